#include "loadtest/speech/riva_offline_client.h"

#include <cstring>
#include <span>

#include "absl/strings/str_cat.h"
#include "loadtest/kserve/grpc_infer_client.h"
#include "loadtest/speech/speech_audio.h"

namespace sluice::loadtest {
namespace {

namespace riva = nvidia::riva::asr;

// KServe's BYTES layout: each element a 4-byte little-endian length, then its bytes.
std::string BytesElement(const std::string& text) {
  const uint32_t n = static_cast<uint32_t>(text.size());
  const char length[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                          static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  return std::string(length, 4) + text;
}

}  // namespace

struct RivaOfflineClient::Call {
  grpc::ClientContext context;
  riva::RecognizeRequest request;
  riva::RecognizeResponse response;
  std::string model;
  Done done;
};

RivaOfflineClient::RivaOfflineClient(const Options& options, InferClient* control,
                                     absl::flat_hash_map<std::string, int> sample_rates)
    : InferClient(options), control_(control), sample_rates_(std::move(sample_rates)) {
  for (const auto& channel : CreateLoadChannels(options)) {
    stubs_.push_back(riva::RivaSpeechRecognition::NewStub(channel));
  }
}

RivaOfflineClient::~RivaOfflineClient() {
  CancelAll();
  WaitIdle(absl::Seconds(30));
}

void RivaOfflineClient::Send(inference::ModelInferRequest request, std::chrono::system_clock::time_point deadline,
                             Done done) {
  const auto refuse = [&](const std::string& why) {
    done(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why), inference::ModelInferResponse());
  };
  const auto rate = sample_rates_.find(request.model_name());
  if (rate == sample_rates_.end()) return refuse(absl::StrCat("no sample rate for model ", request.model_name()));
  if (request.raw_input_contents_size() != 1 || request.raw_input_contents(0).size() % sizeof(float) != 0) {
    return refuse("riva-offline sends one FP32 input of audio samples");
  }
  const std::string& raw = request.raw_input_contents(0);
  std::vector<float> samples(raw.size() / sizeof(float));
  std::memcpy(samples.data(), raw.data(), raw.size());
  absl::StatusOr<std::string> wav = EncodeWav(samples, rate->second);
  if (!wav.ok()) {
    done(grpc::Status(grpc::StatusCode::INTERNAL, std::string(wav.status().message())),
         inference::ModelInferResponse());
    return;
  }

  auto owned = std::make_shared<Call>();
  Call* call = owned.get();
  call->model = request.model_name();
  call->done = std::move(done);
  riva::RecognitionConfig* config = call->request.mutable_config();
  config->set_encoding(nvidia::riva::LINEAR_PCM);
  config->set_sample_rate_hertz(rate->second);
  config->set_audio_channel_count(1);
  config->set_max_alternatives(1);
  config->set_model(request.model_name());
  *call->request.mutable_audio() = *std::move(wav);
  call->context.set_deadline(deadline);
  if (!options_.bearer_token.empty()) call->context.AddMetadata("authorization", "Bearer " + options_.bearer_token);
  calls_.Add(std::move(owned));
  auto& stub = *stubs_[next_channel_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
  stub.async()->Recognize(&call->context, &call->request, &call->response,
                          [this, call](grpc::Status status) { Finish(call, status); });
}

void RivaOfflineClient::Finish(Call* call, const grpc::Status& status) {
  inference::ModelInferResponse answer;
  if (status.ok()) {
    answer.set_model_name(call->model);
    std::string transcript;
    for (const riva::SpeechRecognitionResult& result : call->response.results()) {
      if (result.alternatives_size() == 0 || result.alternatives(0).transcript().empty()) continue;
      absl::StrAppend(&transcript, transcript.empty() ? "" : " ", result.alternatives(0).transcript());
    }
    inference::ModelInferResponse::InferOutputTensor* output = answer.add_outputs();
    output->set_name("transcript");
    output->set_datatype("BYTES");
    output->add_shape(1);
    answer.add_raw_output_contents(BytesElement(transcript));
  }
  call->done(status, answer);
  calls_.Remove(call);  // freed here, unless CancelAll still holds it
}

void RivaOfflineClient::CancelAll() {
  // As GrpcInferClient::CancelAll: TryCancel outside the registry's lock, the shared_ptrs keeping each context alive.
  for (const std::shared_ptr<Call>& call : calls_.Snapshot()) call->context.TryCancel();
}

bool RivaOfflineClient::WaitIdle(absl::Duration timeout) { return calls_.WaitIdle(timeout); }

int64_t RivaOfflineClient::in_flight() const { return calls_.size(); }

std::string TranscriptOf(const inference::ModelInferResponse& response) {
  for (int i = 0; i < response.outputs_size() && i < response.raw_output_contents_size(); ++i) {
    if (response.outputs(i).name() != "transcript") continue;
    const std::string& raw = response.raw_output_contents(i);
    if (raw.size() < 4) return "";
    const uint32_t n = static_cast<uint8_t>(raw[0]) | static_cast<uint8_t>(raw[1]) << 8 |
                       static_cast<uint8_t>(raw[2]) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(raw[3])) << 24;
    return raw.substr(4, n);
  }
  return "";
}

}  // namespace sluice::loadtest
