#include "scheduler/batch_assembly.h"

#include <tbb/parallel_for.h>

#include <cstring>

namespace sluice {

PaddedBatch AssembleBatch(const ModelConfig& model, const std::vector<const InferRequest*>& requests,
                          int batch_size, int64_t bucket_length) {
  PaddedBatch batch{batch_size, bucket_length, {}, std::vector<int64_t>(batch_size, 1)};
  for (size_t r = 0; r < requests.size(); ++r) batch.row_lengths[r] = requests[r]->length;
  for (size_t j = 0; j < model.inputs.size(); ++j) {
    const TensorSpec& spec = model.inputs[j];
    std::vector<int64_t> shape = {batch_size, bucket_length};
    shape.insert(shape.end(), spec.shape.begin() + 1, spec.shape.end());
    batch.inputs.push_back(HostTensor::Zeros(spec.dtype, std::move(shape)));
    HostTensor& tensor = batch.inputs.back();
    const size_t row_bytes = tensor.bytes.size() / batch_size;
    tbb::parallel_for(size_t{0}, requests.size(), [&](size_t r) {
      const HostTensor& row = requests[r]->inputs[j];
      std::memcpy(tensor.bytes.data() + r * row_bytes, row.bytes.data(), row.bytes.size());
    });
  }
  return batch;
}

std::vector<std::vector<HostTensor>> ScatterOutputs(const ModelConfig& model, const BatchResult& result, int rows) {
  std::vector<std::vector<HostTensor>> per_row(rows, std::vector<HostTensor>(model.outputs.size()));
  tbb::parallel_for(0, rows, [&](int r) {
    for (size_t o = 0; o < model.outputs.size(); ++o) {
      const HostTensor& batched = result.outputs[o];
      const size_t row_bytes = batched.bytes.size() / batched.shape[0];
      HostTensor out;
      out.dtype = batched.dtype;
      out.shape.assign(batched.shape.begin() + 1, batched.shape.end());
      size_t keep = row_bytes;
      // A leading variable axis is trimmed to this row's real output length; an inner one stays padded
      // (its real part is not contiguous), so such outputs keep the bucket's full extent.
      if (!out.shape.empty() && model.outputs[o].shape[0] == kVariableDim) {
        keep = row_bytes / out.shape[0] * result.output_lengths[r];
        out.shape[0] = result.output_lengths[r];
      }
      const std::byte* begin = batched.bytes.data() + r * row_bytes;
      out.bytes.assign(begin, begin + keep);
      per_row[r][o] = std::move(out);
    }
  });
  return per_row;
}

}  // namespace sluice
