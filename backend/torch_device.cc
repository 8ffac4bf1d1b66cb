#include "backend/torch_device.h"

#include <pthread.h>
#include <torch/cuda.h>

#include <atomic>
#include <cstdlib>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/base/blas_kernels.h"
#include "backend/base/sync.h"
#include "backend/base/status_macros.h"
#include "backend/neuron_runtime.h"

namespace sluice {

absl::StatusOr<c10::Device> ChooseTorchDevice(const InstanceOptions& options) {
  switch (options.group.device) {
    case DeviceKind::kCpu:
      return c10::Device(c10::kCPU);
    case DeviceKind::kCuda:
      if (!torch::cuda::is_available()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model ", options.model->name, ": device cuda requested, but this libtorch has no usable CUDA (",
            torch::cuda::device_count(), " devices visible; Debian's libtorch is CPU-only)"));
      }
      return c10::Device(c10::kCUDA, 0);
    case DeviceKind::kNeuron: {
      // Neuron graphs take host tensors; the Neuron runtime moves them to the NeuronCores itself.
      SLUICE_RETURN_IF_ERROR(LoadNeuronLibrary(options.group.neuron_library));
      return c10::Device(c10::kCPU);
    }
    case DeviceKind::kSim:
      break;
  }
  return absl::InvalidArgumentError("the torch backend does not run device sim");
}

absl::StatusOr<TorchTarget> ChooseTorchTarget(const InstanceOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(c10::Device device, ChooseTorchDevice(options));
  TorchTarget target{device, std::nullopt};
  if (options.group.device != DeviceKind::kNeuron) return target;
  const std::string who = absl::StrCat("model ", options.model->name, " instance #", options.replica);
  if (!options.group.cores) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": device neuron needs cores (the replica's NeuronCores)"));
  }
  const char* visible = std::getenv(kNeuronVisibleCoresEnv);
  absl::StatusOr<NeuronCorePlacement> placement =
      NeuronPlacementWithinVisible(*options.group.cores, visible == nullptr ? "" : visible);
  if (!placement.ok()) {
    return absl::Status(placement.status().code(), absl::StrCat(who, ": ", placement.status().message()));
  }
  target.neuron_cores = *placement;
  return target;
}

absl::StatusOr<torch::jit::Module> LoadTorchGraph(const TorchTarget& target, const std::string& path) {
  std::optional<torch::jit::Module> module;
  auto load = [&]() -> absl::Status {
    try {
      module = torch::jit::load(path, target.device);
    } catch (const std::exception& e) {  // c10::Error derives from std::exception
      return absl::FailedPreconditionError(FirstLine(e.what()));
    }
    return absl::OkStatus();
  };
  if (target.neuron_cores) {
    SLUICE_RETURN_IF_ERROR(WithNeuronCoreDefaults(*target.neuron_cores, load));
  } else {
    SLUICE_RETURN_IF_ERROR(load());
  }
  return std::move(*module);
}

namespace {

// The BLAS found at run time and its thread-count calls (each null when that BLAS lacks it).
struct BlasControl {
  BlasInfo info;
  void (*set_process_wide)(int) = nullptr;  // openblas_set_num_threads
  void (*set_blis)(int64_t) = nullptr;      // bli_thread_set_num_threads(dim_t): process-wide (not run here)
  int (*set_per_thread)(int) = nullptr;     // MKL_Set_Num_Threads_Local (not run here)
  int (*get)() = nullptr;                   // openblas_get_num_threads
};

BlasControl FindBlas() {
  BlasControl blas;
  const LoadedBlasLibrary& library = LoadedBlasLibraryOfProcess();
  if (library.file.empty()) {
    blas.info.name = "none loaded (no sgemm_ in the process)";
    return blas;
  }
  blas.info.library = library.file;
  auto find = [&library](const char* name) { return library.Find(name); };
  if (void* set = find("openblas_set_num_threads")) {
    blas.set_process_wide = reinterpret_cast<void (*)(int)>(set);
    blas.get = reinterpret_cast<int (*)()>(find("openblas_get_num_threads"));
    auto config = reinterpret_cast<char* (*)()>(find("openblas_get_config"));
    auto parallel = reinterpret_cast<int (*)()>(find("openblas_get_parallel"));
    const int mode = parallel ? parallel() : -1;
    blas.info.name = absl::StrCat("OpenBLAS (", config ? config() : "unknown build", ", ",
                                  mode == 0 ? "sequential" : mode == 1 ? "pthread" : mode == 2 ? "OpenMP" : "?",
                                  ")");
    blas.info.settable = blas.info.process_wide = true;
  } else if (void* set = find("MKL_Set_Num_Threads_Local")) {
    blas.set_per_thread = reinterpret_cast<int (*)(int)>(set);
    blas.info.name = "Intel MKL";
    blas.info.settable = true;
  } else if (void* set = find("bli_thread_set_num_threads")) {
    blas.set_blis = reinterpret_cast<void (*)(int64_t)>(set);
    blas.info.name = "BLIS";
    blas.info.settable = blas.info.process_wide = true;
  } else {
    blas.info.name = "unknown BLAS without a known thread call (assumed single-threaded, like the reference BLAS)";
  }
  return blas;
}

const BlasControl& Blas() {
  static const BlasControl* const blas = new BlasControl(FindBlas());
  return *blas;
}

// Process-wide pools: the values sluice set (0: not set yet).
ABSL_CONST_INIT sluice::Mutex pools_mu;
int process_blas_threads ABSL_GUARDED_BY(pools_mu) = 0;
int process_inter_op_threads ABSL_GUARDED_BY(pools_mu) = 0;

// Caps a process-wide BLAS pool at `threads` (the smallest value any instance asked for wins).
void CapProcessBlasThreads(int threads) {
  const BlasControl& blas = Blas();
  if (!blas.info.process_wide) return;
  sluice::MutexLock lock(&pools_mu);
  if (process_blas_threads != 0 && process_blas_threads <= threads) return;
  process_blas_threads = threads;
  if (blas.set_process_wide) blas.set_process_wide(threads);
  if (blas.set_blis) blas.set_blis(threads);
}

absl::Status UseInterOpThreads(int threads, const std::string& who) {
  sluice::MutexLock lock(&pools_mu);
  if (process_inter_op_threads == threads) return absl::OkStatus();
  if (process_inter_op_threads != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, ": inter_op_threads ", threads, ", but torch's inter-op pool is process-wide and another instance set it to ",
        process_inter_op_threads, ": give every model the same value"));
  }
  try {
    at::set_num_interop_threads(threads);
  } catch (const std::exception& e) {  // torch refuses once inter-op work has started
    return absl::FailedPreconditionError(absl::StrCat(who, ": cannot set inter_op_threads ", threads, ": ",
                                                      FirstLine(e.what())));
  }
  process_inter_op_threads = threads;
  return absl::OkStatus();
}

std::atomic<uint64_t> next_instance_id{1};
thread_local uint64_t applied_instance = 0;              // the InstanceThreads this thread last applied
thread_local std::optional<cpu_set_t> unpinned_affinity;  // the thread's CPU set before its first pin

cpu_set_t CpuSetOf(const CoreRange& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu = cpus.first; cpu <= cpus.last; ++cpu) CPU_SET(cpu, &set);
  return set;
}

absl::StatusOr<cpu_set_t> CallingThreadAffinity() {
  cpu_set_t set;
  if (int err = pthread_getaffinity_np(pthread_self(), sizeof(set), &set); err != 0) {
    return absl::InternalError(absl::StrCat("pthread_getaffinity_np failed: error ", err));
  }
  return set;
}

absl::Status SetCallingThreadAffinity(const cpu_set_t& set, const std::string& what) {
  if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); err != 0) {
    return absl::InternalError(absl::StrCat("cannot pin the calling thread to ", what, ": error ", err));
  }
  return absl::OkStatus();
}

std::string CpuList(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return absl::StrJoin(cpus, ",");
}

}  // namespace

const BlasInfo& LoadedBlas() { return Blas().info; }

int BlasThreadCount() { return Blas().get ? Blas().get() : -1; }

absl::StatusOr<InstanceThreads> InstanceThreads::Create(const InstanceOptions& options) {
  const InstanceGroup& group = options.group;
  const std::string who = absl::StrCat("model ", options.model->name, " instance #", options.replica);
  std::optional<CoreRange> pinned;
  if (group.device == DeviceKind::kCpu && group.cores) {
    // The CPUs this thread may use (before any pin of its own): a slice outside them could never run.
    cpu_set_t allowed;
    if (unpinned_affinity) {
      allowed = *unpinned_affinity;
    } else {
      SLUICE_ASSIGN_OR_RETURN(allowed, CallingThreadAffinity());
    }
    for (int cpu = group.cores->first; cpu <= group.cores->last; ++cpu) {
      if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) {
        return absl::FailedPreconditionError(absl::StrCat(who, ": cores ", group.cores->ToString(), " include CPU ",
                                                          cpu, ", which this process may not use (allowed: ",
                                                          CpuList(allowed), ")"));
      }
    }
    pinned = group.cores;
  }
  if (group.inter_op_threads) SLUICE_RETURN_IF_ERROR(UseInterOpThreads(*group.inter_op_threads, who));
  CapProcessBlasThreads(group.intra_op_threads);
  return InstanceThreads(next_instance_id.fetch_add(1), group.intra_op_threads, pinned);
}

absl::Status InstanceThreads::ApplyToCallingThread() const {
  if (applied_instance == id_) return absl::OkStatus();
  // The CPU set first: threads started below (at::set_num_threads restarts pthreadpool's workers from this thread)
  // and later (the OpenMP team at the first parallel region) inherit it.
  if (pinned_cpus_) {
    if (!unpinned_affinity) {
      SLUICE_ASSIGN_OR_RETURN(cpu_set_t before, CallingThreadAffinity());
      unpinned_affinity = before;
    }
    SLUICE_RETURN_IF_ERROR(SetCallingThreadAffinity(CpuSetOf(*pinned_cpus_),
                                                    absl::StrCat("CPUs ", pinned_cpus_->ToString())));
  } else if (unpinned_affinity) {
    SLUICE_RETURN_IF_ERROR(SetCallingThreadAffinity(*unpinned_affinity, "its CPUs from before pinning"));
    unpinned_affinity.reset();
  }
  // torch sets a thread's OpenMP count from its process-wide last value at the thread's first parallel region;
  // run that first, or another instance's count could replace this one there.
  at::internal::lazy_init_num_threads();
  at::set_num_threads(intra_op_threads_);
  if (Blas().set_per_thread) Blas().set_per_thread(intra_op_threads_);
  applied_instance = id_;
  return absl::OkStatus();
}

ScopedInstanceThreads::ScopedInstanceThreads(const InstanceThreads& threads)
    : saved_intra_op_threads_(at::get_num_threads()), saved_applied_(applied_instance),
      saved_unpinned_(unpinned_affinity) {
  absl::StatusOr<cpu_set_t> affinity = CallingThreadAffinity();
  if (affinity.ok()) {
    saved_affinity_ = *affinity;
    saved_affinity_valid_ = true;
  }
  status_ = threads.ApplyToCallingThread();
}

ScopedInstanceThreads::~ScopedInstanceThreads() {
  if (saved_affinity_valid_) (void)SetCallingThreadAffinity(saved_affinity_, "its CPUs from before the scope");
  at::set_num_threads(saved_intra_op_threads_);
  if (Blas().set_per_thread) Blas().set_per_thread(saved_intra_op_threads_);
  unpinned_affinity = saved_unpinned_;
  applied_instance = saved_applied_;
}

}  // namespace sluice
