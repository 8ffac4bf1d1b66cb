#include "server/voice/voice_metrics.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/support/status.h"

namespace sluice::voice {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10};

const char* ApiName(VoiceApi api) {
  switch (api) {
    case VoiceApi::kOffline: return "offline";
    case VoiceApi::kStreaming: return "streaming";
    case VoiceApi::kOpenAi: return "openai";
  }
  return "offline";
}

}  // namespace

void VoiceMetrics::RateWindow::Add(absl::Time now, double seconds) {
  const int64_t second = absl::ToUnixSeconds(now);
  const size_t slot = static_cast<size_t>(second % 60);
  if (slot_second[slot] != second) {  // the slot last held a second that is now out of the window
    slot_second[slot] = second;
    seconds_in_slot[slot] = 0;
  }
  seconds_in_slot[slot] += seconds;
}

double VoiceMetrics::RateWindow::PerSecond(absl::Time now) const {
  const int64_t second = absl::ToUnixSeconds(now);
  double total = 0;
  for (size_t i = 0; i < 60; ++i) {
    if (second - slot_second[i] < 60) total += seconds_in_slot[i];
  }
  return total / 60.0;
}

VoiceMetrics::VoiceMetrics(ServerMetrics* metrics) : metrics_(metrics) {
  if (metrics_ == nullptr) return;
  prometheus::Registry& r = metrics_->registry();
  audio_family_ = &BuildCounter().Name("sluice_voice_audio_seconds_total")
                       .Help("Audio seconds received by the voice API").Register(r);
  processed_family_ = &BuildCounter().Name("sluice_voice_processed_audio_seconds_total")
                           .Help("Audio seconds whose transcript the voice API sent").Register(r);
  requests_family_ = &BuildCounter().Name("sluice_voice_requests_total")
                          .Help("Answered Recognize and OpenAI transcription calls and ended streams, by gRPC status code number").Register(r);
  streams_family_ = &BuildGauge().Name("sluice_voice_streams_active").Help("Open StreamingRecognize calls")
                         .Register(r);
  chunk_family_ = &BuildHistogram().Name("sluice_voice_chunk_latency_seconds")
                       .Help("Streaming: audio chunk received to the interim result covering it sent").Register(r);
  final_family_ = &BuildHistogram().Name("sluice_voice_final_latency_seconds")
                       .Help("Streaming: end of a segment's audio to its final result sent").Register(r);
  rtfx_family_ = &BuildGauge().Name("sluice_voice_realtime_factor")
                      .Help("RTFx: audio seconds processed per wall second over the last 60 s").Register(r);
  per_dollar_family_ = &BuildGauge().Name("sluice_voice_audio_seconds_per_dollar")
                            .Help("Client audio seconds the voice API transcribed (sluice_voice_processed_audio_seconds_total, each "
                                  "second once) / the model's sluice_cost_usd: what a caller's audio costs. Below "
                                  "sluice_audio_seconds_per_dollar by the windows' overlap and streaming context").Register(r);
  metrics_->AddRenderHook([this](absl::Time now) { Refresh(now); });
}

VoiceMetrics::ModelSeries* VoiceMetrics::Series(const ModelConfig& model) {
  auto [it, inserted] = models_.try_emplace(model.name);
  ModelSeries& s = it->second;
  if (!inserted) return &s;
  const prometheus::Labels labels = {{"model", model.name}};
  s.config = &model;
  for (VoiceApi api : {VoiceApi::kOffline, VoiceApi::kStreaming, VoiceApi::kOpenAi}) {
    const prometheus::Labels with_api = {{"model", model.name}, {"api", ApiName(api)}};
    s.audio[static_cast<int>(api)] = &audio_family_->Add(with_api);
    s.processed[static_cast<int>(api)] = &processed_family_->Add(with_api);
  }
  s.streams = &streams_family_->Add(labels);
  s.chunk_latency = &chunk_family_->Add(labels, kLatencyBuckets);
  s.final_latency = &final_family_->Add(labels, kLatencyBuckets);
  s.rtfx = &rtfx_family_->Add(labels);
  s.per_dollar = &per_dollar_family_->Add(labels);
  return &s;
}

void VoiceMetrics::RecordAudio(const ModelConfig& model, VoiceApi api, double seconds) {
  if (metrics_ == nullptr) return;
  MutexLock lock(&mu_);
  Series(model)->audio[static_cast<int>(api)]->Increment(seconds);
}

void VoiceMetrics::RecordProcessed(const ModelConfig& model, VoiceApi api, double seconds, absl::Time now) {
  if (metrics_ == nullptr) return;
  MutexLock lock(&mu_);
  ModelSeries* s = Series(model);
  s->processed[static_cast<int>(api)]->Increment(seconds);
  s->window.Add(now, seconds);
}

void VoiceMetrics::RecordAnswer(const ModelConfig& model, VoiceApi api, int grpc_code) {
  if (metrics_ == nullptr) return;
  MutexLock lock(&mu_);
  Series(model);
  requests_family_->Add({{"model", model.name}, {"api", ApiName(api)}, {"code", absl::StrCat(grpc_code)}})
      .Increment();
}

void VoiceMetrics::StreamOpened(const ModelConfig& model) {
  if (metrics_ == nullptr) return;
  MutexLock lock(&mu_);
  Series(model)->streams->Increment();
}

void VoiceMetrics::StreamClosed(const ModelConfig& model) {
  if (metrics_ == nullptr) return;
  MutexLock lock(&mu_);
  Series(model)->streams->Decrement();
}

void VoiceMetrics::RecordChunkLatency(const ModelConfig& model, absl::Duration latency) {
  if (metrics_ == nullptr) return;
  MutexLock lock(&mu_);
  Series(model)->chunk_latency->Observe(absl::ToDoubleSeconds(latency));
}

void VoiceMetrics::RecordFinalLatency(const ModelConfig& model, absl::Duration latency) {
  if (metrics_ == nullptr) return;
  MutexLock lock(&mu_);
  Series(model)->final_latency->Observe(absl::ToDoubleSeconds(latency));
}

void VoiceMetrics::Refresh(absl::Time now) {
  MutexLock lock(&mu_);
  for (auto& [name, s] : models_) {
    s.rtfx->Set(s.window.PerSecond(now));
    const double dollars = metrics_->ModelDollarsSoFar(*s.config, now);
    double processed = 0;
    for (prometheus::Counter* counter : s.processed) processed += counter->Value();
    s.per_dollar->Set(dollars > 0 ? processed / dollars : 0);
  }
}

}  // namespace sluice::voice
