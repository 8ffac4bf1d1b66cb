// Test helper: Riva speech clients over real gRPC for the voice robustness tests (in-process and against the
// server process), and the sim speech model configs they serve. A call's outcome is kept whole (status, results),
// so tests assert on what the client saw.
// Thread-safety: the functions are independent; a Stub may be shared by threads (gRPC stubs are thread-safe).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "riva/proto/riva_asr.grpc.pb.h"

namespace sluice::testing {

namespace riva = nvidia::riva::asr;

constexpr int kRivaRate = 16000;

struct SimSpeech {
  std::string name;
  int max_queue_size = 256;
  int base_ms = 10;            // every batch takes this long
  std::string batch_sizes = "1, 4, 8";
  bool shared_tick = false;    // speech.streaming.shared_tick
};

// A speech model on the sim device: 1, 2 and 4 s buckets; 640 samples per output frame, four classes (its log-probs
// make blank-only transcripts: these tests are about answers and lifetimes, not text).
inline std::string SimSpeechYaml(const SimSpeech& model) {
  return "name: " + model.name + "\nkind: speech\n"
         "inputs:\n  - {name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}\n"
         "outputs:\n  - {name: log_probs, dtype: FP32, shape: [-1, 4]}\n"
         "buckets: {lengths: [16000, 32000, 64000], batch_sizes: [" + model.batch_sizes + "]}\n"
         "batching: {max_queue_delay_ms: 5, max_queue_size: " + std::to_string(model.max_queue_size) + "}\n"
         "instances: [{count: 1, device: sim}]\n"
         "sim: {base_ms: " + std::to_string(model.base_ms) +
         ", per_sample_us: 0, output_steps_per_input_step: 0.0015625}\n"
         "speech:\n  vocabulary: [\"<blank>\", \"a\", \"b\", \" \"]\n  frame_samples: 640\n"
         "  max_audio_seconds: 600\n  long_audio_overlap_ms: 640\n"
         "  streaming: {step_ms: 480, left_context_ms: 1280, lookahead_ms: 640, shared_tick: " +
         (model.shared_tick ? "true" : "false") + "}\n";
}

// `seconds` of 16-bit mono PCM (a square wave).
inline std::string Pcm16(double seconds, int rate = kRivaRate) {
  std::string bytes(static_cast<size_t>(seconds * rate) * 2, '\0');
  for (size_t i = 0; i < bytes.size() / 2; ++i) {
    const int16_t v = static_cast<int16_t>(3000 * ((i / 40) % 2 ? 1 : -1));
    std::memcpy(&bytes[2 * i], &v, 2);
  }
  return bytes;
}

inline riva::RecognitionConfig PcmConfig(const std::string& model) {
  riva::RecognitionConfig config;
  config.set_encoding(nvidia::riva::LINEAR_PCM);
  config.set_sample_rate_hertz(kRivaRate);
  config.set_audio_channel_count(1);
  config.set_model(model);
  return config;
}

struct RecognizeOutcome {
  grpc::Status status;
  int results = 0;
  float audio_processed = 0;
};

// One Recognize of `audio` (16 kHz PCM); `deadline` zero: none.
inline RecognizeOutcome Recognize(riva::RivaSpeechRecognition::Stub& stub, const std::string& model,
                                  const std::string& audio,
                                  std::chrono::milliseconds deadline = std::chrono::milliseconds(0)) {
  riva::RecognizeRequest request;
  *request.mutable_config() = PcmConfig(model);
  request.set_audio(audio);
  riva::RecognizeResponse response;
  grpc::ClientContext context;
  if (deadline.count() > 0) context.set_deadline(std::chrono::system_clock::now() + deadline);
  RecognizeOutcome outcome;
  outcome.status = stub.Recognize(&context, request, &response);
  outcome.results = response.results_size();
  if (outcome.results > 0) outcome.audio_processed = response.results(0).audio_processed();
  return outcome;
}

struct StreamOutcome {
  grpc::Status status;
  int finals = 0;
  float last_processed = 0;
};

// One StreamingRecognize: the config, then `seconds` of audio in 100 ms chunks as fast as flow control allows,
// then the half-close; every response read.
inline StreamOutcome Stream(riva::RivaSpeechRecognition::Stub& stub, const std::string& model, double seconds) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub.StreamingRecognize(&context);
  StreamOutcome outcome;
  std::thread reader([&] {
    riva::StreamingRecognizeResponse response;
    while (stream->Read(&response)) {
      for (const auto& result : response.results()) {
        if (result.is_final()) ++outcome.finals;
        outcome.last_processed = result.audio_processed();
      }
    }
  });
  riva::StreamingRecognizeRequest first;
  *first.mutable_streaming_config()->mutable_config() = PcmConfig(model);
  first.mutable_streaming_config()->set_interim_results(true);
  if (stream->Write(first)) {
    const std::string audio = Pcm16(seconds);
    const size_t chunk = kRivaRate / 10 * 2;
    for (size_t at = 0; at < audio.size(); at += chunk) {
      riva::StreamingRecognizeRequest message;
      message.set_audio_content(audio.substr(at, chunk));
      if (!stream->Write(message)) break;
    }
    stream->WritesDone();
  }
  reader.join();
  outcome.status = stream->Finish();
  return outcome;
}

}  // namespace sluice::testing
