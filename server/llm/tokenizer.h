// A generation model's tokenizer: a SentencePiece model (Debian's libsentencepiece), text <-> token ids, and an
// incremental detokenizer that turns a growing id sequence into whole-character UTF-8 text deltas.
// Thread-safety: Tokenizer is immutable after Load and safe from any thread; IncrementalDetokenizer is owned by
// one sequence and used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace sluice {

class Tokenizer {
 public:
  // InvalidArgument naming the file when it is missing or not a SentencePiece model.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  ~Tokenizer();

  std::vector<int32_t> Encode(std::string_view text) const;  // no BOS/EOS added
  std::string Decode(const std::vector<int32_t>& ids) const;  // ids out of range decode to nothing
  int vocab_size() const;

 private:
  Tokenizer() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

// Emits the text that appending one more token adds. SentencePiece text of a prefix is not always a prefix of the
// text of the whole (a leading-space piece, a multi-byte character split over byte tokens), so it decodes the
// sequence so far and emits what is new once it is whole UTF-8.
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
  size_t emitted_bytes_ = 0;
};

}  // namespace sluice
