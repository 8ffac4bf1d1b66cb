#include "loadtest/kserve/kserve_driver.h"

#include "loadtest/app_options.h"
#include "loadtest/kserve/fetch_model_info.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/kserve/verify.h"
#include "loadtest/report/report.h"

namespace sluice::loadtest {
namespace {

class KServeDriver final : public ApiDriver {
 public:
  absl::Status CheckOptions(AppOptions& options) const override {
    return CheckRequestLoop(options.streaming.streams, options.sweep);
  }

  absl::StatusOr<ModelInfo> Describe(InferClient& control, const std::string& model,
                                     const AppOptions& options) override {
    return DescribeOverKServe(control, model, options);
  }

  absl::StatusOr<VerifyReport> Verify(InferClient& control, const ModelInfo& model,
                                      const AppOptions& options) override {
    return VerifyOverKServe(control, model, options);
  }

  absl::Status Prepare(InferClient& control, const AppOptions&, const Workload& workload, const SloSpec&,
                       int64_t) override {
    control_ = &control;
    workload_ = &workload;
    return absl::OkStatus();
  }

  absl::StatusOr<RunSummary> Run(const RunOptions& options, int, const RunSummarizer& summarize, RunResult& run,
                                 Report&) override {
    absl::StatusOr<RunResult> result = RunLoad(options, *workload_, *control_);
    if (!result.ok()) return result.status();
    run = *std::move(result);
    return summarize(run, options.burstiness);
  }

  bool reads_server_statistics() const override { return true; }
  bool compares_server_latency() const override { return true; }

 private:
  InferClient* control_ = nullptr;       // set by Prepare
  const Workload* workload_ = nullptr;  // set by Prepare
};

}  // namespace

std::unique_ptr<ApiDriver> MakeKServeDriver() { return std::make_unique<KServeDriver>(); }

absl::StatusOr<ModelInfo> DescribeOverKServe(InferClient& control, const std::string& model,
                                             const AppOptions& options) {
  return FetchModelInfo(control, model, options.model_repository, options.max_length);
}

absl::StatusOr<VerifyReport> VerifyOverKServe(InferClient& control, const ModelInfo& model,
                                              const AppOptions& options) {
  return VerifyModel(control, model, options.model_repository, options.tolerance, options.run.timeout_ms);
}

}  // namespace sluice::loadtest
