// What the embeddings front ends decode and encode (EmbeddingModel, embedding_model.h, runs it): the texts of one
// call and the vectors answered. Native types only, so the wire codecs need nothing else of the model.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice {

// The texts to embed, in order (at least one; each non-empty; the codec checks both).
struct EmbeddingCall {
  std::vector<std::string> texts;
};

struct EmbeddingResult {
  std::vector<std::vector<float>> vectors;  // one per text, in the call's order
  int64_t prompt_tokens = 0;                // tokens of every text, the tokenizer's template included
};

using EmbeddingCompletion = std::function<void(absl::StatusOr<EmbeddingResult>)>;

}  // namespace sluice
