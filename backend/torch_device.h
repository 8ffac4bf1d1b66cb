// What the libtorch backends (torch_backend.cc: bucket graphs; torch_generation_backend.cc: prefill/decode
// graphs) share about devices and threads: the torch::Device of an instance group (loading AWS's
// libtorchneuron.so first for device neuron; NEURON_RT_VISIBLE_CORES is set once per process by
// ModelRepository::Load), how a graph file loads there (device neuron: onto the replica's own NeuronCores, see
// neuron_placement.h), and InstanceThreads, which makes `intra_op_threads`, `inter_op_threads` and (device cpu)
// `cores` hold for every thread pool a graph can reach. Included only by backend/*.cc: it carries libtorch headers.
//
// The pools a graph can use with Debian 12's libtorch 1.13.1, and how each is bounded (checked with ldd,
// torch.__config__.parallel_info() and per-thread CPU time from /proc; see README "Model repository"):
// - torch intra-op = OpenMP (libgomp; oneDNN 2.6.3 runs on the same OpenMP). OpenMP's thread count is per calling
//   thread, so at::set_num_threads runs on the thread that runs the graphs. libgomp starts a thread's team from
//   that thread, so team threads inherit its CPU set (team threads started before a pin keep their old set;
//   the pin happens before the first graph runs on the thread, so none exist).
// - BLAS: libtorch NEEDs libblas.so.3; Debian's alternatives point it at openblas-pthread/libblas.so.3, a thin
//   wrapper over libopenblas.so.0 (0.3.21, pthread build). That pool is process-wide, started when the library
//   loads (by the main thread: not pinned) and blind to torch's and OpenMP's settings: with intra_op_threads 1 one
//   asr_ctc graph kept ~2 cores busy. The BLAS serving sgemm_ is found at run time (dlsym/dladdr on the library
//   already loaded; no link dependency that could pick another BLAS) and its thread count set through its own
//   call: OpenBLAS openblas_set_num_threads (process-wide; with 1 every BLAS call runs on its caller alone, so on
//   the caller's pinned CPUs), MKL MKL_Set_Num_Threads_Local (per thread), BLIS bli_thread_set_num_threads
//   (process-wide). A process-wide count is set to the smallest intra_op_threads of the torch instances created
//   (OpenBLAS runs concurrent calls from several instance threads side by side, each with up to that many
//   threads); with a count above 1 its pool threads are shared by all instances and are not pinned.
// - torch inter-op (only torch.jit.fork uses it): process-wide and settable once, by `inter_op_threads`; a second
//   model asking for another value is an error. Its threads start at the first fork, from the forking thread.
// - pthreadpool (XNNPACK/QNNPACK quantized kernels): process-wide, sized by at::set_num_threads (last caller).
//
// Thread-safety: ChooseTorchDevice, ChooseTorchTarget, LoadTorchGraph (neuron loads take turns: see
// neuron_placement.h), LoadedBlas and InstanceThreads::Create are safe to call concurrently;
// ApplyToCallingThread and ScopedInstanceThreads act on the calling thread only.
#pragma once

#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <sched.h>
#include <torch/script.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/base/core_range.h"
#include "backend/neuron_placement.h"

namespace sluice {

// cpu: the CPU; cuda: GPU 0 (FailedPrecondition when this libtorch has no usable CUDA); neuron: the CPU, after
// loading options.group.neuron_library (Neuron graphs take host tensors; the Neuron runtime moves them).
// InvalidArgument for device sim.
absl::StatusOr<c10::Device> ChooseTorchDevice(const InstanceOptions& options);

// Where one instance's graphs load.
struct TorchTarget {
  c10::Device device = c10::Device(c10::kCPU);
  // Device neuron: the replica's NeuronCores (options.group.cores) among the process's visible NeuronCores.
  std::optional<NeuronCorePlacement> neuron_cores;
};

// ChooseTorchDevice, and for device neuron the replica's placement among NEURON_RT_VISIBLE_CORES as set now
// (ModelRepository::Load sets it before creating instances; unset: all cores, numbered from 0). Errors name the
// model and replica (a neuron group without cores, or cores that are not visible).
// REQUIRES: options.group.cores, if set, is already this replica's slice (ModelRepository splits the group's).
absl::StatusOr<TorchTarget> ChooseTorchTarget(const InstanceOptions& options);

// torch::jit::load(path) onto target.device. With target.neuron_cores, the load runs inside
// WithNeuronCoreDefaults, so every Neuron subgraph in the file loads onto those cores; a placement failure is
// returned before anything loads. A libtorch exception becomes FailedPrecondition with its first line.
absl::StatusOr<torch::jit::Module> LoadTorchGraph(const TorchTarget& target, const std::string& path);

// The BLAS library that serves this process's sgemm_ (what libtorch calls for float matmuls), found once.
struct BlasInfo {
  std::string library;      // the file defining sgemm_ (symlinks resolved); empty when no BLAS is loaded
  std::string name;         // e.g. "OpenBLAS (OpenBLAS 0.3.21 NO_AFFINITY ..., pthread)"
  bool settable = false;    // sluice knows how to set its thread count
  bool process_wide = false;  // that count is one value for the whole process (OpenBLAS, BLIS)
};
const BlasInfo& LoadedBlas();

// The BLAS's current thread count as it reports it; -1 when it cannot say.
int BlasThreadCount();

// The threads and CPUs one instance's graphs may use.
class InstanceThreads {
 public:
  // Checks (device cpu) that the replica's cores are CPUs this thread may use, sets the process-wide pools
  // (inter-op once; a process-wide BLAS count capped at intra_op_threads). Errors name the model and replica.
  // REQUIRES: options.group.cores, if set, is already this replica's slice (ModelRepository splits the group's).
  static absl::StatusOr<InstanceThreads> Create(const InstanceOptions& options);

  // Makes the calling thread run graphs as this instance: torch/OpenMP intra-op count, a per-thread BLAS count
  // where the BLAS has one, and (device cpu with cores) the thread's CPU set. The thread keeps these settings
  // (the scheduler gives each instance its own thread); a thread that later applies an instance without cores
  // gets its CPU set from before its first pin back. Cheap when this instance was the last applied on the thread.
  absl::Status ApplyToCallingThread() const;

  int intra_op_threads() const { return intra_op_threads_; }
  const std::optional<CoreRange>& pinned_cpus() const { return pinned_cpus_; }

 private:
  InstanceThreads(uint64_t id, int intra_op_threads, std::optional<CoreRange> pinned_cpus)
      : id_(id), intra_op_threads_(intra_op_threads), pinned_cpus_(pinned_cpus) {}

  uint64_t id_;  // unique per Create in the process: which instance a thread last applied
  int intra_op_threads_;
  std::optional<CoreRange> pinned_cpus_;  // device cpu with cores only
};

// Applies an instance's settings to the calling thread for the scope's lifetime, then gives the thread its CPU
// set, OpenMP count and previous instance back: for loading and warming an instance on the loading thread (so
// warm-up timings see the instance's real threads) without pinning the threads the loading thread starts later.
class ScopedInstanceThreads {
 public:
  explicit ScopedInstanceThreads(const InstanceThreads& threads);
  ~ScopedInstanceThreads();
  ScopedInstanceThreads(const ScopedInstanceThreads&) = delete;
  ScopedInstanceThreads& operator=(const ScopedInstanceThreads&) = delete;

  // Whether applying succeeded; callers return it before running anything.
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
  int saved_intra_op_threads_;
  uint64_t saved_applied_;
  bool saved_affinity_valid_ = false;
  cpu_set_t saved_affinity_;
  std::optional<cpu_set_t> saved_unpinned_;
};

// The first line of a (multi-line) libtorch exception message.
inline std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace sluice
