#include "server/llm/tokenizer.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/llm/hf_tokenizers/hf_tokenizer.h"
#include "server/llm/sentencepiece_bridge.h"

namespace sluice {
namespace {

// U+FFFD, what SentencePiece decodes an incomplete UTF-8 sequence of byte pieces to.
constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

bool EndsWithReplacement(const std::string& text) {
  return text.size() >= kReplacementCharacter.size() &&
         std::string_view(text).substr(text.size() - kReplacementCharacter.size()) == kReplacementCharacter;
}

// A SentencePiece model through the dlopen()ed module (sentencepiece_bridge.h). SentencePiece never matches
// control pieces (<s>, </s>) in input text, so both SpecialTokens modes tokenize the same.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path) {
    std::string error;
    std::unique_ptr<SentencePieceBridge> processor = SentencePieceBridge::Load(path, &error);
    if (processor == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer ", path, " is not a loadable SentencePiece model: ", error));
    }
    return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(std::move(processor)));
  }

  absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, SpecialTokens) const override {
    const std::vector<int> ids = processor_->Encode(std::string(text));
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  std::string Decode(const std::vector<int32_t>& ids) const override {
    const int size = processor_->size();
    std::vector<int> known;
    known.reserve(ids.size());
    for (int32_t id : ids) {
      if (id >= 0 && id < size) known.push_back(id);
    }
    return processor_->Decode(known);
  }

  int vocab_size() const override { return processor_->size(); }
  int max_piece_bytes() const override { return max_piece_bytes_; }

 private:
  explicit SentencePieceTokenizer(std::unique_ptr<SentencePieceBridge> processor)
      : processor_(std::move(processor)), max_piece_bytes_(processor_->max_piece_bytes()) {}
  std::unique_ptr<SentencePieceBridge> processor_;
  int max_piece_bytes_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  if (absl::EndsWith(path, ".json")) return LoadHfTokenizer(path);
  return SentencePieceTokenizer::Load(path);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  absl::StatusOr<std::vector<int32_t>> ids = Tokenize(text, SpecialTokens::kAsText);
  return ids.ok() ? *std::move(ids) : std::vector<int32_t>();
}

// Decodes a short window of recent tokens instead of the whole sequence (linear, not quadratic, in its length).
// The window's first piece may lose its leading space in decoding; it loses it in both decodings below, so the
// difference between them is right.
std::string IncrementalDetokenizer::Add(int32_t id) {
  ids_.push_back(id);
  const std::vector<int32_t> before(ids_.begin() + prefix_start_, ids_.begin() + read_start_);
  const std::vector<int32_t> now(ids_.begin() + prefix_start_, ids_.end());
  const std::string before_text = tokenizer_->Decode(before);
  const std::string now_text = tokenizer_->Decode(now);
  // Hold back while a multi-byte character is still incomplete (or the window decodes shorter: never expected).
  if (now_text.size() <= before_text.size() || EndsWithReplacement(now_text)) return "";
  prefix_start_ = read_start_;
  read_start_ = ids_.size();
  return now_text.substr(before_text.size());
}

std::string IncrementalDetokenizer::Flush() {
  if (read_start_ == ids_.size()) return "";
  const std::vector<int32_t> before(ids_.begin() + prefix_start_, ids_.begin() + read_start_);
  const std::vector<int32_t> now(ids_.begin() + prefix_start_, ids_.end());
  const std::string before_text = tokenizer_->Decode(before);
  std::string now_text = tokenizer_->Decode(now);
  while (EndsWithReplacement(now_text)) now_text.resize(now_text.size() - kReplacementCharacter.size());
  read_start_ = prefix_start_ = ids_.size();
  return now_text.size() > before_text.size() ? now_text.substr(before_text.size()) : "";
}

}  // namespace sluice
