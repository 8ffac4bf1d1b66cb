//! Shared plumbing of the C ABI: status codes, error messages out, panics caught at the boundary, buffers handed
//! to C (and taken back by the *_free functions).
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub const OK: i32 = 0;
pub const INVALID_INPUT: i32 = 1;
pub const FAILED: i32 = 2;

/// A failure: the status code for C and the message.
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn invalid(message: impl Into<String>) -> Self {
        Failure { code: INVALID_INPUT, message: message.into() }
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Failure { code: FAILED, message: message.into() }
    }
}

/// A NUL-terminated copy of bytes for C (an interior NUL byte is kept: C callers also get the length).
pub fn to_c_bytes(bytes: &[u8]) -> *mut c_char {
    let mut owned = Vec::with_capacity(bytes.len() + 1);
    owned.extend_from_slice(bytes);
    owned.push(0);
    let boxed = owned.into_boxed_slice();
    Box::into_raw(boxed) as *mut c_char
}

/// Frees what to_c_bytes returned for bytes of `length` (the buffer holds one more, the NUL).
#[no_mangle]
pub unsafe extern "C" fn sluice_hf_text_free(text: *mut c_char, length: usize) {
    if !text.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(text as *mut u8, length + 1)));
    }
}

/// A message for C: NUL bytes replaced so C's strlen sees all of it; freed by sluice_hf_string_free.
pub fn to_c_message(message: &str) -> *mut c_char {
    CString::new(message.replace('\0', "\\0")).expect("no NUL left").into_raw()
}

pub unsafe fn set_error(error: *mut *mut c_char, message: &str) {
    if !error.is_null() {
        *error = to_c_message(message);
    }
}

/// Runs body, turning a panic into FAILED; writes the failure's message to *error. Unwind safety is asserted:
/// the objects a body touches are immutable once loaded, and its outputs are written only on success.
pub unsafe fn guarded<F>(error: *mut *mut c_char, body: F) -> i32
where
    F: FnOnce() -> Result<(), Failure>,
{
    if !error.is_null() {
        *error = std::ptr::null_mut();
    }
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => OK,
        Ok(Err(failure)) => {
            set_error(error, &failure.message);
            failure.code
        }
        Err(_) => {
            set_error(error, "internal error: the Rust tokenizer library panicked");
            FAILED
        }
    }
}

/// The bytes [text, text + length) as UTF-8, or INVALID_INPUT naming the first bad byte offset.
pub unsafe fn utf8<'a>(text: *const c_char, length: usize, what: &str) -> Result<&'a str, Failure> {
    if length == 0 {
        return Ok("");
    }
    if text.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    let bytes = std::slice::from_raw_parts(text as *const u8, length);
    std::str::from_utf8(bytes)
        .map_err(|e| Failure::invalid(format!("{what} is not valid UTF-8 (byte {})", e.valid_up_to())))
}

/// A NUL-terminated C string as UTF-8.
pub unsafe fn c_str_utf8<'a>(text: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if text.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    CStr::from_ptr(text)
        .to_str()
        .map_err(|e| Failure::invalid(format!("{what} is not valid UTF-8 (byte {})", e.valid_up_to())))
}

#[no_mangle]
pub unsafe extern "C" fn sluice_hf_string_free(text: *mut c_char) {
    if !text.is_null() {
        drop(CString::from_raw(text));
    }
}
