// The load of a generation API over one generation model: the ordinary runner (closed or open loop, warm-up, caps;
// runner.h) sends the workload's requests through the API's client — an InferClient that turns each into the
// GenerationPlan's streamed request: OpenAiInferClient (--api openai: streamed completions over HTTP) or
// TritonStreamInferClient (--api triton-stream: ModelStreamInfer over gRPC) — and the outcomes of the successful
// ones are collected by request index and summarised (generation_summary.h). Before any load, Create checks that
// the server serves the model over that API (openai: GET /v1/models lists it; triton-stream: ModelMetadata
// describes a text-generation model).
// Thread-safety: Run() blocks its calling thread and is not reentrant.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/core/api.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/workload.h"
#include "loadtest/generation/generation_plan.h"
#include "loadtest/generation/generation_summary.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {

struct GenerationRun {
  RunResult run;
  GenerationStats stats;
  GenerationSamples samples;  // every TTFT and ITL, for the plot
};

// The client of generation API `api` (InvalidArgument for another api). REQUIRES: `plan` (may be null: requests are
// sent as they are) outlives the client.
absl::StatusOr<std::unique_ptr<InferClient>> CreateGenerationClient(Api api,
                                                                    const ClientOptions& options,
                                                                    const GenerationPlan* plan);

class GenerationLoad {
 public:
  // REQUIRES: `workload` (one generation model; its length profile draws prompt lengths) outlives this.
  // FailedPrecondition when the server does not serve the model over `api`.
  static absl::StatusOr<std::unique_ptr<GenerationLoad>> Create(Api api,
                                                                const ClientOptions& client,
                                                                const GenerationPlanOptions& plan,
                                                                const Workload& workload);

  absl::StatusOr<GenerationRun> Run(const RunOptions& options, const SloSpec& slo);

  InferClient& client() { return *client_; }
  const GenerationPlan& plan() const { return *plan_; }

  GenerationLoad(const GenerationLoad&) = delete;
  GenerationLoad& operator=(const GenerationLoad&) = delete;

 private:
  GenerationLoad(Api api, const Workload& workload) : api_(api), workload_(workload) {}
  // How the run's token counts were obtained, for the report.
  std::string TokenCountSource() const;

  const Api api_;
  const Workload& workload_;
  GenerationPlanOptions plan_options_;
  std::unique_ptr<GenerationPlan> plan_;
  std::unique_ptr<InferClient> client_;
};

}  // namespace sluice::loadtest
