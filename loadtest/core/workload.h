// The generated traffic: request number i of a run — which model (by the mix's weights), how long (by that
// model's length profile) and its input data — is a pure function of (seed, i), so two runs with one seed
// send the same requests whatever the timing or the thread that builds them. Input data are slices of a
// seeded noise pool (FP32 audio-like noise in [-0.3, 0.3]; token ids in [1, vocab)), or — for a model given
// recordings — one of its audio clips, chosen by the same seeded draw, whose length replaces the profile's.
// Thread-safety: immutable after Create(); Make() may be called from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/core/audio_folder.h"
#include "loadtest/core/call.h"
#include "loadtest/core/length_profile.h"
#include "loadtest/core/model_info.h"

namespace sluice::loadtest {

struct WorkloadModel {
  ModelInfo info;
  double weight = 1.0;  // share of requests; the weights are normalised
  std::unique_ptr<LengthProfile> profile;
  std::shared_ptr<const AudioFolder> audio;  // optional: recordings to send instead of noise (FP32 inputs)
};

struct PlannedRequest {
  uint64_t index = 0;
  int model = 0;  // index into Workload::models()
  int64_t length = 0;
  int clip = -1;  // index into the model's audio clips, -1 for generated data
  Call call;  // what the runner sends: the model, the index, one input
};

class Workload {
 public:
  // REQUIRES: models non-empty, every profile set. `vocab` bounds generated token ids.
  static absl::StatusOr<std::unique_ptr<Workload>> Create(std::vector<WorkloadModel> models, uint64_t seed,
                                                          int64_t vocab = 8192);

  PlannedRequest Make(uint64_t index) const;
  // The model, length and clip of request `index` without building its input (cheap; same draw as Make()).
  PlannedRequest Draw(uint64_t index) const;

  // The reference transcript of the request's recording (<name>.txt in the audio folder); null when none.
  const std::string* Reference(const PlannedRequest& planned) const;

  const std::vector<WorkloadModel>& models() const { return models_; }
  uint64_t seed() const { return seed_; }

  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

 private:
  Workload() = default;

  std::vector<WorkloadModel> models_;
  std::vector<double> cumulative_;  // cumulative normalised weights
  uint64_t seed_ = 0;
  std::string float_pool_;  // bytes of FP32 noise
  std::string int64_pool_;  // bytes of INT64 token ids
  std::string int32_pool_;  // bytes of INT32 token ids
};

// A well-mixed 64-bit hash (SplitMix64 finaliser): seeds per-request generators from (seed, index).
uint64_t MixSeed(uint64_t seed, uint64_t index);

}  // namespace sluice::loadtest
