// The voice API's Prometheus series, per speech model, beside the model's own (sluice_request_*, which count
// every window the voice API runs):
//   sluice_voice_audio_seconds_total{model,api}   audio received (api: offline | streaming | openai)
//   sluice_voice_processed_audio_seconds_total{model,api}  audio whose transcript was sent
//   sluice_voice_requests_total{model,api,code}   answered calls / ended streams by gRPC code number
//                                                 (OpenAI's answers too: the same numbers, whatever the HTTP status)
//   sluice_voice_streams_active{model}            open StreamingRecognize calls
//   sluice_voice_chunk_latency_seconds{model}     audio chunk received -> the interim result covering it sent
//   sluice_voice_final_latency_seconds{model}     end of a segment's audio (endpoint or end of stream) -> final
//   sluice_voice_realtime_factor{model}           RTFx: audio seconds processed per wall second, last 60 s
//   sluice_voice_audio_seconds_per_dollar{model}  processed audio seconds / the model's sluice_cost_usd
// Thread-safety: every method may be called from any thread (prometheus-cpp series are thread-safe; the
// per-model table and the RTFx windows are under mu_, a leaf lock).
#pragma once

#include <array>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "backend/base/sync.h"
#include "server/metrics/server_metrics.h"

namespace sluice::voice {

// The API that carried the audio: Riva Recognize, Riva StreamingRecognize, OpenAI /v1/audio/transcriptions.
enum class VoiceApi { kOffline, kStreaming, kOpenAi };
inline constexpr int kVoiceApis = 3;

class VoiceMetrics {
 public:
  // `metrics` may be null (no /metrics): every Record is then a no-op. REQUIRES: constructed before serving.
  explicit VoiceMetrics(ServerMetrics* metrics);

  void RecordAudio(const ModelConfig& model, VoiceApi api, double seconds);
  void RecordProcessed(const ModelConfig& model, VoiceApi api, double seconds, absl::Time now);
  void RecordAnswer(const ModelConfig& model, VoiceApi api, int grpc_code);
  void StreamOpened(const ModelConfig& model);
  void StreamClosed(const ModelConfig& model);
  void RecordChunkLatency(const ModelConfig& model, absl::Duration latency);
  void RecordFinalLatency(const ModelConfig& model, absl::Duration latency);

 private:
  // Processed audio per second over the last 60 s (one slot per second).
  struct RateWindow {
    std::array<double, 60> seconds_in_slot{};
    std::array<int64_t, 60> slot_second{};
    void Add(absl::Time now, double seconds);
    double PerSecond(absl::Time now) const;
  };
  struct ModelSeries {
    const ModelConfig* config = nullptr;
    prometheus::Counter* audio[kVoiceApis] = {};
    prometheus::Counter* processed[kVoiceApis] = {};
    prometheus::Gauge* streams = nullptr;
    prometheus::Histogram* chunk_latency = nullptr;
    prometheus::Histogram* final_latency = nullptr;
    prometheus::Gauge* rtfx = nullptr;
    prometheus::Gauge* per_dollar = nullptr;
    RateWindow window;
  };
  ModelSeries* Series(const ModelConfig& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Refresh(absl::Time now);

  ServerMetrics* const metrics_;
  prometheus::Family<prometheus::Counter>* audio_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* processed_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* requests_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* streams_family_ = nullptr;
  prometheus::Family<prometheus::Histogram>* chunk_family_ = nullptr;
  prometheus::Family<prometheus::Histogram>* final_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* rtfx_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* per_dollar_family_ = nullptr;
  Mutex mu_;
  std::map<std::string, ModelSeries> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::voice
