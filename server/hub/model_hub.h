// The models a server process serves and the server's readiness. The server listens before its models are
// loaded: until Publish() the hub holds no models and every lookup answers Unavailable ("loading"), so probes and
// clients get an answer instead of "connection refused".
// Thread-safety: Publish is called once, from the loading thread; every other method may be called from any
// thread at any time. models_ is written only before loaded_ is set (release) and read only after it is seen
// set (acquire), so it needs no lock.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/llm/embedding_model.h"
#include "scheduler/continuous_batcher.h"
#include "server/llm/generation_metrics.h"
#include "server/llm/generation_model.h"
#include "server/core/served_model.h"
#include "server/metrics/server_metrics.h"

namespace sluice {

// A hosted model and its facets, as the one lookup by name answers it: exactly one of `inference` (a batched
// model: KServe infer, and the voice API when its config has a speech section) and `generation` (a text-generation
// model: OpenAI, Triton streaming, KServe metadata) is set. `embedding` is a facet of a batched model (a kind: text
// model with an embedding: section: the OpenAI embeddings API). All point into the hub, which outlives every call.
struct HostedModel {
  ServedModel* inference = nullptr;
  GenerationModel* generation = nullptr;
  EmbeddingModel* embedding = nullptr;
};

// The decoder of an encoder-decoder speech model (Whisper; ModelConfig::is_encoder_decoder): the continuous batcher
// over the model's generation instances, and its generation metrics (sluice_generation_*{model}). A facet of the
// batched model of the same name (its encoder): only the voice API's recognizer feeds it (its sequences need an
// encoder output), so no text-generation API serves it.
struct SpeechDecoder {
  const ModelConfig* config = nullptr;
  std::unique_ptr<GenerationMetrics> metrics;   // may be null (no /metrics); outlives the engine
  std::unique_ptr<ContinuousBatcher> engine;
};

class ModelHub {
 public:
  // `metrics` may be null (then /metrics answers 404); it must outlive the hub.
  explicit ModelHub(ServerMetrics* metrics = nullptr) : metrics_(metrics) {}
  ModelHub(const ModelHub&) = delete;
  ModelHub& operator=(const ModelHub&) = delete;

  // Makes the loaded models visible to the front ends: the batched models (KServe v2, voice) and the
  // text-generation models (OpenAI, Triton streaming). Names are unique across both. REQUIRES: called at most once.
  // `embedding_models` each wrap one of `models`.
  void Publish(std::vector<std::unique_ptr<ServedModel>> models,
               std::vector<std::unique_ptr<GenerationModel>> generation_models = {},
               std::vector<std::unique_ptr<EmbeddingModel>> embedding_models = {},
               std::vector<std::unique_ptr<SpeechDecoder>> speech_decoders = {});
  // Empty until Publish().
  std::span<const std::unique_ptr<ServedModel>> models() const;
  std::span<const std::unique_ptr<GenerationModel>> generation_models() const;

  // The one lookup by name every front end starts from, whatever the model's kind: Unavailable while loading;
  // NotFound naming the model, or the version (sluice serves version "1" of each model; "" means it too).
  absl::StatusOr<HostedModel> Lookup(std::string_view name, std::string_view version = "") const;

  // Lookup narrowed to a batched model: a generation model's name is NotFound ("unknown model"), as before there
  // were two kinds.
  absl::StatusOr<ServedModel*> Find(std::string_view name, std::string_view version) const;

  // Lookup narrowed to a generation model: NotFound naming the model (and saying so when it is a batched model
  // rather than a generation model).
  absl::StatusOr<GenerationModel*> FindGeneration(std::string_view name) const;

  // Lookup narrowed to an embedding model: NotFound naming the model (and saying so when it exists but has no
  // embedding: section).
  absl::StatusOr<EmbeddingModel*> FindEmbedding(std::string_view name) const;
  std::span<const std::unique_ptr<EmbeddingModel>> embedding_models() const;
  // The decoder engine of the encoder-decoder speech model `name`; null when there is none (or while loading).
  ContinuousBatcher* SpeechDecoderOf(std::string_view name) const;

  ServingState& state() { return state_; }
  const ServingState& state() const { return state_; }
  bool ready() const { return state_.ready(); }
  bool draining() const { return state_.draining(); }
  ServerMetrics* metrics() const { return metrics_; }
  int64_t InFlight() const;
  // Stops every scheduler, generation engine and speech decoder (each finishes its accepted requests), after every embedding call
  // already taken has its rows queued. REQUIRES: state().BeginDrain() was called.
  void StopAll();

 private:
  ServingState state_;
  ServerMetrics* const metrics_;
  std::atomic<bool> loaded_{false};
  std::vector<std::unique_ptr<ServedModel>> models_;  // see the thread-safety note above
  std::vector<std::unique_ptr<GenerationModel>> generation_models_;  // likewise
  std::vector<std::unique_ptr<EmbeddingModel>> embedding_models_;  // likewise
  std::vector<std::unique_ptr<SpeechDecoder>> speech_decoders_;    // likewise
};

}  // namespace sluice
