#include "backend/base/stream_step_config.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"

namespace sluice {
namespace {

absl::StatusOr<int64_t> BoundedInt(const YamlNode& node, int64_t min, int64_t max) {
  SLUICE_ASSIGN_OR_RETURN(int64_t value, node.AsInt());
  if (value < min || value > max) return node.Error(absl::StrCat("must be between ", min, " and ", max));
  return value;
}

}  // namespace

absl::StatusOr<StreamStepOptions> ParseStreamStepOptions(const YamlNode& node, int64_t frame_samples) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"chunk_samples", "slots", "batch_sizes", "states", "max_wait_ms"}));
  StreamStepOptions options;
  SLUICE_ASSIGN_OR_RETURN(YamlNode chunk, node.Required("chunk_samples"));
  SLUICE_ASSIGN_OR_RETURN(options.chunk_samples, BoundedInt(chunk, 1, 10'000'000));
  if (options.chunk_samples % frame_samples != 0) {
    return chunk.Error(absl::StrCat("must be a multiple of frame_samples (", frame_samples, ")"));
  }
  options.frames_per_chunk = options.chunk_samples / frame_samples;
  SLUICE_ASSIGN_OR_RETURN(YamlNode slots, node.Required("slots"));
  SLUICE_ASSIGN_OR_RETURN(int64_t slot_count, BoundedInt(slots, 1, 100'000));
  options.slots = static_cast<int>(slot_count);
  SLUICE_ASSIGN_OR_RETURN(YamlNode sizes, node.Required("batch_sizes"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> size_nodes, sizes.AsSequence());
  if (size_nodes.empty()) return sizes.Error("needs at least one batch size");
  for (const YamlNode& size : size_nodes) {
    SLUICE_ASSIGN_OR_RETURN(int64_t b, BoundedInt(size, 1, options.slots));
    if (!options.batch_sizes.empty() && b <= options.batch_sizes.back()) return size.Error("must be ascending");
    options.batch_sizes.push_back(static_cast<int>(b));
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode states, node.Required("states"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> state_nodes, states.AsSequence());
  if (state_nodes.empty()) return states.Error("needs at least one state tensor");
  for (const YamlNode& state : state_nodes) {
    SLUICE_RETURN_IF_ERROR(state.ExpectMap());
    SLUICE_RETURN_IF_ERROR(state.CheckKeys({"name", "shape"}));
    StreamStateSpec spec;
    SLUICE_ASSIGN_OR_RETURN(YamlNode name, state.Required("name"));
    SLUICE_ASSIGN_OR_RETURN(spec.name, name.AsString());
    SLUICE_ASSIGN_OR_RETURN(YamlNode shape, state.Required("shape"));
    SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> dims, shape.AsSequence());
    if (dims.empty()) return shape.Error("needs at least one dimension");
    for (const YamlNode& dim : dims) {
      SLUICE_ASSIGN_OR_RETURN(int64_t d, BoundedInt(dim, 1, 1'000'000));
      spec.shape.push_back(d);
    }
    options.states.push_back(std::move(spec));
  }
  if (auto wait = node.Optional("max_wait_ms")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t ms, BoundedInt(*wait, 0, 10'000));
    options.max_wait_ms = static_cast<int>(ms);
  }
  return options;
}

absl::StatusOr<std::optional<StreamStepOptions>> LoadStreamStepOptions(const ModelConfig& model) {
  if (!model.speech) return std::nullopt;
  const std::string path = (std::filesystem::path(model.directory) / "config.yaml").string();
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  std::optional<YamlNode> speech = root.Optional("speech");
  if (!speech) return std::nullopt;
  std::optional<YamlNode> step = speech->Optional("stream_step");
  if (!step) return std::nullopt;
  SLUICE_ASSIGN_OR_RETURN(StreamStepOptions options, ParseStreamStepOptions(*step, model.speech->frame_samples));
  return options;
}

}  // namespace sluice
