#include "loadtest/generation_load.h"

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace sluice::loadtest {
namespace {

// Outcomes by request index, from the client's worker threads.
class OutcomeLog {
 public:
  void Add(uint64_t index, OpenAiStreamOutcome outcome) {
    absl::MutexLock lock(&mu_);
    outcomes_[index] = std::move(outcome);
  }
  absl::flat_hash_map<uint64_t, OpenAiStreamOutcome> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(outcomes_);
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, OpenAiStreamOutcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<GenerationLoad>> GenerationLoad::Create(const InferClient::Options& client,
                                                                       const GenerationPlanOptions& plan,
                                                                       const Workload& workload) {
  if (workload.models().size() != 1) {
    return absl::InvalidArgumentError("--api openai loads one generation model (no model mix)");
  }
  std::unique_ptr<GenerationLoad> load(new GenerationLoad(workload));
  absl::StatusOr<std::unique_ptr<GenerationPlan>> made = GenerationPlan::Create(plan);
  if (!made.ok()) return made.status();
  load->plan_ = *std::move(made);
  load->client_ = std::make_unique<OpenAiInferClient>(client, load->plan_.get());
  inference::ModelMetadataResponse metadata;
  const grpc::Status listed = load->client_->ModelMetadata(plan.model, &metadata);
  if (!listed.ok()) return absl::FailedPreconditionError(listed.error_message());
  return load;
}

absl::StatusOr<GenerationRun> GenerationLoad::Run(const RunOptions& options, const SloSpec& slo) {
  OutcomeLog log;
  RunOptions run_options = options;
  run_options.on_response = [&log](const RequestRecord& record, const inference::ModelInferResponse& response) {
    if (record.measured) log.Add(record.index, OutcomeFromResponse(response));
  };
  absl::StatusOr<RunResult> result = RunLoad(run_options, workload_, *client_);
  if (!result.ok()) return result.status();
  GenerationRun out;
  out.run = *std::move(result);
  const absl::flat_hash_map<uint64_t, OpenAiStreamOutcome> outcomes = log.Take();
  out.stats = SummarizeGeneration(out.run, outcomes, slo);
  out.stats.prompt_source = plan_->PromptSource();
  out.samples = GenerationLatencySamples(out.run, outcomes);
  return out;
}

}  // namespace sluice::loadtest
