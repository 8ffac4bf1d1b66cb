#include "server/core/served_model.h"

#include "absl/time/clock.h"
#include "scheduler/dynamic_batcher.h"

namespace sluice {

ServedModel::ServedModel(const ServedModelOptions& options)
    : config_(options.config), state_(options.state), clock_(options.clock) {}

ServedModel::~ServedModel() {
  if (scheduler_) scheduler_->Stop();  // its threads report to metrics_/stats_: stop them first
}

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Create(const ServedModelOptions& options) {
  std::unique_ptr<ServedModel> model(new ServedModel(options));
  ServedModel* raw = model.get();
  DynamicBatcherOptions batcher;
  batcher.model = options.config;
  batcher.instances = options.instances;
  batcher.clock = options.clock;
  // metrics_ is set below, before the model serves: no batch can run before then.
  batcher.on_batch = [raw](const BatchReport& report) {
    if (raw->metrics_ != nullptr) raw->metrics_->RecordBatch(report);
  };
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = CreateDynamicBatcher(batcher);
  if (!scheduler.ok()) return scheduler.status();
  model->scheduler_ = *std::move(scheduler);
  if (options.metrics != nullptr) {
    std::vector<const Backend*> instances(options.instances.begin(), options.instances.end());
    ServedModel* const self = model.get();
    model->metrics_ = options.metrics->AddModel(*options.config, instances, model->scheduler_.get(),
                                                [self] { return self->ready(); }, *options.clock);
  }
  return model;
}

InferHandle ServedModel::Infer(absl::StatusOr<InferCall> call, InferCompletion done) {
  ValidatedRequest validated;
  absl::StatusOr<std::shared_ptr<PendingInference>> pending =
      call.ok() ? Prepare(*call, done, validated) : call.status();
  if (!pending.ok()) {
    RecordRefused(pending.status());
    done(pending.status());
    return InferHandle();
  }
  if (metrics_ != nullptr) metrics_->RecordArrival(validated.rows, validated.length);
  (*pending)->SubmitRows(std::move(validated.row_inputs), validated.length);
  return InferHandle(*std::move(pending));
}

absl::StatusOr<std::shared_ptr<PendingInference>> ServedModel::Prepare(InferCall& call, InferCompletion& done,
                                                                       ValidatedRequest& validated) {
  // A later window of a Recognize or stream admitted before the drain finishes that call (the drain waits for it).
  if (state_->draining() && !call.continues_admitted) return absl::UnavailableError("server is draining; not accepting requests");
  absl::StatusOr<InferOptions> options =
      ParseInferParameters(call.parameters, config_->batching.priority_levels, clock_->Now());
  if (!options.ok()) return options.status();
  options->deadline = std::min(options->deadline, call.transport_deadline);
  absl::StatusOr<std::vector<size_t>> selected = SelectOutputs(*config_, call.requested_outputs);
  if (!selected.ok()) return selected.status();
  absl::StatusOr<ValidatedRequest> inputs = ValidateInputs(*config_, call.inputs);
  if (!inputs.ok()) return inputs.status();
  validated = *std::move(inputs);
  std::vector<InferOutput> outputs;
  for (size_t index : *selected) outputs.push_back({&config_->outputs[index], {}});
  return std::make_shared<PendingInference>(PendingInference::Target{scheduler_.get(), &stats_, metrics_},
                                            validated.rows, validated.length, std::move(outputs),
                                            *std::move(selected), *options, std::move(done));
}

void ServedModel::RecordRefused(const absl::Status& status) {
  stats_.RecordRejected(absl::ZeroDuration());
  if (metrics_ != nullptr) metrics_->RecordRequest(status, absl::ZeroDuration(), 1, 0);
}

}  // namespace sluice
