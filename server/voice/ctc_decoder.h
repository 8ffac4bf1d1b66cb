// CTC decoding: a speech model's per-frame log-probabilities -> transcript text, words with start/end times in
// milliseconds, and confidences. CtcDecoder is the seam (greedy now, a beam-search decoder can sit beside it);
// DecodeFrameRange decodes part of a sequence with global times, for streaming windows.
// Thread-safety: decoders are immutable after construction; Decode is const and pure (same input, same output),
// so one decoder may be shared by any number of threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sluice::voice {

// The model's output classes, from its config.yaml.
struct SymbolTable {
  std::vector<std::string> symbols;  // output class i -> text (a character or a word piece)
  int blank = 0;
  // A symbol equal to this separates words (" " for character models, "|" for wav2vec2-style tables; empty
  // when the table has none). Independently, a word piece starting with "▁" (U+2581, SentencePiece) starts a
  // new word; a lone "▁" acts as a separator.
  std::string word_separator = " ";
};

// OK when `table` can decode a model with `num_classes` outputs: num_classes > 0, one symbol per class, blank in
// [0, num_classes), and no empty symbol other than the blank's (an empty piece would emit nothing and hide a
// broken config). InvalidArgument naming the field or the symbol index otherwise.
absl::Status ValidateSymbolTable(const SymbolTable& table, int64_t num_classes);

struct WordTiming {
  std::string word;
  int64_t start_ms = 0;  // start of the frame of the word's first emitted symbol
  int64_t end_ms = 0;    // end of the frame of the word's last emitted symbol
  float confidence = 0;  // mean over the word's emitted symbols of exp(that frame's max log-prob)
};

struct Transcript {
  std::string text;      // words joined by one space: no leading, trailing or repeated spaces
  float confidence = 0;  // mean over all emitted symbols (separators included) of exp(max log-prob); 0 if no words
  std::vector<WordTiming> words;
  int64_t frames = 0;    // frames decoded
};

// Frame f covers [offset + f*frame_seconds, offset + (f+1)*frame_seconds).
struct FrameTiming {
  double frame_seconds = 0;
  double offset_seconds = 0;
};

class CtcDecoder {
 public:
  virtual ~CtcDecoder() = default;
  CtcDecoder(const CtcDecoder&) = delete;
  CtcDecoder& operator=(const CtcDecoder&) = delete;

  // log_probs: row-major [frames, num_classes], natural log.
  // REQUIRES: log_probs.size() == frames * num_classes; num_classes matches the decoder's symbol table.
  // (Violations do not read out of bounds: only whole rows inside log_probs are decoded, and classes without a
  // symbol emit nothing.)
  virtual Transcript Decode(std::span<const float> log_probs, int64_t frames, int64_t num_classes,
                            const FrameTiming& timing) const = 0;

 protected:
  CtcDecoder() = default;
};

// Decodes only frames [begin, end) of `log_probs` ([frames, num_classes]); times stay those of the whole
// sequence (frame `begin` starts at timing.offset_seconds + begin * frame_seconds). begin and end are clamped to
// [0, frames]. The range is decoded on its own: a symbol repeated across `begin` (no blank between) is emitted
// again, so streaming should cut ranges where the previous range's last frame was a blank or accept that.
Transcript DecodeFrameRange(const CtcDecoder& decoder, std::span<const float> log_probs, int64_t frames,
                            int64_t num_classes, const FrameTiming& timing, int64_t begin, int64_t end);

// Best path: argmax per frame (the lowest class wins a tie), repeats collapsed, blanks dropped.
class GreedyCtcDecoder final : public CtcDecoder {
 public:
  // REQUIRES: ValidateSymbolTable(table, <the model's num_classes>).ok().
  explicit GreedyCtcDecoder(SymbolTable table);

  Transcript Decode(std::span<const float> log_probs, int64_t frames, int64_t num_classes,
                    const FrameTiming& timing) const override;

 private:
  const SymbolTable table_;
};

}  // namespace sluice::voice
