#include "loadtest/speech/speech_load.h"

#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "backend/base/sync.h"
#include "loadtest/kserve/grpc_infer_client.h"
#include "loadtest/speech/openai_audio_client.h"
#include "loadtest/speech/riva_offline_client.h"
#include "loadtest/speech/speech_summary.h"
#include "riva/proto/riva_asr.grpc.pb.h"

namespace sluice::loadtest {
namespace {

namespace riva = nvidia::riva::asr;

// Whether the server serves `model` over the Riva API (its answer names why not).
absl::Status CheckServedOverRiva(riva::RivaSpeechRecognition::Stub& stub, const std::string& model,
                                 const std::string& bearer_token) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!bearer_token.empty()) context.AddMetadata("authorization", "Bearer " + bearer_token);
  riva::RivaSpeechRecognitionConfigRequest request;
  request.set_model_name(model);
  riva::RivaSpeechRecognitionConfigResponse response;
  const grpc::Status status = stub.GetRivaSpeechRecognitionConfig(&context, request, &response);
  if (!status.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("model ", model, " is not served over the Riva speech API (",
                                                      GrpcCodeName(status.error_code()), ": ",
                                                      status.error_message(), ")"));
  }
  for (const auto& config : response.model_config()) {
    if (config.model_name() == model) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("model ", model, " is not among the server's Riva speech models"));
}

// Transcripts by request index, from the runner's completion threads.
class TranscriptLog {
 public:
  void Add(uint64_t index, std::string transcript) {
    MutexLock lock(&mu_);
    transcripts_[index] = std::move(transcript);
  }
  absl::flat_hash_map<uint64_t, std::string> Take() {
    MutexLock lock(&mu_);
    return std::move(transcripts_);
  }

 private:
  Mutex mu_;
  absl::flat_hash_map<uint64_t, std::string> transcripts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<SpeechLoad>> SpeechLoad::Create(const SpeechLoadOptions& options,
                                                               const Workload& workload) {
  if (!IsSpeechApi(options.api)) {
    return absl::InvalidArgumentError(absl::StrCat("'", ApiName(options.api), "' is no speech API"));
  }
  const bool riva = IsRivaApi(options.api);
  if (riva && options.client.protocol != "grpc") {
    return absl::InvalidArgumentError("the Riva speech API is gRPC: --protocol http does not apply to it");
  }
  std::unique_ptr<riva::RivaSpeechRecognition::Stub> stub;
  if (riva) stub = riva::RivaSpeechRecognition::NewStub(CreateLoadChannels(options.client).front());
  absl::flat_hash_map<std::string, int> sample_rates;
  for (const WorkloadModel& m : workload.models()) {
    if (!m.info.is_speech() || m.info.datatype != "FP32" || m.info.elements_per_step != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", m.info.name, " is not a speech model (kind ", m.info.kind, ", input ",
                       m.info.datatype, "): ", ApiName(options.api), " transcribes audio"));
    }
    // openai-audio: the KServe description said speech; a model without a speech: section is refused by the
    // first call, naming why.
    if (riva) {
      if (absl::Status s = CheckServedOverRiva(*stub, m.info.name, options.client.bearer_token); !s.ok()) return s;
    }
    sample_rates[m.info.name] = m.info.sample_rate;
  }
  std::unique_ptr<SpeechLoad> load(new SpeechLoad(options, workload));
  if (options.api == Api::kRivaOffline) {
    load->offline_client_ = std::make_unique<RivaOfflineClient>(options.client, std::move(sample_rates));
  } else if (options.api == Api::kOpenAiAudio) {
    load->offline_client_ = std::make_unique<OpenAiAudioClient>(options.client, std::move(sample_rates));
  }
  return load;
}

absl::StatusOr<SpeechRun> SpeechLoad::Run(const RunOptions& run, int streams) {
  return IsWholeFileSpeechApi(options_.api) ? RunOffline(run) : RunStreaming(run, streams);
}

absl::StatusOr<SpeechRun> SpeechLoad::RunOffline(const RunOptions& run) {
  TranscriptLog log;
  RunOptions options = run;
  options.on_response = [this, &log](const RequestRecord& record, const Outcome& outcome) {
    if (record.measured && workload_.Reference(workload_.Draw(record.index)) != nullptr) {
      log.Add(record.index, outcome.transcript);
    }
  };
  absl::StatusOr<RunResult> result = RunLoad(options, workload_, *offline_client_);
  if (!result.ok()) return result.status();
  SpeechRun out;
  out.run = *std::move(result);
  out.speech = SummarizeSpeech(options_.api, out.run, nullptr, log.Take(), workload_);
  return out;
}

absl::StatusOr<SpeechRun> SpeechLoad::RunStreaming(const RunOptions& run, int streams) {
  StreamingOptions streaming = options_.streaming;
  if (streams > 0) streaming.streams = streams;
  absl::StatusOr<StreamRunResult> result = RunStreams(run, streaming, workload_, options_.client);
  if (!result.ok()) return result.status();
  absl::flat_hash_map<uint64_t, std::string> transcripts;
  for (size_t i = 0; i < result->run.records.size(); ++i) {
    if (result->streams[i].transcript.empty()) continue;
    transcripts[result->run.records[i].index] = std::move(result->streams[i].transcript);
  }
  SpeechRun out;
  out.speech = SummarizeSpeech(options_.api, result->run, &result->streams, transcripts, workload_);
  out.speech.streams = streaming.streams;
  out.speech.chunk_ms = streaming.chunk_ms;
  out.speech.realtime = streaming.realtime;
  out.run = std::move(result->run);
  return out;
}

}  // namespace sluice::loadtest
