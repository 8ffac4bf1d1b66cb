#include "server/llm/hf_tokenizers/hf_tokenizer.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "server/llm/hf_tokenizers/include/sluice_hf_tokenizers.h"

namespace sluice {
namespace {

// Takes ownership of a message from the C ABI.
std::string TakeMessage(char* message) {
  std::string text = message != nullptr ? message : "unknown error";
  sluice_hf_string_free(message);
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& path) {
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tokenizer = HfTokenizer::Load(path);
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<Tokenizer>(std::move(*tokenizer));
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& path) {
  char* error = nullptr;
  SluiceHfTokenizer* handle = sluice_hf_tokenizer_load(path.c_str(), &error);
  if (handle == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", path, ": ", TakeMessage(error)));
  }
  std::unique_ptr<HfTokenizer> tokenizer(new HfTokenizer(handle));
  const size_t size = sluice_hf_tokenizer_vocab_size(handle);
  if (size > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", path, ": its vocabulary of ", size, " is too large"));
  }
  tokenizer->vocab_size_ = static_cast<int>(size);
  const int64_t bound = sluice_hf_tokenizer_max_input_bytes_per_token(handle);
  tokenizer->max_piece_bytes_ = bound > 0 && bound <= std::numeric_limits<int>::max() ? static_cast<int>(bound) : -1;
  return tokenizer;
}

HfTokenizer::HfTokenizer(SluiceHfTokenizer* handle) : handle_(handle) {}

HfTokenizer::~HfTokenizer() { sluice_hf_tokenizer_free(handle_); }

absl::StatusOr<std::vector<int32_t>> HfTokenizer::Tokenize(std::string_view text, SpecialTokens special) const {
  return EncodeIds(text, /*add_special_tokens=*/false, special == SpecialTokens::kAsText);
}

absl::StatusOr<std::vector<int32_t>> HfTokenizer::TokenizeWithPostProcessor(std::string_view text) const {
  return EncodeIds(text, /*add_special_tokens=*/true, /*split_special_tokens=*/true);
}

absl::StatusOr<std::vector<int32_t>> HfTokenizer::EncodeIds(std::string_view text, bool add_special_tokens,
                                                         bool split_special_tokens) const {
  uint32_t* ids = nullptr;
  size_t count = 0;
  char* error = nullptr;
  const int status = sluice_hf_tokenizer_encode(handle_, text.data(), text.size(), add_special_tokens ? 1 : 0,
                                                split_special_tokens ? 1 : 0, &ids, &count, &error);
  if (status != SLUICE_HF_OK) {
    std::string message = TakeMessage(error);
    return status == SLUICE_HF_INVALID_INPUT ? absl::InvalidArgumentError(message) : absl::InternalError(message);
  }
  std::vector<int32_t> result(ids, ids + count);
  sluice_hf_ids_free(ids, count);
  return result;
}

std::string HfTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<uint32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < vocab_size_) known.push_back(static_cast<uint32_t>(id));
  }
  char* text = nullptr;
  size_t length = 0;
  char* error = nullptr;
  if (sluice_hf_tokenizer_decode(handle_, known.data(), known.size(), /*skip_special_tokens=*/1, &text, &length,
                                 &error) != SLUICE_HF_OK) {
    sluice_hf_string_free(error);  // decoding known ids does not fail; if it did, nothing is the honest text
    return "";
  }
  std::string result(text, length);
  sluice_hf_text_free(text, length);
  return result;
}

std::optional<int32_t> HfTokenizer::TokenId(std::string_view token) const {
  const int64_t id = sluice_hf_tokenizer_token_to_id(handle_, token.data(), token.size());
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return static_cast<int32_t>(id);
}

std::optional<std::string> HfTokenizer::FindSpecialToken(std::string_view text) const {
  char* token = nullptr;
  if (sluice_hf_tokenizer_find_special_token(handle_, text.data(), text.size(), &token) == 0) return std::nullopt;
  std::string found = token;
  sluice_hf_string_free(token);
  return found;
}

}  // namespace sluice
