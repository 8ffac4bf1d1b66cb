// The C ABI of sluice_hf_tokenizers (a Rust static library, src/): Hugging Face's `tokenizers` crate loading a
// `tokenizer.json`, and the `minijinja` engine rendering a `tokenizer_config.json` chat template as `transformers`
// does. server/llm/hf_tokenizer.h wraps it in C++; nothing else calls these functions.
// Thread-safety: a loaded SluiceHfTokenizer / SluiceHfChatTemplate is immutable and safe to use from any number of
// threads at once; free it once, after its last use.
// Memory: every char* / uint32_t* returned is owned by the caller and freed with the matching *_free function
// (error messages and tokens: sluice_hf_string_free; texts, which may hold NUL bytes: sluice_hf_text_free).
// Status: 0 success; SLUICE_HF_INVALID_INPUT the caller's input is at fault (not UTF-8, raise_exception in a
// template, ...); SLUICE_HF_FAILED anything else (bad file, template error, internal panic). On failure *error (if
// error is not NULL) receives a NUL-terminated UTF-8 message naming the problem.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_HF_OK 0
#define SLUICE_HF_INVALID_INPUT 1
#define SLUICE_HF_FAILED 2

typedef struct SluiceHfTokenizer SluiceHfTokenizer;
typedef struct SluiceHfChatTemplate SluiceHfChatTemplate;

void sluice_hf_string_free(char* text);
void sluice_hf_text_free(char* text, size_t length);  // length as returned with the text
void sluice_hf_ids_free(uint32_t* ids, size_t count);

// ---- tokenizer.json -------------------------------------------------------------------------------------------
// NULL when the file cannot be read or is not a tokenizer.json this crate version understands.
SluiceHfTokenizer* sluice_hf_tokenizer_load(const char* path, char** error);
void sluice_hf_tokenizer_free(SluiceHfTokenizer* tokenizer);

// text[0, length) must be UTF-8 (else SLUICE_HF_INVALID_INPUT). add_special_tokens: the tokenizer's post-processor
// (e.g. a BOS template) runs, as HF's encode(add_special_tokens=True). split_special_tokens: special added tokens in
// the text are tokenized as ordinary text (HF's split_special_tokens=True / encode_special_tokens); when 0 they are
// matched as HF does by default. *ids gets *count ids (NULL when 0).
int sluice_hf_tokenizer_encode(const SluiceHfTokenizer* tokenizer, const char* text, size_t length,
                               int add_special_tokens, int split_special_tokens, uint32_t** ids, size_t* count,
                               char** error);
// HF's decode(ids, skip_special_tokens). Incomplete UTF-8 at the end decodes to U+FFFD (as in Python). Ids outside
// the vocabulary decode to nothing (as in HF). *text is NUL-terminated, *length bytes.
int sluice_hf_tokenizer_decode(const SluiceHfTokenizer* tokenizer, const uint32_t* ids, size_t count,
                               int skip_special_tokens, char** text, size_t* length, char** error);
// The id of a token's text (vocabulary or added tokens), or -1.
int64_t sluice_hf_tokenizer_token_to_id(const SluiceHfTokenizer* tokenizer, const char* token, size_t length);
// Vocabulary size with the added tokens: one more than the largest id.
size_t sluice_hf_tokenizer_vocab_size(const SluiceHfTokenizer* tokenizer);
// The most input bytes one token can stand for, when that is bounded: the longest decoded token, times 3 when a
// Unicode normalizer (NFC/NFKC composes up to 3 code points into one) or lowercasing runs; -1 when a normalizer may
// delete input (strip, control-character removal, ...), so no byte bound exists.
int64_t sluice_hf_tokenizer_max_input_bytes_per_token(const SluiceHfTokenizer* tokenizer);
// Copies into *token the first special added token whose text occurs in text[0, length), returns 1; 0 if none.
int sluice_hf_tokenizer_find_special_token(const SluiceHfTokenizer* tokenizer, const char* text, size_t length,
                                           char** token);

// ---- chat templates -------------------------------------------------------------------------------------------
// Reads tokenizer_config.json: its chat_template (a string, or a list of {name, template}: "default" is used) and
// its special tokens (bos_token, eos_token, unk_token, pad_token: strings or {"content": ...}), and compiles the
// template. NULL with *error when the file is unreadable, has no chat_template, or the template does not compile.
SluiceHfChatTemplate* sluice_hf_chat_template_load(const char* tokenizer_config_path, char** error);
// The same from a template's source text and the special tokens (NULL: undefined in the template).
SluiceHfChatTemplate* sluice_hf_chat_template_from_source(const char* source, const char* bos_token,
                                                          const char* eos_token, char** error);
void sluice_hf_chat_template_free(SluiceHfChatTemplate* chat_template);
// The template's bos_token / eos_token text (NULL when the config has none); owned by the template.
const char* sluice_hf_chat_template_bos_token(const SluiceHfChatTemplate* chat_template);
const char* sluice_hf_chat_template_eos_token(const SluiceHfChatTemplate* chat_template);
// Renders messages (roles[i], contents[i], UTF-8, NUL-terminated) as transformers' apply_chat_template(
// tokenize=False) does: trim_blocks, lstrip_blocks, loop controls, raise_exception(), tools/documents none.
// raise_exception (the template refusing the conversation) and non-UTF-8 input: SLUICE_HF_INVALID_INPUT; any
// other rendering error: SLUICE_HF_FAILED. *text NUL-terminated, *length bytes.
int sluice_hf_chat_template_render(const SluiceHfChatTemplate* chat_template, const char* const* roles,
                                   const char* const* contents, size_t count, int add_generation_prompt, char** text,
                                   size_t* length, char** error);

#ifdef __cplusplus
}  // extern "C"
#endif
