#include "server/llm/hf_tokenizers/jinja_chat_template.h"


#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/llm/hf_tokenizers/include/sluice_hf_tokenizers.h"

namespace sluice {
namespace {

std::string TakeMessage(char* message) {
  std::string text = message != nullptr ? message : "unknown error";
  sluice_hf_string_free(message);
  return text;
}

std::optional<std::string> Token(const char* text) {
  return text != nullptr ? std::optional<std::string>(text) : std::nullopt;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JinjaChatTemplate>> JinjaChatTemplate::Load(const std::string& tokenizer_config_path) {
  char* error = nullptr;
  SluiceHfChatTemplate* handle = sluice_hf_chat_template_load(tokenizer_config_path.c_str(), &error);
  if (handle == nullptr) {
    std::string message = TakeMessage(error);
    // The crate says "<path> has no chat_template" when the key is absent: a config without one is not an error.
    if (absl::EndsWith(message, " has no chat_template")) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  return std::unique_ptr<JinjaChatTemplate>(new JinjaChatTemplate(handle));
}

absl::StatusOr<std::unique_ptr<JinjaChatTemplate>> JinjaChatTemplate::FromSource(
    const std::string& source, std::optional<std::string> bos_token, std::optional<std::string> eos_token) {
  char* error = nullptr;
  SluiceHfChatTemplate* handle = sluice_hf_chat_template_from_source(
      source.c_str(), bos_token ? bos_token->c_str() : nullptr, eos_token ? eos_token->c_str() : nullptr, &error);
  if (handle == nullptr) return absl::InvalidArgumentError(TakeMessage(error));
  return std::unique_ptr<JinjaChatTemplate>(new JinjaChatTemplate(handle));
}

JinjaChatTemplate::JinjaChatTemplate(SluiceHfChatTemplate* handle)
    : handle_(handle),
      bos_token_(Token(sluice_hf_chat_template_bos_token(handle))),
      eos_token_(Token(sluice_hf_chat_template_eos_token(handle))) {}

JinjaChatTemplate::~JinjaChatTemplate() { sluice_hf_chat_template_free(handle_); }

absl::StatusOr<std::string> JinjaChatTemplate::Render(const std::vector<ChatTurn>& messages,
                                                      bool add_generation_prompt) const {
  std::vector<const char*> roles, contents;
  roles.reserve(messages.size());
  contents.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    // The C ABI takes NUL-terminated strings: a NUL inside would silently cut the text.
    if (messages[i].role.find('\0') != std::string::npos || messages[i].content.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "] contains a NUL character"));
    }
    roles.push_back(messages[i].role.c_str());
    contents.push_back(messages[i].content.c_str());
  }
  char* text = nullptr;
  size_t length = 0;
  char* error = nullptr;
  const int status = sluice_hf_chat_template_render(handle_, roles.data(), contents.data(), messages.size(),
                                                    add_generation_prompt ? 1 : 0, &text, &length, &error);
  if (status != SLUICE_HF_OK) {
    std::string message = TakeMessage(error);
    return status == SLUICE_HF_INVALID_INPUT ? absl::InvalidArgumentError(message) : absl::InternalError(message);
  }
  std::string rendered(text, length);
  sluice_hf_text_free(text, length);
  return rendered;
}

}  // namespace sluice
