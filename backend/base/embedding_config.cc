#include "backend/base/embedding_config.h"

#include "absl/strings/match.h"
#include "backend/base/generation_config.h"
#include "backend/base/status_macros.h"

namespace sluice {

absl::StatusOr<EmbeddingOptions> ParseEmbeddingOptions(const YamlNode& node, const std::string& model_dir) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"tokenizer", "output"}));
  EmbeddingOptions options;
  SLUICE_ASSIGN_OR_RETURN(options.tokenizer_path, ParseTokenizerPath(node, model_dir));
  // Only a tokenizer.json says how the model wants its input framed (the post-processor's template).
  if (!absl::EndsWith(options.tokenizer_path, ".json")) {
    return node.Required("tokenizer")->Error("must be a Hugging Face tokenizer.json");
  }
  if (std::optional<YamlNode> output = node.Optional("output")) {
    SLUICE_ASSIGN_OR_RETURN(options.output, output->AsString());
  }
  return options;
}

}  // namespace sluice
