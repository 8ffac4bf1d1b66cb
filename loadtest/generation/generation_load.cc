#include "loadtest/generation/generation_load.h"

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "backend/base/sync.h"
#include "loadtest/generation/openai_client.h"
#include "loadtest/generation/triton_stream_client.h"

namespace sluice::loadtest {
namespace {

// Outcomes by request index, from the client's worker threads.
class OutcomeLog {
 public:
  void Add(uint64_t index, GenerationOutcome outcome) {
    MutexLock lock(&mu_);
    outcomes_[index] = std::move(outcome);
  }
  absl::flat_hash_map<uint64_t, GenerationOutcome> Take() {
    MutexLock lock(&mu_);
    return std::move(outcomes_);
  }

 private:
  Mutex mu_;
  absl::flat_hash_map<uint64_t, GenerationOutcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<InferClient>> CreateGenerationClient(Api api,
                                                                    const ClientOptions& options,
                                                                    const GenerationPlan* plan) {
  if (api == Api::kOpenAi) return std::make_unique<OpenAiInferClient>(options, plan);
  if (api == Api::kTritonStream) return std::make_unique<TritonStreamInferClient>(options, plan);
  return absl::InvalidArgumentError(
      absl::StrCat("'", ApiName(api), "' is not a generation API (openai, triton-stream)"));
}

absl::StatusOr<std::unique_ptr<GenerationLoad>> GenerationLoad::Create(Api api,
                                                                       const ClientOptions& client,
                                                                       const GenerationPlanOptions& plan,
                                                                       const Workload& workload) {
  if (workload.models().size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--api ", ApiName(api), " loads one generation model (no model mix)"));
  }
  // The server first (a model it does not serve over this API is exit code 3 whatever else is wrong), through a
  // client without the plan; then the plan (which may need the model's tokenizer) and the client of the run.
  {
    absl::StatusOr<std::unique_ptr<InferClient>> probe = CreateGenerationClient(api, client, nullptr);
    if (!probe.ok()) return probe.status();
    inference::ModelMetadataResponse metadata;
    const grpc::Status served = (*probe)->ModelMetadata(plan.model, &metadata);
    if (!served.ok()) {
      return absl::FailedPreconditionError(
          api == Api::kOpenAi ? served.error_message()
                          : absl::StrCat("model ", plan.model, " over ModelStreamInfer at ", client.address, ": ",
                                         GrpcCodeName(served.error_code()), ": ", served.error_message()));
    }
  }
  std::unique_ptr<GenerationLoad> load(new GenerationLoad(api, workload));
  load->plan_options_ = plan;
  absl::StatusOr<std::unique_ptr<GenerationPlan>> made = GenerationPlan::Create(plan);
  if (!made.ok()) return made.status();
  load->plan_ = *std::move(made);
  absl::StatusOr<std::unique_ptr<InferClient>> made_client = CreateGenerationClient(api, client, load->plan_.get());
  if (!made_client.ok()) return made_client.status();
  load->client_ = *std::move(made_client);
  return load;
}

std::string GenerationLoad::TokenCountSource() const {
  if (api_ == Api::kOpenAi) return "usage";
  return absl::StrCat(plan_options_.counter != nullptr ? "prompts counted by the model's tokenizer"
                                                       : "prompt lengths unknown (no tokenizer)",
                      plan_options_.ignore_eos ? ", outputs = max_tokens (ignore_eos)"
                                               : ", outputs = text responses (a lower bound)",
                      "; ModelStreamInfer reports no usage");
}

absl::StatusOr<GenerationRun> GenerationLoad::Run(const RunOptions& options, const SloSpec& slo) {
  OutcomeLog log;
  RunOptions run_options = options;
  run_options.on_response = [&log](const RequestRecord& record, const Outcome& outcome) {
    if (record.measured) log.Add(record.index, GenerationOutcomeOf(outcome));
  };
  absl::StatusOr<RunResult> result = RunLoad(run_options, workload_, *client_);
  if (!result.ok()) return result.status();
  GenerationRun out;
  out.run = *std::move(result);
  const absl::flat_hash_map<uint64_t, GenerationOutcome> outcomes = log.Take();
  out.stats = SummarizeGeneration(out.run, outcomes, slo);
  out.stats.api = api_;
  out.stats.token_counts = TokenCountSource();
  out.stats.prompt_source = plan_->PromptSource();
  out.samples = GenerationLatencySamples(out.run, outcomes);
  return out;
}

}  // namespace sluice::loadtest
