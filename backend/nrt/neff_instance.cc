#include "backend/nrt/neff_instance.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/neuron_placement.h"

namespace sluice {
namespace {

nrt_dtype_t NrtDtypeOfSafetensors(const std::string& dtype) {
  static const std::pair<const char*, nrt_dtype_t> kTable[] = {
      {"F32", NRT_DTYPE_FLOAT32}, {"F16", NRT_DTYPE_FLOAT16}, {"BF16", NRT_DTYPE_BFLOAT16},
      {"I64", NRT_DTYPE_INT64},   {"I32", NRT_DTYPE_INT32},   {"I16", NRT_DTYPE_INT16},
      {"I8", NRT_DTYPE_INT8},     {"U8", NRT_DTYPE_UINT8},    {"BOOL", NRT_DTYPE_UINT8},
      {"U16", NRT_DTYPE_UINT16},  {"U32", NRT_DTYPE_UINT32},  {"U64", NRT_DTYPE_UINT64}};
  for (const auto& [name, nrt] : kTable) {
    if (dtype == name) return nrt;
  }
  return NRT_DTYPE_UNKNOWN;
}

absl::StatusOr<std::vector<char>> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open NEFF ", path));
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The replica's NeuronCore position within NEURON_RT_VISIBLE_CORES: one core per replica, else an error naming the
// fix.
absl::StatusOr<int> NrtReplicaVnc(const InstanceOptions& options) {
  const ModelConfig& model = *options.model;
  const InstanceGroup& group = options.group;
  if (!group.cores) {
    return absl::InvalidArgumentError(absl::StrCat(model.name, ": device neuron needs cores (the replica's)"));
  }
  const CoreRange cores = *group.cores;  // the repository gives each replica its own slice (ReplicaCores)
  const char* visible = std::getenv("NEURON_RT_VISIBLE_CORES");
  SLUICE_ASSIGN_OR_RETURN(NeuronCorePlacement placement,
                          NeuronPlacementWithinVisible(cores, visible == nullptr ? "" : visible));
  if (placement.nc_count != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        model.name, ": runtime nrt runs each replica on one NeuronCore (libnrt's nrt_load places a NEFF on one "
                    "core), but replica ", options.replica, " has cores ", cores.ToString(),
        ": set the group's count to its number of cores (", cores.size() * group.count, ")"));
  }
  return placement.start_nc;
}

}  // namespace

nrt_dtype_t NrtDtypeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return NRT_DTYPE_UINT8;
    case DataType::kInt32: return NRT_DTYPE_INT32;
    case DataType::kInt64: return NRT_DTYPE_INT64;
    case DataType::kFp16: return NRT_DTYPE_FLOAT16;
    case DataType::kFp32: return NRT_DTYPE_FLOAT32;
  }
  return NRT_DTYPE_UNKNOWN;
}

std::string NrtDtypeName(nrt_dtype_t dtype) {
  switch (dtype) {
    case NRT_DTYPE_FLOAT32: return "FLOAT32";
    case NRT_DTYPE_FLOAT16: return "FLOAT16";
    case NRT_DTYPE_BFLOAT16: return "BFLOAT16";
    case NRT_DTYPE_INT64: return "INT64";
    case NRT_DTYPE_INT32: return "INT32";
    case NRT_DTYPE_INT16: return "INT16";
    case NRT_DTYPE_INT8: return "INT8";
    case NRT_DTYPE_UINT8: return "UINT8";
    default: return absl::StrCat("nrt dtype ", static_cast<int>(dtype));
  }
}

std::vector<std::byte> EncodeNeffLengths(const std::vector<int64_t>& lengths, nrt_dtype_t dtype) {
  const size_t width = dtype == NRT_DTYPE_INT32 ? 4 : 8;
  std::vector<std::byte> bytes(lengths.size() * width);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (width == 4) {
      const int32_t v = static_cast<int32_t>(lengths[i]);
      std::memcpy(bytes.data() + i * 4, &v, 4);
    } else {
      std::memcpy(bytes.data() + i * 8, &lengths[i], 8);
    }
  }
  return bytes;
}

std::vector<int64_t> DecodeNeffLengths(const std::vector<std::byte>& bytes, nrt_dtype_t dtype) {
  const size_t width = dtype == NRT_DTYPE_INT32 ? 4 : 8;
  std::vector<int64_t> lengths(bytes.size() / width);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (width == 4) {
      int32_t v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      lengths[i] = v;
    } else {
      std::memcpy(&lengths[i], bytes.data() + i * 8, 8);
    }
  }
  return lengths;
}

absl::StatusOr<std::unique_ptr<NeffInstance>> NeffInstance::Create(const InstanceOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(int vnc, NrtReplicaVnc(options));
  SLUICE_ASSIGN_OR_RETURN(NeffManifest manifest, LoadNeffManifest(*options.model));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<NrtLibrary> library, NrtLibrary::Acquire(options.group.neuron_library));
  return std::make_unique<NeffInstance>(options.model->name, std::move(library), std::move(manifest), vnc,
                                        options.cancel);
}

NeffInstance::NeffInstance(std::string model_name, std::shared_ptr<NrtLibrary> library, NeffManifest manifest,
                           int vnc, const std::atomic<bool>* cancel)
    : model_name_(std::move(model_name)),
      library_(std::move(library)),
      api_(library_->api()),
      manifest_(std::move(manifest)),
      vnc_(vnc),
      cancel_(cancel) {
  memory_.graph_format = 2;
}

NeffInstance::~NeffInstance() {
  for (LoadedNeff& neff : neffs_) {
    if (neff.inputs != nullptr) api_.destroy_tensor_set(&neff.inputs);
    if (neff.outputs != nullptr) api_.destroy_tensor_set(&neff.outputs);
    for (NeffBucketIo& io : neff.io) Free(io.device);
    if (neff.model == nullptr) continue;
    // Nothing can be done about a failed unload at shutdown but to say so (the server's log is its stderr).
    if (NRT_STATUS s = api_.unload(neff.model); s != NRT_SUCCESS) {
      const absl::Status error = NrtCallError("nrt_unload", s, Where(*neff.manifest));
      std::fprintf(stderr, "%s: %s\n", model_name_.c_str(), std::string(error.message()).c_str());
    }
  }
  for (auto& [name, tensor] : shared_) Free(tensor);
  // library_ goes last: the final holder's release calls nrt_close.
}

absl::Status NeffInstance::Load(NeffModelRunner& runner, int warmup_runs) {
  if (!manifest_.weights_file.empty()) {
    SLUICE_ASSIGN_OR_RETURN(SafetensorsFile weights, SafetensorsFile::Open(manifest_.weights_file));
    weights_ = std::move(weights);
  }
  for (const NeffBucket& bucket : manifest_.buckets) {
    // Between NEFFs (each nrt_load can take seconds on a device): a stop asked for during loading is honoured
    // here, and what was loaded so far is unloaded by the destructor.
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      return absl::CancelledError(absl::StrCat("model ", model_name_, ": loading stopped (", neffs_.size(), " of ",
                                               manifest_.buckets.size(), " NEFFs loaded)"));
    }
    const auto start = std::chrono::steady_clock::now();
    SLUICE_RETURN_IF_ERROR(LoadNeff(bucket, runner));
    const auto loaded = std::chrono::steady_clock::now();
    BucketLoadStats stats{bucket.batch_size, bucket.length};
    stats.load_seconds = std::chrono::duration<double>(loaded - start).count();
    SLUICE_RETURN_IF_ERROR(Warm(runner, warmup_runs, neffs_.back(), stats));
    stats.warm_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loaded).count();
    stats_.push_back(stats);
  }
  return absl::OkStatus();
}

absl::Status NeffInstance::Warm(NeffModelRunner& runner, int runs, LoadedNeff& neff, BucketLoadStats& stats) {
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status s = runner.WarmOnce(neff); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("warming up: ", s.message()));
    }
    stats.steady_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedNeff*> NeffInstance::Find(NeffGraph graph, int batch_size, int64_t length,
                                               const std::string& who) {
  for (LoadedNeff& n : neffs_) {
    if (n.manifest->graph == graph && n.manifest->batch_size == batch_size && n.manifest->length == length) return &n;
  }
  // The scheduler only forms batches of configured buckets and Load() loaded every one: this is a bug, not input.
  return absl::InternalError(
      absl::StrCat(who, ": ", NeffGraphName(graph), " NEFF (", batch_size, ", ", length, ") not loaded"));
}

std::string NeffInstance::Where(const NeffBucket& bucket) const {
  return absl::StrCat("model ", model_name_, " ", NeffGraphName(bucket.graph), " (", bucket.batch_size, ", ",
                      bucket.length, ") NEFF ", bucket.neff);
}

int NeffInstance::shared_tensors(NeffTensorRole role) const {
  const std::string prefix = role == NeffTensorRole::kWeight ? "weight:" : "cache:";
  int n = 0;
  for (const auto& [key, tensor] : shared_) n += key.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

void NeffInstance::Free(NeffDeviceTensor& t) {
  if (t.tensor != nullptr) api_.tensor_free(&t.tensor);
  t.tensor = nullptr;
}

absl::Status NeffInstance::Write(const NeffBucketIo& io, const void* data, size_t size, const LoadedNeff& neff) {
  if (NRT_STATUS s = api_.tensor_write(io.device.tensor, data, 0, size); s != NRT_SUCCESS) {
    return NrtCallError("nrt_tensor_write", s, absl::StrCat(neff.manifest->neff, " tensor '", io.binding.tensor, "'"));
  }
  return absl::OkStatus();
}

absl::Status NeffInstance::Read(const NeffBucketIo& io, void* data, size_t size, const LoadedNeff& neff) {
  if (NRT_STATUS s = api_.tensor_read(io.device.tensor, data, 0, size); s != NRT_SUCCESS) {
    return NrtCallError("nrt_tensor_read", s, absl::StrCat(neff.manifest->neff, " tensor '", io.binding.tensor, "'"));
  }
  return absl::OkStatus();
}

absl::Status NeffInstance::Execute(LoadedNeff& neff, const std::string& context) {
  if (NRT_STATUS s = api_.execute(neff.model, neff.inputs, neff.outputs); s != NRT_SUCCESS) {
    return NrtCallError("nrt_execute", s, absl::StrCat(context, ", ", neff.manifest->neff));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NeffTensorInfo>> NeffInstance::TensorInfo(nrt_model_t* model, const NeffBucket& bucket) {
  nrt_tensor_info_array_t* array = nullptr;
  if (NRT_STATUS s = api_.get_model_tensor_info(model, &array); s != NRT_SUCCESS) {
    return NrtCallError("nrt_get_model_tensor_info", s, Where(bucket));
  }
  std::vector<NeffTensorInfo> infos;
  for (uint64_t i = 0; i < array->tensor_count; ++i) {
    const nrt_tensor_info_t& t = array->tensor_array[i];
    NeffTensorInfo info{std::string(t.name, strnlen(t.name, NRT_TENSOR_NAME_MAX)), t.usage, t.size, t.dtype, {}};
    for (uint32_t d = 0; d < t.ndim; ++d) info.shape.push_back(t.shape[d]);
    infos.push_back(std::move(info));
  }
  if (NRT_STATUS s = api_.free_model_tensor_info(array); s != NRT_SUCCESS) {
    return NrtCallError("nrt_free_model_tensor_info", s, Where(bucket));
  }
  return infos;
}

absl::StatusOr<NeffDeviceTensor> NeffInstance::Allocate(size_t size, nrt_dtype_t dtype, const std::string& name,
                                                        const std::string& context) {
  NeffDeviceTensor t{nullptr, size, dtype};
  if (NRT_STATUS s = api_.tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, vnc_, size, name.c_str(), &t.tensor);
      s != NRT_SUCCESS) {
    return NrtCallError("nrt_tensor_allocate", s, absl::StrCat(context, ", ", size, " bytes on NeuronCore ", vnc_));
  }
  return t;
}

absl::Status NeffInstance::CheckAgainstNeff(const NeffBucket& bucket, const std::vector<NeffTensorInfo>& infos,
                                            const NeffModelRunner& runner) {
  auto bad = [&](const std::string& tensor, const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(Where(bucket), " tensor '", tensor, "': ", why, " (manifest ",
                                                      manifest_.path, ")"));
  };
  for (const NeffTensorInfo& info : infos) {
    bool bound = false;
    for (const NeffTensorBinding& b : bucket.tensors) bound = bound || b.tensor == info.name;
    if (!bound) return bad(info.name, "the NEFF has this tensor but the manifest does not bind it");
  }
  std::map<std::string, std::pair<int, int>> cache_directions;  // cache name -> (inputs, outputs)
  for (const NeffTensorBinding& b : bucket.tensors) {
    const NeffTensorInfo* info = nullptr;
    for (const NeffTensorInfo& i : infos) {
      if (i.name == b.tensor) info = &i;
    }
    if (info == nullptr) return bad(b.tensor, "the manifest binds it but the NEFF has no such tensor");
    const bool neff_output = info->usage == NRT_TENSOR_USAGE_OUTPUT;
    if (b.role == NeffTensorRole::kCache) {
      // A cache may be a NEFF input (read) and an output (its aliased write-back), never two of either.
      auto& [ins, outs] = cache_directions[b.name];
      if (++(neff_output ? outs : ins) > 1) {
        return bad(b.tensor, absl::StrCat("cache '", b.name, "' is bound to two NEFF ",
                                          neff_output ? "outputs" : "inputs"));
      }
    } else {
      const bool is_output = b.role == NeffTensorRole::kOutput || b.role == NeffTensorRole::kOutputLengths;
      if (is_output != neff_output) {
        return bad(b.tensor, absl::StrCat("role ", NeffTensorRoleName(b.role), " needs a NEFF ",
                                          is_output ? "output" : "input", ", but it is a NEFF ",
                                          is_output ? "input" : "output"));
      }
    }
    if (b.role == NeffTensorRole::kWeight) {
      SLUICE_ASSIGN_OR_RETURN(const SafetensorsEntry* entry, weights_->Find(b.name));
      if (info->dtype != NrtDtypeOfSafetensors(entry->dtype) || info->size != entry->size()) {
        return bad(b.tensor, absl::StrCat("the NEFF has ", NrtDtypeName(info->dtype), ", ", info->size,
                                          " bytes; weight '", b.name, "' (", entry->dtype, " ",
                                          ShapeToString(entry->shape), ") needs ",
                                          NrtDtypeName(NrtDtypeOfSafetensors(entry->dtype)), ", ", entry->size(),
                                          " bytes"));
      }
      continue;
    }
    SLUICE_RETURN_IF_ERROR(
        runner.CheckRole(bucket, b, *info, [&](const std::string& why) { return bad(b.tensor, why); }));
  }
  for (const auto& [name, directions] : cache_directions) {
    if (directions.second > 0 && directions.first == 0) {
      return bad(name, "the cache is bound to a NEFF output but to no input: an in-place cache is an input whose "
                       "output aliases it");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NeffDeviceTensor> NeffInstance::SharedTensor(const NeffBucket& bucket,
                                                            const NeffTensorBinding& binding,
                                                            const NeffTensorInfo& info) {
  const bool weight = binding.role == NeffTensorRole::kWeight;
  const std::string key = absl::StrCat(weight ? "weight:" : "cache:", binding.name);
  if (auto it = shared_.find(key); it != shared_.end()) {
    if (it->second.size != info.size || it->second.dtype != info.dtype) {
      return absl::FailedPreconditionError(absl::StrCat(
          Where(bucket), " tensor '", binding.tensor, "': ", NrtDtypeName(info.dtype), ", ", info.size,
          " bytes, but another bucket binds ", key, " as ", NrtDtypeName(it->second.dtype), ", ", it->second.size,
          " bytes (or this NEFF's other side of an aliased cache): they share one device tensor, so they must "
          "agree"));
    }
    return it->second;
  }
  SLUICE_ASSIGN_OR_RETURN(NeffDeviceTensor t,
                          Allocate(info.size, info.dtype, key, absl::StrCat(Where(bucket), " ", key)));
  shared_.emplace(key, t);  // owned from here on, also if the write below fails
  (weight ? memory_.weight_bytes : memory_.cache_bytes) += static_cast<int64_t>(info.size);
  std::vector<std::byte> bytes;
  if (weight) {
    SLUICE_ASSIGN_OR_RETURN(bytes, weights_->ReadTensor(binding.name));
  } else {
    bytes.assign(info.size, std::byte{0});  // caches start zeroed; the NEFFs own their contents from then on
  }
  if (NRT_STATUS s = api_.tensor_write(t.tensor, bytes.data(), 0, bytes.size()); s != NRT_SUCCESS) {
    return NrtCallError("nrt_tensor_write", s, absl::StrCat(Where(bucket), " ", key));
  }
  return t;
}

absl::Status NeffInstance::LoadNeff(const NeffBucket& bucket, const NeffModelRunner& runner) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<char> neff, ReadFile(bucket.neff));
  LoadedNeff& loaded = neffs_.emplace_back();  // owned (and cleaned up) from here on, whatever fails next
  loaded.manifest = &bucket;
  memory_.graph_bytes += static_cast<int64_t>(neff.size());
  ++memory_.graphs;
  // vnc_count is deprecated in current libnrt headers ("always use -1"): one NEFF copy on one core.
  if (NRT_STATUS s = api_.load(neff.data(), neff.size(), vnc_, -1, &loaded.model); s != NRT_SUCCESS) {
    loaded.model = nullptr;
    return NrtCallError("nrt_load", s, absl::StrCat(Where(bucket), " onto NeuronCore ", vnc_));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<NeffTensorInfo> infos, TensorInfo(loaded.model, bucket));
  SLUICE_RETURN_IF_ERROR(CheckAgainstNeff(bucket, infos, runner));
  for (auto* set : {&loaded.inputs, &loaded.outputs}) {
    if (NRT_STATUS s = api_.allocate_tensor_set(set); s != NRT_SUCCESS) {
      *set = nullptr;
      return NrtCallError("nrt_allocate_tensor_set", s, Where(bucket));
    }
  }
  for (const NeffTensorBinding& binding : bucket.tensors) {
    const NeffTensorInfo* info = nullptr;
    for (const NeffTensorInfo& i : infos) {
      if (i.name == binding.tensor) info = &i;
    }
    NeffDeviceTensor device;
    if (binding.role == NeffTensorRole::kWeight || binding.role == NeffTensorRole::kCache) {
      // An aliased cache output gets the very tensor its input has: nrt.h has no aliasing call, the NEFF's
      // input/output alias is honoured by binding one buffer under both names.
      SLUICE_ASSIGN_OR_RETURN(device, SharedTensor(bucket, binding, *info));
    } else {
      SLUICE_ASSIGN_OR_RETURN(device, Allocate(info->size, info->dtype, binding.tensor,
                                               absl::StrCat(Where(bucket), " tensor '", binding.tensor, "'")));
      loaded.io.push_back(NeffBucketIo{binding, device, info->shape});
    }
    nrt_tensor_set_t* set = info->usage == NRT_TENSOR_USAGE_OUTPUT ? loaded.outputs : loaded.inputs;
    if (NRT_STATUS s = api_.add_tensor_to_tensor_set(set, binding.tensor.c_str(), device.tensor); s != NRT_SUCCESS) {
      return NrtCallError("nrt_add_tensor_to_tensor_set", s,
                          absl::StrCat(Where(bucket), " tensor '", binding.tensor, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
