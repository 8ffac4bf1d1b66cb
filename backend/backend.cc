#include "backend/backend.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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

namespace {

std::string Bytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
  if (bytes >= 1024) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  return absl::StrCat(bytes, " B");
}

}  // namespace

ModelMemory SumInstanceMemory(const std::vector<InstanceMemory>& instances) {
  ModelMemory sum;
  std::set<std::string> weights_seen;
  for (const InstanceMemory& m : instances) {
    if (sum.graph_format == 0 || (m.graph_format != 0 && m.graph_format < sum.graph_format)) {
      sum.graph_format = m.graph_format;
    }
    // An instance that shares its weights with one counted already adds nothing.
    if (m.weights_id.empty() || weights_seen.insert(m.weights_id).second) sum.weight_bytes += m.weight_bytes;
    sum.cache_bytes += m.cache_bytes;
    sum.graph_bytes += m.graph_bytes;
    sum.graphs += m.graphs;
    if (m.graphs > 0) sum.largest_graph_bytes = std::max(sum.largest_graph_bytes, m.graph_bytes / m.graphs);
  }
  return sum;
}

std::string DescribeModelMemory(const ModelMemory& memory, size_t instances) {
  if (memory.graph_format == 0) return "memory not tracked (sim device)";
  std::string weights = memory.graph_format == 1
                            ? "weights inside every graph (graph format 1)"
                            : absl::StrCat("weights ", Bytes(memory.weight_bytes));
  return absl::StrCat(weights, ", cache ", Bytes(memory.cache_bytes), ", graphs ", Bytes(memory.graph_bytes), " (",
                      memory.graphs, " graph files over ", instances, " instance", instances == 1 ? "" : "s", ")");
}

std::string GraphFormatWarning(const std::string& model, const ModelMemory& memory) {
  if (memory.graph_format != 1 || memory.graphs < 2) return "";
  // Every file holds the same weights: all but about one file's worth is duplication.
  const int64_t wasted = std::max<int64_t>(0, memory.graph_bytes - memory.largest_graph_bytes);
  return absl::StrCat("model ", model, ": graph format 1 (no weights.pt): each of its ", memory.graphs,
                      " graph files carries its own copy of the weights, ", Bytes(memory.graph_bytes),
                      " loaded where one copy would be about ", Bytes(memory.largest_graph_bytes), " (about ",
                      Bytes(wasted), " wasted); re-export with backend/compile/export_models.py (format 2)");
}

}  // namespace sluice
