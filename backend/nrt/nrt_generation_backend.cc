#include "backend/nrt/nrt_generation_backend.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/generation_inputs.h"
#include "backend/nrt/neff_instance.h"

namespace sluice {
namespace {

class NrtGenerationBackend final : public GenerationBackend, private NeffModelRunner {
 public:
  NrtGenerationBackend(const InstanceOptions& options, std::unique_ptr<NeffInstance> instance)
      : model_(*options.model),
        generation_(*options.model->generation),
        replica_(options.replica),
        scratch_slot_(generation_.kv_cache.slots),
        instance_(std::move(instance)) {}

  absl::Status Load(int warmup_runs) { return instance_->Load(*this, warmup_runs); }

  absl::StatusOr<Logits> Prefill(const PrefillInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidatePrefillInput(model_, input));
    SLUICE_ASSIGN_OR_RETURN(LoadedNeff * neff,
                            instance_->Find(NeffGraph::kPrefill, 1, input.bucket_length, Describe()));
    return RunPrefill(*neff, input.tokens, input.slot);
  }

  absl::StatusOr<Logits> Decode(const DecodeInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidateDecodeInput(model_, input));
    SLUICE_ASSIGN_OR_RETURN(LoadedNeff * neff,
                            instance_->Find(NeffGraph::kDecode, input.batch_size, input.kv_length, Describe()));
    return RunDecode(*neff, input.rows, 0);
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return instance_->load_stats(); }
  InstanceMemory memory() const override { return instance_->memory(); }

  std::string Describe() const override {
    return absl::StrCat(model_.name, "#", replica_, " on neuron (nrt, NeuronCore ", instance_->vnc(),
                        " of the visible, ", KvCacheSummary(generation_), ")");
  }

 private:
  // Shapes as torch_generation_backend.h's graphs take them: all INT64; tokens [1, L] (prefill) or [B] (decode),
  // length and slot [1], positions and slots [B]; logits FP32 [rows, vocab]; each cache FP32 [layers, slots + 1,
  // context_length, kv_heads, head_dim] — its byte size is what makes every NEFF share one cache of the config's
  // size (the sizes a NEFF reports are checked here, and all NEFFs must agree: NeffInstance::SharedTensor).
  absl::Status CheckRole(const NeffBucket& bucket, const NeffTensorBinding& b, const NeffTensorInfo& info,
                         const BadTensor& bad) const override {
    std::vector<int64_t> want;
    nrt_dtype_t dtype = NRT_DTYPE_INT64;
    const int64_t rows = bucket.batch_size;
    switch (b.role) {
      case NeffTensorRole::kInput:
        if (bucket.graph == NeffGraph::kPrefill) {
          want = b.name == "tokens" ? std::vector<int64_t>{1, bucket.length} : std::vector<int64_t>{1};
        } else {
          want = {rows};
        }
        break;
      case NeffTensorRole::kOutput:
        want = {rows, generation_.vocab_size};
        dtype = NRT_DTYPE_FLOAT32;
        break;
      case NeffTensorRole::kCache: {
        const KvCacheShape& c = generation_.kv_cache;
        want = {c.layers, c.slots + 1, generation_.context_length, c.kv_heads, c.head_dim};
        dtype = NRT_DTYPE_FLOAT32;
        break;
      }
      default: return absl::OkStatus();  // weights: checked by NeffInstance; no other role parses here
    }
    const size_t size = static_cast<size_t>(NumElements(want)) * (dtype == NRT_DTYPE_INT64 ? 8 : 4);
    if (info.dtype != dtype || info.size != size || (!info.shape.empty() && info.shape != want)) {
      return bad(absl::StrCat("the NEFF has ", NrtDtypeName(info.dtype), " ", ShapeToString(info.shape), ", ",
                              info.size, " bytes; ", NeffTensorRoleName(b.role), " '", b.name, "' needs ",
                              NrtDtypeName(dtype), " ", ShapeToString(want), ", ", size, " bytes"));
    }
    return absl::OkStatus();
  }

  // Writes each named INT64 input of the NEFF, executes, and returns the first `rows` logits rows.
  absl::StatusOr<Logits> Run(LoadedNeff& neff, const std::vector<std::vector<int64_t>>& inputs, int rows,
                             const std::string& what) {
    for (const NeffBucketIo& io : neff.io) {
      if (io.binding.role != NeffTensorRole::kInput) continue;
      const std::vector<int64_t>& values = inputs[io.binding.model_index];
      SLUICE_RETURN_IF_ERROR(instance_->Write(io, values.data(), values.size() * sizeof(int64_t), neff));
    }
    SLUICE_RETURN_IF_ERROR(instance_->Execute(neff, absl::StrCat(Describe(), " ", what)));
    for (const NeffBucketIo& io : neff.io) {
      if (io.binding.role != NeffTensorRole::kOutput) continue;
      Logits logits{rows, generation_.vocab_size, {}, {}};
      logits.values.resize(static_cast<size_t>(rows) * generation_.vocab_size);
      // Only the real rows are read: the padding rows' logits never leave the device.
      SLUICE_RETURN_IF_ERROR(instance_->Read(io, logits.values.data(), logits.values.size() * sizeof(float), neff));
      return logits;
    }
    return absl::InternalError(absl::StrCat(Describe(), ": ", neff.manifest->neff, " has no logits output"));
  }

  // REQUIRES: tokens.size() in [1, bucket]; slot in [0, slots] (the scratch slot only for warm-up).
  absl::StatusOr<Logits> RunPrefill(LoadedNeff& neff, const std::vector<int32_t>& tokens, int64_t slot) {
    std::vector<int64_t> ids(static_cast<size_t>(neff.manifest->length), 0);
    for (size_t i = 0; i < tokens.size(); ++i) ids[i] = tokens[i];
    return Run(neff, {ids, {static_cast<int64_t>(tokens.size())}, {slot}}, 1,
               absl::StrCat("prefill (prompt bucket ", neff.manifest->length, ")"));
  }

  // Rows past rows.size() are padding: token 0, position `padding_position`, the scratch slot.
  absl::StatusOr<Logits> RunDecode(LoadedNeff& neff, const std::vector<DecodeRow>& rows, int64_t padding_position) {
    const size_t batch = static_cast<size_t>(neff.manifest->batch_size);
    std::vector<int64_t> tokens(batch, 0), positions(batch, padding_position), slots(batch, scratch_slot_);
    for (size_t r = 0; r < rows.size(); ++r) {
      tokens[r] = rows[r].token;
      positions[r] = rows[r].position;
      slots[r] = rows[r].slot;
    }
    return Run(neff, {tokens, positions, slots}, static_cast<int>(rows.size()),
               absl::StrCat("decode (batch ", batch, ", KV length ", neff.manifest->length, ")"));
  }

  // As the TorchScript backend warms: the whole prompt bucket, or only padding rows at the last position (the
  // widest attention), writing the scratch slot only.
  absl::Status WarmOnce(LoadedNeff& neff) override {
    const NeffBucket& bucket = *neff.manifest;
    if (bucket.graph == NeffGraph::kPrefill) {
      return RunPrefill(neff, std::vector<int32_t>(static_cast<size_t>(bucket.length), 0), scratch_slot_).status();
    }
    return RunDecode(neff, {}, bucket.length - 1).status();
  }

  const ModelConfig& model_;
  const GenerationOptions& generation_;
  const int replica_;
  const int scratch_slot_;
  std::unique_ptr<NeffInstance> instance_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GenerationBackend>> CreateNrtGenerationBackend(const InstanceOptions& options) {
  if (!options.model->generation) {
    return absl::InvalidArgumentError(absl::StrCat("model ", options.model->name, " is not a generation model"));
  }
  if (options.model->generation->chunked_prefill()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model ", options.model->name, ": runtime nrt has no prefill chunk NEFFs yet; remove ",
        "generation.prefill_chunk_lengths (whole prefills)"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<NeffInstance> instance, NeffInstance::Create(options));
  auto backend = std::make_unique<NrtGenerationBackend>(options, std::move(instance));
  SLUICE_RETURN_IF_ERROR(backend->Load(options.warmup_runs));
  return backend;
}

}  // namespace sluice
