// The Backend seam: one model instance on one device (a CPU thread set, a GPU, a NeuronCore range, or the
// simulator) holding every per-bucket graph of the model, warmed, ready to execute a padded batch.
//
// Thread-safety: Execute() may be called from one thread at a time per instance (the scheduler gives each
// instance its own thread); different instances run concurrently. load_stats()/memory()/Describe() are immutable
// after Create().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/model_config.h"
#include "backend/base/tensor.h"

namespace sluice {

// A padded batch for exactly one compiled (batch size, length) bucket.
struct PaddedBatch {
  int batch_size = 0;
  int64_t length = 0;                // the bucket length (the variable axis of every input)
  std::vector<HostTensor> inputs;    // one per declared input, shape [batch_size, length, ...]
  std::vector<int64_t> row_lengths;  // batch_size real lengths, each in [1, length]
};

struct BatchResult {
  std::vector<HostTensor> outputs;      // one per declared output, shape [batch_size, ...] (still padded)
  std::vector<int64_t> output_lengths;  // per row: real extent of the variable output axis; empty if none
};

// What loading one bucket cost; reported apart from steady-state numbers.
struct BucketLoadStats {
  int batch_size = 0;
  int64_t length = 0;
  double load_seconds = 0;  // read + deserialize (+ device placement)
  double warm_seconds = 0;  // first executions, until the graph runs at steady state
  double steady_seconds = 0;  // the last warm-up execution alone: a first estimate of steady compute time
};

// What one instance holds in memory, as loaded (bytes; see backend/compile/README.md "Graph format").
struct InstanceMemory {
  int graph_format = 0;      // 2: weights.pt bound to every graph; 1: each graph file holds its own weights; 0: none
  int64_t weight_bytes = 0;  // tensor bytes of the weights it binds (format 1: 0, they are inside graph_bytes)
  std::string weights_id;    // instances with the same non-empty id bind one shared copy (count it once)
  int64_t cache_bytes = 0;   // state resident between calls (the KV cache)
  int64_t graph_bytes = 0;   // the graph files it loaded (serialized code and constants; format 1: + weights)
  int graphs = 0;
};

// A model's memory over its instances: shared weights counted once.
struct ModelMemory {
  int graph_format = 0;  // the lowest format among the instances (1 wins: it wastes memory)
  int64_t weight_bytes = 0;
  int64_t cache_bytes = 0;
  int64_t graph_bytes = 0;
  int graphs = 0;
  int64_t largest_graph_bytes = 0;  // format 1: the biggest graph file, about one copy of the weights
};
ModelMemory SumInstanceMemory(const std::vector<InstanceMemory>& instances);
// One line for logs, e.g. "weights 14.3 MiB (1 copy, shared by 2 instances), cache 0 B, graphs 15 x 6 KiB".
std::string DescribeModelMemory(const ModelMemory& memory, size_t instances);
// Format 1: a warning naming the memory the per-graph weight copies waste; empty otherwise.
std::string GraphFormatWarning(const std::string& model, const ModelMemory& memory);

struct InstanceOptions {
  const ModelConfig* model = nullptr;  // must outlive the instance
  InstanceGroup group;
  int replica = 0;  // index within the group (chooses this replica's slice of the group's cores)
  int warmup_runs = 2;
  // May be null. Set (by the server, on SIGTERM during loading) to ask a loading instance to stop early with
  // Cancelled; backends that load in steps check it between steps (runtime nrt: between NEFFs). Must outlive the
  // instance's creation.
  const std::atomic<bool>* cancel = nullptr;
};

class Backend {
 public:
  // Creates the instance for options.group.device, loading and warming every bucket graph.
  // Errors name the model, the bucket and the file.
  static absl::StatusOr<std::unique_ptr<Backend>> Create(const InstanceOptions& options);

  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  // Runs the bucket graph for (batch.batch_size, batch.length).
  // REQUIRES: that bucket is compiled; inputs match the model's declared dtypes and [B, L, ...] shapes.
  virtual absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) = 0;

  virtual const std::vector<BucketLoadStats>& load_stats() const = 0;
  // What this instance holds (immutable after Create()).
  virtual InstanceMemory memory() const { return {}; }
  // e.g. "asr_ctc#0 on cpu (1 intra-op thread)"
  virtual std::string Describe() const = 0;
};

// Checks a batch against the model's declarations (shared by every implementation before it runs anything).
absl::Status ValidatePaddedBatch(const ModelConfig& model, const PaddedBatch& batch);

}  // namespace sluice
