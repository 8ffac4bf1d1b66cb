// The part of a Neuron Runtime instance that batch models (nrt_backend.cc) and generation models
// (nrt_generation_backend.cc) share: every NEFF of the manifest nrt_load()ed onto one NeuronCore, its tensors
// checked against the manifest, ONE device tensor per weight (written once from the safetensors file) and per
// cache (zeroed once) bound to every NEFF that names it — a cache bound to a NEFF input and to its aliased output
// is the same device tensor in both sets, which is how a NEFF updates it in place — and each NEFF's own
// input/output tensors allocated once. Destruction destroys the sets, frees every tensor and nrt_unload()s every
// NEFF; the NrtLibrary reference goes last (nrt_close when it was the process's last).
// UNVERIFIED ON HARDWARE: exercised only against the fake libnrt in tests/backend.
//
// Thread-safety: not thread-safe; one instance is used by one thread at a time (the Backend and
// GenerationBackend seams).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/nrt/neff_manifest.h"
#include "backend/nrt/nrt_library.h"
#include "backend/nrt/safetensors_file.h"

namespace sluice {

// What nrt_get_model_tensor_info reported for one tensor, copied out of the runtime's array.
struct NeffTensorInfo {
  std::string name;
  nrt_tensor_usage_t usage = NRT_TENSOR_USAGE_INPUT;
  size_t size = 0;
  nrt_dtype_t dtype = NRT_DTYPE_UNKNOWN;
  std::vector<int64_t> shape;
};

nrt_dtype_t NrtDtypeOf(DataType dtype);
std::string NrtDtypeName(nrt_dtype_t dtype);

// One device tensor; freed by its owner through the library.
struct NeffDeviceTensor {
  nrt_tensor_t* tensor = nullptr;
  size_t size = 0;
  nrt_dtype_t dtype = NRT_DTYPE_UNKNOWN;
};

// A NEFF tensor bound to a per-NEFF device tensor that the caller writes or reads each execution.
struct NeffBucketIo {
  NeffTensorBinding binding;
  NeffDeviceTensor device;
  std::vector<int64_t> shape;  // the NEFF's shape
};

struct LoadedNeff {
  const NeffBucket* manifest = nullptr;
  nrt_model_t* model = nullptr;
  nrt_tensor_set_t* inputs = nullptr;
  nrt_tensor_set_t* outputs = nullptr;
  std::vector<NeffBucketIo> io;  // inputs, lengths, outputs, output_lengths (weights and caches are shared)
};

// What a backend built on a NeffInstance supplies (NrtBackend, NrtGenerationBackend): the checks of the tensor
// roles whose meaning it owns, and one warm-up execution. Called by NeffInstance::Load on the loading thread.
class NeffModelRunner {
 public:
  // Builds the error naming the model, NEFF, tensor and manifest from why the tensor does not fit.
  using BadTensor = std::function<absl::Status(const std::string& why)>;

  virtual ~NeffModelRunner() = default;

  // Checks one binding whose role the runner owns (input, lengths, output, output_lengths, and cache sizes)
  // against what the NEFF reports; weights are checked by NeffInstance against the safetensors file.
  virtual absl::Status CheckRole(const NeffBucket& bucket, const NeffTensorBinding& binding,
                                 const NeffTensorInfo& info, const BadTensor& bad) const = 0;
  // Executes `neff` once on all-padding inputs of its shape (writing only the scratch slot of any cache).
  virtual absl::Status WarmOnce(LoadedNeff& neff) = 0;
};

class NeffInstance {
 public:
  // The replica's NeuronCore (one per replica, else an error naming the fix), the model's NEFF manifest and the
  // runtime library of options.group; `options.cancel` (may be null) is checked before each NEFF loads.
  static absl::StatusOr<std::unique_ptr<NeffInstance>> Create(const InstanceOptions& options);

  NeffInstance(std::string model_name, std::shared_ptr<NrtLibrary> library, NeffManifest manifest, int vnc,
               const std::atomic<bool>* cancel);
  NeffInstance(const NeffInstance&) = delete;
  NeffInstance& operator=(const NeffInstance&) = delete;
  ~NeffInstance();

  // Loads, checks (runner.CheckRole) and binds every NEFF of the manifest, in order, and warms each once bound:
  // `warmup_runs` runner.WarmOnce calls, the last one's time its steady_seconds. On error what was loaded stays
  // owned and is released by the destructor.
  absl::Status Load(NeffModelRunner& runner, int warmup_runs);

  // The loaded NEFF of that graph and shape; else an Internal error "`who`: decode NEFF (4, 128) not loaded".
  absl::StatusOr<LoadedNeff*> Find(NeffGraph graph, int batch_size, int64_t length, const std::string& who);

  absl::Status Write(const NeffBucketIo& io, const void* data, size_t size, const LoadedNeff& neff);
  absl::Status Read(const NeffBucketIo& io, void* data, size_t size, const LoadedNeff& neff);
  // nrt_execute of the NEFF over its bound sets; `context` is added to the error.
  absl::Status Execute(LoadedNeff& neff, const std::string& context);

  // "model m bucket (2, 8) NEFF .../b2_l8.neff" / "model m prefill (1, 64) NEFF ..."
  std::string Where(const NeffBucket& bucket) const;
  int vnc() const { return vnc_; }
  const std::vector<BucketLoadStats>& load_stats() const { return stats_; }
  // Weights and caches as allocated on this instance's core: each replica holds its own device copy (weights_id
  // stays empty, so a model's memory counts them once per replica).
  const InstanceMemory& memory() const { return memory_; }
  // How many device tensors were allocated for weights and for caches (each once, whatever the NEFF count).
  int shared_tensors(NeffTensorRole role) const;

 private:
  void Free(NeffDeviceTensor& t);
  absl::StatusOr<std::vector<NeffTensorInfo>> TensorInfo(nrt_model_t* model, const NeffBucket& bucket);
  absl::StatusOr<NeffDeviceTensor> Allocate(size_t size, nrt_dtype_t dtype, const std::string& name,
                                            const std::string& context);
  absl::Status LoadNeff(const NeffBucket& bucket, const NeffModelRunner& runner);
  absl::Status Warm(NeffModelRunner& runner, int runs, LoadedNeff& neff, BucketLoadStats& stats);
  absl::Status CheckAgainstNeff(const NeffBucket& bucket, const std::vector<NeffTensorInfo>& infos,
                                const NeffModelRunner& runner);
  absl::StatusOr<NeffDeviceTensor> SharedTensor(const NeffBucket& bucket, const NeffTensorBinding& binding,
                                                const NeffTensorInfo& info);

  const std::string model_name_;
  std::shared_ptr<NrtLibrary> library_;  // declared first among the runtime's users: destroyed last
  const NrtFunctions& api_;
  const NeffManifest manifest_;
  const int vnc_;
  const std::atomic<bool>* const cancel_;
  std::optional<SafetensorsFile> weights_;
  // Weights ("weight:<name>") and caches ("cache:<name>"): one device tensor each for the whole instance.
  std::map<std::string, NeffDeviceTensor> shared_;
  std::vector<LoadedNeff> neffs_;
  std::vector<BucketLoadStats> stats_;
  InstanceMemory memory_;  // graph_format 2: set in the constructor
};

// The lengths tensor's bytes (INT32 or INT64, one per row) and back.
std::vector<std::byte> EncodeNeffLengths(const std::vector<int64_t>& lengths, nrt_dtype_t dtype);
std::vector<int64_t> DecodeNeffLengths(const std::vector<std::byte>& bytes, nrt_dtype_t dtype);

}  // namespace sluice
