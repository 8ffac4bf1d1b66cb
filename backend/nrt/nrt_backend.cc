#include "backend/nrt/nrt_backend.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/neuron_placement.h"
#include "backend/nrt/neff_manifest.h"
#include "backend/nrt/nrt_library.h"
#include "backend/nrt/safetensors_file.h"

namespace sluice {
namespace {

// What nrt_get_model_tensor_info reported for one tensor, copied out of the runtime's array.
struct NeffTensorInfo {
  std::string name;
  nrt_tensor_usage_t usage = NRT_TENSOR_USAGE_INPUT;
  size_t size = 0;
  nrt_dtype_t dtype = NRT_DTYPE_UNKNOWN;
  std::vector<int64_t> shape;
};

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

absl::StatusOr<std::vector<char>> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open NEFF ", path));
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One device tensor; freed by its owner through the library (nrt_tensor_free takes a pointer to null it).
struct DeviceTensor {
  nrt_tensor_t* tensor = nullptr;
  size_t size = 0;
  nrt_dtype_t dtype = NRT_DTYPE_UNKNOWN;
};

// A NEFF tensor bound to a per-bucket device tensor that Execute() writes or reads.
struct BucketIo {
  NeffTensorBinding binding;
  DeviceTensor device;
  std::vector<int64_t> shape;  // outputs: the NEFF's shape, which the result tensor takes
};

struct LoadedBucket {
  const NeffBucket* manifest = nullptr;
  nrt_model_t* model = nullptr;
  nrt_tensor_set_t* inputs = nullptr;
  nrt_tensor_set_t* outputs = nullptr;
  std::vector<BucketIo> io;  // inputs, lengths, outputs, output_lengths (weights and caches are shared)
};

class NrtBackend final : public Backend {
 public:
  NrtBackend(const InstanceOptions& options, std::shared_ptr<NrtLibrary> library, NeffManifest manifest, int vnc)
      : model_(*options.model),
        replica_(options.replica),
        library_(std::move(library)),
        api_(library_->api()),
        manifest_(std::move(manifest)),
        vnc_(vnc) {}

  ~NrtBackend() override {
    for (LoadedBucket& bucket : buckets_) {
      if (bucket.inputs != nullptr) api_.destroy_tensor_set(&bucket.inputs);
      if (bucket.outputs != nullptr) api_.destroy_tensor_set(&bucket.outputs);
      for (BucketIo& io : bucket.io) Free(io.device);
      if (bucket.model == nullptr) continue;
      // Nothing can be done about a failed unload at shutdown but to say so (the server's log is its stderr).
      if (NRT_STATUS s = api_.unload(bucket.model); s != NRT_SUCCESS) {
        const absl::Status error = NrtCallError("nrt_unload", s, Where(*bucket.manifest));
        std::fprintf(stderr, "%s: %s\n", Describe().c_str(), std::string(error.message()).c_str());
      }
    }
    for (auto& [name, tensor] : shared_) Free(tensor);
    // library_ goes last: the final holder's release calls nrt_close.
  }

  absl::Status Load(int warmup_runs) {
    if (!manifest_.weights_file.empty()) {
      SLUICE_ASSIGN_OR_RETURN(SafetensorsFile weights, SafetensorsFile::Open(manifest_.weights_file));
      weights_ = std::move(weights);
    }
    for (const NeffBucket& bucket : manifest_.buckets) {
      const auto start = std::chrono::steady_clock::now();
      SLUICE_RETURN_IF_ERROR(LoadBucket(bucket));
      const auto loaded = std::chrono::steady_clock::now();
      BucketLoadStats stats{bucket.batch_size, bucket.length};
      stats.load_seconds = std::chrono::duration<double>(loaded - start).count();
      SLUICE_RETURN_IF_ERROR(Warm(bucket, warmup_runs, stats));
      stats.warm_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loaded).count();
      stats_.push_back(stats);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) override {
    SLUICE_RETURN_IF_ERROR(ValidatePaddedBatch(model_, batch));
    LoadedBucket* bucket = Find(batch.batch_size, batch.length);
    if (bucket == nullptr) return absl::InternalError(absl::StrCat(Describe(), ": bucket not loaded"));
    const std::string& neff = bucket->manifest->neff;
    for (BucketIo& io : bucket->io) {
      if (io.binding.role == NeffTensorRole::kInput) {
        const HostTensor& t = batch.inputs[io.binding.model_index];
        SLUICE_RETURN_IF_ERROR(Write(io, t.bytes.data(), t.bytes.size(), neff));
      } else if (io.binding.role == NeffTensorRole::kLengths) {
        std::vector<std::byte> bytes = EncodeLengths(batch.row_lengths, io.device.dtype);
        SLUICE_RETURN_IF_ERROR(Write(io, bytes.data(), bytes.size(), neff));
      }
    }
    if (NRT_STATUS s = api_.execute(bucket->model, bucket->inputs, bucket->outputs); s != NRT_SUCCESS) {
      return NrtCallError("nrt_execute", s, absl::StrCat(Describe(), ", ", neff));
    }
    BatchResult result;
    result.outputs.resize(model_.outputs.size());
    for (BucketIo& io : bucket->io) {
      if (io.binding.role == NeffTensorRole::kOutput) {
        HostTensor out = HostTensor::Zeros(model_.outputs[io.binding.model_index].dtype, io.shape);
        SLUICE_RETURN_IF_ERROR(Read(io, out.bytes.data(), out.bytes.size(), neff));
        result.outputs[io.binding.model_index] = std::move(out);
      } else if (io.binding.role == NeffTensorRole::kOutputLengths) {
        std::vector<std::byte> bytes(io.device.size);
        SLUICE_RETURN_IF_ERROR(Read(io, bytes.data(), bytes.size(), neff));
        result.output_lengths = DecodeLengths(bytes, io.device.dtype);
      }
    }
    return result;
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return stats_; }
  InstanceMemory memory() const override { return memory_; }

  std::string Describe() const override {
    return absl::StrCat(model_.name, "#", replica_, " on neuron (nrt, NeuronCore ", vnc_, " of the visible)");
  }

 private:
  std::string Where(const NeffBucket& bucket) const {
    return absl::StrCat("model ", model_.name, " bucket (", bucket.batch_size, ", ", bucket.length, ") NEFF ",
                        bucket.neff);
  }

  void Free(DeviceTensor& t) {
    if (t.tensor != nullptr) api_.tensor_free(&t.tensor);
    t.tensor = nullptr;
  }

  absl::Status Write(BucketIo& io, const void* data, size_t size, const std::string& neff) {
    if (NRT_STATUS s = api_.tensor_write(io.device.tensor, data, 0, size); s != NRT_SUCCESS) {
      return NrtCallError("nrt_tensor_write", s, absl::StrCat(neff, " tensor '", io.binding.tensor, "'"));
    }
    return absl::OkStatus();
  }

  absl::Status Read(BucketIo& io, void* data, size_t size, const std::string& neff) {
    if (NRT_STATUS s = api_.tensor_read(io.device.tensor, data, 0, size); s != NRT_SUCCESS) {
      return NrtCallError("nrt_tensor_read", s, absl::StrCat(neff, " tensor '", io.binding.tensor, "'"));
    }
    return absl::OkStatus();
  }

  static std::vector<std::byte> EncodeLengths(const std::vector<int64_t>& lengths, nrt_dtype_t dtype) {
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

  static std::vector<int64_t> DecodeLengths(const std::vector<std::byte>& bytes, nrt_dtype_t dtype) {
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

  LoadedBucket* Find(int batch_size, int64_t length) {
    for (LoadedBucket& b : buckets_) {
      if (b.manifest->batch_size == batch_size && b.manifest->length == length) return &b;
    }
    return nullptr;
  }

  absl::StatusOr<std::vector<NeffTensorInfo>> TensorInfo(nrt_model_t* model, const NeffBucket& bucket) {
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

  absl::StatusOr<DeviceTensor> Allocate(size_t size, nrt_dtype_t dtype, const std::string& name,
                                        const std::string& context) {
    DeviceTensor t{nullptr, size, dtype};
    if (NRT_STATUS s = api_.tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, vnc_, size, name.c_str(), &t.tensor);
        s != NRT_SUCCESS) {
      return NrtCallError("nrt_tensor_allocate", s, absl::StrCat(context, ", ", size, " bytes on NeuronCore ", vnc_));
    }
    return t;
  }

  absl::Status LoadBucket(const NeffBucket& bucket);
  absl::Status CheckAgainstNeff(const NeffBucket& bucket, const std::vector<NeffTensorInfo>& infos);
  absl::StatusOr<DeviceTensor> SharedTensor(const NeffBucket& bucket, const NeffTensorBinding& binding,
                                            const NeffTensorInfo& info);
  absl::Status Warm(const NeffBucket& bucket, int runs, BucketLoadStats& stats);

  const ModelConfig& model_;
  const int replica_;
  std::shared_ptr<NrtLibrary> library_;  // declared first among the runtime's users: destroyed last
  const NrtFunctions& api_;
  const NeffManifest manifest_;
  const int vnc_;
  std::optional<SafetensorsFile> weights_;
  // Weights ("weight:<name>") and caches ("cache:<name>"): one device tensor each for the whole instance.
  std::map<std::string, DeviceTensor> shared_;
  std::vector<LoadedBucket> buckets_;
  std::vector<BucketLoadStats> stats_;
  // Weights and caches as allocated on this instance's core: each replica holds its own device copy (weights_id
  // stays empty, so a model's memory counts them once per replica).
  InstanceMemory memory_{.graph_format = 2};
};

absl::Status NrtBackend::CheckAgainstNeff(const NeffBucket& bucket, const std::vector<NeffTensorInfo>& infos) {
  auto bad = [&](const std::string& tensor, const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(Where(bucket), " tensor '", tensor, "': ", why, " (manifest ",
                                                      manifest_.path, ")"));
  };
  for (const NeffTensorInfo& info : infos) {
    bool bound = false;
    for (const NeffTensorBinding& b : bucket.tensors) bound = bound || b.tensor == info.name;
    if (!bound) return bad(info.name, "the NEFF has this tensor but the manifest does not bind it");
  }
  for (const NeffTensorBinding& b : bucket.tensors) {
    const NeffTensorInfo* info = nullptr;
    for (const NeffTensorInfo& i : infos) {
      if (i.name == b.tensor) info = &i;
    }
    if (info == nullptr) return bad(b.tensor, "the manifest binds it but the NEFF has no such tensor");
    const bool is_output = b.role == NeffTensorRole::kOutput || b.role == NeffTensorRole::kOutputLengths;
    if (is_output != (info->usage == NRT_TENSOR_USAGE_OUTPUT)) {
      return bad(b.tensor, absl::StrCat("role ", NeffTensorRoleName(b.role), " needs a NEFF ",
                                        is_output ? "output" : "input", ", but it is a NEFF ",
                                        is_output ? "input" : "output"));
    }
    auto expect = [&](nrt_dtype_t dtype, size_t size, const std::string& what) -> absl::Status {
      if (info->dtype != dtype || info->size != size) {
        return bad(b.tensor, absl::StrCat("the NEFF has ", NrtDtypeName(info->dtype), ", ", info->size, " bytes; ",
                                          what, " needs ", NrtDtypeName(dtype), ", ", size, " bytes"));
      }
      return absl::OkStatus();
    };
    const size_t rows = static_cast<size_t>(bucket.batch_size);
    switch (b.role) {
      case NeffTensorRole::kInput: {
        const TensorSpec& spec = model_.inputs[b.model_index];
        std::vector<int64_t> want = {bucket.batch_size, bucket.length};
        want.insert(want.end(), spec.shape.begin() + 1, spec.shape.end());
        SLUICE_RETURN_IF_ERROR(expect(NrtDtypeOf(spec.dtype), NumElements(want) * DataTypeSize(spec.dtype),
                                      absl::StrCat("input '", spec.name, "' ", ShapeToString(want))));
        if (!info->shape.empty() && info->shape != want) {
          return bad(b.tensor, absl::StrCat("NEFF shape ", ShapeToString(info->shape), ", input '", spec.name,
                                            "' needs ", ShapeToString(want)));
        }
        break;
      }
      case NeffTensorRole::kLengths:
      case NeffTensorRole::kOutputLengths:
        if (info->dtype == NRT_DTYPE_INT32) {
          SLUICE_RETURN_IF_ERROR(expect(NRT_DTYPE_INT32, rows * 4, "one length per row"));
        } else {
          SLUICE_RETURN_IF_ERROR(expect(NRT_DTYPE_INT64, rows * 8, "one length per row"));
        }
        break;
      case NeffTensorRole::kOutput: {
        const TensorSpec& spec = model_.outputs[b.model_index];
        // The NEFF's shape is the padded result's shape: [batch, the config's dims with the variable one fixed].
        bool fits = info->shape.size() == spec.shape.size() + 1 && !info->shape.empty() &&
                    info->shape[0] == bucket.batch_size;
        for (size_t d = 0; fits && d < spec.shape.size(); ++d) {
          fits = spec.shape[d] == kVariableDim || spec.shape[d] == info->shape[d + 1];
        }
        if (!fits) {
          return bad(b.tensor, absl::StrCat("NEFF shape ", ShapeToString(info->shape), " does not fit output '",
                                            spec.name, "' ", ShapeToString(spec.shape), " with batch ",
                                            bucket.batch_size));
        }
        SLUICE_RETURN_IF_ERROR(expect(NrtDtypeOf(spec.dtype), NumElements(info->shape) * DataTypeSize(spec.dtype),
                                      absl::StrCat("output '", spec.name, "'")));
        break;
      }
      case NeffTensorRole::kWeight: {
        SLUICE_ASSIGN_OR_RETURN(const SafetensorsEntry* entry, weights_->Find(b.name));
        SLUICE_RETURN_IF_ERROR(expect(NrtDtypeOfSafetensors(entry->dtype), entry->size(),
                                      absl::StrCat("weight '", b.name, "' (", entry->dtype, " ",
                                                   ShapeToString(entry->shape), ")")));
        break;
      }
      case NeffTensorRole::kCache: break;  // sized by the NEFF; buckets sharing it must agree (SharedTensor)
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceTensor> NrtBackend::SharedTensor(const NeffBucket& bucket, const NeffTensorBinding& binding,
                                                      const NeffTensorInfo& info) {
  const bool weight = binding.role == NeffTensorRole::kWeight;
  const std::string key = absl::StrCat(weight ? "weight:" : "cache:", binding.name);
  if (auto it = shared_.find(key); it != shared_.end()) {
    if (it->second.size != info.size || it->second.dtype != info.dtype) {
      return absl::FailedPreconditionError(absl::StrCat(
          Where(bucket), " tensor '", binding.tensor, "': ", NrtDtypeName(info.dtype), ", ", info.size,
          " bytes, but another bucket binds ", key, " as ", NrtDtypeName(it->second.dtype), ", ",
          it->second.size, " bytes: buckets share one device tensor, so they must agree"));
    }
    return it->second;
  }
  SLUICE_ASSIGN_OR_RETURN(DeviceTensor t, Allocate(info.size, info.dtype, key, absl::StrCat(Where(bucket), " ", key)));
  shared_.emplace(key, t);  // owned from here on, also if the write below fails
  (weight ? memory_.weight_bytes : memory_.cache_bytes) += static_cast<int64_t>(info.size);
  std::vector<std::byte> bytes;
  if (weight) {
    SLUICE_ASSIGN_OR_RETURN(bytes, weights_->ReadTensor(binding.name));
  } else {
    bytes.assign(info.size, std::byte{0});  // caches start zeroed; the NEFF owns their contents from then on
  }
  if (NRT_STATUS s = api_.tensor_write(t.tensor, bytes.data(), 0, bytes.size()); s != NRT_SUCCESS) {
    return NrtCallError("nrt_tensor_write", s, absl::StrCat(Where(bucket), " ", key));
  }
  return t;
}

absl::Status NrtBackend::LoadBucket(const NeffBucket& bucket) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<char> neff, ReadFile(bucket.neff));
  LoadedBucket& loaded = buckets_.emplace_back();  // owned (and cleaned up) from here on, whatever fails next
  loaded.manifest = &bucket;
  memory_.graph_bytes += static_cast<int64_t>(neff.size());
  ++memory_.graphs;
  // vnc_count is deprecated in current libnrt headers ("always use -1"): one NEFF copy on one core.
  if (NRT_STATUS s = api_.load(neff.data(), neff.size(), vnc_, -1, &loaded.model); s != NRT_SUCCESS) {
    loaded.model = nullptr;
    return NrtCallError("nrt_load", s, absl::StrCat(Where(bucket), " onto NeuronCore ", vnc_));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<NeffTensorInfo> infos, TensorInfo(loaded.model, bucket));
  SLUICE_RETURN_IF_ERROR(CheckAgainstNeff(bucket, infos));
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
    DeviceTensor device;
    if (binding.role == NeffTensorRole::kWeight || binding.role == NeffTensorRole::kCache) {
      SLUICE_ASSIGN_OR_RETURN(device, SharedTensor(bucket, binding, *info));
    } else {
      SLUICE_ASSIGN_OR_RETURN(device, Allocate(info->size, info->dtype, binding.tensor,
                                               absl::StrCat(Where(bucket), " tensor '", binding.tensor, "'")));
      loaded.io.push_back(BucketIo{binding, device, info->shape});
    }
    nrt_tensor_set_t* set = info->usage == NRT_TENSOR_USAGE_OUTPUT ? loaded.outputs : loaded.inputs;
    if (NRT_STATUS s = api_.add_tensor_to_tensor_set(set, binding.tensor.c_str(), device.tensor); s != NRT_SUCCESS) {
      return NrtCallError("nrt_add_tensor_to_tensor_set", s,
                          absl::StrCat(Where(bucket), " tensor '", binding.tensor, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status NrtBackend::Warm(const NeffBucket& bucket, int runs, BucketLoadStats& stats) {
  PaddedBatch batch{bucket.batch_size, bucket.length, {}, std::vector<int64_t>(bucket.batch_size, bucket.length)};
  for (const TensorSpec& spec : model_.inputs) {
    std::vector<int64_t> shape = {bucket.batch_size, bucket.length};
    shape.insert(shape.end(), spec.shape.begin() + 1, spec.shape.end());
    batch.inputs.push_back(HostTensor::Zeros(spec.dtype, shape));
  }
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<BatchResult> result = Execute(batch);
    if (!result.ok()) {
      return absl::Status(result.status().code(), absl::StrCat("warming up: ", result.status().message()));
    }
    stats.steady_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateNrtBackend(const InstanceOptions& options) {
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
  SLUICE_ASSIGN_OR_RETURN(NeffManifest manifest, LoadNeffManifest(model));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<NrtLibrary> library, NrtLibrary::Acquire(group.neuron_library));
  auto backend = std::make_unique<NrtBackend>(options, std::move(library), std::move(manifest), placement.start_nc);
  SLUICE_RETURN_IF_ERROR(backend->Load(options.warmup_runs));
  return backend;
}

}  // namespace sluice
