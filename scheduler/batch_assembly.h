// Gathering requests into one padded batch tensor, and scattering a batch's outputs back to each request,
// trimmed to its real output length. Row copies run in parallel with oneTBB.
// Thread-safety: pure functions over their arguments.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "backend/base/model_config.h"
#include "scheduler/infer_request.h"

namespace sluice {

// Rows [0, requests.size()) hold the requests' data followed by zero padding; the remaining rows up to
// batch_size are dummy rows (zeros, length 1) that only fill the compiled batch size.
// REQUIRES: every request matches the model's inputs and has length <= bucket_length.
PaddedBatch AssembleBatch(const ModelConfig& model, const std::vector<const InferRequest*>& requests,
                          int batch_size, int64_t bucket_length);

// One output list per real row: fixed-shape outputs as declared, variable-axis outputs trimmed to the row's
// output length. REQUIRES: result came from executing a batch of at least `rows` rows of this model.
std::vector<std::vector<HostTensor>> ScatterOutputs(const ModelConfig& model, const BatchResult& result, int rows);

}  // namespace sluice
