#include "backend/base/generation_config.h"

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"

namespace sluice {
namespace {

// Bounds that keep every size far from overflow in the products the backends compute (cache bytes, tokens).
constexpr int64_t kMaxContextLength = int64_t{1} << 20;
constexpr int64_t kMaxCacheDim = int64_t{1} << 16;
constexpr int64_t kMaxVocabSize = int64_t{1} << 24;

absl::StatusOr<int64_t> BoundedInt(const YamlNode& node, int64_t min, int64_t max) {
  SLUICE_ASSIGN_OR_RETURN(int64_t value, node.AsInt());
  if (value < min || value > max) return node.Error(absl::StrCat("must be between ", min, " and ", max));
  return value;
}

absl::StatusOr<int64_t> RequiredBoundedInt(const YamlNode& parent, std::string_view key, int64_t min, int64_t max) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode node, parent.Required(key));
  return BoundedInt(node, min, max);
}

// Positive, at most `max`, strictly ascending: the smallest fitting bucket is found by a forward scan.
absl::StatusOr<std::vector<int64_t>> AscendingList(const YamlNode& parent, std::string_view key, int64_t max) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode node, parent.Required(key));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> values, node.AsIntList());
  if (values.empty()) return node.Error("must list at least one value");
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] <= 0 || values[i] > max) {
      return node.Error(absl::StrCat("value ", values[i], " must be between 1 and ", max));
    }
    if (i > 0 && values[i] <= values[i - 1]) return node.Error("values must be strictly ascending (and unique)");
  }
  return values;
}


absl::StatusOr<KvCacheShape> ParseKvCache(const YamlNode& parent, int64_t context_length) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode node, parent.Required("kv_cache"));
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"slots", "layers", "kv_heads", "head_dim"}));
  KvCacheShape shape;
  SLUICE_ASSIGN_OR_RETURN(int64_t slots, RequiredBoundedInt(node, "slots", 1, 4096));
  SLUICE_ASSIGN_OR_RETURN(int64_t layers, RequiredBoundedInt(node, "layers", 1, kMaxCacheDim));
  SLUICE_ASSIGN_OR_RETURN(int64_t heads, RequiredBoundedInt(node, "kv_heads", 1, kMaxCacheDim));
  SLUICE_ASSIGN_OR_RETURN(int64_t head_dim, RequiredBoundedInt(node, "head_dim", 1, kMaxCacheDim));
  // The K and V tensors each hold layers x (slots + 1) x context_length x kv_heads x head_dim floats.
  int64_t bytes = 2 * 4;
  bool fits = true;
  for (int64_t d : {layers, slots + 1, context_length, heads, head_dim}) {
    fits = fits && !__builtin_mul_overflow(bytes, d, &bytes);
  }
  if (!fits) return node.Error("the cache (layers x (slots + 1) x context_length x kv_heads x head_dim) is too large");
  shape.slots = static_cast<int>(slots);
  shape.layers = static_cast<int>(layers);
  shape.kv_heads = static_cast<int>(heads);
  shape.head_dim = static_cast<int>(head_dim);
  return shape;
}

absl::StatusOr<CrossAttentionShape> ParseCrossAttention(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"encoder_positions", "encoder_hidden"}));
  CrossAttentionShape shape;
  SLUICE_ASSIGN_OR_RETURN(shape.encoder_positions, RequiredBoundedInt(node, "encoder_positions", 1, kMaxCacheDim));
  SLUICE_ASSIGN_OR_RETURN(shape.encoder_hidden, RequiredBoundedInt(node, "encoder_hidden", 1, kMaxCacheDim));
  return shape;
}

absl::StatusOr<ChatTemplate> ParseChatTemplate(const YamlNode& node) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"system", "user", "assistant", "separator"}));
  ChatTemplate chat;
  for (auto [key, field] : {std::pair{"system", &chat.system}, {"user", &chat.user},
                            {"assistant", &chat.assistant}, {"separator", &chat.separator}}) {
    if (auto value = node.Optional(key)) {
      SLUICE_ASSIGN_OR_RETURN(*field, value->AsString());
    }
  }
  return chat;
}

// The relations between keys, checked once every key has parsed; each error points at the key it names.
absl::Status CheckRelations(const YamlNode& node, const GenerationOptions& options) {
  if (options.kv_lengths.back() != options.context_length) {
    return node.Required("kv_lengths")->Error(absl::StrCat("the last KV length (", options.kv_lengths.back(),
                                                           ") must equal context_length (", options.context_length,
                                                           ")"));
  }
  if (options.max_prompt_length() > options.context_length) {
    return node.Required("prefill_lengths")->Error(absl::StrCat(
        "the largest prompt bucket (", options.max_prompt_length(), ") is over context_length (",
        options.context_length, ")"));
  }
  if (options.max_num_seqs > options.kv_cache.slots || options.max_num_seqs > options.max_decode_batch()) {
    return node.Required("max_num_seqs")->Error(absl::StrCat(
        "must be at most kv_cache.slots (", options.kv_cache.slots, ") and the largest decode batch size (",
        options.max_decode_batch(), ")"));
  }
  if (options.prefill_token_budget < options.max_prompt_length()) {
    return node.Required("prefill_token_budget")->Error(absl::StrCat(
        "must be at least the largest prompt bucket (", options.max_prompt_length(), ")"));
  }
  if (options.chunked_prefill() && options.prefill_chunk_lengths.back() > options.kv_lengths.front()) {
    return node.Required("prefill_chunk_lengths")->Error(absl::StrCat(
        "the largest chunk (", options.prefill_chunk_lengths.back(), ") is over the smallest KV length (",
        options.kv_lengths.front(), "): a chunk graph attends over at least its own length"));
  }
  if (options.default_max_tokens >= options.context_length) {
    return node.Required("default_max_tokens")->Error(absl::StrCat(
        "must be below context_length (", options.context_length, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ParseTokenizerPath(const YamlNode& parent, const std::string& model_dir) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode node, parent.Required("tokenizer"));
  SLUICE_ASSIGN_OR_RETURN(std::string text, node.AsString());
  if (text.empty()) return node.Error("must name the tokenizer file (e.g. tokenizer.model)");
  std::filesystem::path path(text);
  if (path.is_relative()) path = std::filesystem::path(model_dir) / path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return node.Error(absl::StrCat("tokenizer file '", path.string(), "' does not exist"));
  }
  return std::filesystem::absolute(path, ec).lexically_normal().string();
}

absl::StatusOr<GenerationOptions> ParseGenerationOptions(const YamlNode& node, const std::string& model_dir) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"tokenizer", "vocab_size", "context_length", "kv_cache", "prefill_lengths",
                                         "decode_batch_sizes", "kv_lengths", "bos_token_id", "eos_token_id",
                                         "max_num_seqs", "prefill_token_budget", "max_queue_size",
                                         "default_max_tokens", "chat_template", "execution_timeout_ms",
                                         "prefill_chunk_lengths", "iteration_token_budget", "decode_first",
                                         "prefix_cache_block_size",
                                         "cross_attention"}));
  GenerationOptions options;
  SLUICE_ASSIGN_OR_RETURN(options.tokenizer_path, ParseTokenizerPath(node, model_dir));
  SLUICE_ASSIGN_OR_RETURN(int64_t vocab, RequiredBoundedInt(node, "vocab_size", 1, kMaxVocabSize));
  options.vocab_size = static_cast<int>(vocab);
  SLUICE_ASSIGN_OR_RETURN(options.context_length, RequiredBoundedInt(node, "context_length", 2, kMaxContextLength));
  SLUICE_ASSIGN_OR_RETURN(options.kv_cache, ParseKvCache(node, options.context_length));
  SLUICE_ASSIGN_OR_RETURN(options.prefill_lengths, AscendingList(node, "prefill_lengths", kMaxContextLength));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> batch_sizes, AscendingList(node, "decode_batch_sizes", 4096));
  options.decode_batch_sizes.assign(batch_sizes.begin(), batch_sizes.end());
  SLUICE_ASSIGN_OR_RETURN(options.kv_lengths, AscendingList(node, "kv_lengths", kMaxContextLength));

  for (auto [key, id] : {std::pair{"bos_token_id", &options.bos_token_id}, {"eos_token_id", &options.eos_token_id}}) {
    if (auto value = node.Optional(key)) {
      // eos_token_id may list several ids (Llama 3 ends on <|end_of_text|> and <|eot_id|>): the first is
      // eos_token_id, the rest extra_eos_token_ids.
      absl::StatusOr<int64_t> one = value->AsInt();
      std::vector<int64_t> ids;
      if (one.ok() || std::string_view(key) != "eos_token_id") {
        SLUICE_ASSIGN_OR_RETURN(int64_t parsed, std::move(one));
        ids.push_back(parsed);
      } else {
        SLUICE_ASSIGN_OR_RETURN(ids, value->AsIntList());
        if (ids.empty()) return value->Error("must be a token id or a non-empty list of token ids");
      }
      for (int64_t parsed : ids) {
        if (parsed < (ids.size() == 1 ? -1 : 0) || parsed >= vocab) {
          return value->Error(absl::StrCat("must be a token id in [0, vocab_size ", vocab, ")",
                                           ids.size() == 1 ? " or -1 (none)" : ""));
        }
      }
      *id = static_cast<int>(ids[0]);
      if (id == &options.eos_token_id) options.extra_eos_token_ids.assign(ids.begin() + 1, ids.end());
    }
  }
  options.max_num_seqs = std::min(options.kv_cache.slots, options.max_decode_batch());
  if (auto value = node.Optional("max_num_seqs")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t parsed, BoundedInt(*value, 1, 4096));
    options.max_num_seqs = static_cast<int>(parsed);
  }
  options.prefill_token_budget = options.max_prompt_length();
  if (auto value = node.Optional("prefill_token_budget")) {
    SLUICE_ASSIGN_OR_RETURN(options.prefill_token_budget, BoundedInt(*value, 1, int64_t{1} << 40));
  }
  if (node.Optional("prefill_chunk_lengths")) {
    SLUICE_ASSIGN_OR_RETURN(options.prefill_chunk_lengths,
                            AscendingList(node, "prefill_chunk_lengths", kMaxContextLength));
    options.iteration_token_budget = options.max_num_seqs + options.prefill_chunk_lengths.back();
  }
  for (const char* key : {"iteration_token_budget", "decode_first", "prefix_cache_block_size"}) {
    std::optional<YamlNode> value = node.Optional(key);
    if (value && !options.chunked_prefill()) {
      return value->Error("applies to chunked prefill only: set prefill_chunk_lengths too");
    }
  }
  if (auto value = node.Optional("iteration_token_budget")) {
    SLUICE_ASSIGN_OR_RETURN(options.iteration_token_budget, BoundedInt(*value, 1, int64_t{1} << 40));
  }
  if (auto value = node.Optional("decode_first")) {
    SLUICE_ASSIGN_OR_RETURN(options.decode_first, value->AsBool());
  }
  if (auto value = node.Optional("prefix_cache_block_size")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t parsed, BoundedInt(*value, 0, options.context_length));
    if (parsed > 0 && options.context_length % parsed != 0) {
      return value->Error(absl::StrCat("must divide context_length (", options.context_length, ")"));
    }
    options.prefix_cache_block_size = static_cast<int>(parsed);
  }
  if (auto value = node.Optional("max_queue_size")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t parsed, BoundedInt(*value, 1, std::numeric_limits<int>::max()));
    options.max_queue_size = static_cast<int>(parsed);
  }
  if (auto value = node.Optional("execution_timeout_ms")) {
    SLUICE_ASSIGN_OR_RETURN(options.execution_timeout_ms, value->AsDouble());
    if (!(std::isfinite(options.execution_timeout_ms) && options.execution_timeout_ms >= 0)) {
      return value->Error("must be a finite number of milliseconds >= 0 (0: no execution timeout)");
    }
  }
  if (auto value = node.Optional("default_max_tokens")) {
    SLUICE_ASSIGN_OR_RETURN(int64_t parsed, BoundedInt(*value, 1, kMaxContextLength));
    options.default_max_tokens = static_cast<int>(parsed);
  } else {
    options.default_max_tokens =
        static_cast<int>(std::min<int64_t>(options.default_max_tokens, options.context_length - 1));
  }
  if (auto value = node.Optional("chat_template")) {
    SLUICE_ASSIGN_OR_RETURN(options.chat_template, ParseChatTemplate(*value));
  }
  if (auto value = node.Optional("cross_attention")) {
    SLUICE_ASSIGN_OR_RETURN(options.cross_attention, ParseCrossAttention(*value));
  }
  SLUICE_RETURN_IF_ERROR(CheckRelations(node, options));
  return options;
}

}  // namespace sluice
