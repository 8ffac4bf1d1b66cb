#include "server/voice/window_ticker.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace sluice::voice {

WindowTicker::WindowTicker(absl::Duration period) : period_(period), thread_([this] { Loop(); }) {
  loop_id_ = thread_.get_id();  // before any Register: only this constructor writes it
}

WindowTicker::~WindowTicker() { Stop(); }

void WindowTicker::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  std::call_once(joined_, [this] { thread_.join(); });
}

int64_t WindowTicker::Register(Callback callback) {
  MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  callbacks_.emplace(id, std::make_shared<Callback>(std::move(callback)));
  return id;
}

void WindowTicker::Unregister(int64_t id) {
  MutexLock lock(&mu_);
  callbacks_.erase(id);
  // From inside a callback (its stream ended while it ran: gRPC may run OnDone on the thread that finished the
  // call) waiting would never end; the loop never calls an erased id again, and touches nothing of it after.
  if (std::this_thread::get_id() == loop_id_) return;
  while (calling_ == id) changed_.Wait(&mu_);
}

int64_t WindowTicker::ticks() const {
  MutexLock lock(&mu_);
  return ticks_;
}

void WindowTicker::Loop() {
  absl::Time next = absl::Now() + period_;
  while (true) {
    std::optional<std::vector<std::pair<int64_t, std::shared_ptr<Callback>>>> due = NextTick(next);
    if (!due) return;  // stopping
    for (const auto& [id, callback] : *due) {
      if (!StartCalling(id)) continue;  // unregistered (or stopping) since the tick began
      (*callback)();
      MutexLock lock(&mu_);
      calling_ = 0;
      changed_.SignalAll();
    }
  }
}

std::optional<std::vector<std::pair<int64_t, std::shared_ptr<WindowTicker::Callback>>>> WindowTicker::NextTick(
    absl::Time& next) {
  MutexLock lock(&mu_);
  while (!stop_ && absl::Now() < next) changed_.WaitUntil(&mu_, next);
  if (stop_) return std::nullopt;
  ++ticks_;
  // Late (a slow tick): the next one keeps its place on the grid rather than drifting.
  const absl::Time now = absl::Now();
  while (next <= now) next += period_;
  return std::vector<std::pair<int64_t, std::shared_ptr<Callback>>>(callbacks_.begin(), callbacks_.end());
}

bool WindowTicker::StartCalling(int64_t id) {
  MutexLock lock(&mu_);
  if (stop_ || callbacks_.find(id) == callbacks_.end()) return false;
  calling_ = id;
  return true;
}

WindowTicker* WindowTickers::ForModel(const std::string& model, absl::Duration period) {
  MutexLock lock(&mu_);
  std::unique_ptr<WindowTicker>& ticker = tickers_[model];
  if (!ticker) ticker = std::make_unique<WindowTicker>(period);
  return ticker.get();
}

void WindowTickers::StopAll() {
  MutexLock lock(&mu_);
  for (auto& [name, ticker] : tickers_) ticker->Stop();
}

}  // namespace sluice::voice
