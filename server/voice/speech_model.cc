#include "server/voice/speech_model.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::voice {

absl::StatusOr<SpeechModel> SpeechModel::Create(ServedModel* model) {
  const ModelConfig& config = model->config();
  if (config.kind != ModelKind::kSpeech || !config.speech) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", config.name, "' has no speech: section in its config.yaml (the voice API needs its "
                     "vocabulary and frame_samples)"));
  }
  if (config.inputs.size() != 1 || config.inputs.front().dtype != DataType::kFp32 ||
      config.inputs.front().shape.size() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", config.name, "': the voice API feeds one FP32 audio input of shape [-1]; this model takes ",
        config.inputs.size(), " input(s)"));
  }
  return SpeechModel(model);
}

int64_t SpeechModel::FramesFor(int64_t samples) const {
  const int64_t per_frame = speech().frame_samples;
  return (samples + per_frame - 1) / per_frame;
}

InferHandle SpeechModel::Run(std::vector<float> samples, absl::Time deadline, bool continues_admitted,
                             WindowDone done) const {
  const ModelConfig& config = model_->config();
  InferCall call;
  std::string& bytes = call.storage.emplace_back(samples.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), samples.data(), bytes.size());
  call.inputs.push_back(WireTensor{.name = config.inputs.front().name,
                                   .datatype = "FP32",
                                   .shape = {1, static_cast<int64_t>(samples.size())},
                                   .bytes = std::string_view(bytes)});
  call.requested_outputs.push_back(config.speech->output);
  call.transport_deadline = deadline;
  call.continues_admitted = continues_admitted;
  const int64_t classes = static_cast<int64_t>(config.speech->vocabulary.size());
  return model_->Infer(std::move(call), [classes, done = std::move(done)](absl::StatusOr<InferResult> result) {
    if (!result.ok()) {
      done(result.status());
      return;
    }
    const HostTensor& tensor = result->outputs.front().tensor;  // [1, frames, classes]
    if (tensor.shape.size() != 3 || tensor.shape[2] != classes) {
      done(absl::InternalError("the speech output does not have shape [1, frames, classes]"));
      return;
    }
    std::span<const float> values = tensor.values<float>();
    done(WindowLogProbs{.values = std::vector<float>(values.begin(), values.end()),
                        .frames = tensor.shape[1],
                        .classes = classes});
  });
}

}  // namespace sluice::voice
