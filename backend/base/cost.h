// What serving costs: the instance's hourly price (a preset from deploy/pricing.yaml or explicit numbers), how
// many accelerators the instance has, and the share of them each model's instances hold.
//
// Definitions (also in README "Cost metrics"):
//   share(model)   = min(1, accelerators held by the model's instances / accelerators of the instance type)
//   dollars(model) = hourly_usd * share(model) * hours since the server process started (loading and warm-up
//                    included: the machine is paid for while it loads)
// Thread-safety: CostConfig is a plain value; CostMeter is immutable after construction.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/model_config.h"
#include "backend/base/yaml_node.h"

namespace sluice {

struct CostConfig {
  std::string preset;     // empty for explicit prices
  double hourly_usd = 0;  // the whole instance, on demand
  int accelerators = 1;   // NeuronCores, GPUs or vCPUs the instance has
  std::string unit;       // "neuroncore", "gpu", "vcpu" (informational)
  std::string source;     // where the price comes from, and when
  std::string date;       // when the price was read: the preset's `date`, else the file's `snapshot` (may be empty)
  bool unverified = false;  // `unverified: true`, or a source containing "UNVERIFIED"
};

// Reads preset `name` of a pricing file (deploy/pricing.yaml: top-level `snapshot` date, `presets: {NAME: {...}}`).
// The one reader of that format: the server's `cost: {preset}` and sluice-loadtest's --pricing both use it.
// A preset's keys: hourly_usd (> 0, finite), accelerators (>= 1), source (required), and optional unit, date and
// unverified; any other key is refused by name. Errors name file, key and line; NotFound for no preset `name`.
absl::StatusOr<CostConfig> LoadPricingPreset(const std::string& path, const std::string& name);

// Reads `cost:` of the server config: either {preset: NAME, pricing_file: PATH} (PATH relative to the server
// config's directory; read by LoadPricingPreset) or {hourly_usd: X, accelerators: N, source: TEXT, unit: U}.
// Errors name file, key and line.
absl::StatusOr<CostConfig> ParseCostConfig(const YamlNode& node, const std::string& config_dir);

// Accelerators one model's instances hold: NeuronCores for neuron, one GPU per cuda instance, intra-op threads
// (vCPUs) per cpu instance, one per sim instance.
int AcceleratorsHeld(const ModelConfig& model);

class CostMeter {
 public:
  CostMeter(CostConfig config, absl::Time start) : config_(std::move(config)), start_(start) {}
  const CostConfig& config() const { return config_; }
  double Share(int held) const;
  double DollarsSoFar(int held, absl::Time now) const;

 private:
  CostConfig config_;
  absl::Time start_;
};

}  // namespace sluice
