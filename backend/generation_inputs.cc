#include "backend/generation_inputs.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

template <typename T>
bool Contains(const std::vector<T>& values, T value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

absl::Status CheckToken(const ModelConfig& model, const std::string& where, int32_t token) {
  if (token < 0 || token >= model.generation->vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": token id ", token, " is outside [0, vocab_size ",
                                                   model.generation->vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckSlot(const ModelConfig& model, const std::string& where, int slot) {
  if (slot < 0 || slot >= model.generation->kv_cache.slots) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": slot ", slot, " is outside [0, ",
                                                   model.generation->kv_cache.slots, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePrefillInput(const ModelConfig& model, const PrefillInput& input) {
  const GenerationOptions& g = *model.generation;
  const std::string where = absl::StrCat(model.name, " prefill (prompt bucket ", input.bucket_length, ")");
  if (!Contains(g.prefill_lengths, input.bucket_length)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": prompt bucket not compiled"));
  }
  const auto n = static_cast<int64_t>(input.tokens.size());
  if (n < 1 || n > input.bucket_length) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", n, " prompt tokens, expected 1 to ",
                                                   input.bucket_length));
  }
  for (int32_t token : input.tokens) {
    if (absl::Status status = CheckToken(model, where, token); !status.ok()) return status;
  }
  if (g.cross_attention) {
    const int64_t want = g.cross_attention->encoder_output_size();
    if (input.encoder_output == nullptr || static_cast<int64_t>(input.encoder_output->size()) != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the encoder output has ", input.encoder_output ? input.encoder_output->size() : 0,
          " values, expected ", want, " (cross_attention encoder_positions x encoder_hidden)"));
    }
  } else if (input.encoder_output != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": an encoder output given to a decoder-only model"));
  }
  return CheckSlot(model, where, input.slot);
}

absl::Status ValidatePrefillChunkInput(const ModelConfig& model, const PrefillChunkInput& input) {
  const GenerationOptions& g = *model.generation;
  const std::string where = absl::StrCat(model.name, " prefill chunk (chunk ", input.chunk_length, ", KV length ",
                                         input.kv_length, ")");
  if (!Contains(g.prefill_chunk_lengths, input.chunk_length)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": chunk length not compiled"));
  }
  if (!Contains(g.kv_lengths, input.kv_length)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": KV length not compiled"));
  }
  const auto n = static_cast<int64_t>(input.tokens.size());
  if (n < 1 || n > input.chunk_length) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", n, " tokens, expected 1 to ", input.chunk_length));
  }
  if (input.start < 0 || input.start + n > input.kv_length) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": positions [", input.start, ", ", input.start + n,
                                                   ") do not fit in [0, ", input.kv_length, ")"));
  }
  for (int32_t token : input.tokens) {
    if (absl::Status status = CheckToken(model, where, token); !status.ok()) return status;
  }
  return CheckSlot(model, where, input.slot);
}

absl::Status ValidateKvCopyInput(const ModelConfig& model, const KvCopyInput& input) {
  const std::string where = absl::StrCat(model.name, " KV copy (slot ", input.from_slot, " to ", input.to_slot,
                                         ", positions ", input.start, " + ", input.length, ")");
  for (int slot : {input.from_slot, input.to_slot}) {
    if (absl::Status status = CheckSlot(model, where, slot); !status.ok()) return status;
  }
  if (input.from_slot == input.to_slot) return absl::InvalidArgumentError(absl::StrCat(where, ": the same slot"));
  if (input.start < 0 || input.length < 1 || input.start + input.length > model.generation->context_length) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": positions outside [0, context_length ",
                                                   model.generation->context_length, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDecodeInput(const ModelConfig& model, const DecodeInput& input) {
  const GenerationOptions& g = *model.generation;
  const std::string where =
      absl::StrCat(model.name, " decode (batch ", input.batch_size, ", KV length ", input.kv_length, ")");
  if (!Contains(g.decode_batch_sizes, input.batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": batch size not compiled"));
  }
  if (!Contains(g.kv_lengths, input.kv_length)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": KV length not compiled"));
  }
  if (input.rows.empty() || static_cast<int>(input.rows.size()) > input.batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", input.rows.size(), " rows, expected 1 to ",
                                                   input.batch_size));
  }
  std::set<int> slots;
  for (size_t r = 0; r < input.rows.size(); ++r) {
    const DecodeRow& row = input.rows[r];
    const std::string row_where = absl::StrCat(where, " row ", r);
    if (absl::Status status = CheckSlot(model, row_where, row.slot); !status.ok()) return status;
    if (!slots.insert(row.slot).second) {
      return absl::InvalidArgumentError(absl::StrCat(row_where, ": slot ", row.slot, " is used by another row"));
    }
    if (row.position < 0 || row.position >= input.kv_length) {
      return absl::InvalidArgumentError(absl::StrCat(row_where, ": position ", row.position, " is outside [0, ",
                                                     input.kv_length, ")"));
    }
    if (absl::Status status = CheckToken(model, row_where, row.token); !status.ok()) return status;
  }
  return absl::OkStatus();
}

std::string PrefillGraphPath(const ModelConfig& model, int64_t length) {
  return (std::filesystem::path(model.directory) / "graphs" / absl::StrCat("prefill_l", length, ".pt")).string();
}

std::string PrefillChunkGraphPath(const ModelConfig& model, int64_t chunk_length, int64_t kv_length) {
  return (std::filesystem::path(model.directory) / "graphs" /
          absl::StrCat("prefill_chunk_c", chunk_length, "_k", kv_length, ".pt"))
      .string();
}

std::string DecodeGraphPath(const ModelConfig& model, int batch_size, int64_t kv_length) {
  return (std::filesystem::path(model.directory) / "graphs" /
          absl::StrCat("decode_b", batch_size, "_k", kv_length, ".pt"))
      .string();
}

int64_t KvCacheBytes(const GenerationOptions& options) {
  const KvCacheShape& c = options.kv_cache;
  // An encoder-decoder's cross K/V: one more [positions] axis per head in place of context_length.
  const int64_t positions =
      options.context_length + (options.cross_attention ? options.cross_attention->encoder_positions : 0);
  return int64_t{2} * 4 * c.layers * (int64_t{c.slots} + 1) * positions * c.kv_heads * c.head_dim;
}

std::string KvCacheSummary(const GenerationOptions& options) {
  return absl::StrFormat("KV cache %d slots x %d positions, %.1f MB", options.kv_cache.slots,
                         options.context_length, static_cast<double>(KvCacheBytes(options)) / 1e6);
}

}  // namespace sluice
