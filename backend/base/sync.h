// The scheduler's lock and condition variable: std::mutex / std::condition_variable with clang thread-safety
// annotations, so that (1) clang -Wthread-safety checks every ABSL_GUARDED_BY against them and
// (2) ThreadSanitizer sees every acquire and release. Debian's absl::Mutex is built without TSan annotations,
// so TSan cannot see its synchronisation and reports every access it guards as a race; std::mutex goes through
// pthread, which TSan intercepts. Nothing else is added here: no pool, no spin, no custom waiting.
// Thread-safety: these are the synchronisation primitives.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace sluice {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  // REQUIRES: mu held. Returns with mu held; may wake spuriously.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // mu stays held by the caller's scope
  }
  // As Wait(), also returning once `deadline` passes (real time). InfiniteFuture waits without a timeout.
  void WaitUntil(Mutex* mu, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (deadline == absl::InfiniteFuture()) return Wait(mu);
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait_until(lock, absl::ToChronoTime(deadline));
    lock.release();
  }
  // As Wait(), also returning after `timeout` of real time.
  void WaitFor(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout));
    lock.release();
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace sluice
