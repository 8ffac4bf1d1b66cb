#include "backend/torch_token_pick.h"

#include <limits>

namespace sluice {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

torch::Tensor OnDevice(const std::vector<double>& values, torch::ScalarType type, const torch::Device& device) {
  return torch::tensor(values, torch::dtype(torch::kFloat64)).to(device, type);
}

// Sampled rows ([rows, vocab], NaN already -infinity): one id each, as a device tensor.
torch::Tensor Draw(const torch::Tensor& logits, const std::vector<TokenPick>& picks) {
  const torch::Device device = logits.device();
  const int64_t vocab = logits.size(1);
  std::vector<double> inverse_temperature, keep_k, top_p, uniform;
  bool cut = false;
  for (const TokenPick& p : picks) {
    inverse_temperature.push_back(1.0f / p.temperature);  // in single precision, as the host's
    const int64_t k = p.top_k > 0 && p.top_k < vocab ? p.top_k : vocab;
    keep_k.push_back(static_cast<double>(k));
    top_p.push_back(p.top_p);
    uniform.push_back(p.uniform);
    cut = cut || k < vocab || p.top_p < 1.0f;
  }
  const torch::Tensor scaled = logits * OnDevice(inverse_temperature, torch::kFloat32, device).unsqueeze(1);
  const torch::Tensor max = std::get<0>(scaled.max(1, /*keepdim=*/true));
  // The host's weight: 1 at the maximum (also when it is +infinity), else exp of the distance to it.
  torch::Tensor weights = torch::where(scaled == max, torch::ones_like(scaled), (scaled - max).exp());
  if (cut) {
    // Descending scaled logit, equal ones by ascending id (a stable sort keeps id order among equals).
    const torch::Tensor order = std::get<1>(scaled.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true));
    const torch::Tensor rank = torch::arange(vocab, torch::dtype(torch::kFloat64).device(device)).unsqueeze(0);
    const torch::Tensor in_top_k = rank < OnDevice(keep_k, torch::kFloat64, device).unsqueeze(1);
    const torch::Tensor sorted = weights.gather(1, order).to(torch::kFloat64) * in_top_k;
    const torch::Tensor cumulative = sorted.cumsum(1);
    const torch::Tensor p = OnDevice(top_p, torch::kFloat64, device).unsqueeze(1);  // copied to the device once
    const torch::Tensor target = p * cumulative.narrow(1, vocab - 1, 1);
    // The smallest prefix reaching the target: every id whose predecessors weigh less than it.
    const torch::Tensor in_top_p = (cumulative - sorted < target).logical_or(p >= 1.0);
    const torch::Tensor kept = torch::zeros_like(in_top_k).scatter(1, order, in_top_k.logical_and(in_top_p));
    weights = torch::where(kept, weights, torch::zeros_like(weights));
  }
  const torch::Tensor kept_weights = weights.to(torch::kFloat64);
  const torch::Tensor cumulative = kept_weights.cumsum(1);
  const torch::Tensor u = OnDevice(uniform, torch::kFloat64, device).unsqueeze(1) * cumulative.narrow(1, vocab - 1, 1);
  // The first id whose cumulative weight exceeds u, at most the last id with any weight (rounding at the top end).
  const torch::Tensor first_above = (cumulative <= u).sum(1);
  const torch::Tensor ids = torch::arange(vocab, torch::dtype(torch::kInt64).device(device)).unsqueeze(0);
  const torch::Tensor last_weighted = torch::where(kept_weights > 0, ids, torch::zeros_like(ids)).amax(1);
  const torch::Tensor drawn = torch::minimum(first_above, last_weighted);
  // Nothing with any probability (every logit -infinity or NaN): the lowest id, 0.
  return torch::where(max.squeeze(1) == -kInf, torch::zeros_like(drawn), drawn);
}

}  // namespace

bool AnySampled(const std::vector<TokenPick>& picks) {
  for (const TokenPick& p : picks) {
    if (p.temperature > 0.0f) return true;
  }
  return false;
}

std::vector<int32_t> PickTokens(const torch::Tensor& logits, const std::vector<TokenPick>& picks) {
  torch::InferenceMode inference_mode;
  // Sampler::Greedy's rule: torch's argmax takes the first of equal maxima (the lowest id) but would take a NaN as
  // the maximum, so NaN becomes -infinity first (infinities stay as they are).
  const torch::Tensor clean = logits.nan_to_num(-kInf, kInf, -kInf);
  torch::Tensor ids = clean.argmax(1);
  std::vector<int64_t> sampled_rows;
  std::vector<TokenPick> sampled;
  for (size_t r = 0; r < picks.size(); ++r) {
    if (picks[r].temperature > 0.0f) {
      sampled_rows.push_back(static_cast<int64_t>(r));
      sampled.push_back(picks[r]);
    }
  }
  if (!sampled.empty()) {
    const torch::Tensor rows = torch::tensor(sampled_rows, torch::kInt64).to(logits.device());
    ids = ids.index_copy(0, rows, Draw(clean.index_select(0, rows), sampled));
  }
  const torch::Tensor host = ids.to(torch::kCPU, torch::kInt32).contiguous();
  return std::vector<int32_t>(host.data_ptr<int32_t>(), host.data_ptr<int32_t>() + host.numel());
}

}  // namespace sluice
