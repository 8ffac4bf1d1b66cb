// sluice-loadtest: load generator, SLO checker, correctness verifier and report tool for sluice (or any
// KServe v2 server, over gRPC or HTTP). See README.md "Load testing" and `sluice-loadtest --help`.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "loadtest/app.h"
#include "loadtest/core/api.h"
#include "loadtest/report/compare.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace {

using sluice::loadtest::AppOptions;
using sluice::loadtest::kExitUsage;

// What the command line sets: the run's options, and the flags that are turned into them after parsing.
struct Flags {
  AppOptions o;
  std::string api = "kserve";  // parsed to o.api once (ParseApi)
  std::vector<std::string> compare;
  std::string sweep_levels;
  bool no_progress = false;
  std::string log_level = "info";
  std::string temperature;
  bool no_ignore_eos = false;
};

// The "Target" group of --help: where the server is and which API it speaks.
void AddTargetFlags(CLI::App& app, Flags& f) {
  app.add_option("--api", f.api,
                 "kserve (KServe v2 inference), riva-offline (Riva Recognize: one WAV file per request) or "
                 "riva-streaming (Riva StreamingRecognize: --streams concurrent streams of chunked PCM), openai "
                 "(generation: streamed /v1/completions over HTTP, TTFT/ITL/TPOT, usage checked) or triton-stream "
                 "(generation: Triton's decoupled ModelStreamInfer over gRPC, text_input/text_output, one stream per "
                 "request, TTFT/ITL/TPOT; text prompts sized with the model's tokenizer) or openai-audio (speech: "
                 "OpenAI /v1/audio/transcriptions over HTTP, one WAV file per request as multipart/form-data; -u is "
                 "the HTTP address; WER, RTFx and audio seconds per dollar as riva-offline)")
      ->check(CLI::IsMember(sluice::loadtest::ApiNames()))
      ->capture_default_str()->group("Target");
  app.add_option("--protocol", f.o.protocol,
                 "grpc, or http (KServe v2 REST with binary tensor data); openai is always HTTP, riva-* and "
                 "triton-stream always gRPC")
      ->check(CLI::IsMember({"grpc", "http"}))->capture_default_str()->group("Target");
  app.add_option("-u,--address,--grpc", f.o.address,
                 "server address host:port (default localhost:8001 for gRPC, localhost:8000 for HTTP)")
      ->group("Target");
  app.add_option("--channels", f.o.channels, "gRPC channels (connections), used round robin")
      ->check(CLI::Range(1, 64))->capture_default_str()->group("Target");
  app.add_option("--token", f.o.bearer_token, "bearer token sent with every call")->group("Target");
  app.add_option("--metrics-url", f.o.metrics_url,
                 "Prometheus page to scrape; 'auto' = the server's own over HTTP, http://HOST:8000/metrics when the "
                 "gRPC port is 8001; 'none'")
      ->capture_default_str()->group("Target");
  app.add_option("--scrape-interval", f.o.scrape_interval_s, "seconds between /metrics scrapes during the run")
      ->check(CLI::PositiveNumber)->capture_default_str()->group("Target");
  app.add_option("--server-pid", f.o.server_pid, "local server pid: its peak RSS (VmHWM) when /metrics has none")
      ->group("Target");
}

// The "Workload" group of --help: which models, lengths and inputs.
void AddWorkloadFlags(CLI::App& app, Flags& f) {
  app.add_option("-m,--model", f.o.model_mix, "model or weighted mix, e.g. asr_ctc:0.7,text_embed:0.3")
      ->group("Workload");
  app.add_option("--lengths", f.o.lengths,
                 "length profile for every model, or MODEL=SPEC: fixed:N, uniform:A-B, lognormal:MEDIAN,SIGMA, speech, "
                 "file:PATH (N in steps, or seconds with an s suffix); default speech for speech models, "
                 "uniform:1-MAX otherwise")
      ->group("Workload");
  app.add_option("--audio-dir,--audio-folder", f.o.audio_dir,
                 "send the recordings in this folder (WAV, FLAC, ... via libsndfile; mono-mixed, at the model's "
                 "sample rate) to speech models instead of generated noise; <name>.txt beside <name>.wav is its "
                 "reference transcript (the Riva APIs report WER)")
      ->group("Workload");
  app.add_option("--max-length", f.o.max_length, "largest length to send (default: the model's largest bucket)")
      ->group("Workload");
  app.add_option("--seed", f.o.seed, "seed of inputs, lengths, model choice and arrivals")->capture_default_str()
      ->group("Workload");
  app.add_option("--vocab", f.o.vocab,
                 "synthetic token ids are drawn from [1, vocab) (default: the server's vocab_size from GET /v1/models "
                 "for --api openai, else 8192)")
      ->check(CLI::PositiveNumber)->group("Workload");
  app.add_option("--model-repository", f.o.model_repository,
                 "the server's model repository (sample rates; reference sets for --verify)")
      ->group("Workload");

}

// The "Load" group of --help: closed or open loop, warm-up, ends and caps.
void AddLoadFlags(CLI::App& app, Flags& f) {
  app.add_option("-c,--concurrency", f.o.run.concurrency, "closed loop: calls kept in flight")
      ->check(CLI::PositiveNumber)->group("Load");
  app.add_option("-r,--rate", f.o.run.rate, "open loop: mean requests per second")->check(CLI::PositiveNumber)
      ->group("Load");
  app.add_option("--arrival", f.o.arrival, "open-loop arrivals: poisson, gamma or constant")->capture_default_str()
      ->group("Load");
  app.add_option("--burstiness", f.o.run.burstiness, "gamma shape (1 = Poisson, < 1 burstier); != 1 implies gamma")
      ->check(CLI::PositiveNumber)->capture_default_str()->group("Load");
  app.add_option("-d,--duration", f.o.run.duration_s,
                 "measured seconds after warm-up (with neither -d nor -n: 30, and the run says so)")
      ->check(CLI::NonNegativeNumber)->group("Load");
  app.add_option("-n,--requests", f.o.run.requests, "measured requests after warm-up")->check(CLI::NonNegativeNumber)
      ->group("Load");
  app.add_option("--warmup", f.o.run.warmup_s, "seconds of warm-up, excluded from results")
      ->check(CLI::NonNegativeNumber)->group("Load");
  app.add_option("--warmup-requests", f.o.run.warmup_requests, "requests of warm-up, excluded from results")
      ->check(CLI::NonNegativeNumber)->group("Load");
  app.add_option("--timeout-ms", f.o.run.timeout_ms, "per-request deadline")->check(CLI::PositiveNumber)
      ->capture_default_str()->group("Load");
  app.add_option("--max-requests", f.o.run.max_requests, "hard cap on requests sent, warm-up included")
      ->check(CLI::PositiveNumber)->capture_default_str()->group("Load");
  app.add_option("--max-duration", f.o.run.max_duration_s, "hard cap on one run's seconds, warm-up included")
      ->check(CLI::PositiveNumber)->capture_default_str()->group("Load");
  app.add_option("--max-outstanding", f.o.run.max_outstanding, "open loop: calls in flight before arrivals drop")
      ->check(CLI::PositiveNumber)->capture_default_str()->group("Load");
  app.add_flag("--no-progress", f.no_progress, "no progress line on the terminal")->group("Load");
}

// The "Streaming" group of --help: --api riva-streaming.
void AddStreamingFlags(CLI::App& app, Flags& f) {
  app.add_option("--streams", f.o.streaming.streams,
                 "riva-streaming: concurrent streams; each sends one recording, and its next starts when it ends")
      ->check(CLI::Range(1, 4096))->group("Streaming");
  app.add_option("--chunk-ms", f.o.streaming.chunk_ms, "riva-streaming: milliseconds of audio per message")
      ->check(CLI::Range(1.0, 60000.0))->capture_default_str()->group("Streaming");
  app.add_flag("--realtime,!--no-realtime", f.o.streaming.realtime,
               "riva-streaming: send chunks at real time (default), or as fast as gRPC flow control allows")
      ->group("Streaming");
}

// The "Generation" group of --help: --api openai and triton-stream.
void AddGenerationFlags(CLI::App& app, Flags& f) {
  app.add_option("--prompt-tokens", f.o.lengths,
                 "openai, triton-stream: prompt length distribution in tokens (fixed:N, uniform:A-B, "
                 "lognormal:MEDIAN,SIGMA, file:PATH; default fixed:128). openai: token-id arrays cut from real text "
                 "tokenized by the model's tokenizer (--tokenizer, or MODEL_REPOSITORY/MODEL/tokenizer.model), else "
                 "synthetic ids in [1, --vocab). triton-stream (text only; needs that tokenizer or --prompts-file): "
                 "words of the same real text whose count, BOS included, is the drawn length")
      ->group("Generation");
  app.add_option("--output-tokens", f.o.generation.output_tokens,
                 "openai, triton-stream: output length distribution, sent as max_tokens (same specs as "
                 "--prompt-tokens)")
      ->capture_default_str()->group("Generation");
  app.add_flag("--no-ignore-eos", f.no_ignore_eos,
               "openai, triton-stream: let the model stop at EOS (default: ignore_eos, so each request generates "
               "max_tokens; triton-stream then counts output tokens as text responses, a lower bound)")
      ->group("Generation");
  app.add_option("--prompts-file", f.o.generation.prompts_file,
                 "openai, triton-stream: text prompts, one per line (\\n for a line break), drawn uniformly; "
                 "lengths from usage (openai) or the model's tokenizer (triton-stream)")
      ->group("Generation");
  app.add_flag("--chat", f.o.generation.chat, "openai: /v1/chat/completions (one user message; needs --prompts-file)")
      ->group("Generation");
  app.add_option("--temperature", f.temperature,
                 "openai, triton-stream: sampling temperature (default: the server's)")
      ->group("Generation");
  app.add_option("--shared-prefix-tokens", f.o.generation.shared_prefix_tokens,
                 "openai (token-id prompts): every prompt starts with the same N tokens (a shared system prompt, "
                 "for prefix caching), then its drawn --prompt-tokens")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))->group("Generation");
  app.add_flag("--request-seeds", f.o.generation.per_request_seed,
               "openai, triton-stream: send seed = hash(--seed, request index) with every request")
      ->group("Generation");
  app.add_option("--tokenizer", f.o.tokenizer_path,
                 "openai, triton-stream: SentencePiece model for the real-text prompts (default: "
                 "MODEL_REPOSITORY/MODEL/tokenizer.model)")
      ->group("Generation");
}

// The "Checks" group of --help: SLO and --verify.
void AddCheckFlags(CLI::App& app, Flags& f) {
  app.add_option("--slo", f.o.slo_path, "SLO YAML: PASS/FAIL verdicts and the exit code")->group("Checks");
  app.add_flag("--verify", f.o.verify, "send the reference set of each model and compare outputs")->group("Checks");
  app.add_option("--tolerance", f.o.tolerance, "--verify: largest allowed error, relative to the reference's largest |value| (absolute below 1)")->capture_default_str()
      ->group("Checks");
}

// The "Cost" group of --help: the instance price.
void AddCostFlags(CLI::App& app, Flags& f) {
  app.add_option("--pricing", f.o.pricing_path, "pricing YAML (deploy/pricing.yaml)")->group("Cost");
  app.add_option("--preset", f.o.preset, "preset in the pricing YAML, e.g. inf2.xlarge")->group("Cost");
  app.add_option("--hourly-usd", f.o.hourly_usd, "instance price instead of a preset")->check(CLI::PositiveNumber)
      ->group("Cost");
  app.add_option("--accelerators", f.o.accelerators, "accelerators of the instance (with --hourly-usd)")
      ->check(CLI::PositiveNumber)->group("Cost");
  app.add_option("--accelerators-used", f.o.accelerators_used, "accelerators the server holds (its share of the cost)")
      ->check(CLI::PositiveNumber)->group("Cost");
}

// The "Sweep" group of --help.
void AddSweepFlags(CLI::App& app, Flags& f) {
  app.add_option("--sweep", f.o.sweep.knob,
                 "raise 'concurrency' or 'rate' (or, for riva-streaming, 'streams') until the SLO breaks")
      ->check(CLI::IsMember({"concurrency", "rate", "streams"}))->group("Sweep");
  app.add_option("--sweep-levels", f.sweep_levels, "explicit levels, e.g. 1,2,4,8 (else start x factor^k)")
      ->group("Sweep");
  app.add_option("--sweep-factor", f.o.sweep.factor, "multiplier between levels")->capture_default_str()->group("Sweep");
  app.add_option("--sweep-steps", f.o.sweep.steps, "number of levels")->check(CLI::Range(1, 64))->capture_default_str()
      ->group("Sweep");
}

// The "Output" group of --help.
void AddOutputFlags(CLI::App& app, Flags& f) {
  app.add_option("--json", f.o.json_path, "write the JSON report here")->group("Output");
  app.add_option("--plot", f.o.svg_path, "write an SVG plot here (timeline, histogram, sweep curve)")->group("Output");
  app.add_option("--compare", f.compare, "print two JSON reports side by side (no load)")->expected(2)
      ->group("Output");
  app.add_flag("--dry-run", f.o.dry_run,
               "send nothing: draw -n requests (default 1000) and print how they fall into the model's buckets and "
               "the padding efficiency (buckets vs pad-to-max); --json writes it")
      ->group("Output");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error")->capture_default_str()->group("Output");
}

// The flags that need more than CLI11's checks, into the run's options; false (after saying why) when one is wrong.
bool FinishOptions(Flags& f) {
  absl::StatusOr<sluice::loadtest::Api> api = sluice::loadtest::ParseApi(f.api);
  if (!api.ok()) {
    std::cerr << api.status().message() << "\n";
    return false;
  }
  f.o.api = *api;
  for (absl::string_view part : absl::StrSplit(f.sweep_levels, ',', absl::SkipEmpty())) {
    double level = 0;
    if (!absl::SimpleAtod(part, &level)) {
      std::cerr << "--sweep-levels: '" << part << "' is not a number\n";
      return false;
    }
    f.o.sweep.levels.push_back(level);
  }
  f.o.run.progress = !f.no_progress;
  f.o.generation.ignore_eos = !f.no_ignore_eos;
  if (!f.temperature.empty()) {
    double t = 0;
    if (!absl::SimpleAtod(f.temperature, &t) || t < 0) {
      std::cerr << "--temperature: '" << f.temperature << "' is not a non-negative number\n";
      return false;
    }
    f.o.generation.temperature = t;
  }
  return true;
}

// --compare A B: the two JSON reports side by side.
int CompareReports(const std::vector<std::string>& files) {
  absl::StatusOr<std::string> table = sluice::loadtest::CompareReportFiles(files[0], files[1]);
  if (!table.ok()) {
    std::cerr << table.status().message() << "\n";
    return kExitUsage;
  }
  std::cout << *table;
  return 0;
}

// Everything is written and every client torn down by now. Skip static destruction: gRPC's background poller
// threads can still be inside the library while libtorch's exit handlers (linked in for --verify) run, which
// crashed the process at exit now and then (exit 139 after a complete run).
[[noreturn]] void ExitNow(int code) {
  std::cout.flush();
  std::cerr.flush();
  spdlog::shutdown();
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"sluice-loadtest: closed/open-loop load over KServe v2 gRPC or HTTP, Riva speech recognition "
               "(offline or streaming), or LLM generation (OpenAI streamed completions, Triton ModelStreamInfer), SLO "
               "verdicts, --verify against reference outputs, cost per success, /metrics scraping, sweeps, JSON/SVG "
               "reports, --compare"};
  app.set_help_all_flag("--help-all");
  app.footer("Exit codes: 0 done (every check passed), 1 an SLO verdict, a sweep or --verify failed, 2 bad arguments "
             "or files, 3 the server could not be used (unreachable, a model not served, or no measured request "
             "succeeded: the report names each error code's first message)");
  app.set_version_flag("--version", "sluice-loadtest " SLUICE_VERSION);

  AddTargetFlags(app, f);
  AddWorkloadFlags(app, f);
  AddLoadFlags(app, f);
  AddStreamingFlags(app, f);
  AddGenerationFlags(app, f);
  AddCheckFlags(app, f);
  AddCostFlags(app, f);
  AddSweepFlags(app, f);
  AddOutputFlags(app, f);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  spdlog::set_default_logger(spdlog::stderr_logger_st("sluice-loadtest"));
  spdlog::set_level(spdlog::level::from_str(f.log_level));

  if (!f.compare.empty()) return CompareReports(f.compare);
  if (f.o.model_mix.empty()) {
    std::cerr << "--model is required (or --compare A B)\n";
    return kExitUsage;
  }
  if (!FinishOptions(f)) return kExitUsage;
  ExitNow(sluice::loadtest::RunApp(std::move(f.o)));
}
