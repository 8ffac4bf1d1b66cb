// The shared tick of windowed streaming (StreamingSession): one ticker per speech model calls every registered
// stream's callback once per period, all at the same moment, so each stream starts its next window then and the
// windows of many streams reach the model's dynamic batcher together and run as one batch. Streams that started
// at different times would otherwise submit at phases of their own, a step apart at worst, and mostly run alone.
// A stream's window covers its audio up to the tick, so after one tick the streams stay aligned.
//
// Thread-safety: every method may be called from any thread. Callbacks run on the ticker's thread, one after
// another, outside the ticker's lock; a callback may Unregister (itself or another) but must not call Stop. mu_ is
// a leaf lock: nothing is called under it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "backend/base/sync.h"

namespace sluice::voice {

class WindowTicker {
 public:
  using Callback = std::function<void()>;

  // Ticks at start + k * period for k = 1, 2, ... (a tick that comes late does not shift the later ones).
  explicit WindowTicker(absl::Duration period);
  WindowTicker(const WindowTicker&) = delete;
  WindowTicker& operator=(const WindowTicker&) = delete;
  ~WindowTicker();  // Stop()s

  // The callback runs at every tick from the next one on, until Unregister.
  int64_t Register(Callback callback) ABSL_LOCKS_EXCLUDED(mu_);
  // Once it returns, the callback is not running (unless it is the caller: called from a callback, it does not
  // wait) and never runs again. Unknown ids: nothing. REQUIRES: not under a lock a callback takes.
  void Unregister(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Joins the thread after its current tick; later ticks never come. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Duration period() const { return period_; }
  int64_t ticks() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the tick at `next` (and moves `next` on); the callbacks registered then, nullopt when stopping.
  std::optional<std::vector<std::pair<int64_t, std::shared_ptr<Callback>>>> NextTick(absl::Time& next)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Marks id's callback as running; false when it was unregistered meanwhile or the ticker is stopping.
  bool StartCalling(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  const absl::Duration period_;
  mutable Mutex mu_;
  CondVar changed_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, std::shared_ptr<Callback>> callbacks_ ABSL_GUARDED_BY(mu_);
  int64_t calling_ ABSL_GUARDED_BY(mu_) = 0;  // the id whose callback runs now (0: none)
  int64_t ticks_ ABSL_GUARDED_BY(mu_) = 0;
  std::once_flag joined_;
  std::thread thread_;  // started after everything above
  std::thread::id loop_id_;  // thread_'s, set by the constructor (Unregister compares without touching thread_)
};

// The tickers of the windowed streaming models, by model name, made on a model's first stream.
class WindowTickers {
 public:
  WindowTicker* ForModel(const std::string& model, absl::Duration period) ABSL_LOCKS_EXCLUDED(mu_);
  void StopAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Mutex mu_;
  std::map<std::string, std::unique_ptr<WindowTicker>> tickers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::voice
