//! tokenizer.json through Hugging Face's `tokenizers` crate: load, encode, decode, lookups, and the byte bound the
//! server uses to refuse over-long prompts before tokenizing them.
use std::ffi::c_char;
use std::panic::AssertUnwindSafe;

use serde_json::Value as Json;
use tokenizers::Tokenizer;

use crate::ffi_util::{c_str_utf8, guarded, to_c_bytes, to_c_message, utf8, Failure};

/// One loaded tokenizer.json. `split` is the same tokenizer with encode_special_tokens set (special added tokens
/// tokenized as text); both are immutable after load, so any thread may use them.
pub struct SluiceHfTokenizer {
    plain: Tokenizer,
    split: Tokenizer,
    max_input_bytes_per_token: i64,
}

fn load(path: &str) -> Result<SluiceHfTokenizer, Failure> {
    let mut plain = Tokenizer::from_file(path)
        .map_err(|e| Failure::failed(format!("{path} is not a loadable tokenizer.json: {e}")))?;
    // A tokenizer.json may carry truncation and padding settings (sentence-transformers' exports: truncate and pad
    // to 128). sluice owns both: over-long inputs are refused by name against the buckets, never cut silently, and
    // the batcher pads to the bucket. So every encode returns exactly the text's tokens.
    plain
        .with_truncation(None)
        .map_err(|e| Failure::failed(format!("{path}: cannot turn its truncation off: {e}")))?;
    plain.with_padding(None);
    let mut split = plain.clone();
    split.set_encode_special_tokens(true);
    let max_input_bytes_per_token = input_bytes_bound(&plain);
    Ok(SluiceHfTokenizer { plain, split, max_input_bytes_per_token })
}

/// How much a normalizer can shrink the input: Some(1) never, Some(3) Unicode composition/case mapping, None
/// when it may delete input (then no bound exists). Walks the normalizer's serialized form.
fn normalizer_shrink(normalizer: &Json) -> Option<i64> {
    let kind = normalizer.get("type").and_then(Json::as_str).unwrap_or("");
    match kind {
        "Sequence" => normalizer
            .get("normalizers")
            .and_then(Json::as_array)?
            .iter()
            .try_fold(1, |factor, inner| normalizer_shrink(inner).map(|f| factor * f)),
        "Prepend" | "ByteLevel" => Some(1),
        "Replace" => {
            let pattern = normalizer.get("pattern").and_then(|p| p.get("String")).and_then(Json::as_str)?;
            let content = normalizer.get("content").and_then(Json::as_str)?;
            (content.len() >= pattern.len()).then_some(1)
        }
        "NFC" | "NFD" | "NFKC" | "NFKD" | "Lowercase" => Some(3),
        _ => None, // Strip, StripAccents, BertNormalizer (control characters), Precompiled, regex Replace, ...
    }
}

/// The most input bytes one token can cover (see the header), or -1.
fn input_bytes_bound(tokenizer: &Tokenizer) -> i64 {
    let shrink = match tokenizer.get_normalizer() {
        None => Some(1),
        Some(normalizer) => serde_json::to_value(normalizer).ok().as_ref().and_then(normalizer_shrink),
    };
    let model = serde_json::to_value(tokenizer.get_model()).unwrap_or(Json::Null);
    // An unknown token stands for one character (4 bytes) unless runs of unknown input fuse into one; with byte
    // fallback, unknown input becomes byte tokens, never the unknown token.
    let flag = |key: &str| model.get(key).and_then(Json::as_bool).unwrap_or(false);
    let unknown_bytes = match model.get("type").and_then(Json::as_str) {
        Some("BPE") if !flag("fuse_unk") || flag("byte_fallback") => Some(4),
        Some("WordLevel") | Some("BPE") if model.get("unk_token").map_or(true, Json::is_null) => Some(4),
        _ => None, // WordPiece (a whole long word becomes one [UNK]), Unigram (unknown runs fuse)
    };
    match (shrink, unknown_bytes) {
        (Some(factor), Some(unknown)) => {
            let longest = tokenizer.get_vocab(true).keys().map(|token| token.len()).max().unwrap_or(1);
            factor * std::cmp::max(longest as i64, unknown)
        }
        _ => -1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_tokenizer_load(path: *const c_char, error: *mut *mut c_char) -> *mut SluiceHfTokenizer {
    let mut loaded = None;
    let slot = AssertUnwindSafe(&mut loaded);
    guarded(error, move || {
        let slot = slot;
        let path = c_str_utf8(path, "the tokenizer path")?;
        *slot.0 = Some(load(path)?);
        Ok(())
    });
    loaded.map_or(std::ptr::null_mut(), |t| Box::into_raw(Box::new(t)))
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_tokenizer_free(tokenizer: *mut SluiceHfTokenizer) {
    if !tokenizer.is_null() {
        drop(Box::from_raw(tokenizer));
    }
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_tokenizer_encode(
    tokenizer: *const SluiceHfTokenizer,
    text: *const c_char,
    length: usize,
    add_special_tokens: i32,
    split_special_tokens: i32,
    ids: *mut *mut u32,
    count: *mut usize,
    error: *mut *mut c_char,
) -> i32 {
    *ids = std::ptr::null_mut();
    *count = 0;
    let out = AssertUnwindSafe((ids, count));
    guarded(error, move || {
        let out = out;
        let tokenizer = tokenizer.as_ref().ok_or_else(|| Failure::invalid("the tokenizer is NULL"))?;
        let text = utf8(text, length, "the text")?;
        let chosen = if split_special_tokens != 0 { &tokenizer.split } else { &tokenizer.plain };
        let encoding = chosen
            .encode_fast(text, add_special_tokens != 0)
            .map_err(|e| Failure::failed(format!("tokenizing failed: {e}")))?;
        let encoded: Box<[u32]> = encoding.get_ids().to_vec().into_boxed_slice();
        *out.0 .1 = encoded.len();
        if !encoded.is_empty() {
            *out.0 .0 = Box::into_raw(encoded) as *mut u32;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_ids_free(ids: *mut u32, count: usize) {
    if !ids.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ids, count)));
    }
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_tokenizer_decode(
    tokenizer: *const SluiceHfTokenizer,
    ids: *const u32,
    count: usize,
    skip_special_tokens: i32,
    text: *mut *mut c_char,
    length: *mut usize,
    error: *mut *mut c_char,
) -> i32 {
    *text = std::ptr::null_mut();
    *length = 0;
    let out = AssertUnwindSafe((text, length));
    guarded(error, move || {
        let out = out;
        let tokenizer = tokenizer.as_ref().ok_or_else(|| Failure::invalid("the tokenizer is NULL"))?;
        let ids: &[u32] = if count == 0 { &[] } else { std::slice::from_raw_parts(ids, count) };
        let decoded = tokenizer
            .plain
            .decode(ids, skip_special_tokens != 0)
            .map_err(|e| Failure::failed(format!("decoding failed: {e}")))?;
        *out.0 .1 = decoded.len();
        *out.0 .0 = to_c_bytes(decoded.as_bytes());
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_tokenizer_token_to_id(
    tokenizer: *const SluiceHfTokenizer,
    token: *const c_char,
    length: usize,
) -> i64 {
    let (Some(tokenizer), Ok(token)) = (tokenizer.as_ref(), utf8(token, length, "the token")) else { return -1 };
    tokenizer.plain.token_to_id(token).map_or(-1, i64::from)
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_tokenizer_vocab_size(tokenizer: *const SluiceHfTokenizer) -> usize {
    let Some(tokenizer) = tokenizer.as_ref() else { return 0 };
    // get_vocab_size(true) counts tokens, not the id range: added tokens may leave holes or reuse model ids.
    let model_size = tokenizer.plain.get_vocab_size(false);
    let added_max = tokenizer.plain.get_added_tokens_decoder().keys().map(|id| *id as usize + 1).max().unwrap_or(0);
    std::cmp::max(model_size, added_max)
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_tokenizer_max_input_bytes_per_token(tokenizer: *const SluiceHfTokenizer) -> i64 {
    tokenizer.as_ref().map_or(-1, |t| t.max_input_bytes_per_token)
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_tokenizer_find_special_token(
    tokenizer: *const SluiceHfTokenizer,
    text: *const c_char,
    length: usize,
    token: *mut *mut c_char,
) -> i32 {
    *token = std::ptr::null_mut();
    let (Some(tokenizer), Ok(text)) = (tokenizer.as_ref(), utf8(text, length, "the text")) else { return 0 };
    let mut specials: Vec<(u32, String)> = tokenizer
        .plain
        .get_added_tokens_decoder()
        .into_iter()
        .filter(|(_, added)| added.special && !added.content.is_empty())
        .map(|(id, added)| (id, added.content))
        .collect();
    specials.sort(); // the lowest id first, so the answer does not depend on hash order
    match specials.iter().find(|(_, content)| text.contains(content.as_str())) {
        Some((_, content)) => {
            *token = to_c_message(content);
            1
        }
        None => 0,
    }
}

