//! The C ABI of sluice_hf_tokenizers (include/sluice_hf_tokenizers.h documents every function). Each entry point
//! catches panics (a panic never unwinds into C++) and reports failures as a status code plus a message.
mod chat_template;
mod ffi_util;
mod tokenizer;
