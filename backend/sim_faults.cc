#include "backend/sim_faults.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"

namespace sluice {

absl::Status SimFaultInjector::Next() {
  if (!active_) return absl::OkStatus();
  ++calls_;
  if (faults_.hang_after_batches > 0 && calls_ > faults_.hang_after_batches) {
    // A device call that does not return: the scheduler's execution timeout is what notices.
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(faults_.hang_ms));
  }
  if (faults_.gone_after_batches > 0 && calls_ > faults_.gone_after_batches) {
    return absl::UnavailableError(
        absl::StrCat("sim device gone (injected: after ", faults_.gone_after_batches, " batches)"));
  }
  if (faults_.error_rate == 0 && faults_.exception_rate == 0) return absl::OkStatus();
  const double draw = std::uniform_real_distribution<double>(0.0, 1.0)(random_);
  if (draw < faults_.exception_rate) throw std::runtime_error("sim injected exception");
  if (draw < faults_.exception_rate + faults_.error_rate) return absl::InternalError("sim injected failure");
  return absl::OkStatus();
}

}  // namespace sluice
