// The seam between the run (app.cc: traffic, workload, monitor, sweep, SLO, cost, report) and one API's part of
// it: which options fit the API, how the server describes a model, how --verify checks one, what must be ready
// before the load, and one run summarised. app.cc makes the driver of --api once (MakeApiDriver) and never asks
// which API it is again. One driver per API family: kserve/kserve_driver.h (--api kserve, gRPC or HTTP),
// speech/speech_driver.h (riva-offline, riva-streaming), generation/generation_driver.h (openai, triton-stream).
// Every driver reaches the server's KServe v2 control calls (metadata, config, statistics) through the `control`
// client app.cc connects for every API (after CheckOptions, which may decide its protocol).
// API-neutral like the rest of core/: the types of the API families and of the app it names are declared here, not
// included (the command line's AppOptions: app_options.h; the KServe client: kserve/infer_client.h; the report:
// report/report.h); a driver's own header includes them.
// Thread-safety: a driver is used from the run's thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loadtest/core/api.h"
#include "loadtest/core/model_info.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/slo.h"
#include "loadtest/core/summary.h"
#include "loadtest/core/sweep.h"
#include "loadtest/core/verify_report.h"
#include "loadtest/core/workload.h"

namespace sluice::loadtest {

struct AppOptions;   // app_options.h
class InferClient;   // kserve/infer_client.h
struct Report;       // report/report.h

// The run's summary of a RunResult (the SLO's per-request objectives and the arrival kind are the run's).
using RunSummarizer = std::function<RunSummary(const RunResult& run, double burstiness)>;

class ApiDriver {
 public:
  virtual ~ApiDriver() = default;

  // The options that do not fit this API (InvalidArgument, the message for the user); may fix up the ones the API
  // decides (openai: always HTTP).
  virtual absl::Status CheckOptions(AppOptions& options) const = 0;
  // What the server says about `model`.
  virtual absl::StatusOr<ModelInfo> Describe(InferClient& control, const std::string& model,
                                             const AppOptions& options) = 0;
  // --verify of one model against its reference set.
  virtual absl::StatusOr<VerifyReport> Verify(InferClient& control, const ModelInfo& model,
                                              const AppOptions& options) = 0;
  // Before a load (not for --verify only or --dry-run): the API's own checks with the server and clients.
  // FailedPrecondition: the server does not serve the workload over this API. `vocab`: token ids are drawn from
  // [1, vocab); `slo` judges each request (goodput). REQUIRES: `control` and `workload` outlive the driver.
  virtual absl::Status Prepare(InferClient& control, const AppOptions& options, const Workload& workload,
                               const SloSpec& slo, int64_t vocab) = 0;
  // One run, summarised through `summarize`; `streams` > 0 replaces --streams (a sweep step). May fill in the
  // report's API-specific figures that are not in the summary (the generation histograms). REQUIRES: Prepare().
  virtual absl::StatusOr<RunSummary> Run(const RunOptions& options, int streams, const RunSummarizer& summarize,
                                         RunResult& run, Report& report) = 0;
  // Whether the server monitor reads the models' ModelStatistics before and after (false: they count something
  // else than this API's requests).
  virtual bool reads_server_statistics() const = 0;
  // Whether a request's client latency compares with the server's per-inference figure (one call, one inference).
  virtual bool compares_server_latency() const = 0;
};

// The checks every API that sends one request per call shares (all but riva-streaming): a loop kind of the
// runner, not --streams. `streams`: --streams; `sweep`: --sweep.
absl::Status CheckRequestLoop(int streams, const SweepOptions& sweep);

}  // namespace sluice::loadtest
