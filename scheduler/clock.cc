#include "scheduler/clock.h"

namespace sluice {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void WaitUntil(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) const override {
    cv.WaitWithDeadline(&mu, deadline);
  }
};

}  // namespace

Clock& Clock::Real() {
  static RealClock* clock = new RealClock();  // never destroyed: threads may use it during shutdown
  return *clock;
}

}  // namespace sluice
