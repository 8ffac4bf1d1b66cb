// Blocking HTTP calls (cpp-httplib) behind the runner's asynchronous seam (LoadClient, core/load_client.h): httplib's
// client is blocking, so every call in flight needs a connection and a thread. Workers are started on demand, one per
// concurrent call (a closed loop of N starts N; an open loop as many as its calls in flight), up to
// `max_connections`, after which calls wait in the pool's queue (open-loop latency still counts from the scheduled
// time). Each worker keeps its connection alive between calls. CancelAll() fails the queued calls and shuts the
// sockets of those in flight.
// The pool knows no API: each HTTP client owns one (composition) and gives it `execute`, one call of its API on a
// worker's connection — KServe v2 REST (kserve/http_infer_client.h) and OpenAI streaming (generation/openai_client.h).
// Thread-safety: thread-safe. `execute` and the calls' callbacks run on worker threads; callbacks must be short and
// may call Send(). REQUIRES: whatever `execute` uses outlives the pool (an owner declares its pool last, so that the
// pool's destructor stops the workers before the rest is destroyed).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "backend/base/sync.h"
#include "loadtest/core/call.h"
#include "loadtest/core/load_client.h"

namespace httplib {
class Client;
}

namespace sluice::loadtest {

class HttpWorkerPool {
 public:
  struct Job {
    Call call;
    std::chrono::system_clock::time_point deadline;
    LoadClient::OutcomeDone done;
  };
  // One call on the worker's connection; returns the outcome the job's callback gets. `epoch`: see cancelled().
  using Execute = std::function<Outcome(httplib::Client& connection, const Job& job, uint64_t epoch)>;

  // REQUIRES: `address` is host:port.
  HttpWorkerPool(std::string address, int max_connections, Execute execute);
  // Cancels the calls queued and in flight, waits (up to 30 s) for them to end and joins the workers.
  ~HttpWorkerPool();

  // As LoadClient's.
  void Send(Call call, std::chrono::system_clock::time_point deadline, LoadClient::OutcomeDone done);
  void CancelAll();
  bool WaitIdle(absl::Duration timeout);
  int64_t in_flight() const;

  // True when CancelAll ran since a call of `epoch` started.
  bool cancelled(uint64_t epoch) const { return cancel_epoch_.load() != epoch; }

  HttpWorkerPool(const HttpWorkerPool&) = delete;
  HttpWorkerPool& operator=(const HttpWorkerPool&) = delete;

 private:
  void WorkerLoop();

  const std::string address_;
  const int max_connections_;
  const Execute execute_;
  mutable Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  // Each running worker's connection (owned by its thread), for CancelAll to stop.
  absl::flat_hash_set<httplib::Client*> connections_ ABSL_GUARDED_BY(mu_);
  int idle_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // queued and running
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  CondVar work_;  // signalled when a job is queued or stop_ is set (idle workers wait on it)
  CondVar idle_;  // signalled when in_flight_ drops to 0
  std::atomic<uint64_t> cancel_epoch_{0};  // raised by CancelAll: calls that fail after it were cancelled
};

// A connection to `address` (host:port) as every HTTP client of the load tester opens it: keep-alive, Nagle off
// (headers and body go out in separate writes), a 10 s connect timeout.
std::unique_ptr<httplib::Client> ConnectHttp(const std::string& address);

}  // namespace sluice::loadtest
