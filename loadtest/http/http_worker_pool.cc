#include "loadtest/http/http_worker_pool.h"

#include <httplib.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sluice::loadtest {

std::unique_ptr<httplib::Client> ConnectHttp(const std::string& address) {
  auto client = std::make_unique<httplib::Client>(absl::StrCat("http://", address));
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);  // headers and body go out in separate writes: no Nagle wait between them
  client->set_connection_timeout(std::chrono::seconds(10));
  return client;
}

HttpWorkerPool::HttpWorkerPool(std::string address, int max_connections, Execute execute)
    : address_(std::move(address)), max_connections_(std::max(1, max_connections)), execute_(std::move(execute)) {}

HttpWorkerPool::~HttpWorkerPool() {
  CancelAll();
  WaitIdle(absl::Seconds(30));
  std::vector<std::thread> workers;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    work_.SignalAll();
    workers.swap(workers_);
  }
  for (std::thread& worker : workers) worker.join();
}

void HttpWorkerPool::Send(Call call, std::chrono::system_clock::time_point deadline, LoadClient::OutcomeDone done) {
  MutexLock lock(&mu_);
  ++in_flight_;
  queue_.push_back({std::move(call), deadline, std::move(done)});
  work_.Signal();
  if (static_cast<int>(queue_.size()) > idle_workers_ && static_cast<int>(workers_.size()) < max_connections_) {
    // Started under mu_ so that workers_.size() counts it at once; the thread takes mu_ before touching state.
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

void HttpWorkerPool::WorkerLoop() {
  std::unique_ptr<httplib::Client> client = ConnectHttp(address_);
  {
    MutexLock lock(&mu_);
    connections_.insert(client.get());
  }
  while (true) {
    Job job;
    uint64_t epoch;
    {
      MutexLock lock(&mu_);
      ++idle_workers_;
      while (!stop_ && queue_.empty()) work_.Wait(&mu_);
      --idle_workers_;
      if (queue_.empty()) {  // stopping
        connections_.erase(client.get());
        return;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      epoch = cancel_epoch_.load();
    }
    job.done(execute_(*client, job, epoch));
    MutexLock lock(&mu_);
    if (--in_flight_ == 0) idle_.SignalAll();
  }
}

void HttpWorkerPool::CancelAll() {
  std::vector<Job> queued;
  std::vector<httplib::Client*> running;
  {
    MutexLock lock(&mu_);
    cancel_epoch_.fetch_add(1);
    for (Job& job : queue_) queued.push_back(std::move(job));
    queue_.clear();
    running.assign(connections_.begin(), connections_.end());
  }
  // Outside mu_: httplib's stop() shuts the socket of a request in flight from another thread (its own lock);
  // an idle connection is closed and reopened by the next call. Workers and their connections live until the
  // destructor, which calls CancelAll before stopping them.
  for (httplib::Client* client : running) client->stop();
  for (Job& job : queued) {
    // absl's and gRPC's status codes share their numbers (Outcome::code is gRPC's).
    job.done(Outcome::Ended(static_cast<int>(absl::StatusCode::kCancelled), "cancelled by the client"));
    MutexLock lock(&mu_);
    if (--in_flight_ == 0) idle_.SignalAll();
  }
}

bool HttpWorkerPool::WaitIdle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (in_flight_ > 0) {
    if (absl::Now() >= deadline) return false;
    idle_.WaitUntil(&mu_, deadline);
  }
  return true;
}

int64_t HttpWorkerPool::in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace sluice::loadtest
