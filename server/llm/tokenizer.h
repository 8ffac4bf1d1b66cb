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
#include "server/llm/sentencepiece_bridge.h"

namespace sluice {

class Tokenizer {
 public:
  // InvalidArgument naming the file when it is missing or not a SentencePiece model.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  ~Tokenizer();

  std::vector<int32_t> Encode(std::string_view text) const;  // no BOS/EOS added
  std::string Decode(const std::vector<int32_t>& ids) const;  // ids out of range decode to nothing
  int vocab_size() const;
  // The longest piece in bytes (a leading "\u2581" counts its 3 bytes), computed once at Load.
  int max_piece_bytes() const { return max_piece_bytes_; }

 private:
  Tokenizer() = default;
  std::unique_ptr<SentencePieceBridge> processor_;
  int max_piece_bytes_ = 0;
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
