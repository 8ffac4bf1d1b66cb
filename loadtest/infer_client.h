// An asynchronous KServe v2 gRPC client (gRPC's callback API): sends ModelInfer calls over one or more
// channels (round robin; each its own HTTP/2 connection) and runs a completion callback per call.
// Thread-safety: thread-safe. Callbacks run on gRPC's threads and must be short; they may call Send().
// REQUIRES: the client outlives every call it sent (the destructor cancels and waits for them).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpc_service.grpc.pb.h"

namespace sluice::loadtest {

class InferClient {
 public:
  struct Options {
    std::string address = "localhost:8001";  // host:port
    int channels = 1;
    std::string bearer_token;  // sent as "authorization: Bearer <token>" when not empty
  };
  using Done = std::function<void(const grpc::Status&, const inference::ModelInferResponse&)>;

  static absl::StatusOr<std::unique_ptr<InferClient>> Create(const Options& options);
  ~InferClient();

  // Sends one call; `done` runs once when it ends (OK, error, deadline or cancellation).
  void Send(inference::ModelInferRequest request, std::chrono::system_clock::time_point deadline, Done done);
  // Cancels every call in flight; their callbacks still run (CANCELLED).
  void CancelAll();
  // Blocks until no call is in flight or `timeout` passes; true when none is.
  bool WaitIdle(absl::Duration timeout);
  int64_t in_flight() const;

  // The first channel's stub, for metadata and statistics RPCs.
  inference::GRPCInferenceService::Stub& stub() { return *stubs_.front(); }
  const std::string& bearer_token() const { return options_.bearer_token; }

  InferClient(const InferClient&) = delete;
  InferClient& operator=(const InferClient&) = delete;

 private:
  struct Call;
  explicit InferClient(const Options& options) : options_(options) {}
  void Finish(Call* call, const grpc::Status& status);

  const Options options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  std::atomic<uint64_t> next_channel_{0};

  mutable absl::Mutex mu_;
  absl::flat_hash_set<Call*> calls_ ABSL_GUARDED_BY(mu_);
};

// Sets the bearer token (if any) on a context for a metadata RPC.
void AddAuth(grpc::ClientContext& context, const std::string& bearer_token);

// Canonical upper-case name of a gRPC code ("DEADLINE_EXCEEDED"); "CLIENT_DROPPED" for the load generator's
// own drops (code -1: the open loop had --max-outstanding calls in flight).
std::string GrpcCodeName(int code);

}  // namespace sluice::loadtest
