// Picking each row's next token where its logits are (a TorchScript backend's device), by the rules of Sampler
// (backend/sampler.h) as TokenPick carries them: greedy rows take the argmax; a
// sampled row scales by 1 / temperature, keeps the top_k highest (ties by ascending id), then the smallest set of
// those, in that order, whose weight reaches top_p of theirs, and draws with its uniform walking the kept ids in id
// order. Weights are single precision, sums double, as on the host; the sums' order may differ (a GPU's scan), so an
// id within rounding of the draw or of the top_p boundary can differ from the host's pick.
// Thread-safety: a pure function of its arguments.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "backend/generation_backend.h"

namespace sluice {

// REQUIRES: logits is [picks.size(), vocab] FP32 on any device, vocab >= 1; every pick validated as
// SamplingParams are (temperature >= 0, top_k >= 0, top_p in (0, 1], uniform in [0, 1)).
// Returns one id per row, on the host.
std::vector<int32_t> PickTokens(const torch::Tensor& logits, const std::vector<TokenPick>& picks);

// Whether any pick samples (temperature > 0): the rest are argmax picks, which cost the device nothing.
bool AnySampled(const std::vector<TokenPick>& picks);

}  // namespace sluice
