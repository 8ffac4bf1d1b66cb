// A generation model's tokenizer: text <-> token ids, and an incremental detokenizer that turns a growing id sequence
// into whole-character UTF-8 text deltas. Two implementations behind one seam, chosen by the file Load is given:
// a SentencePiece `tokenizer.model` (Debian's libsentencepiece, tokenizer.cc) and a Hugging Face `tokenizer.json`
// (HF's own `tokenizers` crate, server/llm/hf_tokenizers/hf_tokenizer.h).
// Special tokens: text from a user (a prompt, a message's content) never yields a special token: its special-token
// look-alikes are tokenized as text (HF's split_special_tokens=True). Only text sluice built itself (a rendered
// chat template) is tokenized with special tokens recognized.
// Thread-safety: a Tokenizer is immutable after Load and safe from any thread; IncrementalDetokenizer is owned by
// one sequence and used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice {

enum class SpecialTokens {
  kAsText,      // user text: "<|im_end|>" in it is ordinary text
  kRecognized,  // text sluice rendered (a chat template): special tokens in it become their ids
};

class Tokenizer {
 public:
  // A path ending in ".json" loads a Hugging Face tokenizer.json, anything else a SentencePiece model.
  // InvalidArgument naming the file when it is missing or not loadable.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // No BOS/EOS or post-processor template added. InvalidArgument when text is not UTF-8.
  virtual absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, SpecialTokens special) const = 0;
  // Tokenize(text, kAsText); empty when the text is not UTF-8 (callers pass validated text).
  std::vector<int32_t> Encode(std::string_view text) const;
  // Special tokens decode to nothing; ids out of range decode to nothing.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  virtual int vocab_size() const = 0;
  // The most input bytes one token can stand for (SentencePiece: the longest piece in bytes, a leading "\u2581"
  // counting its 3), computed once at Load; -1 when the tokenizer has no such bound (a normalizer that deletes
  // input, unknown runs fused into one token).
  virtual int max_piece_bytes() const = 0;

 protected:
  Tokenizer() = default;
};

// Emits the text that appending one more token adds. Decoding token by token is wrong (a piece's leading space is
// dropped at the start of a decoded text; a multi-byte character may be split over byte-fallback pieces), so it
// decodes a window of recent tokens twice (without and with the new ones) and emits the difference once it is
// whole UTF-8 (the approach of vLLM's detokenizer).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  // The new text (possibly empty while a character is incomplete).
  std::string Add(int32_t id);
  // Whatever is still held back (an incomplete trailing character is dropped).
  std::string Flush();
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  const Tokenizer* tokenizer_;
  std::vector<int32_t> ids_;
  size_t prefix_start_ = 0;  // the window's first token (context for the leading-space rule)
  size_t read_start_ = 0;    // tokens before this are emitted

};

}  // namespace sluice
