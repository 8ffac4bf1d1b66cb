// The `sim` device: no graph, a latency that follows the model's configured cost model
// (base_ms + per_sample_us * batch * length) and deterministic outputs of the declared shapes.
// For scheduler tests and capacity planning without hardware.
//
// Output contract (tests rely on it): every element of row r's real part equals row r's real input length
// (as the output dtype); elements past the row's real output length are 0. A variable output axis of a
// bucket of length L has ceil(L * output_steps_per_input_step) steps; row r's real extent is
// ceil(row_length * output_steps_per_input_step).
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/backend.h"

namespace sluice {

// How the simulator spends its latency. Defaults to absl::SleepFor; tests inject a fake clock's advance.
using SimSleeper = std::function<void(absl::Duration)>;

// REQUIRES: options.model->sim is set and options.group.device is sim.
absl::StatusOr<std::unique_ptr<Backend>> CreateSimBackend(const InstanceOptions& options, SimSleeper sleeper = {});

// The latency the cost model gives one batch.
absl::Duration SimLatency(const SimCostModel& cost, int batch_size, int64_t length);

}  // namespace sluice
