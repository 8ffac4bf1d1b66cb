// The StreamStepBackend seam: one instance of a cache-aware streaming speech model (a `speech.stream_step`
// section; backend/compile/README.md "Cache-aware streaming") on one device: every graphs/stream_step_b<B>.pt,
// warmed, and the per-stream state tensors, each FP32 [slots + 1, shape...], resident on the device for the
// instance's lifetime and updated in place by the graphs. Slot `slots` is the scratch slot: padding rows read and
// write only there. Which stream owns which slot is the caller's business (server/voice/stream_engine.h).
//
// Thread-safety: Step() and SlotState() are called from one thread at a time per instance (the engine's step
// thread); Describe()/memory()/load_stats() are immutable after Create().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/base/stream_step_config.h"

namespace sluice {

// One stream's next chunk. `samples` holds 1..chunk_samples real samples (fewer only at the stream's end); the
// backend pads the rest. reset: the stream starts here; its slot's earlier state is ignored (read as zeros).
struct StreamStepRow {
  int slot = 0;  // in [0, slots)
  bool reset = false;
  std::span<const float> samples;
};

struct StreamStepInput {
  int batch_size = 0;               // a compiled stream batch size >= rows.size()
  std::vector<StreamStepRow> rows;  // 1..batch_size rows, distinct slots
};

// Row-major [rows, frames_per_chunk, classes] log-probs of the real rows (padding rows dropped). Frames past a
// short final chunk's real end are included; the caller trims them (ceil(samples / frame_samples) are real).
struct StreamStepOutput {
  int rows = 0;
  int64_t frames = 0;
  int64_t classes = 0;
  std::vector<float> values;
};

class StreamStepBackend {
 public:
  // cpu/cuda (and neuron, unverified): TorchScript. Other devices: Unimplemented naming the model. Errors name the
  // model and the graph file.
  static absl::StatusOr<std::unique_ptr<StreamStepBackend>> Create(const InstanceOptions& options,
                                                                   const StreamStepOptions& step);

  StreamStepBackend() = default;
  StreamStepBackend(const StreamStepBackend&) = delete;
  StreamStepBackend& operator=(const StreamStepBackend&) = delete;
  virtual ~StreamStepBackend() = default;

  // InvalidArgument for rows outside the contract (no such batch size, a slot out of range or repeated, no or too
  // many samples); Internal when the graph fails or returns another shape.
  virtual absl::StatusOr<StreamStepOutput> Step(const StreamStepInput& input) = 0;
  // A copy of one slot's state tensors (slot in [0, slots], the scratch slot included): for tests.
  virtual absl::StatusOr<std::vector<std::vector<float>>> SlotState(int slot) = 0;

  virtual const StreamStepOptions& options() const = 0;
  virtual const std::vector<BucketLoadStats>& load_stats() const = 0;  // batch_size, length = chunk_samples
  virtual InstanceMemory memory() const { return {}; }
  virtual std::string Describe() const = 0;
};

// The graph of one stream batch size: <directory>/graphs/stream_step_b<batch>.pt
std::string StreamStepGraphPath(const ModelConfig& model, int batch_size);

}  // namespace sluice
