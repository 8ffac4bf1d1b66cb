#include "scheduler/batch_assembly.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstring>

#include "backend/base/tsan_handoff.h"

namespace sluice {
namespace {

// tbb::parallel_for over rows [begin, end), with its hand-offs stated to ThreadSanitizer (Debian's oneTBB is not
// instrumented, so TSan sees none of them; no-ops without TSan):
//   - parallel_for copies its body into each task it splits off, and a task runs (or splits again) on whichever
//     thread takes it: each copy acquires from the copy it is made from and releases itself once made, so the
//     caller's writes before the call (the batch tensors, the requests it took from the queue) reach every row;
//   - parallel_for returns only after every task has run: each releases `done` after its rows, and the caller
//     acquires it on return, so the rows written (and their allocations) reach the caller.
// A copy also acquires its own address first, released by the task object that held that memory before (oneTBB
// pools its task memory across threads). What is left unpaired is oneTBB's own code touching its task objects
// (race_top:tbb::detail:: in tsan_tbb.supp and tsan_services.supp).
template <typename Index, typename Rows>
class RowsBody {
 public:
  RowsBody(const Rows* rows, const char* done) : rows_(rows), done_(done) { SLUICE_TSAN_RELEASE(this); }
  RowsBody(const RowsBody& other) {
    SLUICE_TSAN_ACQUIRE(this);
    SLUICE_TSAN_ACQUIRE(&other);  // before reading it
    rows_ = other.rows_;
    done_ = other.done_;
    SLUICE_TSAN_RELEASE(this);
  }
  RowsBody& operator=(const RowsBody&) = delete;
  ~RowsBody() { SLUICE_TSAN_RELEASE(this); }

  void operator()(const tbb::blocked_range<Index>& range) const {
    SLUICE_TSAN_ACQUIRE(this);
    for (Index i = range.begin(); i != range.end(); ++i) (*rows_)(i);
    SLUICE_TSAN_RELEASE(done_);
  }

 private:
  const Rows* rows_;
  const char* done_;
};

template <typename Index, typename Rows>
void ParallelForRows(Index begin, Index end, const Rows& rows) {
  if (begin >= end) return;
  const char done = 0;  // the sync address for the rows' release back to this thread
  tbb::parallel_for(tbb::blocked_range<Index>(begin, end), RowsBody<Index, Rows>(&rows, &done));
  SLUICE_TSAN_ACQUIRE(&done);
}

}  // namespace

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
    ParallelForRows(size_t{0}, requests.size(), [&](size_t r) {
      const HostTensor& row = requests[r]->inputs[j];
      std::memcpy(tensor.bytes.data() + r * row_bytes, row.bytes.data(), row.bytes.size());
    });
  }
  return batch;
}

std::vector<std::vector<HostTensor>> ScatterOutputs(const ModelConfig& model, const BatchResult& result, int rows) {
  std::vector<std::vector<HostTensor>> per_row(rows, std::vector<HostTensor>(model.outputs.size()));
  ParallelForRows(0, rows, [&](int r) {
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
