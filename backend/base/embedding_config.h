// The `embedding:` section of a `kind: text` model's config.yaml: what the OpenAI embeddings API
// (POST /v1/embeddings, server/llm/frontend/) needs to turn text into the model's input ids and to pick the vector
// it answers. A text model without this section is served over KServe v2 only (token ids in, tensors out).
//
//   kind: text
//   inputs:  [{name: input_ids, dtype: INT64, shape: [-1], range: [0, 30521]}]   # exactly one: the token ids
//   outputs: [{name: embedding, dtype: FP32, shape: [384]}]                       # one vector per input
//   embedding:
//     tokenizer: tokenizer.json   # a Hugging Face tokenizer.json, relative to the model directory; its
//                                 # post-processor's template is added (BERT: [CLS] ... [SEP])
//     output: embedding           # the FP32 [dims] output answered (default: the first output)
//
// Inputs longer (in tokens, the template's included) than the largest length bucket are refused with the limit
// named: never truncated, so an embedding always stands for the whole text.
// Thread-safety: plain values.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "backend/base/yaml_node.h"

namespace sluice {

struct EmbeddingOptions {
  std::string tokenizer_path;  // absolute after parsing
  std::string output;          // resolved to a declared output's name by ParseModelConfig
};

// Parses the section; cross-checks against the inputs and outputs are ParseModelConfig's (it knows them).
absl::StatusOr<EmbeddingOptions> ParseEmbeddingOptions(const YamlNode& node, const std::string& model_dir);

}  // namespace sluice
