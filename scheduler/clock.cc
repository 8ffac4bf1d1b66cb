#include "scheduler/clock.h"

namespace sluice {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void WaitUntil(CondVar& cv, Mutex& mu, absl::Time deadline) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    cv.WaitUntil(&mu, deadline);
  }
};

}  // namespace

Clock& Clock::Real() {
  static RealClock* clock = new RealClock();  // never destroyed: threads may use it during shutdown
  return *clock;
}

}  // namespace sluice
