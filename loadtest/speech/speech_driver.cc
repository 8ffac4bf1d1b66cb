#include "loadtest/speech/speech_driver.h"

#include "loadtest/app_options.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/kserve/kserve_driver.h"
#include "loadtest/report/report.h"
#include "loadtest/speech/speech_load.h"

namespace sluice::loadtest {
namespace {

class SpeechDriver final : public ApiDriver {
 public:
  explicit SpeechDriver(Api api) : api_(api) {}

  absl::Status CheckOptions(AppOptions& options) const override {
    if (api_ == Api::kRivaStreaming) {
      if (options.run.concurrency > 0 || options.run.rate > 0) {
        return absl::InvalidArgumentError(
            "--api riva-streaming runs --streams N concurrent streams, not --concurrency or --rate");
      }
      if (!options.sweep.knob.empty() && options.sweep.knob != "streams") {
        return absl::InvalidArgumentError("--api riva-streaming sweeps --sweep streams");
      }
    } else if (absl::Status s = CheckRequestLoop(options.streaming.streams, options.sweep); !s.ok()) {
      return s;
    }
    if (api_ == Api::kOpenAiAudio) {
      options.protocol = "http";  // OpenAI's API is HTTP; KServe REST on the same port describes the models
      return absl::OkStatus();
    }
    if (options.protocol != "grpc") {
      return absl::InvalidArgumentError("the Riva speech API is gRPC: --protocol http does not apply to it");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ModelInfo> Describe(InferClient& control, const std::string& model,
                                     const AppOptions& options) override {
    return DescribeOverKServe(control, model, options);
  }

  absl::StatusOr<VerifyReport> Verify(InferClient& control, const ModelInfo& model,
                                      const AppOptions& options) override {
    return VerifyOverKServe(control, model, options);
  }

  // Riva: the models must be served over the Riva API (the server says so before any load).
  absl::Status Prepare(InferClient& control, const AppOptions& options, const Workload& workload, const SloSpec&,
                       int64_t) override {
    SpeechLoadOptions speech;
    speech.api = api_;
    speech.streaming = options.streaming;
    speech.client = control.options();
    absl::StatusOr<std::unique_ptr<SpeechLoad>> load = SpeechLoad::Create(speech, workload);
    if (!load.ok()) return load.status();
    load_ = *std::move(load);
    return absl::OkStatus();
  }

  absl::StatusOr<RunSummary> Run(const RunOptions& options, int streams, const RunSummarizer& summarize,
                                 RunResult& run, Report&) override {
    absl::StatusOr<SpeechRun> result = load_->Run(options, streams);
    if (!result.ok()) return result.status();
    run = std::move(result->run);
    RunSummary summary = summarize(run, options.burstiness);
    summary.speech = std::move(result->speech);
    return summary;
  }

  bool reads_server_statistics() const override { return true; }
  // A Riva call is several windows, a stream many: no one server inference to compare with.
  bool compares_server_latency() const override { return false; }

 private:
  const Api api_;
  std::unique_ptr<SpeechLoad> load_;  // set by Prepare
};

}  // namespace

std::unique_ptr<ApiDriver> MakeSpeechDriver(Api api) {
  return std::make_unique<SpeechDriver>(api);
}

}  // namespace sluice::loadtest
