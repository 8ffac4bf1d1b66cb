#include "backend/base/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"

namespace sluice {
namespace {

absl::StatusOr<ModelKind> ParseKind(const YamlNode& node) {
  SLUICE_ASSIGN_OR_RETURN(std::string text, node.AsString());
  if (text == "speech") return ModelKind::kSpeech;
  if (text == "text") return ModelKind::kText;
  if (text == "generic") return ModelKind::kGeneric;
  if (text == "generation") return ModelKind::kGeneration;
  return node.Error(absl::StrCat("unknown model kind '", text, "' (expected speech, text, generic or generation)"));
}

absl::StatusOr<DeviceKind> ParseDevice(const YamlNode& node) {
  SLUICE_ASSIGN_OR_RETURN(std::string text, node.AsString());
  if (text == "cpu") return DeviceKind::kCpu;
  if (text == "cuda") return DeviceKind::kCuda;
  if (text == "neuron") return DeviceKind::kNeuron;
  if (text == "sim") return DeviceKind::kSim;
  return node.Error(absl::StrCat("unknown device '", text, "' (expected cpu, cuda, neuron or sim)"));
}

// `range: [min, max]` on an integer input (e.g. token ids [0, vocab-1]): requests with a value outside it are
// refused at the edge instead of being silently clamped or indexing past an embedding table in the graph.
absl::StatusOr<ValueRange> ParseValueRange(const YamlNode& node, const TensorSpec& spec, bool is_input) {
  if (!is_input || (spec.dtype != DataType::kInt32 && spec.dtype != DataType::kInt64)) {
    return node.Error("range is only allowed on INT32 and INT64 inputs");
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> bounds, node.AsIntList());
  if (bounds.size() != 2 || bounds[0] > bounds[1]) return node.Error("expected [min, max] with min <= max");
  return ValueRange{bounds[0], bounds[1]};
}

// `is_input`: inputs must put the variable axis first (it is the axis the server pads).
absl::StatusOr<TensorSpec> ParseTensorSpec(const YamlNode& node, bool is_input, ModelKind kind) {
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"name", "dtype", "shape", "sample_rate", "range"}));
  TensorSpec spec;
  SLUICE_ASSIGN_OR_RETURN(YamlNode name, node.Required("name"));
  SLUICE_ASSIGN_OR_RETURN(spec.name, name.AsString());
  if (spec.name.empty()) return name.Error("must not be empty");

  SLUICE_ASSIGN_OR_RETURN(YamlNode dtype, node.Required("dtype"));
  SLUICE_ASSIGN_OR_RETURN(std::string dtype_text, dtype.AsString());
  std::optional<DataType> parsed = ParseDataType(dtype_text);
  if (!parsed) {
    return dtype.Error(absl::StrCat("unknown dtype '", dtype_text, "' (expected BOOL, INT32, INT64, FP16 or FP32)"));
  }
  spec.dtype = *parsed;

  SLUICE_ASSIGN_OR_RETURN(YamlNode shape, node.Required("shape"));
  SLUICE_ASSIGN_OR_RETURN(spec.shape, shape.AsIntList());
  if (spec.shape.empty()) return shape.Error("must list at least one dimension");
  int variable_axes = 0;
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (spec.shape[i] == kVariableDim) {
      ++variable_axes;
      if (is_input && i != 0) return shape.Error("an input's variable-length axis (-1) must be its first dimension");
    } else if (spec.shape[i] <= 0) {
      return shape.Error(absl::StrCat("dimension ", i, " is ", spec.shape[i], "; dimensions are positive or -1"));
    }
  }
  if (variable_axes > 1) return shape.Error("at most one variable-length axis (-1) is allowed");
  if (is_input && variable_axes == 0) return shape.Error("an input needs a variable-length axis (-1) first");

  if (std::optional<YamlNode> rate = node.Optional("sample_rate")) {
    if (!is_input || kind != ModelKind::kSpeech) {
      return rate->Error("sample_rate is only allowed on inputs of speech models");
    }
    SLUICE_ASSIGN_OR_RETURN(int64_t value, rate->AsInt());
    if (value <= 0 || value > std::numeric_limits<int>::max()) {
      return rate->Error("must be a positive number of samples per second");
    }
    spec.sample_rate = static_cast<int>(value);
  }
  if (std::optional<YamlNode> range = node.Optional("range")) {
    SLUICE_ASSIGN_OR_RETURN(spec.value_range, ParseValueRange(*range, spec, is_input));
  }
  return spec;
}

absl::StatusOr<std::vector<TensorSpec>> ParseTensorList(const YamlNode& root, std::string_view key, bool is_input,
                                                        ModelKind kind) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode list, root.Required(key));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> items, list.AsSequence());
  if (items.empty()) return list.Error("must list at least one tensor");
  std::vector<TensorSpec> specs;
  std::set<std::string> names;
  for (const YamlNode& item : items) {
    SLUICE_ASSIGN_OR_RETURN(TensorSpec spec, ParseTensorSpec(item, is_input, kind));
    if (!names.insert(spec.name).second) return item.Error(absl::StrCat("duplicate name '", spec.name, "'"));
    specs.push_back(std::move(spec));
  }
  return specs;
}

// Positive and strictly ascending: the smallest fitting bucket is found by a forward scan.
absl::StatusOr<std::vector<int64_t>> ParseAscendingList(const YamlNode& parent, std::string_view key) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode node, parent.Required(key));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> values, node.AsIntList());
  if (values.empty()) return node.Error("must list at least one value");
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] <= 0) return node.Error(absl::StrCat("value ", values[i], " must be positive"));
    if (i > 0 && values[i] <= values[i - 1]) return node.Error("values must be strictly ascending");
  }
  return values;
}

absl::StatusOr<BucketSpec> ParseBuckets(const YamlNode& root) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode node, root.Required("buckets"));
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"lengths", "batch_sizes"}));
  BucketSpec buckets;
  SLUICE_ASSIGN_OR_RETURN(buckets.lengths, ParseAscendingList(node, "lengths"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> batch_sizes, ParseAscendingList(node, "batch_sizes"));
  // Stored as int: a larger value would wrap (2147483648 became negative).
  if (batch_sizes.back() > std::numeric_limits<int>::max()) {
    return node.Required("batch_sizes")->Error(
        absl::StrCat("batch size ", batch_sizes.back(), " is over ", std::numeric_limits<int>::max()));
  }
  buckets.batch_sizes.assign(batch_sizes.begin(), batch_sizes.end());
  return buckets;
}

absl::StatusOr<BatchingOptions> ParseBatching(const YamlNode& root) {
  BatchingOptions options;
  std::optional<YamlNode> node = root.Optional("batching");
  if (!node) return options;
  SLUICE_RETURN_IF_ERROR(node->CheckKeys(
      {"max_queue_delay_ms", "max_queue_size", "priority_levels", "default_priority_level", "execution_timeout_ms",
       "batch_size_policy", "max_fill_wait_ms", "skip_futile_delay", "await_returns", "idle_spin_us"}));
  if (auto policy = node->Optional("batch_size_policy")) {
    SLUICE_ASSIGN_OR_RETURN(std::string value, policy->AsString());
    if (value == "measured") {
      options.batch_size_policy = BatchingOptions::BatchSizePolicy::kMeasured;
    } else if (value == "largest") {
      options.batch_size_policy = BatchingOptions::BatchSizePolicy::kLargest;
    } else {
      return policy->Error(absl::StrCat("must be measured or largest, not '", value, "'"));
    }
  }
  if (auto delay = node->Optional("max_queue_delay_ms")) {
    SLUICE_ASSIGN_OR_RETURN(options.max_queue_delay_ms, delay->AsDouble());
    if (!(std::isfinite(options.max_queue_delay_ms) && options.max_queue_delay_ms >= 0)) {
      return delay->Error("must be >= 0 and finite");
    }
  }
  if (auto fill = node->Optional("max_fill_wait_ms")) {
    SLUICE_ASSIGN_OR_RETURN(options.max_fill_wait_ms, fill->AsDouble());
    if (!(std::isfinite(*options.max_fill_wait_ms) && *options.max_fill_wait_ms >= 0)) {
      return fill->Error("must be >= 0 and finite (0: off)");
    }
  }
  if (auto skip = node->Optional("skip_futile_delay")) {
    SLUICE_ASSIGN_OR_RETURN(options.skip_futile_delay, skip->AsBool());
  }
  if (auto await_returns = node->Optional("await_returns")) {
    SLUICE_ASSIGN_OR_RETURN(options.await_returns, await_returns->AsBool());
  }
  if (auto spin = node->Optional("idle_spin_us")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, spin->AsInt());
    if (value < 0 || value > 10000) return spin->Error("must be between 0 (off) and 10000");
    options.idle_spin_us = static_cast<int>(value);
  }
  if (auto timeout = node->Optional("execution_timeout_ms")) {
    SLUICE_ASSIGN_OR_RETURN(options.execution_timeout_ms, timeout->AsDouble());
    if (!(std::isfinite(options.execution_timeout_ms) && options.execution_timeout_ms >= 0)) {
      return timeout->Error("must be >= 0 and finite (0: no limit)");
    }
  }
  if (auto size = node->Optional("max_queue_size")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, size->AsInt());
    if (value < 1 || value > std::numeric_limits<int>::max()) {
      return size->Error(absl::StrCat("must be between 1 and ", std::numeric_limits<int>::max()));
    }
    options.max_queue_size = static_cast<int>(value);
  }
  if (auto levels = node->Optional("priority_levels")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, levels->AsInt());
    if (value < 1 || value > 16) return levels->Error("must be between 1 and 16");
    options.priority_levels = static_cast<int>(value);
    options.default_priority_level = std::min(options.default_priority_level, options.priority_levels);
  }
  if (auto level = node->Optional("default_priority_level")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, level->AsInt());
    if (value < 1 || value > options.priority_levels) {
      return level->Error(absl::StrCat("must be between 1 and priority_levels (", options.priority_levels, ")"));
    }
    options.default_priority_level = static_cast<int>(value);
  }
  return options;
}

absl::StatusOr<InstanceGroup> ParseInstanceGroup(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(
      node.CheckKeys({"count", "device", "cores", "intra_op_threads", "inter_op_threads", "runtime", "neuron_library"}));
  InstanceGroup group;
  SLUICE_ASSIGN_OR_RETURN(YamlNode device, node.Required("device"));
  SLUICE_ASSIGN_OR_RETURN(group.device, ParseDevice(device));
  if (auto count = node.Optional("count")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, count->AsInt());
    if (value < 1 || value > 64) return count->Error("must be between 1 and 64");
    group.count = static_cast<int>(value);
  }
  if (auto threads = node.Optional("intra_op_threads")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, threads->AsInt());
    if (value < 1 || value > 256) return threads->Error("must be between 1 and 256");
    group.intra_op_threads = static_cast<int>(value);
  }
  if (auto threads = node.Optional("inter_op_threads")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, threads->AsInt());
    if (value < 1 || value > 256) return threads->Error("must be between 1 and 256");
    group.inter_op_threads = static_cast<int>(value);
  }
  if (auto cores = node.Optional("cores")) {
    if (group.device != DeviceKind::kNeuron && group.device != DeviceKind::kCpu) {
      return cores->Error("cores is only supported for devices cpu (CPUs to pin to) and neuron (NeuronCores)");
    }
    SLUICE_ASSIGN_OR_RETURN(std::string text, cores->AsString());
    absl::StatusOr<CoreRange> range = ParseCoreRange(text);
    if (!range.ok()) return cores->Error(std::string(range.status().message()));
    if (range->size() % group.count != 0) {
      return cores->Error(absl::StrCat(range->size(), " cores cannot be split evenly over count ", group.count));
    }
    group.cores = *range;
  } else if (group.device == DeviceKind::kNeuron) {
    return node.Error("device neuron needs 'cores' (e.g. cores: \"0-1\")");
  }
  if (auto runtime = node.Optional("runtime")) {
    if (group.device != DeviceKind::kNeuron) return runtime->Error("runtime is only for device neuron");
    SLUICE_ASSIGN_OR_RETURN(std::string text, runtime->AsString());
    if (text == "nrt") {
      group.neuron_runtime = NeuronRuntimeKind::kNrt;
      group.neuron_library = "libnrt.so.1";
    } else if (text != "torchscript") {
      return runtime->Error(absl::StrCat("unknown runtime '", text, "' (expected torchscript or nrt)"));
    }
  }
  if (auto library = node.Optional("neuron_library")) {
    if (group.device != DeviceKind::kNeuron) return library->Error("neuron_library is only for device neuron");
    SLUICE_ASSIGN_OR_RETURN(group.neuron_library, library->AsString());
  }
  return group;
}

absl::StatusOr<SimFaults> ParseSimFaults(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys(
      {"error_rate", "exception_rate", "gone_after_batches", "hang_after_batches", "hang_ms", "replica", "seed"}));
  SimFaults faults;
  for (auto [key, rate] : {std::pair{"error_rate", &faults.error_rate}, {"exception_rate", &faults.exception_rate}}) {
    if (auto value = node.Optional(key)) {
      SLUICE_ASSIGN_OR_RETURN(*rate, value->AsDouble());
      if (!(*rate >= 0 && *rate <= 1)) return value->Error("must be a probability in [0, 1]");
    }
  }
  if (faults.error_rate + faults.exception_rate > 1) return node.Error("error_rate + exception_rate must be <= 1");
  if (auto gone = node.Optional("gone_after_batches")) {
    SLUICE_ASSIGN_OR_RETURN(faults.gone_after_batches, gone->AsInt());
    if (faults.gone_after_batches < 0) return gone->Error("must be >= 0 (0: never)");
  }
  if (auto hang = node.Optional("hang_after_batches")) {
    SLUICE_ASSIGN_OR_RETURN(faults.hang_after_batches, hang->AsInt());
    if (faults.hang_after_batches < 0) return hang->Error("must be >= 0 (0: never)");
  }
  if (auto hang_ms = node.Optional("hang_ms")) {
    SLUICE_ASSIGN_OR_RETURN(faults.hang_ms, hang_ms->AsDouble());
    if (!(std::isfinite(faults.hang_ms) && faults.hang_ms >= 0)) return hang_ms->Error("must be >= 0 and finite");
  }
  if (auto replica = node.Optional("replica")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, replica->AsInt());
    if (value < 0 || value > 1023) return replica->Error("must be a replica index, 0..1023");
    faults.replica = static_cast<int>(value);
  }
  if (auto seed = node.Optional("seed")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t value, seed->AsInt());
    faults.seed = static_cast<uint64_t>(value);
  }
  return faults;
}

absl::StatusOr<SimCostModel> ParseSim(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(
      node.CheckKeys({"base_ms", "per_sample_us", "output_steps_per_input_step", "faults", "picks_tokens"}));
  SimCostModel sim;
  SLUICE_ASSIGN_OR_RETURN(YamlNode base, node.Required("base_ms"));
  SLUICE_ASSIGN_OR_RETURN(sim.base_ms, base.AsDouble());
  if (!(std::isfinite(sim.base_ms) && sim.base_ms >= 0)) return base.Error("must be >= 0 and finite");
  SLUICE_ASSIGN_OR_RETURN(YamlNode per_sample, node.Required("per_sample_us"));
  SLUICE_ASSIGN_OR_RETURN(sim.per_sample_us, per_sample.AsDouble());
  if (!(std::isfinite(sim.per_sample_us) && sim.per_sample_us >= 0)) {
    return per_sample.Error("must be >= 0 and finite");
  }
  if (auto ratio = node.Optional("output_steps_per_input_step")) {
    SLUICE_ASSIGN_OR_RETURN(sim.output_steps_per_input_step, ratio->AsDouble());
    if (!(std::isfinite(sim.output_steps_per_input_step) && sim.output_steps_per_input_step > 0)) {
      return ratio->Error("must be > 0 and finite");
    }
  }
  if (auto faults = node.Optional("faults")) {
    SLUICE_ASSIGN_OR_RETURN(sim.faults, ParseSimFaults(*faults));
  }
  if (auto picks = node.Optional("picks_tokens")) {
    SLUICE_ASSIGN_OR_RETURN(sim.picks_tokens, picks->AsBool());
  }
  return sim;
}

// The largest batch of a tensor (max batch size x max bucket length for its variable axis x its fixed dimensions, in
// bytes) must be a number int64 holds: request validation and batching compute it, and signed overflow is undefined.
absl::Status CheckLargestBatch(const YamlNode& list, const std::vector<TensorSpec>& specs, const BucketSpec& buckets) {
  for (const TensorSpec& spec : specs) {
    int64_t bytes = static_cast<int64_t>(DataTypeSize(spec.dtype));
    bool fits = !__builtin_mul_overflow(bytes, int64_t{buckets.batch_sizes.back()}, &bytes);
    for (int64_t d : spec.shape) {
      fits = fits && !__builtin_mul_overflow(bytes, d == kVariableDim ? buckets.lengths.back() : d, &bytes);
    }
    if (!fits) {
      return list.Error(absl::StrCat("tensor '", spec.name, "': its largest batch (batch ", buckets.batch_sizes.back(),
                                     ", length ", buckets.lengths.back(), ", shape ", ShapeToString(spec.shape),
                                     ") is over 2^63 bytes"));
    }
  }
  return absl::OkStatus();
}

// recognizer: whisper: the encoder's output feeds the decoder's cross-attention (generation.cross_attention), whose
// prompt and suppressed tokens lie inside its vocabulary.
absl::Status CheckEncoderDecoder(const YamlNode& node, const ModelConfig& config, const TensorSpec& output) {
  if (!config.generation || !config.generation->cross_attention) {
    return node.Error("recognizer whisper needs a generation: section (the decoder) with cross_attention");
  }
  const GenerationOptions& g = *config.generation;
  if (g.chunked_prefill()) {  // a chunk graph takes no encoder output: admission must be one whole prefill
    return node.Error("recognizer whisper's decoder cannot use prefill_chunk_lengths (chunked prefill)");
  }
  const CrossAttentionShape& cross = *g.cross_attention;
  if (output.dtype != DataType::kFp32 || output.shape != std::vector<int64_t>{cross.encoder_positions,
                                                                               cross.encoder_hidden}) {
    return node.Error(absl::StrCat("output '", output.name, "' must be FP32 with shape [", cross.encoder_positions,
                                   ", ", cross.encoder_hidden, "] (generation.cross_attention)"));
  }
  const WhisperOptions& w = config.speech->whisper;
  std::vector<int> ids = {w.start_token_id, w.transcribe_token_id, w.no_timestamps_token_id};
  for (const std::vector<int>* list : {&w.language_token_ids, &w.suppress_tokens, &w.begin_suppress_tokens}) {
    ids.insert(ids.end(), list->begin(), list->end());
  }
  for (int id : ids) {
    if (id >= g.vocab_size) {
      return node.Required("whisper")->Error(absl::StrCat("token id ", id, " is outside the decoder's vocabulary [0, ",
                                                          g.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

// The speech section against the rest of the config: a speech model, a [frames, classes] FP32 output with one
// class per vocabulary symbol, and long-audio windows that advance (overlap on both sides < the largest bucket).
absl::Status CheckSpeech(const YamlNode& node, ModelConfig& config) {
  if (config.kind != ModelKind::kSpeech) return node.Error("speech is only allowed on kind: speech models");
  SpeechOptions& speech = *config.speech;
  if (speech.output.empty()) speech.output = config.outputs.front().name;
  const TensorSpec* output = nullptr;
  for (const TensorSpec& spec : config.outputs) {
    if (spec.name == speech.output) output = &spec;
  }
  if (output == nullptr) {
    return node.Required("output")->Error(absl::StrCat("no output named '", speech.output, "'"));
  }
  if (speech.recognizer == RecognizerKind::kWhisper) return CheckEncoderDecoder(node, config, *output);
  const int64_t classes = static_cast<int64_t>(speech.vocabulary.size());
  if (output->dtype != DataType::kFp32 || output->shape.size() != 2 || output->shape[0] != kVariableDim ||
      output->shape[1] != classes) {
    return node.Error(absl::StrCat("output '", output->name, "' must be FP32 with shape [-1, ", classes,
                                   "] (frames x one class per vocabulary symbol)"));
  }
  const int sample_rate = *config.inputs.front().sample_rate;
  const double largest_ms = 1000.0 * static_cast<double>(config.max_length()) / sample_rate;
  // The default overlap suits buckets of many seconds; models with short buckets get a quarter of the largest.
  if (!speech.long_audio_overlap_set) {
    speech.long_audio_overlap_ms = std::min(speech.long_audio_overlap_ms, static_cast<int>(largest_ms / 4));
  }
  if (2.0 * speech.long_audio_overlap_ms >= largest_ms) {
    return node.Error(absl::StrCat("long_audio_overlap_ms (", speech.long_audio_overlap_ms,
                                   ") on both sides must be shorter than the largest bucket (", largest_ms, " ms)"));
  }
  return absl::OkStatus();
}

// The embedding section against the rest of the config: a text model whose one input is the token ids (INT64,
// shape [-1]) and whose chosen output is one FP32 vector per input.
absl::Status CheckEmbedding(const YamlNode& node, ModelConfig& config) {
  if (config.kind != ModelKind::kText) return node.Error("embedding is only allowed on kind: text models");
  EmbeddingOptions& embedding = *config.embedding;
  if (config.inputs.size() != 1 || config.inputs.front().dtype != DataType::kInt64 ||
      config.inputs.front().shape != std::vector<int64_t>{kVariableDim}) {
    return node.Error("an embedding model needs exactly one input: the token ids, INT64 with shape [-1]");
  }
  if (embedding.output.empty()) embedding.output = config.outputs.front().name;
  const TensorSpec* output = nullptr;
  for (const TensorSpec& spec : config.outputs) {
    if (spec.name == embedding.output) output = &spec;
  }
  if (output == nullptr) {
    return node.Required("output")->Error(absl::StrCat("no output named '", embedding.output, "'"));
  }
  if (output->dtype != DataType::kFp32 || output->shape.size() != 1 || output->shape[0] == kVariableDim) {
    return node.Error(absl::StrCat("output '", output->name, "' must be FP32 with a fixed shape [dims]"));
  }
  return absl::OkStatus();
}

// inputs, outputs, buckets and batching: the (batch, length) bucket models' sections.
absl::Status ParseBucketSections(const YamlNode& root, ModelConfig& config) {
  if (std::optional<YamlNode> generation = root.Optional("generation")) {
    // The decoder of an encoder-decoder speech model (speech.recognizer whisper; CheckEncoderDecoder).
    if (config.kind != ModelKind::kSpeech) {
      return generation->Error("generation is only allowed on kind: generation models and encoder-decoder speech "
                               "models");
    }
    SLUICE_ASSIGN_OR_RETURN(config.generation, ParseGenerationOptions(*generation, config.directory));
  }
  SLUICE_ASSIGN_OR_RETURN(config.inputs, ParseTensorList(root, "inputs", /*is_input=*/true, config.kind));
  SLUICE_ASSIGN_OR_RETURN(config.outputs, ParseTensorList(root, "outputs", /*is_input=*/false, config.kind));
  if (config.kind == ModelKind::kSpeech && !config.inputs.front().sample_rate) {
    SLUICE_ASSIGN_OR_RETURN(YamlNode inputs, root.Required("inputs"));
    return inputs.Error("a speech model's first input needs sample_rate (audio seconds are counted from it)");
  }
  SLUICE_ASSIGN_OR_RETURN(config.buckets, ParseBuckets(root));
  SLUICE_ASSIGN_OR_RETURN(config.batching, ParseBatching(root));
  for (std::string_view key : {"inputs", "outputs"}) {
    SLUICE_ASSIGN_OR_RETURN(YamlNode list, root.Required(key));
    SLUICE_RETURN_IF_ERROR(CheckLargestBatch(list, key == "inputs" ? config.inputs : config.outputs, config.buckets));
  }
  return absl::OkStatus();
}

// A generation model's graphs, cache and queue are all in its generation: section (generation_config.h).
absl::Status ParseGenerationSection(const YamlNode& root, ModelConfig& config) {
  for (std::string_view key : {"inputs", "outputs", "buckets", "batching", "speech"}) {
    if (std::optional<YamlNode> node = root.Optional(key)) {
      return node->Error(absl::StrCat(std::string(key),
                                      " is not allowed on kind: generation models (their graphs, cache and queue "
                                      "are set in the generation: section)"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode section, root.Required("generation"));
  SLUICE_ASSIGN_OR_RETURN(config.generation, ParseGenerationOptions(section, config.directory));
  return absl::OkStatus();
}

}  // namespace

const char* ModelKindName(ModelKind kind) {
  switch (kind) {
    case ModelKind::kSpeech: return "speech";
    case ModelKind::kText: return "text";
    case ModelKind::kGeneric: return "generic";
    case ModelKind::kGeneration: return "generation";
  }
  return "generic";
}

const char* DeviceKindName(DeviceKind device) {
  switch (device) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda";
    case DeviceKind::kNeuron: return "neuron";
    case DeviceKind::kSim: return "sim";
  }
  return "cpu";
}

bool TensorSpec::has_variable_axis() const {
  return std::find(shape.begin(), shape.end(), kVariableDim) != shape.end();
}

int64_t TensorSpec::elements_per_step() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= (d == kVariableDim ? 1 : d);
  return n;
}

const TensorSpec& ModelConfig::speech_output() const {
  for (const TensorSpec& output : outputs) {
    if (output.name == speech->output) return output;
  }
  return outputs.front();  // unreachable after ParseModelConfig: it resolved the name
}

const TensorSpec& ModelConfig::embedding_output() const {
  for (const TensorSpec& output : outputs) {
    if (output.name == embedding->output) return output;
  }
  return outputs.front();  // unreachable after ParseModelConfig: it resolved the name
}

bool ModelConfig::has_variable_output() const {
  return std::any_of(outputs.begin(), outputs.end(), [](const TensorSpec& t) { return t.has_variable_axis(); });
}

bool ModelConfig::has_cpu_instances() const {
  return std::any_of(instances.begin(), instances.end(),
                     [](const InstanceGroup& group) { return group.device == DeviceKind::kCpu; });
}

double FillWaitMs(const ModelConfig& model) {
  constexpr double kAcceleratorDefaultMs = 150;
  return model.batching.max_fill_wait_ms.value_or(model.has_cpu_instances() ? 0 : kAcceleratorDefaultMs);
}

std::string ModelConfig::GraphPath(int batch_size, int64_t length) const {
  return (std::filesystem::path(directory) / "graphs" / absl::StrCat("b", batch_size, "_l", length, ".pt")).string();
}

absl::StatusOr<ModelConfig> ParseModelConfig(const YamlNode& root, const std::string& model_dir) {
  SLUICE_RETURN_IF_ERROR(root.CheckKeys(
      {"name", "kind", "inputs", "outputs", "buckets", "batching", "instances", "sim", "speech", "embedding",
       "generation"}));
  ModelConfig config;
  config.directory = model_dir;
  config.config_path = root.file();

  SLUICE_ASSIGN_OR_RETURN(YamlNode name, root.Required("name"));
  SLUICE_ASSIGN_OR_RETURN(config.name, name.AsString());
  const std::string dir_name = std::filesystem::path(model_dir).lexically_normal().filename().string();
  if (!dir_name.empty() && config.name != dir_name) {
    return name.Error(absl::StrCat("model name '", config.name, "' must match its directory name '", dir_name, "'"));
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode kind, root.Required("kind"));
  SLUICE_ASSIGN_OR_RETURN(config.kind, ParseKind(kind));

  SLUICE_RETURN_IF_ERROR(config.kind == ModelKind::kGeneration ? ParseGenerationSection(root, config)
                                                                 : ParseBucketSections(root, config));

  SLUICE_ASSIGN_OR_RETURN(YamlNode instances, root.Required("instances"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> groups, instances.AsSequence());
  if (groups.empty()) return instances.Error("must list at least one instance group");
  bool uses_sim = false;
  for (const YamlNode& item : groups) {
    SLUICE_ASSIGN_OR_RETURN(InstanceGroup group, ParseInstanceGroup(item));
    uses_sim = uses_sim || group.device == DeviceKind::kSim;
    config.instances.push_back(std::move(group));
  }
  if (std::optional<YamlNode> sim = root.Optional("sim")) {
    if (!uses_sim) return sim->Error("sim is set but no instance group uses device sim");
    SLUICE_ASSIGN_OR_RETURN(config.sim, ParseSim(*sim));
    if (std::optional<YamlNode> ratio = sim->Optional("output_steps_per_input_step");
        ratio && config.kind == ModelKind::kGeneration) {
      return ratio->Error("has no meaning for kind: generation models (they return one logits row per sequence)");
    }
    if (std::optional<YamlNode> picks = sim->Optional("picks_tokens");
        picks && config.kind != ModelKind::kGeneration) {
      return picks->Error("applies to kind: generation models only (their decode steps pick tokens)");
    }
  } else if (uses_sim) {
    return instances.Error("device sim needs a top-level 'sim: {base_ms, per_sample_us}' cost model");
  }
  if (std::optional<YamlNode> speech = root.Optional("speech")) {
    SLUICE_ASSIGN_OR_RETURN(config.speech, ParseSpeechOptions(*speech));
    SLUICE_RETURN_IF_ERROR(CheckSpeech(*speech, config));
  }
  if (config.kind == ModelKind::kSpeech && config.generation &&
      (!config.speech || config.speech->recognizer != RecognizerKind::kWhisper)) {
    return root.Required("generation")->Error("a speech model's generation: section is its decoder: it needs "
                                               "speech: {recognizer: whisper}");
  }
  if (std::optional<YamlNode> embedding = root.Optional("embedding")) {
    SLUICE_ASSIGN_OR_RETURN(config.embedding, ParseEmbeddingOptions(*embedding, config.directory));
    SLUICE_RETURN_IF_ERROR(CheckEmbedding(*embedding, config));
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.yaml").string();
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  return ParseModelConfig(root, model_dir);
}

}  // namespace sluice
