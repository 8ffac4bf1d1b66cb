#include "loadtest/report/report_json.h"

#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "loadtest/core/json_writer.h"
#include "loadtest/core/text_file.h"

namespace sluice::loadtest {
namespace {

using Writer = JsonWriter;

void Key(Writer& w, const char* key) { w.Key(key); }
void Num(Writer& w, const char* key, double v) {
  w.Key(key);
  if (std::isfinite(v)) {
    w.Double(v);
  } else {
    w.Null();  // JSON has no infinity
  }
}
void Int(Writer& w, const char* key, int64_t v) {
  w.Key(key);
  w.Int64(v);
}
void Str(Writer& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}
void Bool(Writer& w, const char* key, bool v) {
  w.Key(key);
  w.Bool(v);
}
void Opt(Writer& w, const char* key, const std::optional<double>& v) {
  if (v) Num(w, key, *v);
}

void WriteLatency(Writer& w, const LatencyStats& l, const char* key = "latency_ms") {
  Key(w, key);
  w.StartObject();
  Int(w, "count", l.count);
  Num(w, "mean", l.mean_ms);
  Num(w, "min", l.min_ms);
  Num(w, "p50", l.p50_ms);
  Num(w, "p90", l.p90_ms);
  Num(w, "p95", l.p95_ms);
  Num(w, "p99", l.p99_ms);
  Num(w, "max", l.max_ms);
  w.EndObject();
}

// results.speech: the Riva APIs' figures (absent for KServe runs).
void WriteSpeech(Writer& w, const SpeechStats& s) {
  Key(w, "speech");
  w.StartObject();
  Str(w, "api", std::string(ApiName(s.api)));
  Num(w, "audio_seconds", s.audio_seconds);
  Num(w, "rtfx", s.rtfx);
  if (s.api == Api::kRivaStreaming) {
    Int(w, "streams", s.streams);
    Num(w, "chunk_ms", s.chunk_ms);
    Bool(w, "realtime", s.realtime);
    Int(w, "chunks", s.chunks);
    Int(w, "chunks_unanswered", s.chunks_unanswered);
    WriteLatency(w, s.chunk_latency, "chunk_latency_ms");
    WriteLatency(w, s.final_latency, "final_latency_ms");
    WriteLatency(w, s.first_result, "first_result_ms");
  }
  if (s.wer) {
    Key(w, "wer");
    w.StartObject();
    Num(w, "wer", s.wer->wer);
    Int(w, "scored", s.wer->scored);
    Int(w, "reference_words", s.wer->errors.reference_words);
    Int(w, "errors", s.wer->errors.errors());
    Int(w, "substitutions", s.wer->errors.substitutions);
    Int(w, "insertions", s.wer->errors.insertions);
    Int(w, "deletions", s.wer->errors.deletions);
    w.EndObject();
  }
  w.EndObject();
}

// results.generation: the generation API's figures (absent otherwise).
void WriteGeneration(Writer& w, const GenerationStats& g) {
  Key(w, "generation");
  w.StartObject();
  Str(w, "api", std::string(ApiName(g.api)));
  Str(w, "prompt_source", g.prompt_source);
  Str(w, "token_counts", g.token_counts);
  Int(w, "requests", g.requests);
  Int(w, "prompt_tokens", g.prompt_tokens);
  Int(w, "output_tokens", g.output_tokens);
  Num(w, "prompt_tokens_per_s", g.prompt_tokens_per_s);
  Num(w, "output_tokens_per_s", g.output_tokens_per_s);
  Num(w, "mean_prompt_tokens", g.mean_prompt_tokens);
  Num(w, "mean_output_tokens", g.mean_output_tokens);
  WriteLatency(w, g.ttft, "ttft_ms");
  WriteLatency(w, g.itl, "itl_ms");
  WriteLatency(w, g.tpot, "tpot_ms");
  WriteLatency(w, g.e2e, "e2e_ms");
  Int(w, "good", g.good);
  Num(w, "goodput_rps", g.goodput_rps);
  Int(w, "usage_mismatches", g.usage_mismatches);
  Int(w, "merged_chunks", g.merged_chunks);
  Key(w, "output_tokens_timeline");
  w.StartArray();
  for (double v : g.output_tokens_timeline) w.Double(v);
  w.EndArray();
  w.EndObject();
}

void WriteHistogram(Writer& w, const char* key, const Histogram& h) {
  Key(w, key);
  w.StartObject();
  Key(w, "edges_ms");
  w.StartArray();
  for (double e : h.edges_ms) w.Double(e);
  w.EndArray();
  Key(w, "counts");
  w.StartArray();
  for (int64_t c : h.counts) w.Int64(c);
  w.EndArray();
  w.EndObject();
}

void WriteThroughput(Writer& w, const ThroughputStats& t, const std::optional<SpeechStats>& speech = std::nullopt,
                     const std::optional<GenerationStats>& generation = std::nullopt) {
  w.StartObject();
  if (!t.model.empty()) Str(w, "model", t.model);
  Int(w, "requests", t.requests);
  Int(w, "ok", t.ok);
  Int(w, "errors", t.errors);
  Key(w, "errors_by_code");
  w.StartObject();
  for (const auto& [code, n] : t.errors_by_code) Int(w, code.c_str(), n);
  w.EndObject();
  if (!t.first_error_by_code.empty()) {
    Key(w, "first_error_messages");
    w.StartObject();
    for (const auto& [code, message] : t.first_error_by_code) Str(w, code.c_str(), message);
    w.EndObject();
  }
  Num(w, "error_rate", t.error_rate);
  Num(w, "req_per_s", t.req_per_s);
  Int(w, "good", t.good);
  Num(w, "goodput_rps", t.goodput_rps);
  Num(w, "audio_seconds", t.audio_seconds);
  Num(w, "audio_s_per_s", t.audio_s_per_s);
  Int(w, "tokens", t.tokens);
  Num(w, "tokens_per_s", t.tokens_per_s);
  WriteLatency(w, t.latency);
  if (speech) WriteSpeech(w, *speech);
  if (generation) WriteGeneration(w, *generation);
  w.EndObject();
}

void WriteVerdicts(Writer& w, const std::vector<Verdict>& verdicts) {
  w.StartArray();
  for (const Verdict& v : verdicts) {
    w.StartObject();
    Str(w, "name", v.name);
    Str(w, "op", v.op);
    Num(w, "threshold", v.threshold);
    Num(w, "actual", v.actual);
    Bool(w, "pass", v.pass);
    if (v.no_samples) Bool(w, "no_samples", true);
    w.EndObject();
  }
  w.EndArray();
}

void WriteRun(Writer& w, const RunSummary& s) {
  Key(w, "run");
  w.StartObject();
  Str(w, "mode", s.mode);
  Int(w, "concurrency", s.concurrency);
  Num(w, "rate", s.rate);
  if (!s.arrival.empty()) {
    Str(w, "arrival", s.arrival);
    Num(w, "burstiness", s.burstiness);
  }
  Num(w, "window_s", s.window_s);
  Num(w, "wall_s", s.wall_s);
  Num(w, "max_send_lag_ms", s.max_send_lag_ms);
  Str(w, "stop_reason", s.stop_reason);
  Bool(w, "capped", s.capped);
  w.EndObject();
  Key(w, "results");
  WriteThroughput(w, s.total, s.speech, s.generation);
  Key(w, "per_model");
  w.StartArray();
  for (const ThroughputStats& m : s.per_model) WriteThroughput(w, m);
  w.EndArray();
}

void WriteServer(Writer& w, const ServerMetrics& m) {
  Key(w, "server");
  w.StartObject();
  Key(w, "model_stats");
  w.StartArray();
  for (const ModelServerStats& s : m.model_stats) {
    w.StartObject();
    Str(w, "model", s.model);
    Int(w, "inferences", s.inferences);
    Int(w, "executions", s.executions);
    Num(w, "queue_ms_mean", s.queue_ms_mean);
    Num(w, "compute_ms_mean", s.compute_ms_mean);
    Num(w, "server_ms_mean", s.server_ms_mean);
    Num(w, "rows_per_execution", s.rows_per_execution);
    Opt(w, "client_minus_server_ms", s.client_minus_server_ms);
    w.EndObject();
  }
  w.EndArray();
  Bool(w, "metrics_scraped", m.metrics_scraped);
  if (!m.metrics_error.empty()) Str(w, "metrics_error", m.metrics_error);
  Opt(w, "queue_ms_mean", m.queue_ms_mean);
  Opt(w, "compute_ms_mean", m.compute_ms_mean);
  Opt(w, "server_latency_ms_mean", m.server_latency_ms_mean);
  Opt(w, "batch_size_mean", m.batch_size_mean);
  Opt(w, "peak_rss_bytes", m.peak_rss_bytes);
  if (m.peak_rss_bytes) Str(w, "peak_rss_source", m.peak_rss_source);
  Opt(w, "load_seconds", m.load_seconds);
  Opt(w, "warm_seconds", m.warm_seconds);
  if (!m.padding_efficiency.empty()) {
    Key(w, "padding_efficiency");
    w.StartObject();
    for (const auto& [model, v] : m.padding_efficiency) Num(w, model.c_str(), v);
    w.EndObject();
  }
  if (!m.generation.empty()) {
    Key(w, "generation");
    w.StartObject();
    for (const auto& [key, v] : m.generation) Num(w, key.c_str(), v);
    w.EndObject();
  }
  if (!m.cost_gauges.empty()) {
    Key(w, "cost_gauges");
    w.StartObject();
    for (const auto& [name, v] : m.cost_gauges) Num(w, name.c_str(), v);
    w.EndObject();
  }
  Key(w, "sluice_series");
  w.StartArray();
  for (const std::string& name : m.sluice_series) w.String(name.c_str());
  w.EndArray();
  w.EndObject();
}

// "config": what was run against what.
void WriteConfig(Writer& w, const Report& r) {
  Key(w, "config");
  w.StartObject();
  Str(w, "target", r.target);
  Str(w, "api", std::string(ApiName(r.api)));
  Int(w, "seed", static_cast<int64_t>(r.seed));
  Num(w, "duration_s", r.options.duration_s);
  Int(w, "requests", r.options.requests);
  Num(w, "warmup_s", r.options.warmup_s);
  Int(w, "warmup_requests", r.options.warmup_requests);
  Num(w, "timeout_ms", r.options.timeout_ms);
  Int(w, "max_requests", r.options.max_requests);
  Num(w, "max_duration_s", r.options.max_duration_s);
  Key(w, "models");
  w.StartArray();
  for (const ModelDescription& m : r.models) {
    w.StartObject();
    Str(w, "name", m.name);
    Str(w, "kind", m.kind);
    Num(w, "weight", m.weight);
    Str(w, "profile", m.profile);
    Int(w, "max_length", m.max_length);
    if (m.sample_rate > 0) {
      Int(w, "sample_rate", m.sample_rate);
      Bool(w, "sample_rate_assumed", m.sample_rate_assumed);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

// "slo": the verdicts (with --slo).
void WriteSlo(Writer& w, const Report& r) {
  if (!r.slo) return;
  Key(w, "slo");
  w.StartObject();
  Bool(w, "pass", AllPass(r.verdicts));
  Key(w, "verdicts");
  WriteVerdicts(w, r.verdicts);
  w.EndObject();
}

// "cost": the price and the cost figures (with --pricing/--preset or --hourly-usd).
void WriteCost(Writer& w, const Report& r) {
  if (!(r.pricing && r.cost)) return;
  Key(w, "cost");
  w.StartObject();
  if (!r.pricing->preset.empty()) Str(w, "preset", r.pricing->preset);
  Num(w, "hourly_usd", r.pricing->hourly_usd);
  Int(w, "accelerators", r.pricing->accelerators);
  Int(w, "accelerators_used", r.pricing->accelerators_used > 0 ? r.pricing->accelerators_used
                                                                 : r.pricing->accelerators);
  Num(w, "share", r.pricing->share());
  if (!r.pricing->source.empty()) Str(w, "source", r.pricing->source);
  if (!r.pricing->date.empty()) Str(w, "date", r.pricing->date);
  Bool(w, "unverified", r.pricing->unverified);
  Num(w, "dollars", r.cost->dollars);
  Num(w, "usd_per_1k_success", r.cost->usd_per_1k_success);
  Num(w, "audio_seconds_per_dollar", r.cost->audio_seconds_per_dollar);
  Num(w, "tokens_per_dollar", r.cost->tokens_per_dollar);
  Num(w, "prompt_tokens_per_dollar", r.cost->prompt_tokens_per_dollar);
  Num(w, "output_tokens_per_dollar", r.cost->output_tokens_per_dollar);
  w.EndObject();
}

// "verify": one entry per model checked against its reference set (with --verify).
void WriteVerify(Writer& w, const std::vector<VerifyReport>& reports) {
  if (reports.empty()) return;
  Key(w, "verify");
  w.StartArray();
  for (const VerifyReport& v : reports) {
    w.StartObject();
    Str(w, "model", v.model);
    Num(w, "tolerance", v.tolerance);
    Int(w, "cases", v.cases);
    Int(w, "mismatched_cases", v.mismatched_cases);
    Int(w, "failed_calls", v.failed_calls);
    Int(w, "mismatched_elements", v.mismatched_elements);
    Num(w, "max_abs_error", v.max_abs_error);
    Bool(w, "pass", v.ok());
    Key(w, "failures");
    w.StartArray();
    for (const std::string& f : v.failures) w.String(f.c_str());
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

// "timeline": the run's per-second counts and latency percentiles.
void WriteTimeline(Writer& w, const std::vector<TimelinePoint>& timeline) {
  Key(w, "timeline");
  w.StartArray();
  for (const TimelinePoint& p : timeline) {
    w.StartObject();
    Num(w, "t_s", p.t_s);
    Int(w, "ok", p.ok);
    Int(w, "errors", p.errors);
    Num(w, "p50_ms", p.p50_ms);
    Num(w, "p95_ms", p.p95_ms);
    Num(w, "p99_ms", p.p99_ms);
    w.EndObject();
  }
  w.EndArray();
}

// "sweep": every step and the best passing one (with --sweep).
void WriteSweep(Writer& w, const Report& r) {
  if (r.sweep.empty()) return;
  Key(w, "sweep");
  w.StartObject();
  Str(w, "knob", r.sweep.front().knob);
  if (r.sweep_best) {
    Num(w, "best_level", r.sweep[*r.sweep_best].level);
    Num(w, "best_req_per_s", r.sweep[*r.sweep_best].summary.total.req_per_s);
    if (const auto& speech = r.sweep[*r.sweep_best].summary.speech) Num(w, "best_rtfx", speech->rtfx);
  }
  Key(w, "steps");
  w.StartArray();
  for (const SweepStep& s : r.sweep) {
    w.StartObject();
    Num(w, "level", s.level);
    Bool(w, "pass", s.pass);
    Num(w, "req_per_s", s.summary.total.req_per_s);
    Num(w, "goodput_rps", s.summary.total.goodput_rps);
    Num(w, "audio_s_per_s", s.summary.total.audio_s_per_s);
    Num(w, "error_rate", s.summary.total.error_rate);
    WriteLatency(w, s.summary.total.latency);
    if (s.summary.speech) WriteSpeech(w, *s.summary.speech);
    if (s.summary.generation) WriteGeneration(w, *s.summary.generation);
    Key(w, "verdicts");
    WriteVerdicts(w, s.verdicts);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string ReportToJson(const Report& r) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.SetMaxDecimalPlaces(6);
  w.StartObject();
  Str(w, "schema", "sluice-loadtest/1");
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  Str(w, "created", when);
  WriteConfig(w, r);
  WriteRun(w, r.summary);
  WriteSlo(w, r);
  WriteCost(w, r);
  if (r.server) WriteServer(w, *r.server);
  WriteVerify(w, r.verify);
  WriteTimeline(w, r.timeline);
  WriteHistogram(w, "histogram", r.histogram);
  if (r.summary.generation) {
    WriteHistogram(w, "ttft_histogram", r.ttft_histogram);
    WriteHistogram(w, "itl_histogram", r.itl_histogram);
  }
  WriteSweep(w, r);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

absl::Status WriteReportJson(const Report& report, const std::string& path) {
  return WriteTextFile(path, ReportToJson(report) + "\n");
}

}  // namespace sluice::loadtest
