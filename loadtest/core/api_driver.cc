#include "loadtest/core/api_driver.h"

namespace sluice::loadtest {

absl::Status CheckRequestLoop(int streams, const SweepOptions& sweep) {
  if (streams > 0) {
    return absl::InvalidArgumentError("--streams is for --api riva-streaming (use --concurrency or --rate)");
  }
  if (sweep.knob == "streams") return absl::InvalidArgumentError("--sweep streams is for --api riva-streaming");
  return absl::OkStatus();
}

}  // namespace sluice::loadtest
