#include "backend/torch_generation_backend.h"

#include <torch/script.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/generation_inputs.h"
#include "backend/torch_device.h"
#include "backend/torch_token_pick.h"
#include "backend/torch_weights.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

torch::Tensor Int64Vector(const std::vector<int64_t>& values) {
  return torch::tensor(values, torch::TensorOptions().dtype(torch::kInt64));
}

class TorchGenerationBackend final : public GenerationBackend {
 public:
  TorchGenerationBackend(const InstanceOptions& options, TorchTarget target, InstanceThreads threads)
      : model_(*options.model),
        generation_(*options.model->generation),
        group_(options.group),
        replica_(options.replica),
        target_(target),
        device_(target.device),
        threads_(threads),
        scratch_slot_(generation_.kv_cache.slots) {}

  // Runs on the loading thread, under this instance's threads and CPUs for the duration (warm-up timings).
  absl::Status LoadAll(int warmup_runs) {
    ScopedInstanceThreads scope(threads_);
    SLUICE_RETURN_IF_ERROR(scope.status());
    SLUICE_RETURN_IF_ERROR(AllocateCache());
    memory_.cache_bytes = static_cast<int64_t>(k_cache_.nbytes() + v_cache_.nbytes());
    if (cross_k_.defined()) memory_.cache_bytes += static_cast<int64_t>(cross_k_.nbytes() + cross_v_.nbytes());
    memory_.graph_format = GraphFormatOf(model_);
    if (memory_.graph_format == kGraphFormatVersion) {
      SLUICE_ASSIGN_OR_RETURN(weights_, SharedTorchWeights(model_, target_));
      memory_.weight_bytes = weights_->bytes;
      memory_.weights_id = weights_->id;
    }
    for (int64_t length : generation_.prefill_lengths) {
      SLUICE_RETURN_IF_ERROR(LoadGraph(PrefillGraphPath(model_, length), 1, length, warmup_runs, prefill_[length],
                                       [this, length](torch::jit::Module& graph) {
                                         // The whole bucket, into the scratch slot (an encoder-decoder's
                                         // encoder output: zeros).
                                         RunPrefill(graph, length, std::vector<int32_t>(length, 0), scratch_slot_,
                                                    nullptr);
                                       }));
    }
    for (int64_t chunk : generation_.prefill_chunk_lengths) {
      for (int64_t kv_length : generation_.kv_lengths) {
        SLUICE_RETURN_IF_ERROR(LoadGraph(PrefillChunkGraphPath(model_, chunk, kv_length), 1, chunk, warmup_runs,
                                         chunk_[{chunk, kv_length}],
                                         [this, chunk, kv_length](torch::jit::Module& graph) {
                                           // A whole chunk at the end of the KV length: the widest attention.
                                           RunPrefillChunk(graph, chunk, std::vector<int32_t>(chunk, 0),
                                                           kv_length - chunk, scratch_slot_);
                                         }));
      }
    }
    for (int batch_size : generation_.decode_batch_sizes) {
      for (int64_t kv_length : generation_.kv_lengths) {
        SLUICE_RETURN_IF_ERROR(LoadGraph(DecodeGraphPath(model_, batch_size, kv_length), batch_size, kv_length,
                                         warmup_runs, decode_[{batch_size, kv_length}],
                                         [this, batch_size, kv_length](torch::jit::Module& graph) {
                                           // Only padding rows, at the last position: the widest attention.
                                           RunDecode(graph, batch_size, {}, kv_length - 1);
                                         }));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Logits> Prefill(const PrefillInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidatePrefillInput(model_, input));
    SLUICE_RETURN_IF_ERROR(threads_.ApplyToCallingThread());  // the instance's thread: pinned, pools sized
    try {
      return RunPrefill(prefill_.at(input.bucket_length), input.bucket_length, input.tokens, input.slot,
                        input.encoder_output.get());
    } catch (const std::exception& e) {  // c10::Error derives from std::exception
      return absl::InternalError(absl::StrCat(model_.name, " prefill (prompt bucket ", input.bucket_length, ") on ",
                                              Describe(), " failed: ", FirstLine(e.what())));
    }
  }

  absl::StatusOr<Logits> PrefillChunk(const PrefillChunkInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidatePrefillChunkInput(model_, input));
    SLUICE_RETURN_IF_ERROR(threads_.ApplyToCallingThread());
    try {
      return RunPrefillChunk(chunk_.at({input.chunk_length, input.kv_length}), input.chunk_length, input.tokens,
                             input.start, input.slot);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(model_.name, " prefill chunk (chunk ", input.chunk_length,
                                              ", KV length ", input.kv_length, ") on ", Describe(), " failed: ",
                                              FirstLine(e.what())));
    }
  }

  // A device-side copy of both caches' positions (the cross-attention caches are per sequence, not per prefix).
  absl::Status CopyKv(const KvCopyInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidateKvCopyInput(model_, input));
    SLUICE_RETURN_IF_ERROR(threads_.ApplyToCallingThread());
    try {
      torch::InferenceMode inference_mode;  // the caches are inference tensors: in-place writes need it
      for (torch::Tensor* cache : {&k_cache_, &v_cache_}) {  // [layers, slots + 1, context_length, heads, dim]
        cache->select(1, input.to_slot)
            .narrow(1, input.start, input.length)
            .copy_(cache->select(1, input.from_slot).narrow(1, input.start, input.length));
      }
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(model_.name, " KV copy (slot ", input.from_slot, " to ", input.to_slot,
                                              ") on ", Describe(), " failed: ", FirstLine(e.what())));
    }
  }

  absl::StatusOr<Logits> Decode(const DecodeInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidateDecodeInput(model_, input));
    SLUICE_RETURN_IF_ERROR(threads_.ApplyToCallingThread());
    try {
      return RunDecode(decode_.at({input.batch_size, input.kv_length}), input.batch_size, input.rows, 0,
                       PicksHere(input.picks) ? &input.picks : nullptr);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(model_.name, " decode (batch ", input.batch_size, ", KV length ",
                                              input.kv_length, ") on ", Describe(), " failed: ",
                                              FirstLine(e.what())));
    }
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return stats_; }
  InstanceMemory memory() const override { return memory_; }

  std::string Describe() const override {
    std::string where(DeviceKindName(group_.device));
    if (group_.cores) where += absl::StrCat(" cores ", group_.cores->ToString());
    if (target_.neuron_cores) where += absl::StrCat(" (", target_.neuron_cores->ToString(), ")");
    return absl::StrCat(model_.name, "#", replica_, " on ", where, " (", group_.intra_op_threads, " intra-op thread",
                        group_.intra_op_threads == 1 ? "" : "s", ", ", KvCacheSummary(generation_), ")");
  }

 private:
  absl::Status AllocateCache() {
    const KvCacheShape& c = generation_.kv_cache;
    const std::vector<int64_t> shape = {c.layers, c.slots + 1, generation_.context_length, c.kv_heads, c.head_dim};
    try {
      torch::InferenceMode inference_mode;
      const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
      k_cache_ = torch::zeros(shape, options);
      v_cache_ = torch::zeros(shape, options);
      if (const auto& cross = generation_.cross_attention) {  // whisper.py's layouts (generation_config.h)
        cross_k_ = torch::zeros({c.layers, c.slots + 1, c.kv_heads, c.head_dim, cross->encoder_positions}, options);
        cross_v_ = torch::zeros({c.layers, c.slots + 1, c.kv_heads, cross->encoder_positions, c.head_dim}, options);
      }
    } catch (const std::exception& e) {
      return absl::ResourceExhaustedError(absl::StrCat("model ", model_.name, ": cannot allocate the ",
                                                       KvCacheSummary(generation_), " on ", device_.str(), ": ",
                                                       FirstLine(e.what())));
    }
    return absl::OkStatus();
  }

  // Loads one graph into `slot` and runs `warm` warmup_runs times, recording its load stats.
  absl::Status LoadGraph(const std::string& path, int batch_size, int64_t length, int warmup_runs,
                         torch::jit::Module& slot, const std::function<void(torch::jit::Module&)>& warm) {
    const std::string name = std::filesystem::path(path).filename().string();
    BucketLoadStats stats{batch_size, length, 0, 0, 0};
    const auto load_start = Clock::now();
    // Device neuron: onto this replica's NeuronCores (torch_device.h).
    absl::StatusOr<torch::jit::Module> module = LoadTorchGraph(target_, path);
    if (!module.ok()) {
      return absl::Status(module.status().code(), absl::StrCat("model ", model_.name, ": cannot load graph ", name,
                                                               " from ", path, ": ", module.status().message()));
    }
    try {
      slot = std::move(*module);
      slot.eval();
      stats.load_seconds = SecondsSince(load_start);
      memory_.graph_bytes += GraphFileBytes(path);
      ++memory_.graphs;
      const auto warm_start = Clock::now();
      for (int i = 0; i < warmup_runs; ++i) {
        const auto run_start = Clock::now();
        warm(slot);
        stats.steady_seconds = SecondsSince(run_start);
      }
      stats.warm_seconds = SecondsSince(warm_start);
    } catch (const std::exception& e) {
      return absl::FailedPreconditionError(absl::StrCat("model ", model_.name, ": cannot load and warm graph ", name,
                                                        " from ", path, ": ", FirstLine(e.what())));
    }
    stats_.push_back(stats);
    return absl::OkStatus();
  }

  // REQUIRES: tokens.size() in [1, bucket]; slot in [0, slots] (the scratch slot only for warm-up); an
  // encoder-decoder's encoder_output of encoder_output_size() values (null: zeros, for warm-up).
  Logits RunPrefill(torch::jit::Module& graph, int64_t bucket, const std::vector<int32_t>& tokens, int64_t slot,
                    const std::vector<float>* encoder_output) {
    torch::InferenceMode inference_mode;
    torch::Tensor ids = torch::zeros({1, bucket}, torch::kInt64);
    int64_t* out = ids.data_ptr<int64_t>();
    for (size_t i = 0; i < tokens.size(); ++i) out[i] = tokens[i];
    std::vector<torch::jit::IValue> args = {ids.to(device_),
                                            Int64Vector({static_cast<int64_t>(tokens.size())}).to(device_),
                                            Int64Vector({slot}).to(device_)};
    if (const auto& cross = generation_.cross_attention) {
      torch::Tensor hidden = torch::zeros({1, cross->encoder_positions, cross->encoder_hidden}, torch::kFloat32);
      if (encoder_output != nullptr) {
        std::copy(encoder_output->begin(), encoder_output->end(), hidden.data_ptr<float>());
      }
      args.push_back(hidden.to(device_));
    }
    AppendCaches(args);
    AppendWeights(args);
    return ToLogits(graph.forward(args), 1, 1);
  }

  // REQUIRES: tokens.size() in [1, chunk]; start + tokens.size() <= the graph's KV length; slot in [0, slots].
  Logits RunPrefillChunk(torch::jit::Module& graph, int64_t chunk, const std::vector<int32_t>& tokens, int64_t start,
                         int64_t slot) {
    torch::InferenceMode inference_mode;
    torch::Tensor ids = torch::zeros({1, chunk}, torch::kInt64);
    int64_t* out = ids.data_ptr<int64_t>();
    for (size_t i = 0; i < tokens.size(); ++i) out[i] = tokens[i];
    std::vector<torch::jit::IValue> args = {ids.to(device_), Int64Vector({start}).to(device_),
                                            Int64Vector({static_cast<int64_t>(tokens.size())}).to(device_),
                                            Int64Vector({slot}).to(device_), k_cache_, v_cache_};
    AppendWeights(args);
    return ToLogits(graph.forward(args), 1, 1);
  }

  // Rows past rows.size() are padding: token 0, position `padding_position`, the scratch slot.
  Logits RunDecode(torch::jit::Module& graph, int batch_size, const std::vector<DecodeRow>& rows,
                   int64_t padding_position, const std::vector<TokenPick>* picks = nullptr) {
    torch::InferenceMode inference_mode;
    std::vector<int64_t> tokens(batch_size, 0), positions(batch_size, padding_position),
        slots(batch_size, scratch_slot_);
    for (size_t r = 0; r < rows.size(); ++r) {
      tokens[r] = rows[r].token;
      positions[r] = rows[r].position;
      slots[r] = rows[r].slot;
    }
    std::vector<torch::jit::IValue> args = {Int64Vector(tokens).to(device_), Int64Vector(positions).to(device_),
                                            Int64Vector(slots).to(device_)};
    AppendCaches(args);
    AppendWeights(args);
    return ToLogits(graph.forward(args), batch_size, static_cast<int>(rows.size()), picks);
  }

  // k_cache, v_cache, and an encoder-decoder's cross_k, cross_v.
  void AppendCaches(std::vector<torch::jit::IValue>& args) const {
    args.push_back(k_cache_);
    args.push_back(v_cache_);
    if (cross_k_.defined()) {
      args.push_back(cross_k_);
      args.push_back(cross_v_);
    }
  }

  // Graph format 2: every graph takes the weights after its own inputs.
  void AppendWeights(std::vector<torch::jit::IValue>& args) const {
    if (weights_) args.insert(args.end(), weights_->tensors.begin(), weights_->tensors.end());
  }

  // Whether this backend picks these rows' tokens where the logits are: argmax rows always (a device-side argmax
  // beats copying rows x vocab floats); sampled rows on a GPU only. On the CPU the torch ops (a sort of the
  // vocabulary for a cut-off, double cumulative sums) cost 3-10x the host sampler, which needs neither (16 rows of
  // 32k ids: 11.6 vs 3.8 ms uncut, 70 vs 9 ms with top_p 0.95; server/README "Picking on the device").
  bool PicksHere(const std::vector<TokenPick>& picks) const {
    return !picks.empty() && (device_.is_cuda() || !AnySampled(picks));
  }

  // The graph's [batch_size, vocab] FP32 logits; the first `rows` rows are copied out, or with `picks` only their
  // picked ids (PickTokens, on the device).
  Logits ToLogits(const torch::jit::IValue& returned, int batch_size, int rows,
                  const std::vector<TokenPick>* picks = nullptr) const {
    if (!returned.isTensor()) throw std::runtime_error("graph must return one logits tensor");
    const torch::Tensor& logits = returned.toTensor();
    const int vocab = generation_.vocab_size;
    if (logits.scalar_type() != torch::kFloat32 || logits.dim() != 2 || logits.size(0) != batch_size ||
        logits.size(1) != vocab) {
      throw std::runtime_error(absl::StrCat("graph returned ", std::string(c10::toString(logits.scalar_type())), " ",
                                            ShapeToString(logits.sizes().vec()), ", expected Float [", batch_size,
                                            ", ", vocab, "] (vocab_size)"));
    }
    Logits result{rows, vocab, {}, {}};
    if (picks != nullptr) {
      result.picked = PickTokens(logits.slice(0, 0, rows), *picks);
      return result;
    }
    torch::Tensor cpu = logits.slice(0, 0, rows).to(torch::kCPU).contiguous();
    result.values.assign(cpu.data_ptr<float>(), cpu.data_ptr<float>() + cpu.numel());
    return result;
  }

  const ModelConfig& model_;
  const GenerationOptions& generation_;
  const InstanceGroup group_;
  const int replica_;
  const TorchTarget target_;
  const torch::Device device_;  // target_.device
  const InstanceThreads threads_;
  const int scratch_slot_;
  std::shared_ptr<const TorchWeights> weights_;  // graph format 2: bound to every graph; null for format 1
  InstanceMemory memory_;
  torch::Tensor k_cache_;
  torch::Tensor v_cache_;
  torch::Tensor cross_k_;  // encoder-decoder models only (generation.cross_attention)
  torch::Tensor cross_v_;
  std::map<int64_t, torch::jit::Module> prefill_;                  // by prompt bucket
  std::map<std::pair<int64_t, int64_t>, torch::jit::Module> chunk_;  // by (chunk length, KV length)
  std::map<std::pair<int, int64_t>, torch::jit::Module> decode_;  // by (batch size, KV length)
  std::vector<BucketLoadStats> stats_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GenerationBackend>> CreateTorchGenerationBackend(const InstanceOptions& options) {
  if (!options.model->generation) {
    return absl::InvalidArgumentError(absl::StrCat("model ", options.model->name, " is not a generation model"));
  }
  SLUICE_ASSIGN_OR_RETURN(TorchTarget target, ChooseTorchTarget(options));
  SLUICE_ASSIGN_OR_RETURN(InstanceThreads threads, InstanceThreads::Create(options));
  auto backend = std::make_unique<TorchGenerationBackend>(options, target, threads);
  SLUICE_RETURN_IF_ERROR(backend->LoadAll(options.warmup_runs));
  return backend;
}

}  // namespace sluice
