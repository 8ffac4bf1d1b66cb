// The load of the generation API (--api openai) over one generation model: the ordinary runner (closed or open
// loop, warm-up, caps; runner.h) sends the workload's requests through an OpenAiInferClient, which turns each
// into the GenerationPlan's streamed completion; the outcomes of the successful ones are collected by request
// index and summarised (generation_summary.h). Before any load, Create checks that the server lists the model
// on GET /v1/models.
// Thread-safety: Run() blocks its calling thread and is not reentrant.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "loadtest/generation_plan.h"
#include "loadtest/generation_summary.h"
#include "loadtest/infer_client.h"
#include "loadtest/openai_client.h"
#include "loadtest/runner.h"
#include "loadtest/workload.h"

namespace sluice::loadtest {

struct GenerationRun {
  RunResult run;
  GenerationStats stats;
  GenerationSamples samples;  // every TTFT and ITL, for the plot
};

class GenerationLoad {
 public:
  // REQUIRES: `workload` (one generation model; its length profile draws prompt lengths) outlives this.
  // FailedPrecondition when the server does not list the model.
  static absl::StatusOr<std::unique_ptr<GenerationLoad>> Create(const InferClient::Options& client,
                                                                const GenerationPlanOptions& plan,
                                                                const Workload& workload);

  absl::StatusOr<GenerationRun> Run(const RunOptions& options, const SloSpec& slo);

  InferClient& client() { return *client_; }
  const GenerationPlan& plan() const { return *plan_; }

  GenerationLoad(const GenerationLoad&) = delete;
  GenerationLoad& operator=(const GenerationLoad&) = delete;

 private:
  GenerationLoad(const Workload& workload) : workload_(workload) {}

  const Workload& workload_;
  std::unique_ptr<GenerationPlan> plan_;
  std::unique_ptr<OpenAiInferClient> client_;
};

}  // namespace sluice::loadtest
