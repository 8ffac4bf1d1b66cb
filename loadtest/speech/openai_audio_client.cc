#include "loadtest/speech/openai_audio_client.h"

#include <httplib.h>
#include <rapidjson/document.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/base/status_mapping.h"
#include "loadtest/kserve/kserve_http.h"
#include "loadtest/speech/speech_audio.h"

namespace sluice::loadtest {
namespace {

// A part ends at the first "\r\n--<boundary>" after it starts, so the boundary must not occur in the file's bytes:
// EncodeTranscriptionForm lengthens this one until it does not.
constexpr char kBoundaryBase[] = "sluice-loadtest-7f3a9c";

}  // namespace

TranscriptionForm EncodeTranscriptionForm(const std::string& model, const std::string& wav) {
  std::string boundary = kBoundaryBase;
  while (wav.find(boundary) != std::string::npos) boundary += "x";  // in the rare case the audio holds it
  TranscriptionForm form;
  form.content_type = absl::StrCat("multipart/form-data; boundary=", boundary);
  const auto field = [&](const char* name, const std::string& value) {
    absl::StrAppend(&form.body, "--", boundary, "\r\nContent-Disposition: form-data; name=\"", name, "\"\r\n\r\n",
                    value, "\r\n");
  };
  field("model", model);
  field("response_format", "json");
  absl::StrAppend(&form.body, "--", boundary,
                  "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\n"
                  "Content-Type: audio/wav\r\n\r\n");
  form.body += wav;
  absl::StrAppend(&form.body, "\r\n--", boundary, "--\r\n");
  return form;
}

absl::StatusOr<std::string> DecodeTranscriptionText(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return absl::DataLossError("the answer is not a JSON object");
  if (!doc.HasMember("text") || !doc["text"].IsString()) return absl::DataLossError("the answer has no \"text\"");
  return std::string(doc["text"].GetString(), doc["text"].GetStringLength());
}

OpenAiAudioClient::OpenAiAudioClient(const ClientOptions& options,
                                     absl::flat_hash_map<std::string, int> sample_rates)
    : options_(options),
      sample_rates_(std::move(sample_rates)),
      pool_(options.address, options.max_connections,
            [this](httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch) {
              return Execute(client, job, epoch);
            }) {}

void OpenAiAudioClient::Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) {
  const auto rate = sample_rates_.find(call.model);
  if (rate == sample_rates_.end()) {
    return done(Outcome::Ended(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("no sample rate for model ", call.model)));
  }
  if (call.inputs.size() != 1 || call.inputs[0].raw.size() % sizeof(float) != 0) {
    return done(Outcome::Ended(grpc::StatusCode::INVALID_ARGUMENT, "openai-audio sends one FP32 input of audio samples"));
  }
  pool_.Send(std::move(call), deadline, std::move(done));
}

Outcome OpenAiAudioClient::Execute(httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch) {
  const auto cancelled = [] { return Outcome::Ended(grpc::StatusCode::CANCELLED, "cancelled by the client"); };
  if (pool_.cancelled(epoch)) return cancelled();
  const std::string& raw = job.call.inputs[0].raw;
  std::vector<float> samples(raw.size() / sizeof(float));
  std::memcpy(samples.data(), raw.data(), raw.size());
  absl::StatusOr<std::string> wav = EncodeWav(samples, sample_rates_.at(job.call.model));
  if (!wav.ok()) return Outcome::Ended(grpc::StatusCode::INTERNAL, std::string(wav.status().message()));
  const TranscriptionForm form = EncodeTranscriptionForm(job.call.model, *wav);

  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(job.deadline -
                                                                          std::chrono::system_clock::now());
  if (left.count() <= 0) return Outcome::Ended(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed in the client");
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(left);  // httplib polls in whole milliseconds
  client.set_read_timeout(wait);
  client.set_write_timeout(wait);
  httplib::Headers headers;
  if (!options_.bearer_token.empty()) headers.emplace("Authorization", "Bearer " + options_.bearer_token);
  httplib::Result result = client.Post("/v1/audio/transcriptions", headers, form.body, form.content_type);
  if (!result) {
    if (pool_.cancelled(epoch)) return cancelled();
    if (std::chrono::system_clock::now() + std::chrono::milliseconds(1) >= job.deadline) {
      return Outcome::Ended(grpc::StatusCode::DEADLINE_EXCEEDED, "no answer before the deadline");
    }
    return Outcome::Ended(grpc::StatusCode::UNAVAILABLE, absl::StrCat("HTTP: ", httplib::to_string(result.error())));
  }
  if (std::chrono::system_clock::now() > job.deadline) {  // as the KServe REST client: a late answer is a miss
    return Outcome::Ended(grpc::StatusCode::DEADLINE_EXCEEDED, "the answer arrived after the deadline");
  }
  if (result->status != 200) {
    // absl and gRPC status codes share their numbers.
    return Outcome::Ended(static_cast<int>(StatusCodeForHttp(result->status)),
                          absl::StrCat("HTTP ", result->status, ": ", HttpErrorMessage(result->body)));
  }
  absl::StatusOr<std::string> text = DecodeTranscriptionText(result->body);
  if (!text.ok()) return Outcome::Ended(grpc::StatusCode::DATA_LOSS, std::string(text.status().message()));
  Outcome outcome = Outcome::Ended(0, "");
  outcome.transcript = *std::move(text);
  return outcome;
}

}  // namespace sluice::loadtest
