#include "loadtest/speech/riva_offline_client.h"

#include <cstring>
#include <span>

#include "absl/strings/str_cat.h"
#include "loadtest/kserve/grpc_infer_client.h"
#include "loadtest/speech/speech_audio.h"

namespace sluice::loadtest {
namespace {

namespace riva = nvidia::riva::asr;

}  // namespace

struct RivaOfflineClient::InFlight {
  grpc::ClientContext context;
  riva::RecognizeRequest request;
  riva::RecognizeResponse response;
  OutcomeDone done;
};

RivaOfflineClient::RivaOfflineClient(const ClientOptions& options,
                                     absl::flat_hash_map<std::string, int> sample_rates)
    : options_(options), sample_rates_(std::move(sample_rates)) {
  for (const auto& channel : CreateLoadChannels(options)) {
    stubs_.push_back(riva::RivaSpeechRecognition::NewStub(channel));
  }
}

RivaOfflineClient::~RivaOfflineClient() {
  CancelAll();
  WaitIdle(absl::Seconds(30));
}

void RivaOfflineClient::Send(Call request, std::chrono::system_clock::time_point deadline, OutcomeDone done) {
  const auto refuse = [&](const std::string& why) {
    done(Outcome::Ended(grpc::StatusCode::INVALID_ARGUMENT, why));
  };
  const auto rate = sample_rates_.find(request.model);
  if (rate == sample_rates_.end()) return refuse(absl::StrCat("no sample rate for model ", request.model));
  if (request.inputs.size() != 1 || request.inputs[0].raw.size() % sizeof(float) != 0) {
    return refuse("riva-offline sends one FP32 input of audio samples");
  }
  const std::string& raw = request.inputs[0].raw;
  std::vector<float> samples(raw.size() / sizeof(float));
  std::memcpy(samples.data(), raw.data(), raw.size());
  absl::StatusOr<std::string> wav = EncodeWav(samples, rate->second);
  if (!wav.ok()) {
    done(Outcome::Ended(grpc::StatusCode::INTERNAL, std::string(wav.status().message())));
    return;
  }

  auto owned = std::make_shared<InFlight>();
  InFlight* call = owned.get();
  call->done = std::move(done);
  riva::RecognitionConfig* config = call->request.mutable_config();
  config->set_encoding(nvidia::riva::LINEAR_PCM);
  config->set_sample_rate_hertz(rate->second);
  config->set_audio_channel_count(1);
  config->set_max_alternatives(1);
  config->set_model(request.model);
  *call->request.mutable_audio() = *std::move(wav);
  call->context.set_deadline(deadline);
  if (!options_.bearer_token.empty()) call->context.AddMetadata("authorization", "Bearer " + options_.bearer_token);
  calls_.Add(std::move(owned));
  auto& stub = *stubs_[next_channel_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
  stub.async()->Recognize(&call->context, &call->request, &call->response,
                          [this, call](grpc::Status status) { Finish(call, status); });
}

void RivaOfflineClient::Finish(InFlight* call, const grpc::Status& status) {
  Outcome outcome = Outcome::Ended(status.error_code(), status.error_message());
  if (status.ok()) {
    for (const riva::SpeechRecognitionResult& result : call->response.results()) {
      if (result.alternatives_size() == 0 || result.alternatives(0).transcript().empty()) continue;
      absl::StrAppend(&outcome.transcript, outcome.transcript.empty() ? "" : " ", result.alternatives(0).transcript());
    }
  }
  call->done(outcome);
  calls_.Remove(call);  // freed here, unless CancelAll still holds it
}

void RivaOfflineClient::CancelAll() {
  // As GrpcInferClient::CancelAll: TryCancel outside the registry's lock, the shared_ptrs keeping each context alive.
  for (const std::shared_ptr<InFlight>& call : calls_.Snapshot()) call->context.TryCancel();
}

bool RivaOfflineClient::WaitIdle(absl::Duration timeout) { return calls_.WaitIdle(timeout); }

int64_t RivaOfflineClient::in_flight() const { return calls_.size(); }

}  // namespace sluice::loadtest
