#include "backend/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice {

absl::Status ValidatePaddedBatch(const ModelConfig& model, const PaddedBatch& batch) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(model.name, " batch (", batch.batch_size, ", ", batch.length,
                                                   "): ", why));
  };
  const auto& sizes = model.buckets.batch_sizes;
  const auto& lengths = model.buckets.lengths;
  if (std::find(sizes.begin(), sizes.end(), batch.batch_size) == sizes.end()) return bad("batch size not compiled");
  if (std::find(lengths.begin(), lengths.end(), batch.length) == lengths.end()) return bad("length not compiled");
  if (batch.inputs.size() != model.inputs.size()) {
    return bad(absl::StrCat(batch.inputs.size(), " inputs given, model declares ", model.inputs.size()));
  }
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    const TensorSpec& spec = model.inputs[i];
    const HostTensor& t = batch.inputs[i];
    std::vector<int64_t> want = {batch.batch_size, batch.length};
    want.insert(want.end(), spec.shape.begin() + 1, spec.shape.end());
    if (t.dtype != spec.dtype || t.shape != want ||
        t.bytes.size() != static_cast<size_t>(NumElements(want)) * DataTypeSize(spec.dtype)) {
      return bad(absl::StrCat("input '", spec.name, "' must be ", DataTypeName(spec.dtype), " ",
                              ShapeToString(want), ", got ", DataTypeName(t.dtype), " ", ShapeToString(t.shape)));
    }
  }
  if (static_cast<int>(batch.row_lengths.size()) != batch.batch_size) return bad("one row length per row needed");
  for (int64_t len : batch.row_lengths) {
    if (len < 1 || len > batch.length) return bad(absl::StrCat("row length ", len, " outside [1, bucket length]"));
  }
  return absl::OkStatus();
}

}  // namespace sluice
