// sluice-loadtest's generation pieces that need the model's files (the app layer, with Debian's SentencePiece
// through server/llm's Tokenizer): real-text prompts as the model's token ids, and --verify for generation models.
//
// --verify reads <repository>/<model>/reference_generation.json (backend/compile/llama_export.py: greedy batch-1
// eager decoding, EOS ignored; cases {prompt, prompt_ids, output_ids, top2_margins}) and sends each case as a greedy
// request (temperature 0, max_tokens = len(output_ids), ignore_eos) over the run's generation API: openai sends the
// prompt as token ids; triton-stream (text prompts only) sends the case's prompt text (or its ids decoded), after
// checking that the server will tokenize it to exactly prompt_ids (BOS + the model's tokenizer). The streams carry
// text, not ids, so the reference ids are turned into the text each token adds with the model's own tokenizer
// (server/llm's IncrementalDetokenizer, as the server does) and compared token by token with the streamed text;
// openai's usage.completion_tokens must equal len(output_ids). A mismatch names the first differing token and the
// reference's top-2 logit margin there (a near tie can flip under batched arithmetic).
// Thread-safety: the functions block their calling thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/core/api.h"
#include "loadtest/core/client_options.h"
#include "loadtest/core/model_info.h"
#include "loadtest/core/verify_report.h"
#include "loadtest/generation/generation_plan.h"

namespace sluice::loadtest {

// What the workload needs of a generation model: prompt ids (INT32), at most `max_prompt` (> 0) long, else the
// server's largest prompt bucket, else 1024. Over --api openai the server is asked (GET /v1/models: the model must
// be listed; sluice-server adds its vocab_size, max_model_len and max_prompt_tokens, which fill ModelInfo's
// vocab_size and context_length); ModelStreamInfer carries no such limits (text prompts need none).
absl::StatusOr<ModelInfo> GenerationModelInfo(Api api, const ClientOptions& client,
                                              const std::string& model, int64_t max_prompt);

// The real-text corpus as token ids of `tokenizer_path`, else of <model_repository>/<model>/tokenizer.model when
// that exists; empty (synthetic ids) when neither is given. An unreadable tokenizer given by path is an error.
absl::StatusOr<std::vector<int32_t>> RealTextIds(const std::string& tokenizer_path,
                                                 const std::string& model_repository, const std::string& model);

// How the server counts text prompts (--api triton-stream): the tokenizer `tokenizer_path`, else
// <model_repository>/<model>/tokenizer.model; plus the BOS the model's config.yaml (generation.bos_token_id) says
// the server adds (assumed when there is no config to read, as sluice's example models have one). Null when neither
// tokenizer is given; an unreadable tokenizer given by path is an error.
absl::StatusOr<std::shared_ptr<const PromptTokenCounter>> LoadPromptTokenCounter(const std::string& tokenizer_path,
                                                                                 const std::string& model_repository,
                                                                                 const std::string& model);

// `api`: openai or triton-stream.
absl::StatusOr<VerifyReport> VerifyGeneration(Api api, const ClientOptions& client,
                                              const std::string& model, const std::string& model_repository,
                                              double timeout_ms);

}  // namespace sluice::loadtest
