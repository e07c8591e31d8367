//! wgnn's text front end behind a C ABI: Hugging Face tokenizer.json files
//! (the `tokenizers` crate) and chat templates (`minijinja`, with the
//! globals and filters transformers' apply_chat_template gives a template).
//!
//! Every function that can fail returns null on success, else an error
//! message (UTF-8, NUL-terminated) that the caller frees with
//! wgnn_text_free_string. No panic crosses the boundary: each body runs
//! under catch_unwind and a panic becomes an error message. The declarations
//! are in text/text_ffi.h.

// Each extern "C" function's contract (valid pointers and lengths, strings
// freed by the matching free function) is text/text_ffi.h's.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use minijinja::value::{Kwargs, Serde, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};
use tokenizers::Tokenizer;

/// An opaque tokenizer handle.
pub struct WgnnTokenizer {
    inner: Tokenizer,
}

fn message(s: String) -> *mut c_char {
    // A message with a NUL inside keeps what comes before it.
    let bytes: Vec<u8> = s.into_bytes().into_iter().take_while(|&b| b != 0).collect();
    CString::new(bytes).map(CString::into_raw).unwrap_or(ptr::null_mut())
}

/// Runs `f`, turning an Err or a panic into a message for the caller.
fn guard<F: FnOnce() -> Result<(), String>>(f: F) -> *mut c_char {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(e)) => message(e),
        Err(p) => {
            let what = if let Some(s) = p.downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = p.downcast_ref::<String>() {
                s.clone()
            } else {
                "unknown panic".to_string()
            };
            message(format!("internal error in the text library: {what}"))
        }
    }
}

unsafe fn text_arg<'a>(p: *const c_char, len: usize, what: &str) -> Result<&'a str, String> {
    if p.is_null() {
        if len == 0 {
            return Ok("");
        }
        return Err(format!("{what}: null pointer"));
    }
    let bytes = std::slice::from_raw_parts(p as *const u8, len);
    std::str::from_utf8(bytes).map_err(|e| format!("{what} is not valid UTF-8 ({e})"))
}

unsafe fn cstr_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, String> {
    if p.is_null() {
        return Err(format!("{what}: null pointer"));
    }
    CStr::from_ptr(p).to_str().map_err(|e| format!("{what} is not valid UTF-8 ({e})"))
}

/// Hands a string to the caller: *out (NUL-terminated, freed with
/// wgnn_text_free_string) and its length in bytes.
unsafe fn give_string(s: String, out: *mut *mut c_char, out_len: *mut usize) -> Result<(), String> {
    if out.is_null() {
        return Err("null output pointer".into());
    }
    let len = s.len();
    // Decoded text may hold a NUL (a token for it); the length tells.
    let mut bytes = s.into_bytes();
    bytes.push(0);
    let boxed = bytes.into_boxed_slice();
    *out = Box::into_raw(boxed) as *mut c_char;
    if !out_len.is_null() {
        *out_len = len;
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn wgnn_text_free_string(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    // Every string given out is a boxed [u8] of strlen + 1 bytes, or a CString
    // (messages): both were allocated as len + 1 bytes.
    let _ = catch_unwind(|| {
        let len = CStr::from_ptr(s).to_bytes().len();
        drop(Box::from_raw(ptr::slice_from_raw_parts_mut(s as *mut u8, len + 1)));
    });
}

/// A string with NULs inside (decoded text) is freed with its length.
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_free_bytes(s: *mut c_char, len: usize) {
    if s.is_null() {
        return;
    }
    let _ = catch_unwind(|| {
        drop(Box::from_raw(ptr::slice_from_raw_parts_mut(s as *mut u8, len + 1)));
    });
}

#[no_mangle]
pub unsafe extern "C" fn wgnn_text_free_ids(ids: *mut i64, n: usize) {
    if ids.is_null() {
        return;
    }
    let _ = catch_unwind(|| {
        drop(Box::from_raw(ptr::slice_from_raw_parts_mut(ids, n)));
    });
}

/// Loads a tokenizer.json file (path: NUL-terminated UTF-8).
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_tokenizer_load(path: *const c_char, out: *mut *mut WgnnTokenizer) -> *mut c_char {
    guard(|| {
        if out.is_null() {
            return Err("null output pointer".into());
        }
        let path = cstr_arg(path, "the tokenizer path")?;
        let inner = Tokenizer::from_file(path).map_err(|e| format!("{path}: {e}"))?;
        *out = Box::into_raw(Box::new(WgnnTokenizer { inner }));
        Ok(())
    })
}

/// Loads a tokenizer from the JSON text of a tokenizer.json.
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_tokenizer_from_json(
    json: *const c_char,
    len: usize,
    out: *mut *mut WgnnTokenizer,
) -> *mut c_char {
    guard(|| {
        if out.is_null() {
            return Err("null output pointer".into());
        }
        let json = text_arg(json, len, "the tokenizer JSON")?;
        let inner: Tokenizer = json.parse().map_err(|e| format!("{e}"))?;
        *out = Box::into_raw(Box::new(WgnnTokenizer { inner }));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn wgnn_text_tokenizer_free(t: *mut WgnnTokenizer) {
    if t.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(t))));
}

/// The vocabulary size, added tokens included.
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_vocab_size(t: *const WgnnTokenizer) -> usize {
    if t.is_null() {
        return 0;
    }
    catch_unwind(AssertUnwindSafe(|| (*t).inner.get_vocab_size(true))).unwrap_or(0)
}

/// Text -> ids (*ids freed with wgnn_text_free_ids(*ids, *n)).
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_encode(
    t: *const WgnnTokenizer,
    text: *const c_char,
    len: usize,
    add_special_tokens: c_int,
    ids: *mut *mut i64,
    n: *mut usize,
) -> *mut c_char {
    guard(|| {
        if t.is_null() || ids.is_null() || n.is_null() {
            return Err("null pointer".into());
        }
        let text = text_arg(text, len, "the text")?;
        let enc = (*t).inner.encode(text, add_special_tokens != 0).map_err(|e| format!("encode: {e}"))?;
        let v: Vec<i64> = enc.get_ids().iter().map(|&i| i as i64).collect();
        *n = v.len();
        *ids = Box::into_raw(v.into_boxed_slice()) as *mut i64;
        Ok(())
    })
}

/// Ids -> text (*out freed with wgnn_text_free_bytes(*out, *out_len)).
/// An id outside the vocabulary is an error naming it.
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_decode(
    t: *const WgnnTokenizer,
    ids: *const i64,
    n: usize,
    skip_special_tokens: c_int,
    out: *mut *mut c_char,
    out_len: *mut usize,
) -> *mut c_char {
    guard(|| {
        if t.is_null() || (ids.is_null() && n > 0) {
            return Err("null pointer".into());
        }
        let ids = if n == 0 { &[][..] } else { std::slice::from_raw_parts(ids, n) };
        let tok = &(*t).inner;
        let mut v = Vec::with_capacity(ids.len());
        for &id in ids {
            if id < 0 || id > u32::MAX as i64 || tok.id_to_token(id as u32).is_none() {
                return Err(format!(
                    "token id {id} is not in the tokenizer's vocabulary ({} tokens)",
                    tok.get_vocab_size(true)
                ));
            }
            v.push(id as u32);
        }
        let s = tok.decode(&v, skip_special_tokens != 0).map_err(|e| format!("decode: {e}"))?;
        give_string(s, out, out_len)
    })
}

/// A token's id, or -1 when the vocabulary has no such token.
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_token_to_id(
    t: *const WgnnTokenizer,
    token: *const c_char,
    len: usize,
    id: *mut i64,
) -> *mut c_char {
    guard(|| {
        if t.is_null() || id.is_null() {
            return Err("null pointer".into());
        }
        let token = text_arg(token, len, "the token")?;
        *id = (*t).inner.token_to_id(token).map(|i| i as i64).unwrap_or(-1);
        Ok(())
    })
}

/// Whether the id is one of the tokenizer's special added tokens (1), not (0).
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_is_special(t: *const WgnnTokenizer, id: i64) -> c_int {
    if t.is_null() || id < 0 || id > u32::MAX as i64 {
        return 0;
    }
    catch_unwind(AssertUnwindSafe(|| {
        (*t).inner.get_added_tokens_decoder().get(&(id as u32)).map(|a| a.special as c_int).unwrap_or(0)
    }))
    .unwrap_or(0)
}

// ---- chat templates -------------------------------------------------------

/// Python's json.dumps(value, ensure_ascii=False, indent=indent): what
/// transformers' tojson filter gives (", " and ": " without indent, "," and
/// ": " with it; no HTML escaping).
fn py_json(v: &Value, indent: Option<usize>, level: usize, out: &mut String) -> Result<(), Error> {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if let Some(f) = v.as_i64() {
                out.push_str(&f.to_string());
            } else {
                let f: f64 = v.clone().try_into().unwrap_or(f64::NAN);
                if f.is_nan() {
                    out.push_str("NaN");
                } else if f.is_infinite() {
                    out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
                } else if f == f.trunc() && f.abs() < 1e16 {
                    out.push_str(&format!("{f:.1}"));
                } else {
                    out.push_str(&format!("{f}"));
                }
            }
        }
        ValueKind::String | ValueKind::Bytes => {
            let s = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                py_json(item, indent, level + 1, out)?;
            }
            newline(out, level);
            out.push(']');
        }
        ValueKind::Map => {
            let keys: Vec<Value> = v.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                let k = match key.as_str() {
                    Some(s) => Value::from(s),
                    None => Value::from(key.to_string()),
                };
                py_json(&k, indent, level + 1, out)?;
                out.push_str(": ");
                py_json(&v.get_item(key)?, indent, level + 1, out)?;
            }
            newline(out, level);
            out.push('}');
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a value of kind {} has no JSON form", v.kind()),
            ))
        }
    }
    Ok(())
}

fn tojson(v: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut indent = match indent {
        Some(i) if !i.is_none() => Some(usize::try_from(i)?),
        _ => None,
    };
    if let Some(i) = kwargs.get::<Option<usize>>("indent")? {
        indent = Some(i);
    }
    // transformers' filter takes these too; their defaults are what it does.
    let _: Option<Value> = kwargs.get("ensure_ascii")?;
    let _: Option<Value> = kwargs.get("separators")?;
    let _: Option<Value> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    py_json(v, indent, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

#[repr(C)]
struct Tm {
    tm_sec: c_int,
    tm_min: c_int,
    tm_hour: c_int,
    tm_mday: c_int,
    tm_mon: c_int,
    tm_year: c_int,
    tm_wday: c_int,
    tm_yday: c_int,
    tm_isdst: c_int,
    tm_gmtoff: std::ffi::c_long,
    tm_zone: *const c_char,
}

extern "C" {
    fn time(t: *mut i64) -> i64;
    fn localtime_r(t: *const i64, out: *mut Tm) -> *mut Tm;
    fn strftime(s: *mut c_char, max: usize, format: *const c_char, tm: *const Tm) -> usize;
}

/// datetime.now().strftime(format), through the C library's strftime.
fn strftime_now(format: String) -> Result<Value, Error> {
    let f = CString::new(format)
        .map_err(|_| Error::new(ErrorKind::InvalidOperation, "strftime_now: the format holds a NUL"))?;
    let mut buf = vec![0u8; 512];
    // SAFETY: the C library's time functions, on buffers sized here.
    let n = unsafe {
        let now = time(ptr::null_mut());
        let mut tm: Tm = std::mem::zeroed();
        if localtime_r(&now, &mut tm).is_null() {
            return Err(Error::new(ErrorKind::InvalidOperation, "strftime_now: no local time"));
        }
        strftime(buf.as_mut_ptr() as *mut c_char, buf.len(), f.as_ptr(), &tm)
    };
    buf.truncate(n);
    Ok(Value::from(String::from_utf8_lossy(&buf).into_owned()))
}

fn describe(e: &Error) -> String {
    let mut s = match e.kind() {
        // raise_exception's message, as the template author wrote it.
        ErrorKind::InvalidOperation if e.detail().is_some() => e.detail().unwrap_or_default().to_string(),
        _ => e.to_string(),
    };
    if let Some(line) = e.line() {
        if !s.contains("(in ") {
            s = format!("{s} (template line {line})");
        }
    }
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s = format!("{s}: {inner}");
        src = inner.source();
    }
    s
}

/// Renders a chat template as transformers' apply_chat_template does:
/// trim_blocks and lstrip_blocks, loop controls, the tojson filter,
/// raise_exception and strftime_now, Python's string and dict methods;
/// the context is messages (a JSON array of {"role", "content", ...}),
/// tools and documents (None), add_generation_prompt, bos_token, eos_token
/// and the keys of extra_json (a JSON object, may be null).
#[no_mangle]
pub unsafe extern "C" fn wgnn_text_render_chat(
    template: *const c_char,
    messages_json: *const c_char,
    add_generation_prompt: c_int,
    bos_token: *const c_char,
    eos_token: *const c_char,
    extra_json: *const c_char,
    out: *mut *mut c_char,
    out_len: *mut usize,
) -> *mut c_char {
    guard(|| {
        let template = cstr_arg(template, "the chat template")?;
        let messages = cstr_arg(messages_json, "the messages")?;
        let bos = if bos_token.is_null() { "" } else { cstr_arg(bos_token, "bos_token")? };
        let eos = if eos_token.is_null() { "" } else { cstr_arg(eos_token, "eos_token")? };
        let messages: serde_json::Value =
            serde_json::from_str(messages).map_err(|e| format!("the messages are not JSON: {e}"))?;
        if !messages.is_array() {
            return Err("the messages must be a JSON array".into());
        }
        let mut ctx = serde_json::Map::new();
        ctx.insert("messages".into(), messages);
        ctx.insert("tools".into(), serde_json::Value::Null);
        ctx.insert("documents".into(), serde_json::Value::Null);
        ctx.insert("add_generation_prompt".into(), serde_json::Value::Bool(add_generation_prompt != 0));
        ctx.insert("bos_token".into(), serde_json::Value::String(bos.into()));
        ctx.insert("eos_token".into(), serde_json::Value::String(eos.into()));
        if !extra_json.is_null() {
            let extra: serde_json::Value = serde_json::from_str(cstr_arg(extra_json, "the extra context")?)
                .map_err(|e| format!("the extra context is not JSON: {e}"))?;
            match extra {
                serde_json::Value::Object(m) => ctx.extend(m),
                serde_json::Value::Null => {}
                _ => return Err("the extra context must be a JSON object".into()),
            }
        }
        let mut env = Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .map_err(|e| format!("{e}"))?,
        );
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        minijinja_contrib::add_to_environment(&mut env);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        let tmpl = env.template_from_str(template).map_err(|e| format!("the chat template does not parse: {}", describe(&e)))?;
        let s = tmpl
            .render(Value::from(Serde(serde_json::Value::Object(ctx))))
            .map_err(|e| format!("the chat template failed: {}", describe(&e)))?;
        give_string(s, out, out_len)
    })
}
