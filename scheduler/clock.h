// Time, injected: the real clock in production, a FakeClock in tests so batching decisions are deterministic.
// Thread-safety: both implementations are safe for concurrent use. The batcher calls Now() and WaitUntil() with
// its mutex held, so an implementation only reads time and waits: it never calls back into a scheduler, and
// any lock of its own is a leaf (lock order: the batcher's mu_, then FakeClock::mu_).
#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backend/base/sync.h"

namespace sluice {

class Clock {
 public:
  Clock() = default;
  Clock(const Clock&) = delete;
  Clock& operator=(const Clock&) = delete;
  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;
  // Waits on `cv` (with `mu` held) until signalled or until Now() >= deadline; may return early (spuriously).
  // REQUIRES: mu is held by the caller.
  virtual void WaitUntil(CondVar& cv, Mutex& mu, absl::Time deadline) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  static Clock& Real();
};

// Time moves only when a test calls Advance(). Waiters re-check the fake time at least every millisecond of
// real time, so an Advance() is noticed promptly without the clock having to know who waits.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(1)) : now_(start) {}

  absl::Time Now() const override {
    MutexLock lock(&mu_);
    return now_;
  }
  void WaitUntil(CondVar& cv, Mutex& mu, absl::Time deadline) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (Now() < deadline) cv.WaitFor(&mu, absl::Milliseconds(1));
  }
  void Advance(absl::Duration d) {
    MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice
