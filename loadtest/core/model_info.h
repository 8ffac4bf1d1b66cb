// What the load generator knows about a served model, whatever API described it (kserve/fetch_model_info.h asks a
// KServe v2 server; generation/generation_app.h an OpenAI or Triton generation server): the input's name, datatype
// and shape, the compiled length buckets, the sample rate of speech inputs, the token limits of generation models.
// Plus the parsing of a model mix such as "asr_ctc:0.7,text_embed:0.3".
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::loadtest {

struct ModelInfo {
  std::string name;
  std::string kind = "generic";         // speech | text | generic (sluice's ModelConfig parameter)
  std::string input_name;
  std::string datatype;                 // KServe datatype string: FP32, INT64, ...
  std::vector<int64_t> fixed_dims;      // the input's dims after the variable axis
  int64_t elements_per_step = 1;        // their product
  std::vector<int64_t> bucket_lengths;  // ascending; empty when the server does not say
  int64_t max_length = 0;               // the largest bucket (or --max-length)
  int sample_rate = 0;                  // speech only: samples per second of the variable axis
  bool sample_rate_assumed = false;     // true when no config said it and 16000 was assumed
  std::vector<std::string> output_names;
  int64_t vocab_size = 0;      // generation (--api openai): token ids in [0, it), as the server says; 0 unknown
  int64_t context_length = 0;  // generation (--api openai): prompt + output tokens, as the server says; 0 unknown

  bool is_speech() const { return kind == "speech"; }
  // Seconds of audio in `length` steps (0 for non-speech models).
  double AudioSeconds(int64_t length) const {
    return is_speech() && sample_rate > 0 ? static_cast<double>(length) / sample_rate : 0.0;
  }
};

struct ModelShare {
  std::string model;
  double weight = 1.0;  // normalised so that the shares sum to 1
};

// "a" or "a:0.7,b:0.3" (weights need not sum to 1; they are normalised). Fails on empty names, duplicates or
// non-positive weights.
absl::StatusOr<std::vector<ModelShare>> ParseModelMix(const std::string& text);

}  // namespace sluice::loadtest
