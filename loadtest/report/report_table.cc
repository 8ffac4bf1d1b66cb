#include "loadtest/report/report_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <map>

namespace sluice::loadtest {
namespace {

// A latency figure, or n/a when nothing was measured (0 would read as "instant").
std::string Ms(const LatencyStats& l, double v) { return l.count > 0 ? absl::StrFormat("%.1f", v) : "n/a"; }

std::string Row(const std::string& name, const std::string& share, const ThroughputStats& t) {
  const LatencyStats& l = t.latency;
  const std::string audio = t.audio_seconds > 0 ? absl::StrFormat("%.2f", t.audio_s_per_s) : "-";
  return absl::StrFormat("%-14s %5s %8d %8d %6d %9.2f %9s %8s %8s %8s %8s %8s %9.2f\n", name, share, t.requests,
                         t.ok, t.errors, t.req_per_s, audio, Ms(l, l.p50_ms), Ms(l, l.p90_ms), Ms(l, l.p95_ms),
                         Ms(l, l.p99_ms), Ms(l, l.max_ms), t.goodput_rps);
}

std::string OptMs(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.2f ms", *v) : std::string("not reported");
}

std::string RunLine(const RunSummary& s) {
  std::string mode = s.mode == "closed"
                         ? absl::StrCat("closed loop, concurrency ", s.concurrency)
                         : absl::StrFormat("open loop, %.4g req/s %s%s", s.rate, s.arrival,
                                           s.arrival == "gamma" ? absl::StrFormat(" (burstiness %.3g)", s.burstiness)
                                                                : std::string());
  if (s.speech && s.speech->api == Api::kRivaStreaming) {
    mode = absl::StrFormat("Riva StreamingRecognize, %d streams, %.4g ms chunks %s", s.speech->streams,
                           s.speech->chunk_ms, s.speech->realtime ? "at real time" : "as fast as flow control allows");
  } else if (s.speech) {
    mode = absl::StrCat(s.speech->api == Api::kOpenAiAudio ? "OpenAI /v1/audio/transcriptions, " : "Riva Recognize, ",
                        mode);
  }
  return absl::StrFormat("%s; measured window %.2f s (run %.2f s, stopped by %s%s)", mode, s.window_s, s.wall_s,
                         s.stop_reason, s.capped ? ", CAPPED" : "");
}

std::string LatencyRow(const std::string& name, const LatencyStats& l) {
  return absl::StrFormat("  %-14s %8d %8s %8s %8s %8s %8s %8s\n", name, l.count, Ms(l, l.mean_ms), Ms(l, l.p50_ms),
                         Ms(l, l.p90_ms), Ms(l, l.p95_ms), Ms(l, l.p99_ms), Ms(l, l.max_ms));
}

// The speech APIs' figures: audio, RTFx, the streaming latencies and WER.
std::string SpeechSection(const SpeechStats& s) {
  std::string out = absl::StrFormat("speech (%s): %.1f s of audio sent and transcribed, RTFx %.2f (audio seconds "
                                    "per wall second of the window)\n",
                                    ApiName(s.api), s.audio_seconds, s.rtfx);
  if (s.api == Api::kRivaStreaming) {
    absl::StrAppend(&out, "  (a request above is one whole stream: its latency is the stream's duration)\n",
                    absl::StrFormat("  %-14s %8s %8s %8s %8s %8s %8s %8s\n", "latency ms", "count", "mean", "p50",
                                    "p90", "p95", "p99", "max"),
                    LatencyRow("chunk", s.chunk_latency), LatencyRow("final", s.final_latency),
                    LatencyRow("first result", s.first_result));
    absl::StrAppend(&out, absl::StrFormat("  chunks: %d sent by the successful streams, %d never covered by a result\n",
                                          s.chunks, s.chunks_unanswered));
  }
  if (s.wer) {
    const WordErrors& e = s.wer->errors;
    absl::StrAppend(&out, absl::StrFormat("  WER %.2f %% (%d errors / %d reference words: %d substitutions, %d "
                                          "insertions, %d deletions; %d transcripts scored)\n",
                                          100 * s.wer->wer, e.errors(), e.reference_words, e.substitutions,
                                          e.insertions, e.deletions, s.wer->scored));
  }
  return out;
}

// The generation API's figures: token counts, tokens/s, TTFT / ITL / TPOT / e2e, goodput, usage checks.
std::string GenerationSection(const GenerationStats& g) {
  std::string out = absl::StrFormat("generation (%s; prompts: %s):\n", ApiName(g.api), g.prompt_source);
  absl::StrAppend(&out, absl::StrFormat("  tokens (%s): %d prompt (%.1f per request), %d output (%.1f per request); "
                                        "%.1f output tokens/s, %.1f prompt tokens/s\n",
                                        g.token_counts, g.prompt_tokens, g.mean_prompt_tokens, g.output_tokens,
                                        g.mean_output_tokens, g.output_tokens_per_s, g.prompt_tokens_per_s));
  absl::StrAppend(&out, absl::StrFormat("  %-14s %8s %8s %8s %8s %8s %8s %8s\n", "latency ms", "count", "mean", "p50",
                                        "p90", "p95", "p99", "max"),
                  LatencyRow("TTFT", g.ttft), LatencyRow("ITL (gaps)", g.itl), LatencyRow("TPOT", g.tpot),
                  LatencyRow("e2e", g.e2e));
  absl::StrAppend(&out, absl::StrFormat("  goodput %.2f req/s (%d of %d successful requests met the per-request "
                                        "SLO); usage mismatches %d; requests streamed in fewer chunks than tokens %d\n",
                                        g.goodput_rps, g.good, g.requests, g.usage_mismatches, g.merged_chunks));
  return out;
}

// The server's sluice_generation_* figures over the run.
std::string ServerGenerationLine(const std::map<std::string, double>& m) {
  auto get = [&](const char* key, int digits) {
    auto it = m.find(key);
    return it == m.end() ? std::string("n/a") : absl::StrFormat("%.*f", digits, it->second);
  };

  return absl::StrCat("server /metrics (generation): ", get("requests", 0), " requests (", get("requests_ok", 0),
                      " ok), ", get("output_tokens", 0), " output tokens; means: queue ", get("queue_ms_mean", 2),
                      " ms, TTFT ", get("ttft_ms_mean", 2), " ms, ITL ", get("itl_ms_mean", 2), " ms, e2e ",
                      get("e2e_ms_mean", 1), " ms, decode batch ", get("decode_batch_mean", 2),
                      "; peaks: running ", get("running_peak", 0), ", waiting ", get("waiting_peak", 0),
                      ", KV slots in use ", get("kv_slots_in_use_peak", 0), " of ", get("kv_slots", 0), "\n");
}

std::string SweepTable(const Report& r) {
  const std::string& knob = r.sweep.front().knob;
  std::string out = absl::StrCat("\nsweep over ", knob, ":\n");
  if (knob == "streams") {
    absl::StrAppend(&out, absl::StrFormat("%10s %8s %9s %9s %9s %8s  %s\n", knob, "RTFx", "chunk p50", "chunk p95",
                                          "chunk p99", "errors", "SLO"));
  } else if (r.summary.generation) {
    absl::StrAppend(&out, absl::StrFormat("%10s %9s %9s %9s %10s %10s %8s  %s\n", knob, "req/s", "goodput/s", "out tok/s",
                                          "TTFT p99", "TPOT p99", "errors", "SLO"));
  } else {
    absl::StrAppend(&out, absl::StrFormat("%10s %9s %9s %8s %8s %8s  %s\n", knob, "req/s", "goodput/s", "p50 ms",
                                          "p99 ms", "errors", "SLO"));
  }
  for (size_t i = 0; i < r.sweep.size(); ++i) {
    const SweepStep& st = r.sweep[i];
    const ThroughputStats& t = st.summary.total;
    const std::string verdict = absl::StrCat(st.pass ? "PASS" : "FAIL", r.sweep_best == i ? "  <- best" : "");
    if (knob == "streams") {
      const SpeechStats speech = st.summary.speech.value_or(SpeechStats());
      const LatencyStats& c = speech.chunk_latency;
      absl::StrAppend(&out, absl::StrFormat("%10.4g %8.2f %9s %9s %9s %8d  %s\n", st.level, speech.rtfx,
                                            Ms(c, c.p50_ms), Ms(c, c.p95_ms), Ms(c, c.p99_ms), t.errors, verdict));
    } else if (st.summary.generation) {
      const GenerationStats& g = *st.summary.generation;
      absl::StrAppend(&out, absl::StrFormat("%10.4g %9.2f %9.2f %9.1f %10s %10s %8d  %s\n", st.level, t.req_per_s,
                                            t.goodput_rps, g.output_tokens_per_s, Ms(g.ttft, g.ttft.p99_ms),
                                            Ms(g.tpot, g.tpot.p99_ms), t.errors, verdict));
    } else {
      absl::StrAppend(&out, absl::StrFormat("%10.4g %9.2f %9.2f %8s %8s %8d  %s\n", st.level, t.req_per_s,
                                            t.goodput_rps, Ms(t.latency, t.latency.p50_ms),
                                            Ms(t.latency, t.latency.p99_ms), t.errors, verdict));
    }
  }
  if (!r.sweep_best) return absl::StrCat(out, "no sweep step met the SLO\n");
  const SweepStep& best = r.sweep[*r.sweep_best];
  if (knob == "streams") {
    return absl::StrCat(out, absl::StrFormat("most streams meeting the SLO: %.4g (RTFx %.2f, chunk latency p95 %.1f "
                                             "ms)\n",
                                             best.level, best.summary.speech ? best.summary.speech->rtfx : 0.0,
                                             best.summary.speech ? best.summary.speech->chunk_latency.p95_ms : 0.0));
  }
  return absl::StrCat(out, absl::StrFormat("highest throughput meeting the SLO: %.2f req/s at %s %.4g\n",
                                           best.summary.total.req_per_s, knob, best.level));
}

}  // namespace

std::string FormatBytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return absl::StrFormat("%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return absl::StrFormat("%.1f MiB", bytes / (1024.0 * 1024));
  return absl::StrFormat("%.0f KiB", bytes / 1024.0);
}

std::string FormatVerify(const std::vector<VerifyReport>& verify) {
  std::string out;
  for (const VerifyReport& v : verify) {
    if (v.generation) {
      absl::StrAppend(&out, absl::StrFormat("verify %s: %s  %d greedy cases compared token for token, %d mismatched "
                                            "(%d failed calls), %d reference tokens from the first mismatches on\n",
                                            v.model, v.ok() ? "PASS" : "FAIL", v.cases, v.mismatched_cases,
                                            v.failed_calls, v.mismatched_elements));
      for (const std::string& f : v.failures) absl::StrAppend(&out, "  ", f, "\n");
      continue;
    }
    absl::StrAppend(&out, absl::StrFormat("verify %s: %s  %d cases, %d mismatched (%d failed calls), %d elements "
                                          "over %.0e, max abs error %.3g\n",
                                          v.model, v.ok() ? "PASS" : "FAIL", v.cases, v.mismatched_cases,
                                          v.failed_calls, v.mismatched_elements, v.tolerance, v.max_abs_error));
    for (const std::string& f : v.failures) absl::StrAppend(&out, "  ", f, "\n");
  }
  return out;
}

namespace {

// The run line, the sweep note, one line per model and the client's send lag.
std::string HeaderLines(const Report& r) {
  std::string out;
  const RunSummary& s = r.summary;
  absl::StrAppend(&out, "sluice-loadtest ", r.target, ": ", RunLine(s), "\n");
  if (!r.sweep.empty()) absl::StrAppend(&out, "  (the sweep's best passing step, else its last; every step below)\n");
  for (const ModelDescription& m : r.models) {
    absl::StrAppend(&out, absl::StrFormat("  %-12s %-8s share %.2f  lengths %s (max %d%s)\n", m.name, m.kind, m.weight,
                                          m.profile, m.max_length,
                                          m.sample_rate > 0 ? absl::StrFormat(" samples at %d Hz%s", m.sample_rate,
                                                                              m.sample_rate_assumed ? ", assumed" : "")
                                                            : std::string()));
  }
  if (s.mode == "open" && s.max_send_lag_ms > 10) {
    absl::StrAppend(&out, absl::StrFormat("  note: the client sent up to %.1f ms late (latency counts from the "
                                          "scheduled time)\n", s.max_send_lag_ms));
  }
  return out;
}

// The throughput and latency table: one row per model of a mix, then the total.
std::string ThroughputTable(const Report& r) {
  std::string out;
  const RunSummary& s = r.summary;
  absl::StrAppend(&out, "\n", absl::StrFormat("%-14s %5s %8s %8s %6s %9s %9s %8s %8s %8s %8s %8s %9s\n", "model",
                                               "share", "requests", "ok", "errors", "req/s", "audio-s/s", "p50 ms",
                                               "p90 ms", "p95 ms", "p99 ms", "max ms", "goodput/s"));
  if (s.per_model.size() > 1) {
    for (size_t i = 0; i < s.per_model.size(); ++i) {
      absl::StrAppend(&out, Row(s.per_model[i].model, absl::StrFormat("%.2f", r.models[i].weight), s.per_model[i]));
    }
  }
  absl::StrAppend(&out, Row(s.per_model.size() > 1 ? "total" : s.per_model.front().model, "", s.total));
  return out;
}

// The error counts by code and each code's first message.
std::string ErrorLines(const ThroughputStats& total) {
  std::string out;
  if (total.errors_by_code.empty()) return out;
  std::vector<std::string> parts;
  for (const auto& [code, n] : total.errors_by_code) parts.push_back(absl::StrCat(code, " ", n));
  absl::StrAppend(&out, absl::StrFormat("errors by code: %s (error rate %.4f)\n", absl::StrJoin(parts, ", "),
                                        total.error_rate));
  for (const auto& [code, message] : total.first_error_by_code) {
    absl::StrAppend(&out, "  first ", code, ": ", message.empty() ? "(no message)" : message, "\n");
  }
  return out;
}

// The cost line (with a price).
std::string CostLine(const Report& r) {
  std::string out;
  if (!r.pricing || !r.cost) return out;
  const Pricing& p = *r.pricing;
  absl::StrAppend(&out, absl::StrFormat(
      "cost (%s%.5g $/h x share %.3g%s): $%.4g for the window; $%.4g per 1k successful inferences",
      p.preset.empty() ? std::string() : p.preset + ", ", p.hourly_usd, p.share(),
      p.unverified ? ", UNVERIFIED price" : "", r.cost->dollars, r.cost->usd_per_1k_success));
  if (r.cost->audio_seconds_per_dollar > 0) {
    absl::StrAppend(&out, absl::StrFormat("; %.0f audio-seconds per $", r.cost->audio_seconds_per_dollar));
  }
  if (r.cost->output_tokens_per_dollar > 0) {
    absl::StrAppend(&out, absl::StrFormat("; %.0f prompt tokens per $, %.0f output tokens per $",
                                          r.cost->prompt_tokens_per_dollar, r.cost->output_tokens_per_dollar));
  }
  if (r.cost->tokens_per_dollar > 0) {
    absl::StrAppend(&out, absl::StrFormat("; %.0f tokens per $", r.cost->tokens_per_dollar));
  }
  absl::StrAppend(&out, "\n");
  return out;
}

// The server's ModelStatistics per model, and the client's mean latency minus the server's.
std::string ServerStatisticsLines(const Report& r) {
  std::string out;
  const ServerMetrics& m = *r.server;
  if (!r.sweep.empty()) absl::StrAppend(&out, "server figures span the whole sweep:\n");
  for (const ModelServerStats& st : m.model_stats) {
    absl::StrAppend(&out, absl::StrFormat("server %s (ModelStatistics): %d rows in %d executions (%.2f rows each); "
                                          "per row: queue %.2f ms, compute %.2f ms, server total %.2f ms\n",
                                          st.model, st.inferences, st.executions, st.rows_per_execution,
                                          st.queue_ms_mean, st.compute_ms_mean, st.server_ms_mean));
    if (st.client_minus_server_ms) {
      absl::StrAppend(&out, absl::StrFormat("  client mean - server mean: %.2f ms (transport, serialisation, "
                                            "client)\n",
                                            *st.client_minus_server_ms));
    }
  }
  return out;
}

// What the server's /metrics said over the run (or why it was not read).
std::string ServerMetricsLines(const Report& r) {
  std::string out;
  const ServerMetrics& m = *r.server;
  const RunSummary& s = r.summary;
  if (m.metrics_scraped && s.generation) {
    // A generation model has no dynamic batcher or length buckets: its figures are the sluice_generation_* line.
    absl::StrAppend(&out, "server peak RSS: ",
                    m.peak_rss_bytes ? absl::StrCat(FormatBytes(*m.peak_rss_bytes), " (", m.peak_rss_source, ")")
                                     : "not reported",
                    "\n");
    if (!m.generation.empty()) absl::StrAppend(&out, ServerGenerationLine(m.generation));
  } else if (m.metrics_scraped) {
    absl::StrAppend(&out, "server /metrics (means over the run): queue wait ", OptMs(m.queue_ms_mean),
                    " per request, request ", OptMs(m.server_latency_ms_mean), ", batch compute ",
                    OptMs(m.compute_ms_mean), " per batch, batch size ",
                    m.batch_size_mean ? absl::StrFormat("%.2f", *m.batch_size_mean) : "not reported", "\n");
    absl::StrAppend(&out, "server peak RSS: ",
                    m.peak_rss_bytes ? absl::StrCat(FormatBytes(*m.peak_rss_bytes), " (", m.peak_rss_source, ")")
                                     : "not reported",
                    "; load ", m.load_seconds ? absl::StrFormat("%.2f s", *m.load_seconds) : "not reported",
                    ", warm ", m.warm_seconds ? absl::StrFormat("%.2f s", *m.warm_seconds) : "not reported",
                    " (sums over buckets)\n");
    for (const auto& [model, v] : m.padding_efficiency) {
      absl::StrAppend(&out, absl::StrFormat("server padding efficiency %s: %.3f (real / computed input steps)\n",
                                            model, v));
    }
  } else {
    if (!m.metrics_error.empty()) absl::StrAppend(&out, "server /metrics: not read: ", m.metrics_error, "\n");
    if (m.peak_rss_bytes) {
      absl::StrAppend(&out, "server peak RSS: ", FormatBytes(*m.peak_rss_bytes), " (", m.peak_rss_source, ")\n");
    }
  }
  return out;
}

// The SLO verdicts (with --slo).
std::string SloLines(const Report& r) {
  std::string out;
  if (!r.slo) return out;
  absl::StrAppend(&out, "\nSLO:\n");
  for (const Verdict& v : r.verdicts) absl::StrAppend(&out, "  ", FormatVerdict(v), "\n");
  absl::StrAppend(&out, AllPass(r.verdicts) ? "SLO PASS\n" : "SLO FAIL\n");
  return out;
}

}  // namespace

std::string FormatReport(const Report& r) {
  const RunSummary& s = r.summary;
  std::string out = absl::StrCat(HeaderLines(r), ThroughputTable(r), ErrorLines(s.total));
  if (s.total.audio_seconds > 0 && !s.speech) {
    absl::StrAppend(&out, absl::StrFormat("audio: %.1f s served, RTFx %.2f (audio seconds per wall second)\n",
                                          s.total.audio_seconds, s.total.audio_s_per_s));
  }
  if (s.speech) absl::StrAppend(&out, SpeechSection(*s.speech));
  if (s.generation) absl::StrAppend(&out, GenerationSection(*s.generation));
  if (s.total.tokens > 0) {
    absl::StrAppend(&out, absl::StrFormat("tokens: %d served, %.1f tokens/s\n", s.total.tokens, s.total.tokens_per_s));
  }
  absl::StrAppend(&out, CostLine(r));
  if (r.server) absl::StrAppend(&out, ServerStatisticsLines(r), ServerMetricsLines(r));
  absl::StrAppend(&out, FormatVerify(r.verify));
  if (!r.sweep.empty()) absl::StrAppend(&out, SweepTable(r));
  absl::StrAppend(&out, SloLines(r));
  return out;
}

}  // namespace sluice::loadtest
