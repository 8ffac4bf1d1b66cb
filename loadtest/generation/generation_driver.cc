#include "loadtest/generation/generation_driver.h"

#include <utility>
#include <vector>

#include "loadtest/app_options.h"
#include "loadtest/generation/generation_app.h"
#include "loadtest/generation/generation_load.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/report/report.h"

namespace sluice::loadtest {
namespace {

class GenerationDriver final : public ApiDriver {
 public:
  explicit GenerationDriver(Api api) : api_(api) {}

  absl::Status CheckOptions(AppOptions& options) const override {
    if (absl::Status s = CheckRequestLoop(options.streaming.streams, options.sweep); !s.ok()) return s;
    if (api_ == Api::kOpenAi) {
      options.protocol = "http";  // the OpenAI API is HTTP (SSE)
      return absl::OkStatus();
    }
    if (options.protocol != "grpc") {
      return absl::InvalidArgumentError(
          "--api triton-stream is Triton's ModelStreamInfer, a gRPC stream: --protocol http does not apply to it "
          "(use --protocol grpc and the server's gRPC address, e.g. -u host:8001)");
    }
    if (options.generation.chat) {
      return absl::InvalidArgumentError("--chat is for --api openai (ModelStreamInfer has no chat messages)");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ModelInfo> Describe(InferClient& control, const std::string& model,
                                     const AppOptions& options) override {
    return GenerationModelInfo(api_, control.options(), model, options.max_length);
  }

  absl::StatusOr<VerifyReport> Verify(InferClient& control, const ModelInfo& model,
                                      const AppOptions& options) override {
    return VerifyGeneration(api_, control.options(), model.name, options.model_repository, options.run.timeout_ms);
  }

  // The plan (real-text prompts when the model's tokenizer is at hand: token ids for openai, text sized by the
  // tokenizer for triton-stream) and the client.
  absl::Status Prepare(InferClient& control, const AppOptions& options, const Workload& workload,
                       const SloSpec& slo, int64_t vocab) override {
    slo_ = slo;
    GenerationPlanOptions plan = options.generation;
    plan.model = workload.models().front().info.name;
    plan.seed = options.seed;
    plan.synthetic_vocab = vocab;
    plan.context_length = workload.models().front().info.context_length;
    if (api_ == Api::kTritonStream) {
      plan.text_prompts = true;
      absl::StatusOr<std::shared_ptr<const PromptTokenCounter>> counter =
          LoadPromptTokenCounter(options.tokenizer_path, options.model_repository, plan.model);
      if (!counter.ok()) return InvalidArgument(counter.status());
      plan.counter = *std::move(counter);
    } else {
      absl::StatusOr<std::vector<int32_t>> corpus =
          RealTextIds(options.tokenizer_path, options.model_repository, plan.model);
      if (!corpus.ok()) return InvalidArgument(corpus.status());
      plan.corpus_ids = *std::move(corpus);
    }
    absl::StatusOr<std::unique_ptr<GenerationLoad>> load =
        GenerationLoad::Create(api_, control.options(), plan, workload);
    if (!load.ok()) return load.status();
    load_ = *std::move(load);
    return absl::OkStatus();
  }

  absl::StatusOr<RunSummary> Run(const RunOptions& options, int, const RunSummarizer& summarize, RunResult& run,
                                 Report& report) override {
    absl::StatusOr<GenerationRun> result = load_->Run(options, slo_);
    if (!result.ok()) return result.status();
    run = std::move(result->run);
    RunSummary summary = summarize(run, options.burstiness);
    summary.total.good = summary.per_model.front().good = result->stats.good;
    summary.total.goodput_rps = summary.per_model.front().goodput_rps = result->stats.goodput_rps;
    summary.generation = std::move(result->stats);
    report.ttft_histogram = LogHistogram(std::move(result->samples.ttft_ms), 40);
    report.itl_histogram = LogHistogram(std::move(result->samples.itl_ms), 40);
    return summary;
  }

  // The server's ModelStatistics count generation steps, not requests: none are read.
  bool reads_server_statistics() const override { return false; }
  bool compares_server_latency() const override { return false; }

 private:
  // A tokenizer that cannot be read is the user's to fix (exit code 2), whatever its status code says.
  static absl::Status InvalidArgument(const absl::Status& status) {
    return absl::InvalidArgumentError(status.message());
  }

  const Api api_;
  std::unique_ptr<GenerationLoad> load_;  // set by Prepare
  SloSpec slo_;  // set by Prepare: judges each generation (goodput)
};

}  // namespace

std::unique_ptr<ApiDriver> MakeGenerationDriver(Api api) {
  return std::make_unique<GenerationDriver>(api);
}

}  // namespace sluice::loadtest
