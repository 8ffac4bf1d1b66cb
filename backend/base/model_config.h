// A model's config.yaml as native types, validated: what the model takes and returns, its compiled length
// buckets and batch sizes, how requests are batched, and where its instances run.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/core_range.h"
#include "backend/base/embedding_config.h"
#include "backend/base/generation_config.h"
#include "backend/base/speech_config.h"
#include "backend/base/tensor.h"
#include "backend/base/yaml_node.h"

namespace sluice {

// Decides which metrics and APIs apply: speech models get audio-second metrics and voice APIs; generation
// models (decoders with a KV cache) are served by the continuous batcher and the OpenAI/Triton streaming APIs.
enum class ModelKind { kSpeech, kText, kGeneric, kGeneration };
enum class DeviceKind { kCpu, kCuda, kNeuron, kSim };
// device neuron: what executes the graphs. kTorchScript: torch-neuronx TorchScript graphs through libtorchneuron.so
// (Inf2/Trn1, maintenance); kNrt: per-bucket NEFFs through the Neuron Runtime C API, libnrt (backend/nrt/).
enum class NeuronRuntimeKind { kTorchScript, kNrt };

const char* ModelKindName(ModelKind kind);
const char* DeviceKindName(DeviceKind device);

inline constexpr int64_t kVariableDim = -1;

// Inclusive bounds on an integer input's values (token ids: [0, vocabulary size - 1]).
struct ValueRange {
  int64_t min = 0;
  int64_t max = 0;
};

// One input or output, per sample (no batch dimension). Inputs have the variable-length axis first.
struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kFp32;
  std::vector<int64_t> shape;       // kVariableDim marks the variable-length axis
  std::optional<int> sample_rate;   // speech inputs: samples per second of the variable axis
  std::optional<ValueRange> value_range;  // integer inputs: values outside are refused (config key `range`)

  bool has_variable_axis() const;
  // Elements per step of the variable axis (product of the fixed dims).
  int64_t elements_per_step() const;
};

// Sorted ascending, no duplicates. Every (batch size, length) pair has its own precompiled graph.
struct BucketSpec {
  std::vector<int64_t> lengths;
  std::vector<int> batch_sizes;
};

struct BatchingOptions {
  double max_queue_delay_ms = 5.0;
  int max_queue_size = 256;
  // Request priority 1 is the highest; a request's priority 0 means default_priority_level (as in Triton).
  int priority_levels = 3;
  int default_priority_level = 2;
  // A batch whose execution has not returned after this long is answered Unavailable and its instance taken
  // out of rotation (a hung device call cannot be interrupted). 0: no limit. Generous by default: the slowest
  // bucket of a CPU graph takes about a second here.
  double execution_timeout_ms = 60000;
  // How large a batch the dynamic batcher forms in a bucket. kMeasured: the compiled size with the best measured
  // rows/s (on a CPU, long buckets often run fastest per row at small sizes, so batching stops there). kLargest:
  // always up to the largest compiled size, whatever the timings say (an accelerator whose timings are noisy, or
  // a test that must see batches form).
  enum class BatchSizePolicy { kMeasured, kLargest };
  BatchSizePolicy batch_size_policy = BatchSizePolicy::kMeasured;
  // Filling under load: how much longer than max_queue_delay_ms a partial batch may wait while whole batches of
  // other buckets (of its priority or higher) run ahead of it, so that it fills. Never past what a request's
  // deadline allows, never while an instance would idle. 0: off (a due partial batch goes first by age).
  // Unset: FillWaitMs below (150 ms on accelerators, off on CPU instances).
  std::optional<double> max_fill_wait_ms;
  // Not waiting for no one: when every request the model recently had in flight at once is already queued (none
  // running or being answered), no answer is pending that could bring a closed-loop client's next request, so
  // max_queue_delay_ms would only idle a free instance: the oldest partial batch starts at once. Open-loop
  // traffic rarely meets the condition (see scheduler/dynamic_batcher.h). false: always wait the delay.
  bool skip_futile_delay = true;
  // Waiting for the ones just answered: when closed-loop clients were just answered (their next requests usually
  // arrive within a measured gap, see scheduler/return_tracker.h), a partial batch due by its delay waits that
  // gap for them, so they can join it or fill another, and the next launch serves more rows. Never past a
  // deadline, never when the gap is as long as a launch of the graph, never with max_queue_delay_ms 0, never on
  // CPU instances (the graphs share the cores with the threads bringing those requests: measured a loss). false: off.
  bool await_returns = true;
  // Spinning before sleeping: an instance with nothing to run while at most one request was in flight at once over
  // the last 1-2 s (one caller at a time) polls for its next batch this long before it sleeps, so the request a
  // lone client sends on getting its answer starts without a thread wake-up (most of a zero-cost request's latency
  // on a VM). With more in flight the threads bringing that work need the CPU, and it sleeps at once. 0: off.
  int idle_spin_us = 200;
};

// Latency of the `sim` backend: base_ms + per_sample_us * batch * length (one "sample" = one step of the
// variable axis). Outputs' variable axis has ceil(length * output_steps_per_input_step) steps.
// Faults the `sim` device injects, for tests that faults stay contained (config `sim: {faults: {...}}`): each
// batch throws an exception with probability exception_rate, else fails Internal with probability error_rate;
// every batch after the first gone_after_batches (0: never) fails Unavailable, as a device that disappeared;
// every batch after the first hang_after_batches (0: never) blocks for hang_ms before it runs, as a hung device
// call. Draws are deterministic: a generator seeded with seed + the instance's replica index. `replica` limits
// the faults to that one replica (unset: every replica).
struct SimFaults {
  double error_rate = 0.0;
  double exception_rate = 0.0;
  int64_t gone_after_batches = 0;
  int64_t hang_after_batches = 0;
  double hang_ms = 3600000;
  std::optional<int> replica;
  uint64_t seed = 1;
};

struct SimCostModel {
  double base_ms = 0.0;
  double per_sample_us = 0.0;
  double output_steps_per_input_step = 1.0;
  SimFaults faults;
  // Generation models only: the sim device picks each decode row's token itself when the engine offers the picks
  // (a GPU backend that samples in its graph), during its modeled step time; false: it returns logits and the
  // engine samples on the host (as the nrt backend does).
  bool picks_tokens = false;
};

struct InstanceGroup {
  int count = 1;
  DeviceKind device = DeviceKind::kCpu;
  // neuron: the NeuronCores this group may use; cpu: the CPUs its threads are pinned to (unset: not pinned).
  // Split evenly over the replicas (see ReplicaCores).
  std::optional<CoreRange> cores;
  int intra_op_threads = 1;  // torch intra-op / OpenMP threads per replica; also caps the BLAS pool
  // dlopen()ed before graphs load (neuron only); the default follows the runtime (libnrt.so.1 for nrt).
  std::string neuron_library = "libtorchneuron.so";
  std::optional<int> inter_op_threads;  // torch's process-wide inter-op pool (torch.jit.fork); unset: torch's default
  // Last, so that existing aggregate initializers keep their meaning.
  NeuronRuntimeKind neuron_runtime = NeuronRuntimeKind::kTorchScript;  // config `runtime: torchscript | nrt`
};

struct ModelConfig {
  std::string name;
  ModelKind kind = ModelKind::kGeneric;
  std::string directory;    // the model's directory (holds config.yaml and graphs/)
  std::string config_path;  // for messages
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  BucketSpec buckets;
  BatchingOptions batching;
  std::vector<InstanceGroup> instances;
  std::optional<SimCostModel> sim;  // present iff some instance group uses the sim device
  std::optional<SpeechOptions> speech;  // kind speech only: what the voice API needs (speech_config.h)
  std::optional<EmbeddingOptions> embedding;  // kind text only: what the embeddings API needs (embedding_config.h)
  // kind generation (and then always; inputs/outputs/buckets are empty), or the decoder of an encoder-decoder speech
  // model: the decoder's graphs, KV cache and engine policy (generation_config.h).
  std::optional<GenerationOptions> generation;

  // A speech model whose recognizer is an encoder-decoder (speech.recognizer whisper): its instances are an
  // encoder Backend (the buckets) and a decoder GenerationBackend (the generation: section) each.
  bool is_encoder_decoder() const { return kind == ModelKind::kSpeech && generation.has_value(); }
  int max_batch_size() const { return buckets.batch_sizes.back(); }
  int64_t max_length() const { return buckets.lengths.back(); }
  bool has_variable_output() const;
  bool has_cpu_instances() const;
  // The output the voice API decodes. REQUIRES: speech is set.
  const TensorSpec& speech_output() const;
  // The vector the embeddings API answers. REQUIRES: embedding is set.
  const TensorSpec& embedding_output() const;
  // The precompiled graph for one bucket: <directory>/graphs/b<batch>_l<length>.pt
  std::string GraphPath(int batch_size, int64_t length) const;
};

// batching.max_fill_wait_ms as configured, else the default for the model's devices. On accelerators (sim, cuda,
// neuron) 150 ms: at 16 calls in flight on the sim's speech mix the partial batches passed over are 60-150 ms old,
// so 100 ms caught few of them (+0.6 % served) and 150 or 300 ms the same +2 %; the longer, the longer the tail
// under heavier load (1000 ms at 64 in flight: p99 427 -> 909 ms). Off where any instance is a CPU: there it made
// requests wait longer and served no more (asr_ctc near saturation, 160 req/s open loop, alternated: p50 56-63 ->
// 105-109 ms, p99 294-309 -> 357-625 ms).
double FillWaitMs(const ModelConfig& model);

// Reads and validates <model_dir>/config.yaml. Every error names the file, the key and the line.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);
// Validates an already parsed document; `model_dir` is where graphs are looked up.
absl::StatusOr<ModelConfig> ParseModelConfig(const YamlNode& root, const std::string& model_dir);

}  // namespace sluice
