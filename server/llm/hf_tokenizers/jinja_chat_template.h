// A checkpoint's own chat template: tokenizer_config.json's Jinja `chat_template`, rendered by the minijinja crate
// (include/sluice_hf_tokenizers.h) as transformers' apply_chat_template(tokenize=False) renders it: `messages`,
// `add_generation_prompt`, the config's special tokens (bos_token, eos_token, ...), `tools`/`documents` none,
// trim_blocks/lstrip_blocks, loop controls and raise_exception().
// Thread-safety: immutable after Load; Render is const and safe from any thread at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

struct SluiceHfChatTemplate;

namespace sluice {

struct ChatTurn {
  std::string role;
  std::string content;
};

class JinjaChatTemplate {
 public:
  // NotFound when the file has no chat_template (the caller falls back); InvalidArgument naming the file when it
  // is unreadable, not JSON, or its template does not compile.
  static absl::StatusOr<std::unique_ptr<JinjaChatTemplate>> Load(const std::string& tokenizer_config_path);
  // A template from its source (tests); bos/eos absent when nullopt.
  static absl::StatusOr<std::unique_ptr<JinjaChatTemplate>> FromSource(const std::string& source,
                                                                       std::optional<std::string> bos_token,
                                                                       std::optional<std::string> eos_token);
  ~JinjaChatTemplate();
  JinjaChatTemplate(const JinjaChatTemplate&) = delete;
  JinjaChatTemplate& operator=(const JinjaChatTemplate&) = delete;

  // InvalidArgument when the template refuses the conversation (raise_exception, e.g. "roles must alternate") or
  // a text is not UTF-8; Internal for any other template failure (the model's template is broken).
  absl::StatusOr<std::string> Render(const std::vector<ChatTurn>& messages, bool add_generation_prompt) const;
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }

 private:
  explicit JinjaChatTemplate(SluiceHfChatTemplate* handle);
  SluiceHfChatTemplate* const handle_;  // owned
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
};

}  // namespace sluice
