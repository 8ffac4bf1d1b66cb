#include "server/voice/ctc_decoder.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::voice {
namespace {

constexpr std::string_view kPieceWordStart = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's word start

// exp(log-prob) as a probability; log-probs that are not normalized (or NaN) are clamped into [0, 1].
float Probability(float log_prob) {
  const float p = std::exp(log_prob);
  return p >= 0 ? std::min(p, 1.0f) : 0.0f;
}

int64_t Milliseconds(const FrameTiming& timing, int64_t frame) {
  return std::llround((timing.offset_seconds + static_cast<double>(frame) * timing.frame_seconds) * 1000.0);
}

// Collects words as symbols are emitted; a word is only kept if it got some text.
class WordAssembler {
 public:
  explicit WordAssembler(const FrameTiming& timing) : timing_(timing) {}

  void EndWord() {
    if (!open_) return;
    open_ = false;
    if (text_.empty()) return;
    words_.push_back({std::move(text_), Milliseconds(timing_, first_frame_), Milliseconds(timing_, last_frame_ + 1),
                      confidence_sum_ / static_cast<float>(symbols_)});
    text_.clear();
  }

  // Appends `piece` (possibly empty) emitted at `frame` to the open word, opening one if needed.
  void Append(std::string_view piece, int64_t frame, float probability) {
    if (!open_) {
      open_ = true;
      first_frame_ = frame;
      confidence_sum_ = 0;
      symbols_ = 0;
    }
    // A word starts at its first symbol with text: a lone "▁" before it only opened the word.
    if (text_.empty()) first_frame_ = frame;
    text_.append(piece);
    last_frame_ = frame;
    confidence_sum_ += probability;
    ++symbols_;
  }

  std::vector<WordTiming> Finish() && {
    EndWord();
    return std::move(words_);
  }

 private:
  const FrameTiming timing_;
  std::vector<WordTiming> words_;
  bool open_ = false;
  std::string text_;
  int64_t first_frame_ = 0;
  int64_t last_frame_ = 0;
  float confidence_sum_ = 0;
  int symbols_ = 0;
};

}  // namespace

absl::Status ValidateSymbolTable(const SymbolTable& table, int64_t num_classes) {
  if (num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("CTC symbol table: num_classes must be > 0, got ", num_classes));
  }
  if (static_cast<int64_t>(table.symbols.size()) != num_classes) {
    return absl::InvalidArgumentError(absl::StrCat("CTC symbol table has ", table.symbols.size(),
                                                   " symbols but the model has ", num_classes, " output classes"));
  }
  if (table.blank < 0 || table.blank >= num_classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("CTC symbol table: blank index ", table.blank, " is outside [0, ", num_classes, ")"));
  }
  for (size_t i = 0; i < table.symbols.size(); ++i) {
    if (static_cast<int>(i) != table.blank && table.symbols[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("CTC symbol table: symbol ", i, " is empty (only the blank, index ", table.blank,
                       ", may be)"));
    }
  }
  return absl::OkStatus();
}

Transcript DecodeFrameRange(const CtcDecoder& decoder, std::span<const float> log_probs, int64_t frames,
                            int64_t num_classes, const FrameTiming& timing, int64_t begin, int64_t end) {
  if (num_classes <= 0) return {};
  frames = std::clamp<int64_t>(frames, 0, static_cast<int64_t>(log_probs.size()) / num_classes);
  begin = std::clamp<int64_t>(begin, 0, frames);
  end = std::clamp<int64_t>(end, begin, frames);
  const FrameTiming range_timing{timing.frame_seconds,
                                 timing.offset_seconds + static_cast<double>(begin) * timing.frame_seconds};
  return decoder.Decode(log_probs.subspan(begin * num_classes, (end - begin) * num_classes), end - begin,
                        num_classes, range_timing);
}

GreedyCtcDecoder::GreedyCtcDecoder(SymbolTable table) : table_(std::move(table)) {}

Transcript GreedyCtcDecoder::Decode(std::span<const float> log_probs, int64_t frames, int64_t num_classes,
                                    const FrameTiming& timing) const {
  Transcript transcript;
  if (num_classes <= 0) return transcript;
  // Only whole rows that exist are read, whatever `frames` claims.
  frames = std::clamp<int64_t>(frames, 0, static_cast<int64_t>(log_probs.size()) / num_classes);
  transcript.frames = frames;

  WordAssembler words(timing);
  float confidence_sum = 0;
  int64_t emitted = 0;
  int64_t previous = table_.blank;
  for (int64_t f = 0; f < frames; ++f) {
    const float* row = log_probs.data() + f * num_classes;
    const int64_t best = std::max_element(row, row + num_classes) - row;  // first maximum: lowest class wins
    // CTC: a repeat is only a new symbol when a blank (or another symbol) came between.
    const bool repeat = best == previous;
    previous = best;
    if (best == table_.blank || repeat || best >= static_cast<int64_t>(table_.symbols.size())) continue;

    const std::string_view symbol = table_.symbols[best];
    const float probability = Probability(row[best]);
    confidence_sum += probability;
    ++emitted;
    if (!table_.word_separator.empty() && symbol == table_.word_separator) {
      words.EndWord();
    } else if (symbol.starts_with(kPieceWordStart)) {
      words.EndWord();
      words.Append(symbol.substr(kPieceWordStart.size()), f, probability);
    } else {
      words.Append(symbol, f, probability);
    }
  }

  transcript.words = std::move(words).Finish();
  if (transcript.words.empty()) return transcript;  // nothing but blanks and separators: confidence 0
  for (const WordTiming& word : transcript.words) {
    absl::StrAppend(&transcript.text, transcript.text.empty() ? "" : " ", word.word);
  }
  transcript.confidence = confidence_sum / static_cast<float>(emitted);
  return transcript;
}

}  // namespace sluice::voice
