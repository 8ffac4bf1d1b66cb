// A Hugging Face tokenizer.json through HF's own `tokenizers` crate (the C ABI in include/sluice_hf_tokenizers.h):
// byte-level BPE (GPT-2, Llama 3, Qwen, SmolLM pre-tokenizers), SentencePiece-style BPE with byte fallback,
// Unigram and WordPiece, with their added/special tokens, normalizers and decoders, exactly as HF encodes them.
// Thread-safety: immutable after Load; every method is const and safe from any thread at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/llm/tokenizer.h"

struct SluiceHfTokenizer;

namespace sluice {

// Tokenizer::Load's path for a ".json" file.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& path);

class HfTokenizer final : public Tokenizer {
 public:
  // InvalidArgument naming the file (and what the crate said) when it cannot be loaded.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const std::string& path);
  ~HfTokenizer() override;

  // kAsText: HF's encode(text, add_special_tokens=False) with split_special_tokens=True; kRecognized: the same
  // with special tokens matched, as transformers' apply_chat_template(tokenize=True) tokenizes a rendered chat.
  absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, SpecialTokens special) const override;
  // User text as an encoder model takes it: HF's encode(text, add_special_tokens=True) — the tokenizer.json's
  // post-processor adds its template (BERT's [CLS] ... [SEP]) — with special-token look-alikes in the text
  // tokenized as text. The tokenizer.json's own truncation and padding never apply (sluice refuses over-long
  // inputs and pads to the bucket itself).
  absl::StatusOr<std::vector<int32_t>> TokenizeWithPostProcessor(std::string_view text) const;
  // HF's decode(ids, skip_special_tokens=True) (what vLLM and TGI stream); incomplete UTF-8 at the end decodes
  // to U+FFFD, as SentencePiece's does, which IncrementalDetokenizer holds back.
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int vocab_size() const override { return vocab_size_; }
  int max_piece_bytes() const override { return max_piece_bytes_; }

  // The id of a token's text (vocabulary or added tokens).
  std::optional<int32_t> TokenId(std::string_view token) const;
  // The first special added token whose text occurs in `text`, if any.
  std::optional<std::string> FindSpecialToken(std::string_view text) const;

 private:
  explicit HfTokenizer(SluiceHfTokenizer* handle);
  absl::StatusOr<std::vector<int32_t>> EncodeIds(std::string_view text, bool add_special_tokens,
                                              bool split_special_tokens) const;
  SluiceHfTokenizer* const handle_;  // owned; freed by the destructor
  int vocab_size_ = 0;
  int max_piece_bytes_ = -1;
};

}  // namespace sluice
