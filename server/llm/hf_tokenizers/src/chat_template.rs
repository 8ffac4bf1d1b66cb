//! Chat templates: a tokenizer_config.json's Jinja `chat_template` compiled by minijinja and rendered with the
//! variables and environment settings transformers' apply_chat_template uses (trim_blocks, lstrip_blocks, loop
//! controls, raise_exception, a Python-json `tojson`, Python string methods).
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_char, CString};
use std::panic::AssertUnwindSafe;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Serde};
use minijinja::{Environment, Error, ErrorKind, Value};
use serde_json::Value as Json;

use crate::ffi_util::{c_str_utf8, guarded, to_c_bytes, Failure};

const TEMPLATE_NAME: &str = "chat_template";
// Work one render may do (minijinja instructions): bounds a template that loops without end.
const FUEL: u64 = 50_000_000;
// The special tokens transformers passes to the template (its special_tokens_map).
const SPECIAL_TOKEN_KEYS: [&str; 7] =
    ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"];

/// A compiled template and the special tokens it sees; immutable after load (minijinja's Environment is Sync).
pub struct SluiceHfChatTemplate {
    env: Environment<'static>,
    special_tokens: BTreeMap<String, Json>,
    bos_token: Option<CString>,
    eos_token: Option<CString>,
}

thread_local! {
    // The message of the template's raise_exception() call during the current render on this thread.
    static RAISED: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn raise_exception(message: String) -> Result<Value, Error> {
    RAISED.with(|raised| *raised.borrow_mut() = Some(message.clone()));
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// transformers' tojson: Python's json.dumps(value, ensure_ascii=False, indent=indent), so ", " and ": "
/// separators unless indented. Other keyword arguments are accepted and ignored.
fn python_tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let json = serde_json::to_value(&value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let mut out = Vec::new();
    let result = match indent {
        Some(width) => {
            let spaces = vec![b' '; width];
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&spaces);
            serde::Serialize::serialize(&json, &mut serde_json::Serializer::with_formatter(&mut out, formatter))
        }
        None => serde::Serialize::serialize(&json, &mut serde_json::Serializer::with_formatter(&mut out, PythonJson)),
    };
    result.map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(Value::from_safe_string(String::from_utf8(out).expect("serde_json writes UTF-8")))
}

/// serde_json's compact output with Python's default separators.
struct PythonJson;
impl serde_json::ser::Formatter for PythonJson {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

fn environment(source: String) -> Result<Environment<'static>, Failure> {
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .map_err(|e| Failure::failed(format!("chat template syntax settings: {e}")))?;
    env.set_syntax(syntax);
    env.set_fuel(Some(FUEL));
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", raise_exception);
    env.add_filter("tojson", python_tojson);
    env.add_template_owned(TEMPLATE_NAME, source)
        .map_err(|e| Failure::failed(format!("the chat template does not compile: {}", describe(&e))))?;
    Ok(env)
}

/// minijinja's message with the template line it points at.
fn describe(error: &Error) -> String {
    match error.line() {
        Some(line) => format!("{error} (template line {line})"),
        None => error.to_string(),
    }
}

/// A special token's text: "..." or {"content": "..."} (an AddedToken), else None.
fn token_text(value: &Json) -> Option<String> {
    match value {
        Json::String(text) => Some(text.clone()),
        Json::Object(fields) => fields.get("content").and_then(Json::as_str).map(str::to_owned),
        _ => None,
    }
}

fn build(source: String, special_tokens: BTreeMap<String, Json>) -> Result<SluiceHfChatTemplate, Failure> {
    let c_token = |key: &str| {
        special_tokens.get(key).and_then(Json::as_str).and_then(|text| CString::new(text).ok())
    };
    Ok(SluiceHfChatTemplate {
        bos_token: c_token("bos_token"),
        eos_token: c_token("eos_token"),
        env: environment(source)?,
        special_tokens,
    })
}

fn load(path: &str) -> Result<SluiceHfChatTemplate, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| Failure::failed(format!("cannot read {path}: {e}")))?;
    let config: Json =
        serde_json::from_str(&text).map_err(|e| Failure::failed(format!("{path} is not valid JSON: {e}")))?;
    let source = match config.get("chat_template") {
        Some(Json::String(source)) => source.clone(),
        Some(Json::Array(named)) => named
            .iter()
            .find(|entry| entry.get("name").and_then(Json::as_str) == Some("default"))
            .and_then(|entry| entry.get("template").and_then(Json::as_str))
            .map(str::to_owned)
            .ok_or_else(|| Failure::failed(format!("{path}: chat_template is a list without a \"default\" entry")))?,
        Some(_) => return Err(Failure::failed(format!("{path}: chat_template is neither a string nor a list"))),
        None => return Err(Failure::failed(format!("{path} has no chat_template"))),
    };
    let mut special_tokens = BTreeMap::new();
    for key in SPECIAL_TOKEN_KEYS {
        if let Some(text) = config.get(key).and_then(token_text) {
            special_tokens.insert(key.to_owned(), Json::String(text));
        }
    }
    if let Some(Json::Array(extra)) = config.get("additional_special_tokens") {
        let texts: Vec<Json> = extra.iter().filter_map(token_text).map(Json::String).collect();
        special_tokens.insert("additional_special_tokens".to_owned(), Json::Array(texts));
    }
    build(source, special_tokens).map_err(|f| Failure { message: format!("{path}: {}", f.message), ..f })
}

fn render(
    template: &SluiceHfChatTemplate,
    messages: Vec<BTreeMap<&str, &str>>,
    add_generation_prompt: bool,
) -> Result<String, Failure> {
    let mut context: BTreeMap<String, Value> = template
        .special_tokens
        .iter()
        .map(|(key, value)| (key.clone(), Value::from(Serde(value))))
        .collect();
    context.insert("messages".into(), Value::from(Serde(&messages)));
    context.insert("add_generation_prompt".into(), Value::from(add_generation_prompt));
    context.insert("tools".into(), Value::from(())); // transformers passes tools=None, documents=None
    context.insert("documents".into(), Value::from(()));
    let compiled = template.env.get_template(TEMPLATE_NAME).map_err(|e| Failure::failed(describe(&e)))?;
    RAISED.with(|raised| raised.borrow_mut().take());
    compiled.render(context).map_err(|e| match RAISED.with(|raised| raised.borrow_mut().take()) {
        Some(message) => Failure::invalid(format!("the model's chat template refused the messages: {message}")),
        None => Failure::failed(format!("the model's chat template failed: {}", describe(&e))),
    })
}

unsafe fn optional_token(text: *const c_char, what: &str) -> Result<Option<Json>, Failure> {
    if text.is_null() {
        return Ok(None);
    }
    Ok(Some(Json::String(c_str_utf8(text, what)?.to_owned())))
}

unsafe fn hand_out(
    built: Result<SluiceHfChatTemplate, Failure>,
    error: *mut *mut c_char,
) -> *mut SluiceHfChatTemplate {
    let mut result = Some(built);
    let slot = AssertUnwindSafe(&mut result);
    let mut template = None;
    let out = AssertUnwindSafe(&mut template);
    guarded(error, move || {
        let (slot, out) = (slot, out);
        *out.0 = Some(slot.0.take().expect("once")?);
        Ok(())
    });
    template.map_or(std::ptr::null_mut(), |t| Box::into_raw(Box::new(t)))
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_chat_template_load(
    tokenizer_config_path: *const c_char,
    error: *mut *mut c_char,
) -> *mut SluiceHfChatTemplate {
    let built = std::panic::catch_unwind(|| load(c_str_utf8(tokenizer_config_path, "the tokenizer_config.json path")?))
        .unwrap_or_else(|_| Err(Failure::failed("internal error: loading the chat template panicked")));
    hand_out(built, error)
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_chat_template_from_source(
    source: *const c_char,
    bos_token: *const c_char,
    eos_token: *const c_char,
    error: *mut *mut c_char,
) -> *mut SluiceHfChatTemplate {
    let built = std::panic::catch_unwind(|| {
        let source = c_str_utf8(source, "the chat template")?.to_owned();
        let mut special_tokens = BTreeMap::new();
        for (key, text) in [("bos_token", bos_token), ("eos_token", eos_token)] {
            if let Some(token) = optional_token(text, key)? {
                special_tokens.insert(key.to_owned(), token);
            }
        }
        build(source, special_tokens)
    })
    .unwrap_or_else(|_| Err(Failure::failed("internal error: compiling the chat template panicked")));
    hand_out(built, error)
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_chat_template_free(template: *mut SluiceHfChatTemplate) {
    if !template.is_null() {
        drop(Box::from_raw(template));
    }
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_chat_template_bos_token(template: *const SluiceHfChatTemplate) -> *const c_char {
    template.as_ref().and_then(|t| t.bos_token.as_ref()).map_or(std::ptr::null(), |s| s.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_chat_template_eos_token(template: *const SluiceHfChatTemplate) -> *const c_char {
    template.as_ref().and_then(|t| t.eos_token.as_ref()).map_or(std::ptr::null(), |s| s.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_chat_template_render(
    template: *const SluiceHfChatTemplate,
    roles: *const *const c_char,
    contents: *const *const c_char,
    count: usize,
    add_generation_prompt: i32,
    text: *mut *mut c_char,
    length: *mut usize,
    error: *mut *mut c_char,
) -> i32 {
    *text = std::ptr::null_mut();
    *length = 0;
    let out = AssertUnwindSafe((text, length));
    guarded(error, move || {
        let out = out;
        let template = template.as_ref().ok_or_else(|| Failure::invalid("the chat template is NULL"))?;
        let mut messages = Vec::with_capacity(count);
        for i in 0..count {
            let role = c_str_utf8(*roles.add(i), &format!("messages[{i}].role"))?;
            let content = c_str_utf8(*contents.add(i), &format!("messages[{i}].content"))?;
            messages.push(BTreeMap::from([("role", role), ("content", content)]));
        }
        let rendered = render(template, messages, add_generation_prompt != 0)?;
        *out.0 .1 = rendered.len();
        *out.0 .0 = to_c_bytes(rendered.as_bytes());
        Ok(())
    })
}
