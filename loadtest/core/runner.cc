#include "loadtest/core/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "backend/base/sync.h"
#include "loadtest/core/progress_bar.h"

namespace sluice::loadtest {
namespace {

using Clock = std::chrono::steady_clock;

// State shared between the sending thread and the client's completion threads (and read by the progress bar).
struct Shared {
  Mutex mu;
  CondVar slot_freed;  // signalled when a call ends (the closed loop waits for in_flight < concurrency)
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  std::vector<RequestRecord> records ABSL_GUARDED_BY(mu);
  int64_t ok ABSL_GUARDED_BY(mu) = 0;
  int64_t errors ABSL_GUARDED_BY(mu) = 0;
  std::map<int, std::string> first_errors ABSL_GUARDED_BY(mu);
};

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One RunLoad. Every field but shared_ and progress_sent_ belongs to the sending thread (the caller's);
// completion callbacks touch only shared_, the progress bar's thread reads shared_ and progress_sent_.
class LoadRun {
 public:
  LoadRun(const RunOptions& options, const Workload& workload, LoadClient& client)
      : options_(options),
        workload_(workload),
        client_(client),
        closed_(options.concurrency > 0),
        measured_end_s_(options.duration_s > 0 ? options.warmup_s + options.duration_s : 1e300),
        cap_end_s_(options.max_duration_s),
        send_end_s_(std::min(measured_end_s_, cap_end_s_)),
        arrivals_(options.arrival, std::max(options.rate, 1e-9), std::max(options.burstiness, 1e-9),
                  options.arrival_seed) {
    result_.concurrency = options.concurrency;
    result_.rate = options.rate;
  }

  RunResult Run() {
    ProgressBar bar([this] { return ProgressLine(); }, options_.progress);
    SendUntilDone();
    DrainCallsInFlight();
    bar.Stop();
    result_.capped = result_.capped || absl::StrContains(result_.stop_reason, "cap");
    result_.wall_s = Elapsed();
    CollectRecords();
    return std::move(result_);
  }

 private:
  double Elapsed() const { return SecondsSince(start_); }

  // The progress bar's line (its own thread).
  std::string ProgressLine() {
    const double t = Elapsed();
    int64_t ok, errors, in_flight;
    {
      MutexLock lock(&shared_.mu);
      ok = shared_.ok;
      errors = shared_.errors;
      in_flight = shared_.in_flight;
    }
    double fraction = options_.duration_s > 0 ? t / (options_.warmup_s + options_.duration_s) : 0;
    if (options_.requests > 0) {
      fraction = std::max(fraction, static_cast<double>(progress_sent_.load()) /
                                        static_cast<double>(options_.requests + options_.warmup_requests));
    }
    return absl::StrFormat("%s %s %6.1fs  sent %d  ok %d  err %d  in flight %d  %.1f req/s", options_.label,
                           ProgressBar::Bar(fraction, 24), t, progress_sent_.load(), ok, errors, in_flight,
                           t > 0 ? ok / t : 0.0);
  }

  // The record of the next request in the sequence, scheduled at `scheduled_s`; counts it as sent.
  RequestRecord TakeNextRecord(double scheduled_s, const PlannedRequest& planned) {
    RequestRecord record;
    record.index = options_.first_index + static_cast<uint64_t>(sent_);
    record.model = planned.model;
    record.length = planned.length;
    record.scheduled_s = scheduled_s;
    record.measured = scheduled_s >= options_.warmup_s && sent_ >= options_.warmup_requests;
    return record;
  }

  void CountSent(const RequestRecord& record) {
    ++sent_;
    progress_sent_.store(sent_);
    if (record.measured) ++measured_sent_;
  }

  void Send(double scheduled_s) {
    PlannedRequest planned = workload_.Make(options_.first_index + static_cast<uint64_t>(sent_));
    RequestRecord record = TakeNextRecord(scheduled_s, planned);
    record.sent_s = Elapsed();
    if (record.measured && measured_sent_ == 0 && options_.on_measure_start) options_.on_measure_start();
    result_.max_send_lag_ms = std::max(result_.max_send_lag_ms, (record.sent_s - scheduled_s) * 1e3);
    CountSent(record);
    {
      MutexLock lock(&shared_.mu);
      ++shared_.in_flight;
    }
    const auto deadline = std::chrono::system_clock::now() +
                          std::chrono::microseconds(static_cast<int64_t>(options_.timeout_ms * 1e3));
    client_.Send(std::move(planned.call), deadline,
                 [shared = &shared_, start = start_, record, on_response = &options_.on_response](
                     const Outcome& outcome) mutable {
                   record.done_s = SecondsSince(start);
                   record.code = outcome.code;
                   if (record.ok() && *on_response) (*on_response)(record, outcome);
                   MutexLock lock(&shared->mu);
                   --shared->in_flight;
                   shared->slot_freed.Signal();
                   (record.ok() ? shared->ok : shared->errors) += 1;
                   if (!record.ok()) shared->first_errors.emplace(record.code, outcome.message);
                   shared->records.push_back(record);
                 });
  }

  // Open loop with max_outstanding calls in flight: the arrival is recorded as dropped (code -1), never sent.
  void Drop(double scheduled_s) {
    const PlannedRequest drawn = workload_.Draw(options_.first_index + static_cast<uint64_t>(sent_));
    RequestRecord record = TakeNextRecord(scheduled_s, drawn);
    record.sent_s = record.done_s = scheduled_s;
    record.code = kClientDroppedCode;
    CountSent(record);
    MutexLock lock(&shared_.mu);
    ++shared_.errors;
    shared_.first_errors.emplace(kClientDroppedCode, "--max-outstanding calls were in flight: the arrival was not sent");
    shared_.records.push_back(record);
  }

  // Why the run stops now, or "" to go on.
  std::string StopReason(double now_s) const {
    if (options_.requests > 0 && measured_sent_ >= options_.requests) return "requests";
    if (sent_ >= options_.max_requests) return "max-requests cap";
    if (now_s < send_end_s_) return "";
    return now_s >= cap_end_s_ && cap_end_s_ < measured_end_s_ ? "max-duration cap" : "duration";
  }

  // Closed loop: waits (at most 1 s, never past the end) for fewer than `concurrency` calls in flight.
  bool WaitForFreeSlot(double now_s) {
    const absl::Time deadline = absl::Now() + absl::Seconds(std::min(send_end_s_ - now_s, 1.0));
    MutexLock lock(&shared_.mu);
    while (shared_.in_flight >= options_.concurrency) {
      if (absl::Now() >= deadline) return false;
      shared_.slot_freed.WaitUntil(&shared_.mu, deadline);
    }
    return true;
  }

  // Open loop: sleeps until the next arrival; false when the run ends before it.
  bool WaitForNextArrival(double now_s) {
    if (next_arrival_s_ <= now_s) return true;
    const double wait_s = std::min(next_arrival_s_, send_end_s_) - now_s;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    return next_arrival_s_ < send_end_s_;
  }

  // Open loop: sends the arrival due now, or drops it when max_outstanding calls are in flight.
  void SendOrDropArrival() {
    bool full;
    {
      MutexLock lock(&shared_.mu);
      full = shared_.in_flight >= options_.max_outstanding;
    }
    full ? Drop(next_arrival_s_) : Send(next_arrival_s_);
    next_arrival_s_ += arrivals_.NextGap();
  }

  void SendUntilDone() {
    while (true) {
      const double now_s = Elapsed();
      if (std::string why = StopReason(now_s); !why.empty()) {
        result_.stop_reason = why;
        return;
      }
      if (closed_) {
        if (WaitForFreeSlot(now_s)) Send(Elapsed());
      } else if (WaitForNextArrival(now_s)) {
        SendOrDropArrival();
      }
    }
  }

  // Lets calls in flight finish within their deadline (+ grace), or the remaining time before the cap; then
  // cancels the rest.
  void DrainCallsInFlight() {
    const double grace_s = options_.timeout_ms / 1e3 + 5.0;
    const double left_s = std::max(0.5, std::min(grace_s, cap_end_s_ - Elapsed()));
    if (!client_.WaitIdle(absl::Seconds(left_s))) {
      client_.CancelAll();
      result_.capped = true;
      client_.WaitIdle(absl::Seconds(30));
    }
  }

  // Moves the records into the result and sets the measured window: first measured schedule to last end.
  void CollectRecords() {
    {
      MutexLock lock(&shared_.mu);
      result_.records = std::move(shared_.records);
      result_.first_errors = std::move(shared_.first_errors);
    }
    double first = 1e300, last = 0;
    for (const RequestRecord& r : result_.records) {
      if (!r.measured) continue;
      first = std::min(first, r.scheduled_s);
      last = std::max(last, r.done_s);
    }
    result_.measure_start_s = first == 1e300 ? 0 : first;
    result_.measure_end_s = std::max(last, result_.measure_start_s);
  }

  const RunOptions& options_;
  const Workload& workload_;
  LoadClient& client_;
  const bool closed_;
  const Clock::time_point start_ = Clock::now();
  const double measured_end_s_;
  const double cap_end_s_;
  const double send_end_s_;
  ArrivalProcess arrivals_;
  double next_arrival_s_ = 0;
  int64_t sent_ = 0, measured_sent_ = 0;
  std::atomic<int64_t> progress_sent_{0};  // sent_, for the progress bar's thread
  RunResult result_;
  Shared shared_;
};

}  // namespace

absl::StatusOr<RunResult> RunLoad(const RunOptions& options, const Workload& workload, LoadClient& client) {
  const bool closed = options.concurrency > 0;
  if (closed == (options.rate > 0)) return absl::InvalidArgumentError("set exactly one of concurrency and rate");
  if (options.rate > 0 && options.arrival == ArrivalKind::kGamma && !(options.burstiness > 0)) {
    return absl::InvalidArgumentError("burstiness must be positive");
  }
  return LoadRun(options, workload, client).Run();
}

}  // namespace sluice::loadtest
