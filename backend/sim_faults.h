// The faults the `sim` device injects (model_config.h SimFaults), shared by the sim Backend and the sim
// GenerationBackend: each call draws once from a generator seeded with faults.seed + the replica index.
// Thread-safety: not thread-safe; one per instance, used by the instance's one calling thread.
#pragma once

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "backend/base/model_config.h"

namespace sluice {

class SimFaultInjector {
 public:
  SimFaultInjector(const SimFaults& faults, int replica)
      : faults_(faults),
        active_(!faults.replica || *faults.replica == replica),
        random_(faults.seed + static_cast<uint64_t>(replica)) {}

  // One batch (or one prefill/decode step): Unavailable once gone_after_batches calls have run; blocks the
  // calling thread for hang_ms once hang_after_batches calls have run; otherwise throws std::runtime_error with
  // probability exception_rate, or returns Internal with probability error_rate. No fault when `replica` names
  // another replica.
  absl::Status Next();

 private:
  const SimFaults faults_;
  const bool active_;
  std::mt19937_64 random_;
  int64_t calls_ = 0;
};

}  // namespace sluice
