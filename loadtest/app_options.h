// sluice-loadtest's options, as the command line (loadtest_main.cc) fills them in and the run (app.cc) and each
// API's driver (core/api_driver.h) read them. Beside app.h rather than in core/, because they name every API's own
// options (speech/streaming_options.h, generation/generation_plan.h): core/ knows them only by a forward declaration.
// Thread-safety: a plain struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loadtest/core/api.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/sweep.h"
#include "loadtest/generation/generation_plan.h"
#include "loadtest/speech/streaming_options.h"

namespace sluice::loadtest {

struct AppOptions {
  // Target.
  Api api = Api::kKServe;
  std::string protocol = "grpc";  // grpc | http (KServe v2 REST with binary tensor data)
  std::string address;            // host:port; empty: localhost:8001 (gRPC) or localhost:8000 (HTTP)
  int channels = 1;
  std::string bearer_token;
  std::string metrics_url = "auto";  // "auto": HTTP: the same address; gRPC: HOST:8000 when the port is 8001
  double scrape_interval_s = 1.0;
  int server_pid = 0;

  // Workload.
  std::string model_mix;
  std::vector<std::string> lengths;  // "SPEC" for every model or "MODEL=SPEC"
  int64_t max_length = 0;
  uint64_t seed = 1;
  int64_t vocab = 0;  // 0: the server's vocab_size (--api openai), else 8192
  std::string model_repository;
  std::string audio_dir;  // recordings for the speech models (libsndfile), instead of generated noise

  // Load (RunOptions without the per-run fields) and checks.
  RunOptions run;
  StreamingOptions streaming;  // riva-streaming: streams, chunk length, pacing
  GenerationPlanOptions generation;  // openai, triton-stream: output lengths, prompt file, ignore_eos, sampling (model
                                     // and seed are filled in); prompt lengths are the --lengths spec (default
                                     // fixed:128)
  std::string tokenizer_path;  // openai, triton-stream: SentencePiece model for real-text prompts (default: the
                               // repository's); triton-stream needs one (or a prompt file)
  std::string arrival = "poisson";
  std::string slo_path;
  bool verify = false;
  double tolerance = 1e-4;

  // Cost.
  std::string pricing_path, preset;
  double hourly_usd = 0;
  int accelerators = 0, accelerators_used = 0;

  // Sweep.
  SweepOptions sweep;  // knob empty: no sweep

  // Output.
  std::string json_path, svg_path;
  bool dry_run = false;  // send nothing: print the padding plan of run.requests (default 1000) drawn requests
};

}  // namespace sluice::loadtest
