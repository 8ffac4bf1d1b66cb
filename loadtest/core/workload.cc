#include "loadtest/core/workload.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {
namespace {

constexpr int64_t kPoolSlack = 8192;  // extra elements so that slices start at varied offsets

template <typename T, typename Dist>
std::string MakePool(int64_t elements, uint64_t seed, Dist dist) {
  std::mt19937_64 rng(seed);
  std::string bytes(elements * sizeof(T), '\0');
  for (int64_t i = 0; i < elements; ++i) {
    const T v = static_cast<T>(dist(rng));
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  return bytes;
}

}  // namespace

uint64_t MixSeed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

absl::StatusOr<std::unique_ptr<Workload>> Workload::Create(std::vector<WorkloadModel> models, uint64_t seed,
                                                           int64_t vocab) {
  if (models.empty()) return absl::InvalidArgumentError("no models to load");
  std::unique_ptr<Workload> w(new Workload());
  w->seed_ = seed;
  double total = 0;
  for (const WorkloadModel& m : models) total += m.weight;
  double running = 0;
  int64_t float_elements = 0, int64_elements = 0, int32_elements = 0;
  for (const WorkloadModel& m : models) {
    if (!m.profile && !m.audio) {
      return absl::InvalidArgumentError(absl::StrCat("model ", m.info.name, " has no length profile"));
    }
    if (m.audio && (m.info.datatype != "FP32" || m.info.elements_per_step != 1 || m.audio->clips.empty())) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", m.info.name, ": audio clips need one FP32 sample per step"));
    }
    running += m.weight / total;
    w->cumulative_.push_back(running);
    const int64_t elements = m.info.max_length * m.info.elements_per_step + kPoolSlack;
    if (m.info.datatype == "FP32") {
      float_elements = std::max(float_elements, elements);
    } else if (m.info.datatype == "INT64") {
      int64_elements = std::max(int64_elements, elements);
    } else if (m.info.datatype == "INT32") {
      int32_elements = std::max(int32_elements, elements);
    } else {
      return absl::UnimplementedError(absl::StrCat("model ", m.info.name, ": input datatype ", m.info.datatype,
                                                   " is not generated (FP32, INT64 and INT32 are)"));
    }
  }
  w->cumulative_.back() = 1.0;
  const int64_t max_id = std::max<int64_t>(2, vocab) - 1;
  w->float_pool_ = MakePool<float>(float_elements, MixSeed(seed, ~0ULL),
                                   std::uniform_real_distribution<float>(-0.3f, 0.3f));
  w->int64_pool_ = MakePool<int64_t>(int64_elements, MixSeed(seed, ~1ULL),
                                     std::uniform_int_distribution<int64_t>(1, max_id));
  w->int32_pool_ = MakePool<int32_t>(int32_elements, MixSeed(seed, ~2ULL),
                                     std::uniform_int_distribution<int64_t>(1, max_id));
  w->models_ = std::move(models);
  return w;
}

PlannedRequest Workload::Draw(uint64_t index) const {
  std::mt19937_64 rng(MixSeed(seed_, index));
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  PlannedRequest planned;
  planned.index = index;
  planned.model = static_cast<int>(std::upper_bound(cumulative_.begin(), cumulative_.end() - 1, u) -
                                   cumulative_.begin());
  const WorkloadModel& m = models_[planned.model];
  if (m.audio) {
    planned.clip = static_cast<int>(std::uniform_int_distribution<size_t>(0, m.audio->clips.size() - 1)(rng));
    planned.length = static_cast<int64_t>(m.audio->clips[planned.clip].samples.size());
  } else {
    planned.length = m.profile->Sample(rng);
  }
  return planned;
}

const std::string* Workload::Reference(const PlannedRequest& planned) const {
  const WorkloadModel& m = models_[planned.model];
  if (!m.audio || planned.clip < 0) return nullptr;
  const std::optional<std::string>& reference = m.audio->clips[planned.clip].reference;
  return reference ? &*reference : nullptr;
}

PlannedRequest Workload::Make(uint64_t index) const {
  PlannedRequest planned = Draw(index);
  const ModelInfo& info = models_[planned.model].info;
  const std::string& pool = info.datatype == "FP32"    ? float_pool_
                            : info.datatype == "INT64" ? int64_pool_
                                                       : int32_pool_;
  const size_t element_size = info.datatype == "INT32" ? 4 : info.datatype == "INT64" ? 8 : 4;
  const int64_t elements = planned.length * info.elements_per_step;
  const int64_t pool_elements = static_cast<int64_t>(pool.size() / element_size);
  const int64_t offset = static_cast<int64_t>(MixSeed(seed_ ^ 0x5eed, index) % (pool_elements - elements + 1));

  Call& call = planned.call;
  call.index = index;  // a client may derive more of the request from it
  call.model = info.name;
  CallTensor& input = call.inputs.emplace_back();
  input.name = info.input_name;
  input.datatype = info.datatype;
  input.shape = {1, planned.length};
  input.shape.insert(input.shape.end(), info.fixed_dims.begin(), info.fixed_dims.end());
  if (planned.clip >= 0) {
    const std::vector<float>& samples = models_[planned.model].audio->clips[planned.clip].samples;
    input.raw.assign(reinterpret_cast<const char*>(samples.data()), samples.size() * sizeof(float));
  } else {
    input.raw = pool.substr(offset * element_size, elements * element_size);
  }
  return planned;
}

}  // namespace sluice::loadtest
