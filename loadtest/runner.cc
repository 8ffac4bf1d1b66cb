#include "loadtest/runner.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "loadtest/progress_bar.h"

namespace sluice::loadtest {
namespace {

using Clock = std::chrono::steady_clock;

// State shared between the sending thread and gRPC's completion threads.
struct Shared {
  absl::Mutex mu;
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  std::vector<RequestRecord> records ABSL_GUARDED_BY(mu);
  int64_t ok ABSL_GUARDED_BY(mu) = 0;
  int64_t errors ABSL_GUARDED_BY(mu) = 0;
};

}  // namespace

absl::StatusOr<RunResult> RunLoad(const RunOptions& options, const Workload& workload, InferClient& client) {
  const bool closed = options.concurrency > 0;
  if (closed == (options.rate > 0)) return absl::InvalidArgumentError("set exactly one of concurrency and rate");
  if (options.rate > 0 && options.arrival == ArrivalKind::kGamma && !(options.burstiness > 0)) {
    return absl::InvalidArgumentError("burstiness must be positive");
  }

  Shared shared;
  const Clock::time_point start = Clock::now();
  auto elapsed = [start] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const double measured_end_s = options.duration_s > 0 ? options.warmup_s + options.duration_s : 1e300;
  const double cap_end_s = options.max_duration_s;
  const double send_end_s = std::min(measured_end_s, cap_end_s);

  RunResult result;
  result.concurrency = options.concurrency;
  result.rate = options.rate;
  int64_t sent = 0, measured_sent = 0;
  std::atomic<int64_t> progress_sent{0};

  ProgressBar bar(
      [&] {
        const double t = elapsed();
        int64_t ok, errors, in_flight;
        {
          absl::MutexLock lock(&shared.mu);
          ok = shared.ok;
          errors = shared.errors;
          in_flight = shared.in_flight;
        }
        double fraction = options.duration_s > 0 ? t / (options.warmup_s + options.duration_s) : 0;
        if (options.requests > 0) {
          fraction = std::max(fraction, static_cast<double>(progress_sent.load()) /
                                            static_cast<double>(options.requests + options.warmup_requests));
        }
        return absl::StrFormat("%s %s %6.1fs  sent %d  ok %d  err %d  in flight %d  %.1f req/s", options.label,
                               ProgressBar::Bar(fraction, 24), t, progress_sent.load(), ok, errors, in_flight,
                               t > 0 ? ok / t : 0.0);
      },
      options.progress);

  auto send = [&](double scheduled_s) {
    const uint64_t index = options.first_index + static_cast<uint64_t>(sent);
    PlannedRequest planned = workload.Make(index);
    RequestRecord record;
    record.index = index;
    record.model = planned.model;
    record.length = planned.length;
    record.scheduled_s = scheduled_s;
    record.sent_s = elapsed();
    record.measured = scheduled_s >= options.warmup_s && sent >= options.warmup_requests;
    if (record.measured && measured_sent == 0 && options.on_measure_start) options.on_measure_start();
    result.max_send_lag_ms = std::max(result.max_send_lag_ms, (record.sent_s - scheduled_s) * 1e3);
    ++sent;
    progress_sent.store(sent);
    if (record.measured) ++measured_sent;
    {
      absl::MutexLock lock(&shared.mu);
      ++shared.in_flight;
    }
    const auto deadline = std::chrono::system_clock::now() +
                          std::chrono::microseconds(static_cast<int64_t>(options.timeout_ms * 1e3));
    client.Send(std::move(planned.proto), deadline,
                [&shared, &elapsed, record](const grpc::Status& status, const inference::ModelInferResponse&) mutable {
                  record.done_s = elapsed();
                  record.code = static_cast<int>(status.error_code());
                  absl::MutexLock lock(&shared.mu);
                  --shared.in_flight;
                  (record.ok() ? shared.ok : shared.errors) += 1;
                  shared.records.push_back(record);
                });
  };
  auto drop = [&](double scheduled_s) {
    RequestRecord record;
    record.index = options.first_index + static_cast<uint64_t>(sent);
    const PlannedRequest drawn = workload.Draw(record.index);
    record.model = drawn.model;
    record.length = drawn.length;
    record.scheduled_s = record.sent_s = record.done_s = scheduled_s;
    record.code = -1;
    record.measured = scheduled_s >= options.warmup_s && sent >= options.warmup_requests;
    ++sent;
    progress_sent.store(sent);
    if (record.measured) ++measured_sent;
    absl::MutexLock lock(&shared.mu);
    ++shared.errors;
    shared.records.push_back(record);
  };
  auto count_done = [&]() -> std::string {
    if (options.requests > 0 && measured_sent >= options.requests) return "requests";
    if (sent >= options.max_requests) return "max-requests cap";
    return "";
  };

  ArrivalProcess arrivals(options.arrival, std::max(options.rate, 1e-9), std::max(options.burstiness, 1e-9),
                          options.arrival_seed);
  double next_arrival_s = 0;
  while (true) {
    if (std::string why = count_done(); !why.empty()) {
      result.stop_reason = why;
      break;
    }
    const double now_s = elapsed();
    if (now_s >= send_end_s) {
      result.stop_reason = now_s >= cap_end_s && cap_end_s < measured_end_s ? "max-duration cap" : "duration";
      break;
    }
    if (closed) {
      absl::MutexLock lock(&shared.mu);
      auto slot_free = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared.mu) {
        return shared.in_flight < options.concurrency;
      };
      const double wait_s = std::min(send_end_s - now_s, 1.0);
      if (!shared.mu.AwaitWithTimeout(absl::Condition(&slot_free), absl::Seconds(wait_s))) continue;
    } else {
      if (next_arrival_s > now_s) {
        const double wait_s = std::min(next_arrival_s, send_end_s) - now_s;
        std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
        if (next_arrival_s >= send_end_s) continue;  // the run ends before this arrival
      }
    }
    if (closed) {
      send(elapsed());
    } else {
      bool full;
      {
        absl::MutexLock lock(&shared.mu);
        full = shared.in_flight >= options.max_outstanding;
      }
      full ? drop(next_arrival_s) : send(next_arrival_s);
      next_arrival_s += arrivals.NextGap();
    }
  }

  // Let calls in flight finish within their deadline (+ grace), or the remaining time before the cap.
  const double grace_s = options.timeout_ms / 1e3 + 5.0;
  const double left_s = std::max(0.5, std::min(grace_s, cap_end_s - elapsed()));
  if (!client.WaitIdle(absl::Seconds(left_s))) {
    client.CancelAll();
    result.capped = true;
    client.WaitIdle(absl::Seconds(30));
  }
  bar.Stop();
  result.capped = result.capped || absl::StrContains(result.stop_reason, "cap");
  result.wall_s = elapsed();
  {
    absl::MutexLock lock(&shared.mu);
    result.records = std::move(shared.records);
  }
  double first = 1e300, last = 0;
  for (const RequestRecord& r : result.records) {
    if (!r.measured) continue;
    first = std::min(first, r.scheduled_s);
    last = std::max(last, r.done_s);
  }
  result.measure_start_s = first == 1e300 ? 0 : first;
  result.measure_end_s = std::max(last, result.measure_start_s);
  return result;
}

}  // namespace sluice::loadtest
