// --dry-run: what padding a traffic profile costs with a model's compiled length buckets, worked out from the
// exact lengths a run would send (the workload's draws for request indices first .. first + n - 1), without
// sending anything. Per model: how many requests land in each bucket, real steps vs padded steps, and the
// padding efficiency sum(real) / sum(bucket) against pad-to-max, sum(real) / (n × largest bucket).
// Row padding only: the dummy rows that fill a partly full batch to a compiled batch size depend on timing and
// are counted by the server (sluice_padding_efficiency on /metrics).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "loadtest/core/bucket_share.h"
#include "loadtest/core/workload.h"

namespace sluice::loadtest {

struct ModelPaddingPlan {
  std::string model;
  int64_t requests = 0;
  double real_steps = 0;
  double bucket_steps = 0;    // every request padded to the smallest bucket that holds it
  int64_t max_bucket = 0;
  double audio_seconds = 0;   // speech models: real audio of the drawn requests
  std::vector<BucketShare> buckets;  // ascending lengths; buckets nobody lands in are listed too

  double efficiency() const { return bucket_steps > 0 ? real_steps / bucket_steps : 0; }
  double pad_to_max_efficiency() const {
    return requests > 0 && max_bucket > 0 ? real_steps / (static_cast<double>(requests) * max_bucket) : 0;
  }
};

// REQUIRES: every model's info lists its bucket lengths (else the plan has one bucket: max_length).
std::vector<ModelPaddingPlan> PlanPadding(const Workload& workload, uint64_t first_index, int64_t requests);

std::string FormatPaddingPlan(const std::vector<ModelPaddingPlan>& plans);
// JSON (schema "sluice-loadtest-plan/1"): {"schema", "seed", "models": [{model, requests, real_steps,
// bucket_steps, max_bucket, audio_seconds, efficiency, pad_to_max_efficiency, buckets: [{length, requests,
// real_steps}]}]}.
std::string PaddingPlanToJson(const std::vector<ModelPaddingPlan>& plans, uint64_t seed);
absl::Status WritePaddingPlanJson(const std::vector<ModelPaddingPlan>& plans, uint64_t seed,
                                  const std::string& path);

}  // namespace sluice::loadtest
