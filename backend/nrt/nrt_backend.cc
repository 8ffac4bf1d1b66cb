#include "backend/nrt/nrt_backend.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/nrt/neff_instance.h"

namespace sluice {
namespace {

class NrtBackend final : public Backend, private NeffModelRunner {
 public:
  NrtBackend(const InstanceOptions& options, std::unique_ptr<NeffInstance> instance)
      : model_(*options.model), replica_(options.replica), instance_(std::move(instance)) {}

  absl::Status Load(int warmup_runs) { return instance_->Load(*this, warmup_runs); }

  absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) override {
    SLUICE_RETURN_IF_ERROR(ValidatePaddedBatch(model_, batch));
    SLUICE_ASSIGN_OR_RETURN(LoadedNeff * neff,
                            instance_->Find(NeffGraph::kBucket, batch.batch_size, batch.length, Describe()));
    for (const NeffBucketIo& io : neff->io) {
      if (io.binding.role == NeffTensorRole::kInput) {
        const HostTensor& t = batch.inputs[io.binding.model_index];
        SLUICE_RETURN_IF_ERROR(instance_->Write(io, t.bytes.data(), t.bytes.size(), *neff));
      } else if (io.binding.role == NeffTensorRole::kLengths) {
        std::vector<std::byte> bytes = EncodeNeffLengths(batch.row_lengths, io.device.dtype);
        SLUICE_RETURN_IF_ERROR(instance_->Write(io, bytes.data(), bytes.size(), *neff));
      }
    }
    SLUICE_RETURN_IF_ERROR(instance_->Execute(*neff, Describe()));
    BatchResult result;
    result.outputs.resize(model_.outputs.size());
    for (const NeffBucketIo& io : neff->io) {
      if (io.binding.role == NeffTensorRole::kOutput) {
        HostTensor out = HostTensor::Zeros(model_.outputs[io.binding.model_index].dtype, io.shape);
        SLUICE_RETURN_IF_ERROR(instance_->Read(io, out.bytes.data(), out.bytes.size(), *neff));
        result.outputs[io.binding.model_index] = std::move(out);
      } else if (io.binding.role == NeffTensorRole::kOutputLengths) {
        std::vector<std::byte> bytes(io.device.size);
        SLUICE_RETURN_IF_ERROR(instance_->Read(io, bytes.data(), bytes.size(), *neff));
        result.output_lengths = DecodeNeffLengths(bytes, io.device.dtype);
      }
    }
    return result;
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return instance_->load_stats(); }
  InstanceMemory memory() const override { return instance_->memory(); }

  std::string Describe() const override {
    return absl::StrCat(model_.name, "#", replica_, " on neuron (nrt, NeuronCore ", instance_->vnc(),
                        " of the visible)");
  }

 private:
  // The roles of a batch model's bucket NEFF: inputs [B, L, ...] of the config's dtype, one length per row,
  // outputs [B, ...] fitting the config's shape. Caches are sized by the NEFF (buckets sharing one must agree).
  absl::Status CheckRole(const NeffBucket& bucket, const NeffTensorBinding& b, const NeffTensorInfo& info,
                         const BadTensor& bad) const override {
    auto expect = [&](nrt_dtype_t dtype, size_t size, const std::string& what) -> absl::Status {
      if (info.dtype != dtype || info.size != size) {
        return bad(absl::StrCat("the NEFF has ", NrtDtypeName(info.dtype), ", ", info.size, " bytes; ", what,
                                " needs ", NrtDtypeName(dtype), ", ", size, " bytes"));
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
        if (!info.shape.empty() && info.shape != want) {
          return bad(absl::StrCat("NEFF shape ", ShapeToString(info.shape), ", input '", spec.name, "' needs ",
                                  ShapeToString(want)));
        }
        return absl::OkStatus();
      }
      case NeffTensorRole::kLengths:
      case NeffTensorRole::kOutputLengths:
        if (info.dtype == NRT_DTYPE_INT32) return expect(NRT_DTYPE_INT32, rows * 4, "one length per row");
        return expect(NRT_DTYPE_INT64, rows * 8, "one length per row");
      case NeffTensorRole::kOutput: {
        const TensorSpec& spec = model_.outputs[b.model_index];
        // The NEFF's shape is the padded result's shape: [batch, the config's dims with the variable one fixed].
        bool fits = info.shape.size() == spec.shape.size() + 1 && !info.shape.empty() &&
                    info.shape[0] == bucket.batch_size;
        for (size_t d = 0; fits && d < spec.shape.size(); ++d) {
          fits = spec.shape[d] == kVariableDim || spec.shape[d] == info.shape[d + 1];
        }
        if (!fits) {
          return bad(absl::StrCat("NEFF shape ", ShapeToString(info.shape), " does not fit output '", spec.name,
                                  "' ", ShapeToString(spec.shape), " with batch ", bucket.batch_size));
        }
        return expect(NrtDtypeOf(spec.dtype), NumElements(info.shape) * DataTypeSize(spec.dtype),
                      absl::StrCat("output '", spec.name, "'"));
      }
      case NeffTensorRole::kWeight:
      case NeffTensorRole::kCache: return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // A full batch of zeros at the bucket's length, as the TorchScript backend warms (FullZeroBatch).
  absl::Status WarmOnce(LoadedNeff& neff) override {
    const NeffBucket& bucket = *neff.manifest;
    PaddedBatch batch{bucket.batch_size, bucket.length, {}, std::vector<int64_t>(bucket.batch_size, bucket.length)};
    for (const TensorSpec& spec : model_.inputs) {
      std::vector<int64_t> shape = {bucket.batch_size, bucket.length};
      shape.insert(shape.end(), spec.shape.begin() + 1, spec.shape.end());
      batch.inputs.push_back(HostTensor::Zeros(spec.dtype, shape));
    }
    return Execute(batch).status();
  }

  const ModelConfig& model_;
  const int replica_;
  std::unique_ptr<NeffInstance> instance_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateNrtBackend(const InstanceOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<NeffInstance> instance, NeffInstance::Create(options));
  auto backend = std::make_unique<NrtBackend>(options, std::move(instance));
  SLUICE_RETURN_IF_ERROR(backend->Load(options.warmup_runs));
  return backend;
}

}  // namespace sluice
