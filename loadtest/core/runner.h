// Drives one load run against a server: a closed loop (N calls always in flight, the next sent when one ends)
// or an open loop (sends at arrival times from an ArrivalProcess, whatever the server's speed). Warm-up
// requests are sent but excluded from results; the run ends by duration or request count, whichever comes
// first, and never passes the hard caps on requests and time (then calls still in flight are cancelled).
// Open-loop latency counts from the scheduled send time, so a slow client or server cannot hide queueing
// (no coordinated omission); with --max-outstanding calls in flight, further arrivals are dropped and counted.
// Thread-safety: RunLoad blocks its calling thread; it is not reentrant for one client.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/core/arrival_process.h"
#include "loadtest/core/workload.h"
#include "loadtest/core/load_client.h"

namespace sluice::loadtest {

struct RequestRecord;

struct RunOptions {
  int concurrency = 0;  // > 0: closed loop
  double rate = 0;      // > 0: open loop, requests per second
  ArrivalKind arrival = ArrivalKind::kPoisson;
  double burstiness = 1.0;

  double duration_s = 0;     // measured seconds after warm-up (0: no time limit besides the cap)
  int64_t requests = 0;      // measured requests after warm-up (0: no count limit besides the cap)
  double warmup_s = 0;       // requests sent before this many seconds are warm-up
  int64_t warmup_requests = 0;  // ... and so are the first this many
  double timeout_ms = 30000;    // per-request deadline

  int64_t max_requests = 1000000;  // hard cap on everything sent, warm-up included
  double max_duration_s = 3600;    // hard cap on the whole run's wall time
  int max_outstanding = 1024;      // open loop: calls in flight before arrivals are dropped

  uint64_t first_index = 0;  // first request index into the workload's sequence
  uint64_t arrival_seed = 1;
  bool progress = true;
  std::string label;  // shown on the progress line
  // Called once, on the sending thread, just before the first measured request is sent (warm-up over).
  // Must return quickly (it delays that send).
  std::function<void()> on_measure_start;
  // Called for every call that ends OK, on the client's thread, with its record (done_s and code set) and
  // outcome (e.g. riva-offline's transcript). Must be short and thread-safe.
  std::function<void(const RequestRecord&, const Outcome&)> on_response;
};

// One request as the load generator saw it. Times are seconds since the run started.
struct RequestRecord {
  uint64_t index = 0;
  int model = 0;
  int64_t length = 0;
  double scheduled_s = 0;  // open loop: the arrival time; closed loop: the send time
  double sent_s = 0;
  double done_s = 0;
  int code = 0;  // grpc::StatusCode; kClientDroppedCode (-1): dropped by the client
  bool measured = false;

  bool ok() const { return code == 0; }
  double latency_s() const { return done_s - scheduled_s; }
};

struct RunResult {
  std::vector<RequestRecord> records;  // every request, warm-up included, in completion order
  double measure_start_s = 0;          // when the first measured request was scheduled
  double measure_end_s = 0;            // when the last measured request ended
  double wall_s = 0;                   // the whole run
  double max_send_lag_ms = 0;          // open loop: the worst (send - scheduled) delay of the client itself
  std::map<int, std::string> first_errors;  // by code (-1: dropped by the client): the first error's message
  std::string stop_reason;             // "duration", "requests", "max-requests cap", "max-duration cap"
  bool capped = false;                 // a hard cap ended the run
  int concurrency = 0;
  double rate = 0;

  double window_s() const { return std::max(1e-9, measure_end_s - measure_start_s); }
};

// REQUIRES: exactly one of concurrency and rate is positive; duration_s or requests or the caps bound the run.
absl::StatusOr<RunResult> RunLoad(const RunOptions& options, const Workload& workload, LoadClient& client);

}  // namespace sluice::loadtest
