#include "backend/sim_backend.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/sim_faults.h"

namespace sluice {
namespace {

int64_t OutputSteps(double ratio, int64_t input_steps) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(input_steps) * ratio));
}

template <typename T>
void FillRows(HostTensor& out, const std::vector<int64_t>& row_lengths, const std::vector<int64_t>& out_lengths,
              int64_t steps, int64_t per_step) {
  std::span<T> values = out.values<T>();
  const int64_t row_elements = steps * per_step;
  for (size_t r = 0; r < row_lengths.size(); ++r) {
    const int64_t real = out_lengths.empty() ? row_elements : out_lengths[r] * per_step;
    for (int64_t i = 0; i < real; ++i) values[r * row_elements + i] = static_cast<T>(row_lengths[r]);
  }
}

class SimBackend final : public Backend {
 public:
  SimBackend(const InstanceOptions& options, SimSleeper sleeper)
      : model_(*options.model),
        replica_(options.replica),
        sleeper_(std::move(sleeper)),
        faults_(options.model->sim->faults, options.replica) {
    for (int batch_size : model_.buckets.batch_sizes) {
      for (int64_t length : model_.buckets.lengths) stats_.push_back({batch_size, length, 0.0, 0.0});
    }
  }

  absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) override {
    SLUICE_RETURN_IF_ERROR(ValidatePaddedBatch(model_, batch));
    SLUICE_RETURN_IF_ERROR(InjectFault());
    sleeper_(SimLatency(*model_.sim, batch.batch_size, batch.length));
    const double ratio = model_.sim->output_steps_per_input_step;
    BatchResult result;
    if (model_.has_variable_output()) {
      for (int64_t len : batch.row_lengths) result.output_lengths.push_back(OutputSteps(ratio, len));
    }
    for (const TensorSpec& spec : model_.outputs) {
      std::vector<int64_t> shape = {batch.batch_size};
      const int64_t steps = spec.has_variable_axis() ? OutputSteps(ratio, batch.length) : 1;
      for (int64_t d : spec.shape) shape.push_back(d == kVariableDim ? steps : d);
      HostTensor out = HostTensor::Zeros(spec.dtype, std::move(shape));
      const std::vector<int64_t> no_lengths;
      const auto& lengths = spec.has_variable_axis() ? result.output_lengths : no_lengths;
      const int64_t per_step = spec.elements_per_step();
      switch (spec.dtype) {
        case DataType::kFp32: FillRows<float>(out, batch.row_lengths, lengths, steps, per_step); break;
        case DataType::kInt64: FillRows<int64_t>(out, batch.row_lengths, lengths, steps, per_step); break;
        case DataType::kInt32: FillRows<int32_t>(out, batch.row_lengths, lengths, steps, per_step); break;
        default: break;  // BOOL/FP16 outputs stay zero: the simulator has no meaningful value for them
      }
      result.outputs.push_back(std::move(out));
    }
    return result;
  }

  // The configured faults (sim_faults.h). Execute runs on one thread at a time: no lock needed.
  absl::Status InjectFault() { return faults_.Next(); }

  const std::vector<BucketLoadStats>& load_stats() const override { return stats_; }
  std::string Describe() const override { return absl::StrCat(model_.name, "#", replica_, " on sim"); }

 private:
  const ModelConfig& model_;
  const int replica_;
  SimSleeper sleeper_;
  SimFaultInjector faults_;
  std::vector<BucketLoadStats> stats_;
};

}  // namespace

absl::Duration SimLatency(const SimCostModel& cost, int batch_size, int64_t length) {
  return absl::Milliseconds(cost.base_ms) +
         absl::Microseconds(cost.per_sample_us * static_cast<double>(batch_size) * static_cast<double>(length));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateSimBackend(const InstanceOptions& options, SimSleeper sleeper) {
  if (!options.model->sim) {
    return absl::InvalidArgumentError(absl::StrCat("model ", options.model->name, ": device sim needs 'sim:'"));
  }
  if (!sleeper) sleeper = [](absl::Duration d) { absl::SleepFor(d); };
  return std::make_unique<SimBackend>(options, std::move(sleeper));
}

}  // namespace sluice
