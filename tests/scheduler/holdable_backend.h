// Test helper: the Hold()/Release() part of the scheduler and front-end tests' fake backends, so that a test can
// keep a batch inside Execute (an instance busy) for exactly as long as it needs.
#pragma once

#include "backend/backend.h"
#include "backend/base/sync.h"

namespace sluice::testing {

// A Backend whose subclass calls WaitWhileHeld() inside Execute, under mu_, which it also uses for its own state.
class HoldableBackend : public Backend {
 public:
  void Hold() {
    MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    MutexLock lock(&mu_);
    held_ = false;
    released_.SignalAll();
  }

 protected:
  // Returns at once unless held; then waits (releasing mu_) until Release().
  void WaitWhileHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (held_) released_.Wait(&mu_);
  }

  mutable Mutex mu_;

 private:
  mutable CondVar released_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sluice::testing
