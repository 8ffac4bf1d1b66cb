// The stream engines of the served cache-aware speech models, by model name: StreamingRecognize runs a model's
// streams on its engine when it has one (speech.stream_step), and windowed (StreamingSession) otherwise.
// Thread-safety: Publish is called once, from the loading thread, before Find can see anything; Find may be called
// from any thread at any time (an atomic flag publishes the table, as ModelHub does). StopAll after the streams
// have ended (each engine's Stop is thread-safe).
#pragma once

#include <atomic>
#include <memory>
#include <string_view>
#include <vector>

#include "server/voice/stream_engine.h"

namespace sluice::voice {

class StreamEngines {
 public:
  // REQUIRES: called at most once.
  void Publish(std::vector<std::unique_ptr<StreamEngine>> engines) {
    engines_ = std::move(engines);
    published_.store(true, std::memory_order_release);
  }
  // nullptr: the model has no stream engine (or the models are not published yet).
  StreamEngine* Find(std::string_view model) const {
    if (!published_.load(std::memory_order_acquire)) return nullptr;
    for (const auto& engine : engines_) {
      if (engine->config().name == model) return engine.get();
    }
    return nullptr;
  }
  // Stops every engine's step thread (before the models' statistics and backends go).
  void StopAll() {
    if (!published_.load(std::memory_order_acquire)) return;
    for (const auto& engine : engines_) engine->Stop();
  }

 private:
  std::atomic<bool> published_{false};
  std::vector<std::unique_ptr<StreamEngine>> engines_;  // written once before published_
};

}  // namespace sluice::voice
