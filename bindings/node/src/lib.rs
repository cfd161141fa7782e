//! The native half of the `litelane` Node package: one class, `NativeDatabase`,
//! over `litelane::Database`. index.js builds better-sqlite3's API on it.
//!
//! Everything runs on the JavaScript thread: reads through `Database::read`
//! (a reader of the pool), writes outside a transaction through
//! `Database::write_local` (one turn of the engine's fair write queue, which
//! other processes share), and an explicit transaction (`BEGIN`,
//! `db.transaction(fn)`) through `Database::hold_writer`, held across calls
//! until `COMMIT`/`ROLLBACK`. User functions are installed on every connection
//! with `Database::configure` and call back into JavaScript on this thread.
//!
//! Errors cross to JavaScript as `Error`s whose message is
//! `KIND\u{1}message`, KIND being an SQLite code name (`SQLITE_...`),
//! `TypeError` or `RangeError`; index.js turns them into `SqliteError`s.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use litelane::rusqlite::{self, types::ValueRef, Connection};
use litelane::{CheckpointMode, Database, Error, HeldWrite, Options, Profile, SqliteCode, Value};
use napi::bindgen_prelude::*;
use napi::{
    sys, Env, JsArrayBuffer, JsFunction, JsObject, JsUnknown, NapiRaw, NapiValue, ValueType,
};
use napi_derive::napi;

mod asyncops;
mod vtab;

fn kind_err(kind: &str, message: impl std::fmt::Display) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("{kind}\u{1}{message}"))
}

fn from_rusqlite(e: rusqlite::Error) -> Error {
    Error::from_sqlite(e, "")
}

fn to_js_err(e: Error) -> napi::Error {
    match e {
        Error::Sqlite {
            extended_code,
            message,
            ..
        } => kind_err(SqliteCode::name_of(extended_code), message),
        Error::ReadOnly { .. } => {
            kind_err("SQLITE_READONLY", "attempt to write a readonly database")
        }
        Error::RolledBack { cause, .. } => to_js_err(*cause),
        Error::InvalidInput { message } if message.starts_with("JS:") => {
            let (kind, msg) = message[3..]
                .split_once('\u{1}')
                .unwrap_or(("Error", &message[3..]));
            kind_err(kind, msg)
        }
        other => {
            if let Some(x) = other.sqlite_extended_code() {
                kind_err(SqliteCode::name_of(x), other)
            } else {
                kind_err("SQLITE_ERROR", other)
            }
        }
    }
}

/// An error raised inside an engine closure that must reach JavaScript as a
/// `TypeError`/`RangeError`.
fn js_kind(kind: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidInput {
        message: format!("JS:{kind}\u{1}{message}"),
    }
}

/// The first keyword of a statement, upper-cased (comments skipped).
fn keywords(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut s = sql;
    while out.len() < 3 {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix("--") {
            s = rest.split_once('\n').map_or("", |x| x.1);
            continue;
        }
        if let Some(rest) = s.strip_prefix("/*") {
            s = rest.split_once("*/").map_or("", |x| x.1);
            continue;
        }
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        if end == 0 {
            break;
        }
        out.push(s[..end].to_ascii_uppercase());
        s = &s[end..];
    }
    out
}

/// True for a part of a script with nothing but blanks, comments and `;`.
fn is_blank(sql: &str) -> bool {
    let mut s = sql;
    loop {
        s = s.trim_start_matches(|c: char| c.is_whitespace() || c == ';');
        if let Some(rest) = s.strip_prefix("--") {
            s = rest.split_once('\n').map_or("", |x| x.1);
        } else if let Some(rest) = s.strip_prefix("/*") {
            s = rest.split_once("*/").map_or("", |x| x.1);
        } else {
            return s.is_empty();
        }
    }
}

/// True for an `INSERT`/`UPDATE`/`DELETE`/`REPLACE` without `RETURNING`
/// whose parameters are all anonymous `?`: what `Database::execute` runs
/// exactly as the general path would (anything else takes that path).
fn one_shot_write(sql: &str) -> bool {
    let first = keywords(sql);
    if !matches!(
        first.first().map(String::as_str),
        Some("INSERT" | "UPDATE" | "DELETE" | "REPLACE")
    ) {
        return false;
    }
    let b = sql.as_bytes();
    let numbered = b.windows(2).any(|w| w[0] == b'?' && w[1].is_ascii_digit());
    !numbered
        && !b.iter().any(|c| matches!(c, b':' | b'@' | b'$'))
        && !sql.to_ascii_uppercase().contains("RETURNING")
}

enum Control {
    Begin,
    Commit,
    Rollback,
    Savepoint(String),
    Release(String),
    Vacuum,
    None,
}

fn control_of(sql: &str) -> Control {
    let k = keywords(sql);
    let first = k.first().map(String::as_str).unwrap_or("");
    match first {
        "BEGIN" => Control::Begin,
        "COMMIT" | "END" => Control::Commit,
        "ROLLBACK" => {
            let rest: Vec<&str> = k[1..].iter().map(String::as_str).collect();
            if rest.first() == Some(&"TO") || rest.get(1) == Some(&"TO") {
                Control::None
            } else {
                Control::Rollback
            }
        }
        "SAVEPOINT" => Control::Savepoint(k.get(1).cloned().unwrap_or_default()),
        "RELEASE" => {
            let name = if k.get(1).map(String::as_str) == Some("SAVEPOINT") {
                k.get(2)
            } else {
                k.get(1)
            };
            Control::Release(name.cloned().unwrap_or_default())
        }
        "VACUUM" => Control::Vacuum,
        _ => Control::None,
    }
}

/// A JavaScript value turned into an SQLite value (better-sqlite3's rules:
/// numbers bind as REAL, bigints as INTEGER, strings, buffers, null/undefined).
fn to_value(v: &JsUnknown) -> napi::Result<Value> {
    Ok(match v.get_type()? {
        ValueType::Null | ValueType::Undefined => Value::Null,
        ValueType::Number => {
            let n: f64 = unsafe { v.cast::<napi::JsNumber>() }.get_double()?;
            Value::Real(n)
        }
        ValueType::BigInt => {
            let b = unsafe { v.cast::<napi::JsBigInt>() };
            let (n, lossless) = b.get_i64()?;
            if !lossless {
                return Err(kind_err(
                    "RangeError",
                    "The bound string, buffer, or bigint is too big",
                ));
            }
            Value::Integer(n)
        }
        ValueType::String => {
            let s = unsafe { v.cast::<napi::JsString>() }.into_utf8()?;
            Value::Text(s.as_str()?.to_owned())
        }
        ValueType::Object if v.is_buffer()? => {
            // An empty Buffer's data pointer is NULL, which napi-rs 2.16's
            // `into_value` turns into a Vec (undefined behaviour; a debug
            // build aborts): read its length first.
            let len: u32 = unsafe { v.cast::<napi::JsObject>() }
                .get_named_property::<napi::JsNumber>("length")?
                .get_uint32()?;
            if len == 0 {
                Value::Blob(Vec::new())
            } else {
                let b = unsafe { v.cast::<napi::JsBuffer>() }.into_value()?;
                Value::Blob(b.to_vec())
            }
        }
        _ => {
            return Err(kind_err(
                "TypeError",
                "SQLite3 can only bind numbers, strings, bigints, buffers, and null",
            ))
        }
    })
}

fn to_js(env: &Env, v: ValueRef<'_>, safe_ints: bool) -> napi::Result<JsUnknown> {
    Ok(match v {
        ValueRef::Null => env.get_null()?.into_unknown(),
        ValueRef::Integer(i) => {
            if safe_ints {
                env.create_bigint_from_i64(i)?.into_unknown()?
            } else {
                env.create_double(i as f64)?.into_unknown()
            }
        }
        ValueRef::Real(f) => env.create_double(f)?.into_unknown(),
        ValueRef::Text(t) => env
            .create_string(&String::from_utf8_lossy(t))?
            .into_unknown(),
        ValueRef::Blob(b) => env
            .create_buffer_with_data(b.to_vec())?
            .into_raw()
            .into_unknown(),
    })
}

/// Parameters as better-sqlite3 binds them: anonymous ones in order, named
/// ones (`:a`, `@a`, `$a`) from one plain object by name without the prefix.
struct Params {
    anon: Vec<Value>,
    named: Option<Vec<(String, Value)>>,
}

impl Params {
    fn from_js(anon: Vec<JsUnknown>, named: Option<JsObject>) -> napi::Result<Params> {
        let anon = anon
            .iter()
            .map(to_value)
            .collect::<napi::Result<Vec<_>>>()?;
        let named = match named {
            None => None,
            Some(obj) => {
                let keys = obj.get_property_names()?;
                let n = keys.get_array_length()?;
                let mut out = Vec::with_capacity(n as usize);
                for i in 0..n {
                    let k: napi::JsString = keys.get_element(i)?;
                    let k = k.into_utf8()?.as_str()?.to_owned();
                    let v: JsUnknown = obj.get_named_property(&k)?;
                    out.push((k, to_value(&v)?));
                }
                Some(out)
            }
        };
        Ok(Params { anon, named })
    }

    fn bind(&self, stmt: &mut rusqlite::Statement<'_>) -> litelane::Result<()> {
        let count = stmt.parameter_count();
        let mut next = 0;
        for i in 1..=count {
            let name = stmt.parameter_name(i).map(str::to_owned);
            let value = match name {
                Some(name) if !name.starts_with('?') => {
                    let Some(named) = &self.named else {
                        return Err(js_kind("TypeError", "Missing named parameters"));
                    };
                    let key = &name[1..];
                    match named.iter().find(|(k, _)| k == key) {
                        Some((_, v)) => v,
                        None => {
                            return Err(js_kind(
                                "RangeError",
                                format!("Missing named parameter \"{key}\""),
                            ))
                        }
                    }
                }
                _ => {
                    let Some(v) = self.anon.get(next) else {
                        return Err(js_kind(
                            "RangeError",
                            "Too few parameter values were provided",
                        ));
                    };
                    next += 1;
                    v
                }
            };
            stmt.raw_bind_parameter(i, value).map_err(from_rusqlite)?;
        }
        if next < self.anon.len() {
            return Err(js_kind(
                "RangeError",
                "Too many parameter values were provided",
            ));
        }
        Ok(())
    }
}

/// Bound values longer than this many bytes are shortened in the `verbose`
/// text, as in better-sqlite3's SQLite build (`SQLITE_TRACE_SIZE_LIMIT`).
const TRACE_SIZE_LIMIT: usize = 32;

/// `params` with every text or blob longer than `TRACE_SIZE_LIMIT` bytes
/// replaced by a marker, and what each marker's quoted form becomes in the
/// expanded SQL: the first bytes and how many more there were, as SQLite
/// writes it when built with a trace size limit.
fn shorten_for_trace(params: Params) -> (Params, Vec<(String, String)>) {
    let mut long = Vec::new();
    let mut shorten = |v: Value| -> Value {
        let shown = match &v {
            Value::Text(t) if t.len() > TRACE_SIZE_LIMIT => {
                let b = t.as_bytes();
                let mut n = TRACE_SIZE_LIMIT;
                while n < b.len() && (b[n] & 0xc0) == 0x80 {
                    n += 1;
                }
                if n == b.len() {
                    return v;
                }
                format!(
                    "'{}'/*+{} bytes*/",
                    String::from_utf8_lossy(&b[..n]).replace('\'', "''"),
                    b.len() - n
                )
            }
            Value::Blob(b) if b.len() > TRACE_SIZE_LIMIT => {
                let hex: String = b[..TRACE_SIZE_LIMIT]
                    .iter()
                    .map(|x| format!("{x:02x}"))
                    .collect();
                format!("x'{hex}'/*+{} bytes*/", b.len() - TRACE_SIZE_LIMIT)
            }
            _ => return v,
        };
        let marker = format!("\u{1}litelane-trace-{}\u{1}", long.len());
        long.push((format!("'{marker}'"), shown));
        Value::Text(marker)
    };
    let anon = params.anon.into_iter().map(&mut shorten).collect();
    let named = params
        .named
        .map(|n| n.into_iter().map(|(k, v)| (k, shorten(v))).collect());
    (Params { anon, named }, long)
}

/// What a `query` collected: owned values, turned into JavaScript afterwards.
struct Rows {
    names: Vec<String>,
    rows: Vec<Vec<Value>>,
}

fn run_query(
    conn: &Connection,
    sql: &str,
    params: &Params,
    first_only: bool,
) -> litelane::Result<Rows> {
    let mut stmt = conn.prepare_cached(sql).map_err(from_rusqlite)?;
    params.bind(&mut stmt)?;
    let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
    let n = names.len();
    let mut rows = Vec::new();
    let mut raw = stmt.raw_query();
    while let Some(row) = raw.next().map_err(from_rusqlite)? {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(row.get::<_, Value>(i).map_err(from_rusqlite)?);
        }
        rows.push(out);
        if first_only {
            break;
        }
    }
    Ok(Rows { names, rows })
}

fn run_statement(conn: &Connection, sql: &str, params: &Params) -> litelane::Result<(i64, i64)> {
    run_statement_with(conn, sql, |stmt| params.bind(stmt))
}

/// `run_statement` with the parameters `bind` binds.
fn run_statement_with(
    conn: &Connection,
    sql: &str,
    bind: impl FnOnce(&mut rusqlite::Statement<'_>) -> litelane::Result<()>,
) -> litelane::Result<(i64, i64)> {
    let mut stmt = conn.prepare_cached(sql).map_err(from_rusqlite)?;
    bind(&mut stmt)?;
    let before = conn.total_changes();
    let mut raw = stmt.raw_query();
    while raw.next().map_err(from_rusqlite)?.is_some() {}
    drop(raw);
    // As better-sqlite3 counts: nothing when the statement changed no row
    // (sqlite3_changes would still show the previous statement's count).
    let changes = if conn.total_changes() == before {
        0
    } else {
        conn.changes() as i64
    };
    Ok((changes, conn.last_insert_rowid()))
}

/// SQLite's flags for a function registered from JavaScript: UTF-8, and
/// better-sqlite3's `deterministic` and `directOnly` options.
fn function_flags(deterministic: bool, direct_only: bool) -> rusqlite::functions::FunctionFlags {
    use rusqlite::functions::FunctionFlags as F;
    let mut flags = F::SQLITE_UTF8;
    if deterministic {
        flags |= F::SQLITE_DETERMINISTIC;
    }
    if direct_only {
        flags |= F::SQLITE_DIRECTONLY;
    }
    flags
}

/// A JavaScript function installed as an SQL function. Only ever called on
/// the thread that made it (the JavaScript thread): `call` checks.
struct JsFn {
    env: sys::napi_env,
    func: sys::napi_ref,
    thread: std::thread::ThreadId,
    safe_ints: bool,
}
unsafe impl Send for JsFn {}
unsafe impl Sync for JsFn {}

thread_local! {
    /// Set when a JavaScript function threw (or returned what SQLite cannot
    /// store) during the statement: what the statement then reports.
    static FN_ERROR: RefCell<Option<napi::Error>> = const { RefCell::new(None) };
}

impl JsFn {
    fn call(&self, ctx: &rusqlite::functions::Context<'_>) -> rusqlite::Result<Value> {
        self.invoke(&[], Some(ctx))
    }

    /// Calls the function with `lead` (numbers) then the SQL arguments.
    fn invoke(
        &self,
        lead: &[f64],
        ctx: Option<&rusqlite::functions::Context<'_>>,
    ) -> rusqlite::Result<Value> {
        self.call_js(
            |env, args| {
                for x in lead {
                    args.push(unsafe { env.create_double(*x)?.raw() });
                }
                if let Some(ctx) = ctx {
                    for i in 0..ctx.len() {
                        let v = to_js(env, ctx.get_raw(i), self.safe_ints)?;
                        args.push(unsafe { v.raw() });
                    }
                }
                Ok(())
            },
            |_, out| to_value(&out),
        )
    }

    /// Calls the JavaScript function with the arguments `push` makes and
    /// turns its result with `convert`. `undefined` (what index.js's
    /// wrappers return after catching an exception) and a failed
    /// conversion are errors recorded in `FN_ERROR`, which the statement
    /// then reports.
    fn call_js<T>(
        &self,
        push: impl FnOnce(&Env, &mut Vec<sys::napi_value>) -> napi::Result<()>,
        convert: impl FnOnce(&Env, JsUnknown) -> napi::Result<T>,
    ) -> rusqlite::Result<T> {
        if std::thread::current().id() != self.thread {
            return Err(rusqlite::Error::UserFunctionError(
                "a JavaScript function was called off the JavaScript thread".into(),
            ));
        }
        let env = unsafe { Env::from_raw(self.env) };
        let fail = |m: &str| rusqlite::Error::UserFunctionError(m.to_string().into());
        let result = (|| -> napi::Result<Option<T>> {
            let mut f: sys::napi_value = std::ptr::null_mut();
            unsafe { check(sys::napi_get_reference_value(self.env, self.func, &mut f))? };
            let mut args = Vec::new();
            push(&env, &mut args)?;
            let mut global: sys::napi_value = std::ptr::null_mut();
            unsafe { check(sys::napi_get_undefined(self.env, &mut global))? };
            let mut out: sys::napi_value = std::ptr::null_mut();
            let status = unsafe {
                sys::napi_call_function(self.env, global, f, args.len(), args.as_ptr(), &mut out)
            };
            if status != sys::Status::napi_ok {
                // The JavaScript wrapper catches; this is a pending exception
                // we could not see coming. Clear it and report.
                let mut exc: sys::napi_value = std::ptr::null_mut();
                unsafe { sys::napi_get_and_clear_last_exception(self.env, &mut exc) };
                return Ok(None);
            }
            let out = unsafe { JsUnknown::from_raw_unchecked(self.env, out) };
            // The wrapper returns `undefined` only after catching an error.
            if out.get_type()? == ValueType::Undefined {
                return Ok(None);
            }
            Ok(Some(convert(&env, out)?))
        })();
        match result {
            Ok(Some(v)) => Ok(v),
            Ok(None) => {
                FN_ERROR.with(|e| {
                    *e.borrow_mut() = Some(kind_err("FunctionError", "a JavaScript function threw"))
                });
                Err(fail("JavaScript function threw"))
            }
            Err(e) => {
                let reason = e.reason.clone();
                FN_ERROR.with(|x| *x.borrow_mut() = Some(e));
                Err(fail(&reason))
            }
        }
    }
}

fn check(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            Status::GenericFailure,
            "N-API call failed",
        ))
    }
}

/// An aggregate (window) function: the accumulators live in JavaScript
/// (index.js), keyed by an id; the dispatcher takes (op, id, args...).
struct JsAggregate {
    f: Arc<JsFn>,
}

static NEXT_ACC: AtomicU64 = AtomicU64::new(1);

impl JsAggregate {
    /// After a callback of this statement threw, SQLite still finalizes:
    /// drop the accumulator without calling `start` or `result` again (as
    /// better-sqlite3 does) and keep reporting the error.
    fn failed(&self, id: Option<u64>) -> Option<rusqlite::Error> {
        if FN_ERROR.with(|e| e.borrow().is_none()) {
            return None;
        }
        if let Some(id) = id {
            let saved = FN_ERROR.with(|e| e.borrow_mut().take());
            let _ = self.f.invoke(&[6.0, id as f64], None);
            FN_ERROR.with(|e| *e.borrow_mut() = saved);
        }
        Some(rusqlite::Error::UserFunctionError(
            "a JavaScript callback threw".into(),
        ))
    }
}

impl rusqlite::functions::Aggregate<u64, Value> for JsAggregate {
    fn init(&self, _: &mut rusqlite::functions::Context<'_>) -> rusqlite::Result<u64> {
        let id = NEXT_ACC.fetch_add(1, Ordering::Relaxed);
        self.f.invoke(&[0.0, id as f64], None)?;
        Ok(id)
    }
    fn step(
        &self,
        ctx: &mut rusqlite::functions::Context<'_>,
        id: &mut u64,
    ) -> rusqlite::Result<()> {
        self.f.invoke(&[1.0, *id as f64], Some(ctx)).map(|_| ())
    }
    fn finalize(
        &self,
        _: &mut rusqlite::functions::Context<'_>,
        id: Option<u64>,
    ) -> rusqlite::Result<Value> {
        if let Some(e) = self.failed(id) {
            return Err(e);
        }
        let id = match id {
            Some(id) => id,
            None => {
                let id = NEXT_ACC.fetch_add(1, Ordering::Relaxed);
                self.f.invoke(&[0.0, id as f64], None)?;
                id
            }
        };
        self.f.invoke(&[4.0, id as f64], None)
    }
}

impl rusqlite::functions::WindowAggregate<u64, Value> for JsAggregate {
    fn value(&self, id: Option<&mut u64>) -> rusqlite::Result<Value> {
        if let Some(e) = self.failed(id.as_deref().copied()) {
            return Err(e);
        }
        match id {
            Some(id) => self.f.invoke(&[3.0, *id as f64], None),
            None => self.f.invoke(&[5.0, 0.0], None),
        }
    }
    fn inverse(
        &self,
        ctx: &mut rusqlite::functions::Context<'_>,
        id: &mut u64,
    ) -> rusqlite::Result<()> {
        self.f.invoke(&[2.0, *id as f64], Some(ctx)).map(|_| ())
    }
}

#[napi(object)]
pub struct OpenOptions {
    pub profile: Option<String>,
    pub timeout: Option<f64>,
    pub readers: Option<u32>,
}

#[napi(object)]
pub struct RunResult {
    pub changes: i64,
    pub last_insert_rowid: i64,
}

#[napi(object)]
pub struct StatementInfo {
    pub reader: bool,
    pub column_count: u32,
    pub writer_only: bool,
    /// The name of each parameter without its prefix (`''` for `?`).
    pub parameters: Vec<String>,
}

/// One column of an `insertMany`, as index.js packed it.
enum Column {
    Real(Vec<f64>),
    /// All the strings in one UTF-8 text, and where each one ends.
    Text(String, Vec<usize>),
    Values(Vec<Value>),
}

impl Column {
    fn from_js(env: &Env, v: JsUnknown, n: usize) -> napi::Result<Column> {
        let bad = || {
            kind_err(
                "RangeError",
                "a packed column does not hold one value per row",
            )
        };
        if v.is_typedarray()? {
            let arr = unsafe { Float64Array::from_napi_value(env.raw(), v.raw())? };
            if arr.len() != n {
                return Err(bad());
            }
            return Ok(Column::Real(arr.to_vec()));
        }
        let obj: JsObject = unsafe { v.cast() };
        let len = obj.get_array_length()? as usize;
        if len == 2 && n != 2 {
            // [text, lengths]
            let first: JsUnknown = obj.get_element(0)?;
            if first.get_type()? == ValueType::String {
                let text = unsafe { first.cast::<napi::JsString>() }
                    .into_utf8()?
                    .into_owned()?;
                let lens_js: JsUnknown = obj.get_element(1)?;
                let lens = unsafe { Uint32Array::from_napi_value(env.raw(), lens_js.raw())? };
                if lens.len() != n {
                    return Err(bad());
                }
                // UTF-16 lengths to UTF-8 byte offsets, in one pass.
                let mut ends = Vec::with_capacity(n);
                let mut chars = text.char_indices();
                let mut at = 0usize;
                for &units in lens.iter() {
                    let mut left = units as usize;
                    while left > 0 {
                        let (i, c) = chars.next().ok_or_else(bad)?;
                        at = i + c.len_utf8();
                        left = left.saturating_sub(c.len_utf16());
                    }
                    ends.push(at);
                }
                return Ok(Column::Text(text, ends));
            }
        }
        if len != n {
            return Err(bad());
        }
        let mut values = Vec::with_capacity(n);
        for i in 0..n as u32 {
            let v: JsUnknown = obj.get_element(i)?;
            values.push(to_value(&v)?);
        }
        Ok(Column::Values(values))
    }
}

/// Row `i` of packed columns, read in place by the engine's inserter.
struct PackedRow<'a> {
    cols: &'a [Column],
    i: usize,
}

impl<'a> PackedRow<'a> {
    fn cell(&self, c: usize) -> ValueRef<'a> {
        let i = self.i;
        let cols: &'a [Column] = self.cols;
        match &cols[c] {
            Column::Real(v) => ValueRef::Real(v[i]),
            Column::Text(text, ends) => {
                let start = if i == 0 { 0 } else { ends[i - 1] };
                ValueRef::Text(&text.as_bytes()[start..ends[i]])
            }
            Column::Values(v) => ValueRef::from(&v[i]),
        }
    }
}

impl litelane::BulkRow for PackedRow<'_> {
    fn len(&self) -> usize {
        self.cols.len()
    }

    fn value(&self, c: usize) -> ValueRef<'_> {
        self.cell(c)
    }
}

/// What JavaScript sends the pipelined insert's thread.
enum Chunk {
    Rows(Arc<Vec<Column>>, usize),
    /// A chunk that could not be read: the insert fails with this message.
    Fail(String),
    End,
}

/// A bulk insert in progress on its own thread.
struct Pipeline {
    tx: std::sync::mpsc::SyncSender<Chunk>,
    thread: std::thread::JoinHandle<litelane::Result<u64>>,
}

/// Row `i` of a chunk, owned (the inserter keeps rows across statements).
struct ChunkRow {
    cols: Arc<Vec<Column>>,
    i: usize,
}

impl litelane::BulkRow for ChunkRow {
    fn len(&self) -> usize {
        self.cols.len()
    }

    fn value(&self, c: usize) -> ValueRef<'_> {
        PackedRow {
            cols: &self.cols,
            i: self.i,
        }
        .cell(c)
    }
}

/// The rows of the chunks as they arrive; an unreadable chunk fails the
/// insert (the transaction in progress rolls back).
struct ChunkSource {
    rx: std::sync::mpsc::Receiver<Chunk>,
    chunk: Option<(Arc<Vec<Column>>, usize)>,
    next: usize,
    done: bool,
}

impl litelane::RowSource for ChunkSource {
    type Row = ChunkRow;

    fn next_row(&mut self, _tx: &litelane::Tx<'_>) -> litelane::Result<Option<ChunkRow>> {
        loop {
            if let Some((cols, n)) = &self.chunk {
                if self.next < *n {
                    self.next += 1;
                    return Ok(Some(ChunkRow {
                        cols: Arc::clone(cols),
                        i: self.next - 1,
                    }));
                }
            }
            if self.done {
                return Ok(None);
            }
            match self.rx.recv() {
                Ok(Chunk::Rows(cols, n)) => {
                    self.chunk = Some((cols, n));
                    self.next = 0;
                }
                Ok(Chunk::Fail(message)) => {
                    self.done = true;
                    return Err(js_kind("TypeError", message));
                }
                Ok(Chunk::End) | Err(_) => {
                    self.done = true;
                    self.chunk = None;
                    return Ok(None);
                }
            }
        }
    }

    fn is_done(&mut self) -> bool {
        self.done && self.chunk.as_ref().is_none_or(|(_, n)| self.next >= *n)
    }
}

/// One engine per database file in the process, shared by every
/// `new Database(file)` (as the Python binding does): one write queue, one
/// reader pool. `holder` is the handle holding the writer in a transaction,
/// with its thread, so that another handle on the same thread fails fast
/// with `SQLITE_BUSY` instead of waiting for itself forever.
struct Shared {
    db: Database,
    holder: Mutex<Option<(u64, std::thread::ThreadId)>>,
}

static ENGINES: Mutex<Option<HashMap<PathBuf, Weak<Shared>>>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn engine_for(path: &str, opts: Options) -> litelane::Result<Arc<Shared>> {
    let fresh = |db| {
        Arc::new(Shared {
            db,
            holder: Mutex::new(None),
        })
    };
    if path == ":memory:" {
        return Ok(fresh(Database::open_in_memory(opts)?));
    }
    let key = std::fs::canonicalize(path).ok();
    let mut engines = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    let map = engines.get_or_insert_with(HashMap::new);
    if let Some(k) = &key {
        if let Some(s) = map.get(k).and_then(Weak::upgrade) {
            return Ok(s);
        }
    }
    let shared = fresh(Database::open(path, opts)?);
    if let Ok(k) = std::fs::canonicalize(path) {
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(k, Arc::downgrade(&shared));
    }
    Ok(shared)
}

#[napi]
pub struct NativeDatabase {
    id: u64,
    timeout: std::time::Duration,
    db: Option<Arc<Shared>>,
    held: Option<HeldWrite>,
    /// The savepoint that began the held transaction (SQLite commits when
    /// its outermost savepoint is released).
    held_by_savepoint: Option<String>,
    functions: Vec<Arc<JsFn>>,
    /// Backups in progress (`Database#backup`), by id.
    backups: HashMap<u32, BackupJob>,
    next_backup: u32,
    /// Statement texts by the id `intern` gave them (JavaScript passes the
    /// id instead of the text on every call).
    sqls: Vec<Arc<str>>,
    sql_ids: HashMap<String, u32>,
    /// Whether each of `sqls` is a [`one_shot_write`] (decided once).
    sql_one_shot: Vec<bool>,
    /// A pipelined `insertMany` in progress.
    pipeline: Option<Pipeline>,
    /// The memory `get_fast` shares with index.js (`set_scratch`).
    scratch: Option<Scratch>,
    /// The UTF-8 of `get_fast`'s string parameters, kept between calls.
    fast_text: Vec<u8>,
}

/// The memory a point read (`get_fast`) shares with index.js, an
/// `ArrayBuffer` of `SCRATCH_BYTES` that index.js allocated and this side
/// keeps alive with a reference. Parameters and results cross through it
/// without a napi call per value (only texts, blobs and bigints do):
///
/// - `u32` header at 0: `[0]` the statement's id (`intern`), `[1]` flags
///   (`FAST_*`), `[2]` how many parameters, `[4]` the operation (a `get`,
///   or `FAST_OP_RUN`); `[3]` the row's column count, written back.
/// - parameters: `f64` values at `PARAM_NUMS`, one tag byte each at
///   `PARAM_TAGS` (`TAG_NULL`, `TAG_NUMBER`, `TAG_OTHER`: the value is in
///   the call's argument, in order).
/// - the row: `f64` values at `COL_NUMS`, tags at `COL_TAGS` (`TAG_OTHER`:
///   the value is in what the call returns, in order). A `run` writes
///   there its changes (`f64`), its last insert rowid as an `f64` and as
///   an `i64` (for bigints) after it.
///
/// Everything runs on the JavaScript thread, one call at a time (index.js
/// marks the connection busy meanwhile), and index.js reads the row before
/// its next call.
struct Scratch {
    env: sys::napi_env,
    buf: sys::napi_ref,
    ptr: *mut u8,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        unsafe { sys::napi_delete_reference(self.env, self.buf) };
    }
}

const SCRATCH_BYTES: usize = 1024;
const MAX_FAST_PARAMS: usize = 32;
const MAX_FAST_COLUMNS: usize = 64;
const PARAM_NUMS: usize = 64;
const PARAM_TAGS: usize = PARAM_NUMS + 8 * MAX_FAST_PARAMS;
const COL_NUMS: usize = 384;
const COL_TAGS: usize = COL_NUMS + 8 * MAX_FAST_COLUMNS;
const TAG_NULL: u8 = 0;
const TAG_NUMBER: u8 = 1;
const TAG_OTHER: u8 = 2;
/// The statement runs on a reader outside a transaction.
const FAST_READER: u32 = 1;
/// Integers come back as bigints.
const FAST_SAFE_INTS: u32 = 2;
/// The call's argument is an array of the `TAG_OTHER` parameters (else it
/// is the only one).
const FAST_EXTRAS_ARRAY: u32 = 4;
/// A `run` with more or fewer parameters than the statement has: not
/// through `Database::execute`, so that binding reports it as
/// better-sqlite3 does.
const FAST_WRONG_COUNT: u32 = 8;
/// The header's `[4]` for a `run` (else a `get`).
const FAST_OP_RUN: u32 = 1;

/// A parameter of `get_fast`: texts are ranges of `fast_text`, blobs point
/// into their `Buffer` (alive for the call: it is one of its arguments).
#[derive(Clone, Copy)]
enum FastParam {
    Null,
    Real(f64),
    Integer(i64),
    Text(usize, usize),
    Blob(*const u8, usize),
}

/// A JavaScript string, bigint or `Buffer` as a [`FastParam`].
fn fast_param(
    env: sys::napi_env,
    v: sys::napi_value,
    text: &mut Vec<u8>,
) -> napi::Result<FastParam> {
    let mut ty = 0;
    unsafe { check(sys::napi_typeof(env, v, &mut ty))? };
    match ty {
        sys::ValueType::napi_string => {
            let mut len = 0usize;
            unsafe {
                check(sys::napi_get_value_string_utf8(
                    env,
                    v,
                    std::ptr::null_mut(),
                    0,
                    &mut len,
                ))?
            };
            let start = text.len();
            text.resize(start + len + 1, 0);
            let mut written = 0usize;
            unsafe {
                check(sys::napi_get_value_string_utf8(
                    env,
                    v,
                    text.as_mut_ptr().add(start).cast(),
                    len + 1,
                    &mut written,
                ))?
            };
            text.truncate(start + written);
            Ok(FastParam::Text(start, start + written))
        }
        sys::ValueType::napi_bigint => {
            let mut n = 0i64;
            let mut lossless = false;
            unsafe {
                check(sys::napi_get_value_bigint_int64(
                    env,
                    v,
                    &mut n,
                    &mut lossless,
                ))?
            };
            if !lossless {
                return Err(kind_err(
                    "RangeError",
                    "The bound string, buffer, or bigint is too big",
                ));
            }
            Ok(FastParam::Integer(n))
        }
        _ => {
            let mut is_buffer = false;
            if ty == sys::ValueType::napi_object {
                unsafe { check(sys::napi_is_buffer(env, v, &mut is_buffer))? };
            }
            if !is_buffer {
                return Err(kind_err(
                    "TypeError",
                    "SQLite3 can only bind numbers, strings, bigints, buffers, and null",
                ));
            }
            let mut data: *mut std::ffi::c_void = std::ptr::null_mut();
            let mut len = 0usize;
            unsafe { check(sys::napi_get_buffer_info(env, v, &mut data, &mut len))? };
            Ok(FastParam::Blob(data as *const u8, len))
        }
    }
}

/// The `n` parameters index.js put in the scratch memory at `ptr`, the
/// ones that are not numbers or null read from `extra` (see [`Scratch`]).
fn read_fast_params(
    env: sys::napi_env,
    ptr: *mut u8,
    flags: u32,
    n: usize,
    extra: sys::napi_value,
    text: &mut Vec<u8>,
) -> napi::Result<[FastParam; MAX_FAST_PARAMS]> {
    let mut params = [FastParam::Null; MAX_FAST_PARAMS];
    let mut k = 0u32;
    for (i, p) in params.iter_mut().enumerate().take(n) {
        *p = match unsafe { *ptr.add(PARAM_TAGS + i) } {
            TAG_NULL => FastParam::Null,
            TAG_NUMBER => FastParam::Real(unsafe {
                ptr.add(PARAM_NUMS).cast::<f64>().add(i).read_unaligned()
            }),
            _ => {
                let v = if flags & FAST_EXTRAS_ARRAY != 0 {
                    let mut v: sys::napi_value = std::ptr::null_mut();
                    unsafe { check(sys::napi_get_element(env, extra, k, &mut v))? };
                    v
                } else {
                    extra
                };
                k += 1;
                fast_param(env, v, text)?
            }
        };
    }
    Ok(params)
}

impl FastParam {
    fn value_ref<'a>(&self, text: &'a [u8]) -> ValueRef<'a> {
        match *self {
            FastParam::Null => ValueRef::Null,
            FastParam::Real(f) => ValueRef::Real(f),
            FastParam::Integer(x) => ValueRef::Integer(x),
            FastParam::Text(a, b) => ValueRef::Text(&text[a..b]),
            FastParam::Blob(_, 0) => ValueRef::Blob(&[]),
            FastParam::Blob(p, len) => {
                ValueRef::Blob(unsafe { std::slice::from_raw_parts(p, len) })
            }
        }
    }
}

/// Binds `params` by position as [`Params::bind`] binds anonymous ones,
/// with its errors (a named parameter: none were given).
fn bind_fast(
    stmt: &mut rusqlite::Statement<'_>,
    params: &[FastParam],
    text: &[u8],
) -> litelane::Result<()> {
    let count = stmt.parameter_count();
    let mut next = 0;
    for i in 1..=count {
        if stmt
            .parameter_name(i)
            .is_some_and(|name| !name.starts_with('?'))
        {
            return Err(js_kind("TypeError", "Missing named parameters"));
        }
        let Some(p) = params.get(next) else {
            return Err(js_kind(
                "RangeError",
                "Too few parameter values were provided",
            ));
        };
        next += 1;
        stmt.raw_bind_parameter(i, rusqlite::types::ToSqlOutput::Borrowed(p.value_ref(text)))
            .map_err(from_rusqlite)?;
    }
    if next < params.len() {
        return Err(js_kind(
            "RangeError",
            "Too many parameter values were provided",
        ));
    }
    Ok(())
}

/// One column of the current row as a JavaScript value (a text, blob or
/// bigint: numbers and nulls go through the scratch memory).
fn fast_extra(env: sys::napi_env, v: ValueRef<'_>) -> napi::Result<sys::napi_value> {
    let mut out: sys::napi_value = std::ptr::null_mut();
    unsafe {
        match v {
            ValueRef::Text(t) => check(sys::napi_create_string_utf8(
                env,
                t.as_ptr().cast(),
                t.len(),
                &mut out,
            ))?,
            ValueRef::Blob([]) => {
                let mut data = std::ptr::null_mut();
                check(sys::napi_create_buffer(env, 0, &mut data, &mut out))?
            }
            ValueRef::Blob(b) => {
                let mut data = std::ptr::null_mut();
                check(sys::napi_create_buffer_copy(
                    env,
                    b.len(),
                    b.as_ptr().cast(),
                    &mut data,
                    &mut out,
                ))?
            }
            ValueRef::Integer(i) => check(sys::napi_create_bigint_int64(env, i, &mut out))?,
            ValueRef::Real(f) => check(sys::napi_create_double(env, f, &mut out))?,
            ValueRef::Null => check(sys::napi_get_null(env, &mut out))?,
        }
    }
    Ok(out)
}

/// What `getFast` (the function `set_scratch` makes) points to: its
/// database, and a reference that keeps that database's JavaScript object
/// (and so the database) alive while the function is.
struct FastFn {
    db: *mut NativeDatabase,
    owner: sys::napi_ref,
}

unsafe extern "C" fn drop_fast_fn(
    env: sys::napi_env,
    data: *mut std::ffi::c_void,
    _hint: *mut std::ffi::c_void,
) {
    let fast = unsafe { Box::from_raw(data.cast::<FastFn>()) };
    unsafe { sys::napi_delete_reference(env, fast.owner) };
}

/// `fast(extra)`: [`NativeDatabase::get_fast`] or, when the header's `[4]`
/// is `FAST_OP_RUN`, [`NativeDatabase::run_fast`], on the function's database.
unsafe extern "C" fn get_fast_callback(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let mut argc = 1usize;
    let mut argv: [sys::napi_value; 1] = [std::ptr::null_mut()];
    let mut data: *mut std::ffi::c_void = std::ptr::null_mut();
    let got = unsafe {
        sys::napi_get_cb_info(
            env,
            info,
            &mut argc,
            argv.as_mut_ptr(),
            std::ptr::null_mut(),
            &mut data,
        )
    };
    let out = check(got).and_then(|()| {
        if argc == 0 {
            unsafe { check(sys::napi_get_undefined(env, &mut argv[0]))? };
        }
        // The database outlives the call: `owner` holds its object. Only
        // the JavaScript thread calls, one call at a time (index.js marks
        // the connection busy).
        let fast = unsafe { &*data.cast::<FastFn>() };
        let db = unsafe { &mut *fast.db };
        let op = db.scratch.as_ref().map_or(0, |s| unsafe {
            s.ptr.cast::<u32>().add(4).read_unaligned()
        });
        if op == FAST_OP_RUN {
            db.run_fast(env, argv[0])
        } else {
            db.get_fast(env, argv[0])
        }
    });
    match out {
        Ok(v) => v,
        Err(e) => {
            unsafe { napi::JsError::from(e).throw_into(env) };
            std::ptr::null_mut()
        }
    }
}

/// A step-wise backup: SQLite's backup object from the writer's connection
/// (`source`) to `dest`, used on the JavaScript thread only.
struct BackupJob {
    dest: Connection,
    handle: *mut rusqlite::ffi::sqlite3_backup,
    source: *mut rusqlite::ffi::sqlite3,
    path: PathBuf,
    created: bool,
}

impl NativeDatabase {
    fn db(&self) -> napi::Result<&Database> {
        self.db
            .as_ref()
            .map(|s| &s.db)
            .ok_or_else(|| kind_err("TypeError", "The database connection is not open"))
    }

    /// Runs `f` on the writer's connection: in the held transaction, or in
    /// a turn of the writer with no transaction open.
    fn on_writer<T>(
        &mut self,
        f: impl FnOnce(&Connection) -> litelane::Result<T>,
    ) -> napi::Result<T> {
        if let Some(held) = self.held.as_mut() {
            return held.run(|tx| f(tx)).map_err(to_js_err);
        }
        self.not_blocked()?;
        self.db()?.read_on_writer(f).map_err(to_js_err)
    }

    /// Finishes backup `id` (`sqlite3_backup_finish`, in a turn of the
    /// writer); `abort`: a destination file the backup created is removed.
    fn end_backup(&mut self, id: u32, abort: bool) -> napi::Result<()> {
        let Some(job) = self.backups.remove(&id) else {
            return Ok(());
        };
        let handle = job.handle;
        let finish = || unsafe { rusqlite::ffi::sqlite3_backup_finish(handle) };
        let rc = match self.on_writer(|_| Ok(finish())) {
            Ok(rc) => rc,
            // The writer cannot be had (a handle of this thread holds it):
            // finish anyway, the source is only read.
            Err(_) => finish(),
        };
        drop(job.dest);
        if abort && job.created {
            let _ = std::fs::remove_file(&job.path);
            let mut journal = job.path.clone().into_os_string();
            journal.push("-journal");
            let _ = std::fs::remove_file(journal);
        }
        if abort || rc == rusqlite::ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(kind_err(SqliteCode::name_of(rc), "the backup failed"))
        }
    }

    /// Refuses a write that would wait for a transaction another handle of
    /// this thread holds (it could never end): SQLite's `database is locked`.
    fn not_blocked(&self) -> napi::Result<()> {
        if self.held.is_some() {
            return Ok(());
        }
        if let Some(s) = &self.db {
            let h = s.holder.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((id, thread)) = *h {
                if id != self.id && thread == std::thread::current().id() {
                    drop(h);
                    // What SQLite's busy handler would do for a lock that
                    // cannot be released while it waits: wait, then fail.
                    std::thread::sleep(self.timeout);
                    return Err(kind_err("SQLITE_BUSY", "database is locked"));
                }
            }
        }
        Ok(())
    }

    fn take_writer(&mut self) -> napi::Result<()> {
        self.not_blocked()?;
        let held = self
            .db()?
            .hold_writer("node transaction")
            .map_err(to_js_err)?;
        self.held = Some(held);
        if let Some(s) = &self.db {
            *s.holder.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((self.id, std::thread::current().id()));
        }
        Ok(())
    }

    fn release_writer(&mut self, commit: bool) -> napi::Result<()> {
        let Some(h) = self.held.take() else {
            return Ok(());
        };
        self.held_by_savepoint = None;
        if let Some(s) = &self.db {
            let mut holder = s.holder.lock().unwrap_or_else(|e| e.into_inner());
            if holder.is_some_and(|(id, _)| id == self.id) {
                *holder = None;
            }
        }
        if commit { h.commit() } else { h.rollback() }.map_err(to_js_err)
    }

    /// Runs `f` where the statement belongs: in the held transaction, on a
    /// reader (a read outside a transaction) or in a write turn of its own.
    fn on_conn<T>(
        &mut self,
        reader: bool,
        f: impl FnOnce(&Connection) -> litelane::Result<T>,
    ) -> napi::Result<T> {
        self.on_conn_with(reader, false, f)
    }

    /// `on_conn`; `single`: `f` runs one statement, which on a reader is its
    /// own read transaction (`Database::read_single`).
    fn on_conn_with<T>(
        &mut self,
        reader: bool,
        single: bool,
        f: impl FnOnce(&Connection) -> litelane::Result<T>,
    ) -> napi::Result<T> {
        FN_ERROR.with(|e| *e.borrow_mut() = None);
        let out = if let Some(held) = self.held.as_mut() {
            held.run(|tx| f(tx))
        } else if reader && single {
            self.db()?.read_single(|c| f(c))
        } else if reader {
            self.db()?.read(|c| f(c))
        } else {
            self.not_blocked()?;
            self.db()?.write_local("node", |tx| f(tx))
        };
        out.map_err(|e| {
            FN_ERROR
                .with(|x| x.borrow_mut().take())
                .unwrap_or_else(|| to_js_err(e))
        })
    }

    /// `on_conn`, but a pragma outside a transaction runs on the writer with
    /// no transaction open (`journal_mode` cannot change inside one).
    fn on_conn_sql<T>(
        &mut self,
        sql: &str,
        reader: bool,
        f: impl FnOnce(&Connection) -> litelane::Result<T>,
    ) -> napi::Result<T> {
        if !reader
            && self.held.is_none()
            && matches!(
                keywords(sql).first().map(String::as_str),
                Some("PRAGMA" | "ATTACH" | "DETACH")
            )
        {
            self.not_blocked()?;
            FN_ERROR.with(|e| *e.borrow_mut() = None);
            return self
                .db()?
                .write_outside_transaction("node pragma", |c| f(c))
                .map_err(to_js_err);
        }
        self.on_conn(reader, f)
    }

    /// Transaction control statements, handled by the engine; `None` when
    /// `sql` is not one.
    fn control(&mut self, sql: &str) -> napi::Result<Option<()>> {
        match control_of(sql) {
            Control::Begin => {
                if self.held.is_some() {
                    return Err(kind_err(
                        "SQLITE_ERROR",
                        "cannot start a transaction within a transaction",
                    ));
                }
                self.take_writer()?;
                self.held_by_savepoint = None;
                Ok(Some(()))
            }
            Control::Commit => match self.held.is_some() {
                true => {
                    self.release_writer(true)?;
                    Ok(Some(()))
                }
                false => Err(kind_err(
                    "SQLITE_ERROR",
                    "cannot commit - no transaction is active",
                )),
            },
            Control::Rollback => match self.held.is_some() {
                true => {
                    self.release_writer(false)?;
                    Ok(Some(()))
                }
                false => Err(kind_err(
                    "SQLITE_ERROR",
                    "cannot rollback - no transaction is active",
                )),
            },
            Control::Savepoint(name) => {
                if self.held.is_none() {
                    self.take_writer()?;
                    self.held_by_savepoint = Some(name);
                }
                Ok(None)
            }
            Control::Release(name) => {
                if self.held.is_some() && self.held_by_savepoint.as_deref() == Some(name.as_str()) {
                    self.release_writer(true)?;
                    return Ok(Some(()));
                }
                Ok(None)
            }
            Control::Vacuum if self.held.is_none() => {
                self.not_blocked()?;
                let sql = sql.to_string();
                self.db()?
                    .write_outside_transaction("node vacuum", |c| {
                        c.execute_batch(&sql).map_err(from_rusqlite)
                    })
                    .map_err(to_js_err)?;
                Ok(Some(()))
            }
            _ => Ok(None),
        }
    }

    /// After a statement: an engine-held transaction that SQLite ended
    /// (a failed statement, `INSERT OR ROLLBACK`) is let go.
    fn settle(&mut self) {
        if self.held.as_ref().is_some_and(HeldWrite::has_ended) {
            let _ = self.release_writer(false);
        }
    }
}

#[napi]
impl NativeDatabase {
    #[napi(constructor)]
    pub fn new(path: String, options: Option<OpenOptions>) -> napi::Result<Self> {
        // litelane's settings are better-sqlite3's build options: foreign
        // keys on, double-quoted strings are identifiers. Its page cache too.
        let mut opts = Options {
            stock_settings: false,
            cache_size_kib: 16000,
            mmap_size: 0,
            ..Options::default()
        };
        if let Some(o) = &options {
            if let Some(p) = &o.profile {
                opts.profile = match p.as_str() {
                    "safe" => Profile::Safe,
                    "balanced" => Profile::Balanced,
                    "fast" => Profile::Fast,
                    other => {
                        return Err(kind_err(
                            "TypeError",
                            format!("unknown profile {other:?} (safe, balanced or fast)"),
                        ))
                    }
                };
            }
            if let Some(t) = o.timeout {
                opts.busy_timeout = std::time::Duration::from_millis(t.max(0.0) as u64);
            }
            if let Some(r) = o.readers {
                opts.readers = r.max(1) as usize;
            }
        }
        let timeout = opts.busy_timeout;
        let path = if path.is_empty() {
            ":memory:".to_string()
        } else {
            path
        };
        let db = engine_for(&path, opts).map_err(to_js_err)?;
        Ok(NativeDatabase {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            timeout,
            db: Some(db),
            held: None,
            held_by_savepoint: None,
            functions: Vec::new(),
            backups: HashMap::new(),
            next_backup: 0,
            sqls: Vec::new(),
            sql_ids: HashMap::new(),
            sql_one_shot: Vec::new(),
            pipeline: None,
            scratch: None,
            fast_text: Vec::new(),
        })
    }

    #[napi(getter)]
    pub fn open(&self) -> bool {
        self.db.is_some()
    }

    #[napi(getter)]
    pub fn in_transaction(&self) -> bool {
        self.held.as_ref().is_some_and(|h| !h.has_ended())
    }

    #[napi]
    pub fn close(&mut self) -> napi::Result<()> {
        let running: Vec<u32> = self.backups.keys().copied().collect();
        for id in running {
            let _ = self.end_backup(id, true);
        }
        let _ = self.release_writer(false);
        self.functions.clear();
        self.db = None;
        Ok(())
    }

    /// Checks one statement and says where it runs.
    #[napi]
    pub fn prepare(&mut self, sql: String) -> napi::Result<StatementInfo> {
        let parts: Vec<&str> = litelane::split_statements(&sql)
            .into_iter()
            .filter(|p| !is_blank(p))
            .collect();
        if parts.is_empty() {
            return Err(kind_err(
                "RangeError",
                "The supplied SQL string contains no statements",
            ));
        }
        if parts.len() > 1 {
            return Err(kind_err(
                "RangeError",
                "The supplied SQL string contains more than one statement",
            ));
        }
        let check = |c: &Connection| -> litelane::Result<(bool, u32, Vec<String>)> {
            let s = c.prepare_cached(&sql).map_err(from_rusqlite)?;
            let names = (1..=s.parameter_count())
                .map(|i| match s.parameter_name(i) {
                    Some(n) if !n.starts_with('?') => n[1..].to_string(),
                    _ => String::new(),
                })
                .collect();
            Ok((s.readonly(), s.column_count() as u32, names))
        };
        if let Some(held) = self.held.as_mut() {
            let (ro, n, parameters) = held.run(|tx| check(tx)).map_err(to_js_err)?;
            return Ok(StatementInfo {
                reader: ro,
                column_count: n,
                writer_only: true,
                parameters,
            });
        }
        let db = self.db()?;
        // ATTACH and DETACH change the writer's connection (the statement is
        // "read-only" to SQLite): statements naming an attached database
        // then run there.
        if matches!(
            keywords(&sql).first().map(String::as_str),
            Some("ATTACH" | "DETACH")
        ) {
            let (_, n, parameters) = db.read_on_writer(|c| check(c)).map_err(to_js_err)?;
            return Ok(StatementInfo {
                reader: false,
                column_count: n,
                writer_only: true,
                parameters,
            });
        }
        match db.read(|c| check(c)) {
            Ok((ro, n, parameters)) => Ok(StatementInfo {
                reader: ro,
                column_count: n,
                writer_only: false,
                parameters,
            }),
            Err(_) => {
                // Temporary tables and what else only the writer's
                // connection has.
                let (ro, n, parameters) = db.read_on_writer(|c| check(c)).map_err(to_js_err)?;
                Ok(StatementInfo {
                    reader: ro,
                    column_count: n,
                    writer_only: true,
                    parameters,
                })
            }
        }
    }

    #[napi]
    pub fn run(
        &mut self,
        sql: String,
        reader: bool,
        anon: Vec<JsUnknown>,
        named: Option<JsObject>,
        wrong_count: Option<bool>,
    ) -> napi::Result<RunResult> {
        let params = Params::from_js(anon, named)?;
        if self.control(&sql)?.is_some() {
            return Ok(RunResult {
                changes: 0,
                last_insert_rowid: 0,
            });
        }
        if !reader
            && self.held.is_none()
            && params.named.is_none()
            && one_shot_write(&sql)
            && wrong_count != Some(true)
        {
            // A write known in advance goes through `Database::execute`: it
            // may be committed together with the writes of other processes
            // (one fsync for all under `safe`). Not with setups on the
            // connections (JavaScript functions must run on this thread).
            let db = self.db()?;
            if db.configured().is_empty() {
                self.not_blocked()?;
                match db.execute(&sql, &params.anon) {
                    Ok(done) => {
                        return Ok(RunResult {
                            changes: done.changes as i64,
                            last_insert_rowid: done.last_insert_rowid,
                        })
                    }
                    // Refused before anything ran (wrong parameters...):
                    // the general path below reports it as better-sqlite3 does.
                    Err(Error::InvalidInput { .. }) => {}
                    Err(e) => return Err(to_js_err(e)),
                }
            }
        }
        let out = self.on_conn_sql(&sql, reader, |c| run_statement(c, &sql, &params));
        self.settle();
        let (changes, last_insert_rowid) = out?;
        Ok(RunResult {
            changes,
            last_insert_rowid,
        })
    }

    /// An id for `sql` to pass to `rows` (the same text, the same id); -1
    /// for a transaction control statement, which takes the general path.
    #[napi]
    pub fn intern(&mut self, sql: String) -> i32 {
        if !matches!(control_of(&sql), Control::None) {
            return -1;
        }
        if let Some(&id) = self.sql_ids.get(&sql) {
            return id as i32;
        }
        let id = self.sqls.len() as u32;
        self.sqls.push(Arc::from(sql.as_str()));
        self.sql_one_shot.push(one_shot_write(&sql));
        self.sql_ids.insert(sql, id);
        id as i32
    }

    /// The rows of statement `id` (from `intern`), flat:
    /// `[columns, row 1 values..., row 2 values...]`. The column names are
    /// the caller's to keep (`columns`), so none cross over per call.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn rows(
        &mut self,
        env: Env,
        id: u32,
        reader: bool,
        anon: Vec<JsUnknown>,
        named: Option<JsObject>,
        safe_ints: bool,
        first_only: bool,
    ) -> napi::Result<JsObject> {
        let sql = self
            .sqls
            .get(id as usize)
            .cloned()
            .ok_or_else(|| kind_err("TypeError", "unknown statement"))?;
        let params = Params::from_js(anon, named)?;
        let run = |c: &Connection| {
            let mut stmt = c.prepare_cached(&sql).map_err(from_rusqlite)?;
            params.bind(&mut stmt)?;
            let mut values = Vec::new();
            let mut raw = stmt.raw_query();
            // The column count once the statement ran: a schema change
            // prepares it again in its first step (`SELECT *` after `ALTER
            // TABLE ... ADD COLUMN`).
            let mut n = None;
            while let Some(row) = raw.next().map_err(from_rusqlite)? {
                let n = *n.get_or_insert_with(|| row.as_ref().column_count());
                for i in 0..n {
                    values.push(row.get::<_, Value>(i).map_err(from_rusqlite)?);
                }
                if first_only {
                    break;
                }
            }
            drop(raw);
            Ok((n.unwrap_or_else(|| stmt.column_count()), values))
        };
        let out = if reader {
            self.on_conn_with(true, true, run)
        } else {
            self.on_conn_sql(&sql, false, run)
        };
        self.settle();
        let (n, values) = out?;
        let mut arr = env.create_array_with_length(values.len() + 1)?;
        arr.set_element(0, env.create_uint32(n as u32)?)?;
        for (i, v) in values.iter().enumerate() {
            arr.set_element(i as u32 + 1, to_js(&env, ValueRef::from(v), safe_ints)?)?;
        }
        Ok(arr)
    }

    /// Gives the native side the memory `get_fast` shares with index.js
    /// (see [`Scratch`]) and returns the function that calls `get_fast`:
    /// `getFast(extra)`. It reaches this database through its own data
    /// pointer, not `napi_unwrap` (a tenth of a point read's instructions),
    /// and keeps `owner` (this object, which index.js passes) alive as long
    /// as it lives itself.
    #[napi]
    pub fn set_scratch(
        &mut self,
        env: Env,
        buf: JsArrayBuffer,
        owner: JsObject,
    ) -> napi::Result<JsFunction> {
        let raw_env = env.raw();
        let mut data: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut len = 0usize;
        unsafe {
            check(sys::napi_get_arraybuffer_info(
                raw_env,
                buf.raw(),
                &mut data,
                &mut len,
            ))?
        };
        if len < SCRATCH_BYTES || data.is_null() {
            return Err(kind_err("RangeError", "the scratch buffer is too small"));
        }
        // `owner` must be the object this method was called on.
        let mut wrapped: *mut std::ffi::c_void = std::ptr::null_mut();
        unsafe { check(sys::napi_unwrap(raw_env, owner.raw(), &mut wrapped))? };
        if !std::ptr::eq(wrapped.cast::<NativeDatabase>(), self) {
            return Err(kind_err("TypeError", "setScratch: owner is another object"));
        }
        let mut r: sys::napi_ref = std::ptr::null_mut();
        unsafe { check(sys::napi_create_reference(raw_env, buf.raw(), 1, &mut r))? };
        self.scratch = Some(Scratch {
            env: raw_env,
            buf: r,
            ptr: data.cast(),
        });
        let mut owner_ref: sys::napi_ref = std::ptr::null_mut();
        unsafe {
            check(sys::napi_create_reference(
                raw_env,
                owner.raw(),
                1,
                &mut owner_ref,
            ))?
        };
        let fast = Box::into_raw(Box::new(FastFn {
            db: self as *mut NativeDatabase,
            owner: owner_ref,
        }));
        let mut f: sys::napi_value = std::ptr::null_mut();
        let made = unsafe {
            check(sys::napi_create_function(
                raw_env,
                c"getFast".as_ptr(),
                7,
                Some(get_fast_callback),
                fast.cast(),
                &mut f,
            ))
            .and_then(|()| {
                check(sys::napi_add_finalizer(
                    raw_env,
                    f,
                    fast.cast(),
                    Some(drop_fast_fn),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                ))
            })
        };
        if let Err(e) = made {
            unsafe { drop_fast_fn(raw_env, fast.cast(), std::ptr::null_mut()) };
            return Err(e);
        }
        Ok(unsafe { JsFunction::from_raw_unchecked(raw_env, f) })
    }

    /// The scratch memory and its header, as `get_fast` and `run_fast`
    /// read it: the statement id, the flags and the parameter count
    /// (refused past `MAX_FAST_PARAMS`; `what` names the caller).
    fn scratch_header(&self, what: &str) -> napi::Result<(*mut u8, u32, u32, usize)> {
        let ptr = match self.scratch.as_ref() {
            Some(s) => s.ptr,
            None => return Err(kind_err("TypeError", "no scratch buffer")),
        };
        let header = |i: usize| unsafe { ptr.cast::<u32>().add(i).read_unaligned() };
        let (id, flags, n) = (header(0), header(1), header(2) as usize);
        if n > MAX_FAST_PARAMS {
            return Err(kind_err(
                "RangeError",
                format!("too many parameters for {what}"),
            ));
        }
        Ok((ptr, id, flags, n))
    }

    /// The first row of statement `id` (from `intern`), for `get`: what
    /// `rows` does with `first_only`, its parameters and its row passing
    /// through the scratch memory ([`Scratch`] says how), and the row's
    /// values read from SQLite in place (no copy but the JavaScript
    /// values). `extra`: the parameters that are not numbers or null.
    /// Returns `undefined` without a row, else the row's texts, blobs and
    /// bigints: `null` when there are none, the value itself when there is
    /// one, an array of them otherwise. A row of more columns than the
    /// scratch memory holds comes as an array of all its values (the
    /// header's column count tells index.js).
    fn get_fast(
        &mut self,
        raw_env: sys::napi_env,
        extra: sys::napi_value,
    ) -> napi::Result<sys::napi_value> {
        let (ptr, id, flags, n) = self.scratch_header("get_fast")?;
        let sql = self
            .sqls
            .get(id as usize)
            .cloned()
            .ok_or_else(|| kind_err("TypeError", "unknown statement"))?;
        let mut text = std::mem::take(&mut self.fast_text);
        text.clear();
        let params = read_fast_params(raw_env, ptr, flags, n, extra, &mut text)?;
        let params = &params[..n];
        let safe_ints = flags & FAST_SAFE_INTS != 0;
        let mut extras: [sys::napi_value; MAX_FAST_COLUMNS] =
            [std::ptr::null_mut(); MAX_FAST_COLUMNS];
        let text_ref = &text;
        let extras_ref = &mut extras;
        let mut wide: Vec<sys::napi_value> = Vec::new();
        let wide_ref = &mut wide;
        let run = |c: &Connection| -> litelane::Result<Option<(usize, usize)>> {
            let mut stmt = c.prepare_cached(&sql).map_err(from_rusqlite)?;
            bind_fast(&mut stmt, params, text_ref)?;
            let mut raw = stmt.raw_query();
            let Some(row) = raw.next().map_err(from_rusqlite)? else {
                return Ok(None);
            };
            // The column count once the statement ran (a schema change
            // prepares it again in its first step).
            let ncols = row.as_ref().column_count();
            if ncols > MAX_FAST_COLUMNS {
                // More than the scratch memory holds: every value in an array.
                for i in 0..ncols {
                    let v = match row.get_ref_unwrap(i) {
                        ValueRef::Integer(x) if !safe_ints => ValueRef::Real(x as f64),
                        v => v,
                    };
                    wide_ref.push(fast_extra(raw_env, v).map_err(|e| js_kind("Error", e.reason))?);
                }
                return Ok(Some((ncols, usize::MAX)));
            }
            let mut nx = 0;
            for i in 0..ncols {
                let v = row.get_ref_unwrap(i);
                let tag = match v {
                    ValueRef::Null => TAG_NULL,
                    ValueRef::Real(f) => {
                        unsafe { ptr.add(COL_NUMS).cast::<f64>().add(i).write_unaligned(f) };
                        TAG_NUMBER
                    }
                    ValueRef::Integer(x) if !safe_ints => {
                        unsafe {
                            ptr.add(COL_NUMS)
                                .cast::<f64>()
                                .add(i)
                                .write_unaligned(x as f64)
                        };
                        TAG_NUMBER
                    }
                    _ => {
                        extras_ref[nx] =
                            fast_extra(raw_env, v).map_err(|e| js_kind("Error", e.reason))?;
                        nx += 1;
                        TAG_OTHER
                    }
                };
                unsafe { *ptr.add(COL_TAGS + i) = tag };
            }
            Ok(Some((ncols, nx)))
        };
        let out = if flags & FAST_READER != 0 {
            self.on_conn_with(true, true, run)
        } else {
            self.on_conn_sql(&sql, false, run)
        };
        self.settle();
        self.fast_text = text;
        let Some((ncols, nx)) = out? else {
            let mut v = std::ptr::null_mut();
            unsafe { check(sys::napi_get_undefined(raw_env, &mut v))? };
            return Ok(v);
        };
        unsafe { ptr.cast::<u32>().add(3).write_unaligned(ncols as u32) };
        let (nx, extras) = if nx == usize::MAX {
            (wide.len(), &wide[..])
        } else {
            (nx, &extras[..nx])
        };
        let value = match nx {
            0 => {
                let mut v = std::ptr::null_mut();
                unsafe { check(sys::napi_get_null(raw_env, &mut v))? };
                v
            }
            1 => extras[0],
            _ => {
                let mut arr = std::ptr::null_mut();
                unsafe { check(sys::napi_create_array_with_length(raw_env, nx, &mut arr))? };
                for (i, v) in extras.iter().enumerate() {
                    unsafe { check(sys::napi_set_element(raw_env, arr, i as u32, *v))? };
                }
                arr
            }
        };
        Ok(value)
    }

    /// `run` for statement `id` (from `intern`, so not a transaction
    /// control statement) with its parameters in the scratch memory, as
    /// `get_fast` takes them: the same paths as `run`, its result written
    /// back there (changes, then the last insert rowid as an `f64` and as
    /// an `i64`), no object made for it. Returns `undefined`.
    fn run_fast(
        &mut self,
        raw_env: sys::napi_env,
        extra: sys::napi_value,
    ) -> napi::Result<sys::napi_value> {
        let (ptr, id, flags, n) = self.scratch_header("run_fast")?;
        let id = id as usize;
        let (Some(sql), Some(&one_shot)) = (self.sqls.get(id).cloned(), self.sql_one_shot.get(id))
        else {
            return Err(kind_err("TypeError", "unknown statement"));
        };
        let mut text = std::mem::take(&mut self.fast_text);
        text.clear();
        let params = read_fast_params(raw_env, ptr, flags, n, extra, &mut text)?;
        let params = &params[..n];
        let reader = flags & FAST_READER != 0;
        let mut done = None;
        if !reader && self.held.is_none() && one_shot && flags & FAST_WRONG_COUNT == 0 {
            // As `run`: a write known in advance goes through
            // `Database::execute` (committed with other processes' writes).
            let db = self.db()?;
            if db.configured().is_empty() {
                self.not_blocked()?;
                let values: Vec<Value> = params
                    .iter()
                    .map(|p| match p.value_ref(&text) {
                        ValueRef::Null => Value::Null,
                        ValueRef::Integer(x) => Value::Integer(x),
                        ValueRef::Real(f) => Value::Real(f),
                        // From a JavaScript string: valid UTF-8 (the
                        // check is a fast scan, `from_utf8_lossy` is not).
                        ValueRef::Text(t) => Value::Text(match std::str::from_utf8(t) {
                            Ok(t) => t.to_owned(),
                            Err(_) => String::from_utf8_lossy(t).into_owned(),
                        }),
                        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                    })
                    .collect();
                match db.execute(&sql, &values) {
                    Ok(d) => done = Some((d.changes as i64, d.last_insert_rowid)),
                    Err(Error::InvalidInput { .. }) => {}
                    Err(e) => return Err(to_js_err(e)),
                }
            }
        }
        let (changes, rowid) = match done {
            Some(x) => x,
            None => {
                let text_ref = &text;
                let out = self.on_conn_sql(&sql, reader, |c| {
                    run_statement_with(c, &sql, |stmt| bind_fast(stmt, params, text_ref))
                });
                self.settle();
                out?
            }
        };
        self.fast_text = text;
        unsafe {
            let nums = ptr.add(COL_NUMS).cast::<f64>();
            nums.write_unaligned(changes as f64);
            nums.add(1).write_unaligned(rowid as f64);
            ptr.add(COL_NUMS + 16).cast::<i64>().write_unaligned(rowid);
        }
        let mut v = std::ptr::null_mut();
        unsafe { check(sys::napi_get_undefined(raw_env, &mut v))? };
        Ok(v)
    }

    /// Rows as `[names, [row values...]...]`.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn query(
        &mut self,
        env: Env,
        sql: String,
        reader: bool,
        anon: Vec<JsUnknown>,
        named: Option<JsObject>,
        safe_ints: bool,
        first_only: bool,
    ) -> napi::Result<JsObject> {
        let params = Params::from_js(anon, named)?;
        if self.control(&sql)?.is_some() {
            let mut arr = env.create_array_with_length(1)?;
            arr.set_element(0, env.create_array_with_length(0)?)?;
            return Ok(arr);
        }
        let out = self.on_conn_sql(&sql, reader, |c| run_query(c, &sql, &params, first_only));
        self.settle();
        let rows = out?;
        let mut arr = env.create_array_with_length(rows.rows.len() + 1)?;
        let mut names = env.create_array_with_length(rows.names.len())?;
        for (i, n) in rows.names.iter().enumerate() {
            names.set_element(i as u32, env.create_string(n)?)?;
        }
        arr.set_element(0, names)?;
        for (r, row) in rows.rows.iter().enumerate() {
            let mut a = env.create_array_with_length(row.len())?;
            for (i, v) in row.iter().enumerate() {
                a.set_element(i as u32, to_js(&env, ValueRef::from(v), safe_ints)?)?;
            }
            arr.set_element(r as u32 + 1, a)?;
        }
        Ok(arr)
    }

    /// The statement's SQL with its parameters bound (the `verbose` option).
    #[napi]
    pub fn expanded_sql(
        &mut self,
        sql: String,
        reader: bool,
        anon: Vec<JsUnknown>,
        named: Option<JsObject>,
    ) -> napi::Result<String> {
        let params = Params::from_js(anon, named)?;
        if !matches!(control_of(&sql), Control::None) {
            return Ok(sql);
        }
        let (params, long) = shorten_for_trace(params);
        let out = self.on_conn(reader || self.held.is_none(), |c| {
            let mut stmt = c.prepare_cached(&sql).map_err(from_rusqlite)?;
            params.bind(&mut stmt)?;
            let out = stmt.expanded_sql().unwrap_or_else(|| sql.clone());
            stmt.clear_bindings();
            Ok(out)
        })?;
        Ok(long
            .iter()
            .fold(out, |text, (marker, shown)| text.replacen(marker, shown, 1)))
    }

    /// Column descriptions as better-sqlite3's `Statement.columns()` gives them.
    #[napi]
    pub fn columns(&mut self, env: Env, sql: String, reader: bool) -> napi::Result<JsObject> {
        type Col = (
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        let cols: Vec<Col> = self.on_conn(reader, |c| {
            let s = c.prepare_cached(&sql).map_err(from_rusqlite)?;
            let mut out = Vec::new();
            let types: Vec<Option<String>> = s
                .columns()
                .map(|c| c.decl_type().map(str::to_string))
                .collect();
            for (col, ty) in s.columns_with_metadata().zip(types) {
                out.push((
                    col.name().to_string(),
                    col.origin_name().map(str::to_string),
                    col.table_name().map(str::to_string),
                    col.database_name().map(str::to_string),
                    ty,
                ));
            }
            Ok(out)
        })?;
        let mut arr = env.create_array_with_length(cols.len())?;
        for (i, (name, column, table, database, ty)) in cols.into_iter().enumerate() {
            let mut o = env.create_object()?;
            o.set_named_property("name", env.create_string(&name)?)?;
            let opt = |v: Option<String>| -> napi::Result<JsUnknown> {
                Ok(match v {
                    Some(s) => env.create_string(&s)?.into_unknown(),
                    None => env.get_null()?.into_unknown(),
                })
            };
            o.set_named_property("column", opt(column)?)?;
            o.set_named_property("table", opt(table)?)?;
            o.set_named_property("database", opt(database)?)?;
            o.set_named_property("type", opt(ty)?)?;
            arr.set_element(i as u32, o)?;
        }
        Ok(arr)
    }

    /// Runs a script of statements, one after the other.
    #[napi]
    pub fn exec(&mut self, sql: String) -> napi::Result<()> {
        let none = Params {
            anon: Vec::new(),
            named: None,
        };
        for part in litelane::split_statements(&sql) {
            if self.control(part)?.is_some() {
                continue;
            }
            let out = self.on_conn_sql(part, false, |c| {
                let mut stmt = c.prepare(part).map_err(from_rusqlite)?;
                let mut raw = stmt.raw_query();
                while raw.next().map_err(from_rusqlite)?.is_some() {}
                Ok(())
            });
            self.settle();
            out?;
            let _ = &none;
        }
        Ok(())
    }

    /// Keeps `func` alive (a napi reference) as a [`JsFn`] of this
    /// database, callable from SQLite on the JavaScript thread only.
    fn keep_js_fn(
        &mut self,
        env: Env,
        func: &JsFunction,
        safe_ints: bool,
    ) -> napi::Result<Arc<JsFn>> {
        let mut r: sys::napi_ref = std::ptr::null_mut();
        unsafe { check(sys::napi_create_reference(env.raw(), func.raw(), 1, &mut r))? };
        let f = Arc::new(JsFn {
            env: env.raw(),
            func: r,
            thread: std::thread::current().id(),
            safe_ints,
        });
        self.functions.push(Arc::clone(&f));
        Ok(f)
    }

    /// Installs `func` (index.js's wrapper) as an SQL function on every
    /// connection of the database.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn function(
        &mut self,
        env: Env,
        name: String,
        func: JsFunction,
        argc: i32,
        deterministic: bool,
        direct_only: bool,
        safe_ints: bool,
    ) -> napi::Result<()> {
        let f = self.keep_js_fn(env, &func, safe_ints)?;
        let flags = function_flags(deterministic, direct_only);
        let fname = name.clone();
        let setup: litelane::Setup = Arc::new(move |c: &mut Connection| {
            let f = Arc::clone(&f);
            c.create_scalar_function(fname.as_str(), argc, flags, move |ctx| f.call(ctx))
        });
        self.db()?
            .configure(&format!("function:{name}/{argc}"), setup)
            .map_err(to_js_err)
    }

    /// Installs an aggregate (a window function when `window`) whose
    /// dispatcher is index.js's.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn aggregate(
        &mut self,
        env: Env,
        name: String,
        dispatch: JsFunction,
        argc: i32,
        window: bool,
        deterministic: bool,
        direct_only: bool,
        safe_ints: bool,
    ) -> napi::Result<()> {
        let f = self.keep_js_fn(env, &dispatch, safe_ints)?;
        let flags = function_flags(deterministic, direct_only);
        let fname = name.clone();
        let setup: litelane::Setup = Arc::new(move |c: &mut Connection| {
            let agg = JsAggregate { f: Arc::clone(&f) };
            if window {
                c.create_window_function(fname.as_str(), argc, flags, agg)
            } else {
                c.create_aggregate_function(fname.as_str(), argc, flags, agg)
            }
        });
        self.db()?
            .configure(&format!("function:{name}/{argc}"), setup)
            .map_err(to_js_err)
    }

    /// Installs a virtual table module written in JavaScript (index.js's
    /// dispatcher; see `vtab.rs`) on every connection of the database.
    #[napi]
    pub fn table(
        &mut self,
        env: Env,
        name: String,
        dispatch: JsFunction,
        eponymous: bool,
    ) -> napi::Result<()> {
        let f = self.keep_js_fn(env, &dispatch, false)?;
        let module = name.clone();
        let setup: litelane::Setup =
            Arc::new(move |c: &mut Connection| vtab::register(c, &module, &f, eponymous));
        self.db()?
            .configure(&format!("table:{name}"), setup)
            .map_err(to_js_err)
    }

    /// Loads the SQLite extension at `path` (entry point `entry`, or
    /// SQLite's default) on every connection of the database. Loading is
    /// enabled for this C call only: SQL's `load_extension()` stays
    /// refused. A file that cannot be loaded is refused before any
    /// connection of the database sees it.
    #[napi]
    pub fn load_extension(&mut self, path: String, entry: Option<String>) -> napi::Result<()> {
        let file = std::ffi::CString::new(path.clone())
            .map_err(|_| kind_err("TypeError", "a NUL in the extension path"))?;
        let entry = entry
            .map(std::ffi::CString::new)
            .transpose()
            .map_err(|_| kind_err("TypeError", "a NUL in the entry point"))?;
        let setup: litelane::Setup = Arc::new(move |c: &mut Connection| {
            use rusqlite::ffi;
            let db = unsafe { c.handle() };
            let mut err: *mut std::ffi::c_char = std::ptr::null_mut();
            let entry_ptr = entry.as_ref().map_or(std::ptr::null(), |e| e.as_ptr());
            let rc = unsafe {
                ffi::sqlite3_db_config(
                    db,
                    ffi::SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION,
                    1 as std::ffi::c_int,
                    std::ptr::null_mut::<std::ffi::c_int>(),
                );
                let rc = ffi::sqlite3_load_extension(db, file.as_ptr(), entry_ptr, &mut err);
                ffi::sqlite3_db_config(
                    db,
                    ffi::SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION,
                    0 as std::ffi::c_int,
                    std::ptr::null_mut::<std::ffi::c_int>(),
                );
                rc
            };
            if rc == ffi::SQLITE_OK {
                return Ok(());
            }
            let msg = if err.is_null() {
                "the extension could not be loaded".to_string()
            } else {
                let m = unsafe { std::ffi::CStr::from_ptr(err) }
                    .to_string_lossy()
                    .into_owned();
                unsafe { ffi::sqlite3_free(err.cast()) };
                m
            };
            Err(rusqlite::Error::SqliteFailure(
                ffi::Error::new(rc),
                Some(msg),
            ))
        });
        self.db()?
            .configure(&format!("extension:{path}"), setup)
            .map_err(to_js_err)
    }

    /// Starts a step-wise backup of the schema `attached` (`main` or an
    /// attached database of the writer's connection) to `path`, read
    /// through the writer's connection so that its own writes during the
    /// backup reach the copy (SQLite's backup API). Returns the backup's id
    /// for `backup_step`/`backup_abort`.
    #[napi]
    pub fn backup_start(&mut self, path: String, attached: String) -> napi::Result<u32> {
        let created = !std::path::Path::new(&path).exists();
        let dest = Connection::open(&path).map_err(|e| to_js_err(from_rusqlite(e)))?;
        let dest_handle = unsafe { dest.handle() };
        let schema = std::ffi::CString::new(attached)
            .map_err(|_| kind_err("TypeError", "a NUL in the attached name"))?;
        let started = self.on_writer(|c| {
            let source = unsafe { c.handle() };
            let b = unsafe {
                rusqlite::ffi::sqlite3_backup_init(
                    dest_handle,
                    c"main".as_ptr(),
                    source,
                    schema.as_ptr(),
                )
            };
            Ok((source, b))
        });
        let fail = |dest: Connection, e: napi::Error| {
            drop(dest);
            if created {
                let _ = std::fs::remove_file(&path);
            }
            e
        };
        let (source, handle) = match started {
            Ok(x) => x,
            Err(e) => return Err(fail(dest, e)),
        };
        if handle.is_null() {
            let (code, msg) = unsafe {
                let code = rusqlite::ffi::sqlite3_extended_errcode(dest_handle);
                let msg = std::ffi::CStr::from_ptr(rusqlite::ffi::sqlite3_errmsg(dest_handle));
                (code, msg.to_string_lossy().into_owned())
            };
            return Err(fail(dest, kind_err(SqliteCode::name_of(code), msg)));
        }
        self.next_backup += 1;
        let id = self.next_backup;
        self.backups.insert(
            id,
            BackupJob {
                dest,
                handle,
                source,
                path: PathBuf::from(&path),
                created,
            },
        );
        Ok(id)
    }

    /// One step of `pages` pages (negative: all that remain):
    /// `[done, totalPages, remainingPages]`. SQLite's `SQLITE_BUSY` and
    /// `SQLITE_LOCKED` are not errors: the next step tries again.
    #[napi]
    pub fn backup_step(&mut self, id: u32, pages: i32) -> napi::Result<Vec<f64>> {
        let Some(job) = self.backups.get(&id) else {
            return Err(kind_err("TypeError", "This backup has ended"));
        };
        let (handle, source) = (job.handle, job.source);
        let out = self.on_writer(|c| {
            if unsafe { c.handle() } != source {
                return Err(js_kind(
                    "Error",
                    "the engine's writer connection was reopened",
                ));
            }
            let rc = unsafe { rusqlite::ffi::sqlite3_backup_step(handle, pages) };
            let total = unsafe { rusqlite::ffi::sqlite3_backup_pagecount(handle) };
            let remaining = unsafe { rusqlite::ffi::sqlite3_backup_remaining(handle) };
            Ok((rc, total, remaining))
        });
        let (rc, total, remaining) = match out {
            Ok(x) => x,
            Err(e) => {
                let _ = self.end_backup(id, true);
                return Err(e);
            }
        };
        use rusqlite::ffi::{SQLITE_BUSY, SQLITE_DONE, SQLITE_LOCKED, SQLITE_OK};
        match rc & 0xff {
            SQLITE_OK | SQLITE_BUSY | SQLITE_LOCKED => {
                Ok(vec![0.0, total as f64, remaining as f64])
            }
            SQLITE_DONE => {
                self.end_backup(id, false)?;
                Ok(vec![1.0, total as f64, 0.0])
            }
            _ => {
                let msg = unsafe { std::ffi::CStr::from_ptr(rusqlite::ffi::sqlite3_errstr(rc)) }
                    .to_string_lossy()
                    .into_owned();
                let _ = self.end_backup(id, true);
                Err(kind_err(SqliteCode::name_of(rc), msg))
            }
        }
    }

    /// Ends a backup early: the destination's transaction is rolled back,
    /// and a file the backup created is removed.
    #[napi]
    pub fn backup_abort(&mut self, id: u32) -> napi::Result<()> {
        self.end_backup(id, true)
    }

    /// `db.serialize()`: the bytes of the database `attached` (`main`,
    /// `temp` or an attached name), page by page as SQLite's
    /// `sqlite3_serialize` reads them in one read transaction (through the
    /// WAL, without `SQLITE_ENABLE_DBPAGE_VTAB`), their header made that of
    /// a file of its own ([`standalone_header`]). `main` outside a
    /// transaction is read on a reader (committed data; writers do not
    /// wait); inside this handle's transaction, and for other names (they
    /// live on the writer's connection), on the writer, so the copy has the
    /// transaction's own uncommitted writes, as better-sqlite3's one
    /// connection does. `None` for a database with no page even then.
    #[napi]
    pub fn serialize(&mut self, attached: String) -> napi::Result<Option<Buffer>> {
        let schema = std::ffi::CString::new(attached.as_str())
            .map_err(|_| kind_err("TypeError", "a NUL in the attached name"))?;
        let copy = |c: &Connection| serialize_schema(c, &schema, &attached);
        let on_reader = self.held.is_none() && attached.eq_ignore_ascii_case("main");
        let mut bytes = if on_reader {
            self.db()?.read(copy).map_err(to_js_err)?
        } else {
            self.on_writer(copy)?
        };
        if bytes.is_empty() && self.held.is_none() {
            // A database with no page yet (in memory, never written): its
            // first page is written, as better-sqlite3's `sqlite3_serialize`
            // does there (`BEGIN IMMEDIATE; COMMIT`; here a write of the
            // user version it has, 0, through the engine's write queue), so
            // that the image is one page, as better-sqlite3's.
            self.not_blocked()?;
            let first_page = format!(
                "PRAGMA \"{}\".user_version = 0",
                attached.replace('"', "\"\"")
            );
            let db = self.db()?;
            db.write_local("node serialize", |tx| {
                tx.execute_batch(&first_page).map_err(from_rusqlite)
            })
            .map_err(to_js_err)?;
            bytes = if on_reader {
                db.read(copy).map_err(to_js_err)?
            } else {
                db.read_on_writer(copy).map_err(to_js_err)?
            };
        }
        if bytes.is_empty() {
            return Ok(None);
        }
        standalone_header(&mut bytes);
        Ok(Some(bytes.into()))
    }

    /// `new Database(buffer)`: this database (new, in memory, not yet
    /// used) takes the content of the database file image `bytes`, copied
    /// page by page by SQLite's backup API in one turn of the writer from a
    /// private connection that deserialized it. Bytes that are not a
    /// database fail here (`SQLITE_NOTADB`), not at the first statement.
    #[napi]
    pub fn deserialize(&mut self, bytes: Buffer) -> napi::Result<()> {
        let data: &[u8] = &bytes;
        // A WAL database's image: without a -wal beside it, it is read as
        // the rollback-journal file it is (SQLite's memdb has no WAL).
        let mut head = [0u8; 20];
        let n = data.len().min(20);
        head[..n].copy_from_slice(&data[..n]);
        if n == 20 && head[18] == 2 && head[19] == 2 {
            head[18] = 1;
            head[19] = 1;
        }
        let mut src = Connection::open_in_memory().map_err(|e| to_js_err(from_rusqlite(e)))?;
        let read = std::io::Read::chain(&head[..n], &data[n..]);
        src.deserialize_read_exact("main", read, data.len(), true)
            .map_err(|e| to_js_err(from_rusqlite(e)))?;
        self.not_blocked()?;
        self.db()?
            .write_outside_transaction("node deserialize", |dst| copy_database(&src, dst))
            .map_err(to_js_err)
    }

    /// litelane: bulk insert through the engine's inserter, of `n` rows
    /// given column by column (index.js packs them): a `Float64Array` for a
    /// column of numbers, `[text, lengths]` for a column of strings (all of
    /// them joined, and each one's length in UTF-16 units), or an array of
    /// values for anything else. The rows are read in place, without a
    /// JavaScript value per cell crossing over.
    #[napi]
    pub fn insert_columns(
        &mut self,
        env: Env,
        table: String,
        columns: Vec<String>,
        n: u32,
        packed: Vec<JsUnknown>,
    ) -> napi::Result<f64> {
        let n = n as usize;
        let cols = packed
            .into_iter()
            .map(|c| Column::from_js(&env, c, n))
            .collect::<napi::Result<Vec<_>>>()?;
        if cols.len() != columns.len() {
            return Err(kind_err("RangeError", "one packed column per column name"));
        }
        self.not_blocked()?;
        if self.held.is_some() {
            return Err(kind_err(
                "TypeError",
                "insertMany runs in transactions of its own: not inside a transaction",
            ));
        }
        let names: Vec<&str> = columns.iter().map(String::as_str).collect();
        let rows = (0..n).map(|i| PackedRow { cols: &cols, i });
        let report = self
            .db()?
            .inserter(&table, &names)
            .and_then(|ins| ins.insert(rows))
            .map_err(to_js_err)?;
        Ok(report.rows as f64)
    }

    /// litelane: starts a pipelined bulk insert: a thread of its own runs
    /// the engine's inserter over the chunks `insert_chunk` sends it, while
    /// JavaScript packs the next chunk. Refused inside a transaction and
    /// when setups exist on the connections (a trigger could call a
    /// JavaScript function, which must run on this thread): then
    /// `insert_columns` does it all on this thread.
    #[napi]
    pub fn insert_start(&mut self, table: String, columns: Vec<String>) -> napi::Result<bool> {
        self.not_blocked()?;
        if self.held.is_some() {
            return Err(kind_err(
                "TypeError",
                "insertMany runs in transactions of its own: not inside a transaction",
            ));
        }
        let shared = Arc::clone(
            self.db
                .as_ref()
                .ok_or_else(|| kind_err("TypeError", "The database connection is not open"))?,
        );
        if !shared.db.configured().is_empty() || self.pipeline.is_some() {
            return Ok(false);
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<Chunk>(2);
        let thread = std::thread::spawn(move || {
            let names: Vec<&str> = columns.iter().map(String::as_str).collect();
            let source = ChunkSource {
                rx,
                chunk: None,
                next: 0,
                done: false,
            };
            shared
                .db
                .inserter(&table, &names)
                .and_then(|ins| ins.insert_from(source))
                .map(|r| r.rows)
        });
        self.pipeline = Some(Pipeline { tx, thread });
        Ok(true)
    }

    /// litelane: one chunk of `n` packed rows for the insert `insert_start`
    /// began (see `insert_columns` for the packing).
    #[napi]
    pub fn insert_chunk(&mut self, env: Env, n: u32, packed: Vec<JsUnknown>) -> napi::Result<()> {
        let n = n as usize;
        let cols = packed.into_iter().map(|c| Column::from_js(&env, c, n));
        let chunk = match cols.collect::<napi::Result<Vec<_>>>() {
            Ok(cols) => Chunk::Rows(Arc::new(cols), n),
            Err(e) => Chunk::Fail(
                e.reason
                    .split_once('\u{1}')
                    .map_or(e.reason.as_str(), |(_, m)| m)
                    .to_string(),
            ),
        };
        let failed = matches!(chunk, Chunk::Fail(_));
        let Some(p) = self.pipeline.as_ref() else {
            return Err(kind_err("TypeError", "no bulk insert in progress"));
        };
        if p.tx.send(chunk).is_err() || failed {
            // The inserter stopped (an error it reports at the end) or the
            // chunk could not be read: end the insert now.
            return self.insert_finish(false).map(|_| ());
        }
        Ok(())
    }

    /// litelane: ends the insert `insert_start` began: the rows stored, or
    /// its error (the transaction in progress rolled back). `abort`: roll
    /// back the transaction in progress instead of committing it.
    #[napi]
    pub fn insert_finish(&mut self, abort: bool) -> napi::Result<f64> {
        let Some(p) = self.pipeline.take() else {
            return Err(kind_err("TypeError", "no bulk insert in progress"));
        };
        let _ = p.tx.send(if abort {
            Chunk::Fail("insertMany was abandoned".into())
        } else {
            Chunk::End
        });
        drop(p.tx);
        match p.thread.join() {
            Ok(Ok(rows)) => Ok(rows as f64),
            Ok(Err(e)) => Err(to_js_err(e)),
            Err(_) => Err(kind_err("Error", "the bulk insert's thread panicked")),
        }
    }

    /// litelane: the engine's metrics, as JSON text (durations in ms).
    #[napi]
    pub fn metrics(&self) -> napi::Result<String> {
        use litelane::OverLimitReason as R;
        let m = self.db()?.metrics();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        let pinned = |r: &litelane::PinnedRead| serde_json::json!({"label": r.label, "ageMs": ms(r.age), "sql": r.sql});
        let over = m.wal_over_limit.as_ref().map(|o| {
            let (reason, pinned_by, error) = match &o.reason {
                R::PinnedByRead(r) => ("pinnedByRead", Some(pinned(r)), None),
                R::PinnedElsewhere => ("pinnedElsewhere", None, None),
                R::CatchingUp => ("catchingUp", None, None),
                R::CheckpointFailed(e) => ("checkpointFailed", None, Some(e.clone())),
                _ => ("other", None, None),
            };
            serde_json::json!({
                "durationMs": ms(o.duration),
                "walPages": o.wal_pages,
                "limitPages": o.limit_pages,
                "reason": reason,
                "pinnedBy": pinned_by,
                "error": error,
            })
        });
        Ok(serde_json::json!({
            "queueWaitP50Ms": ms(m.queue_wait_p50),
            "queueWaitP95Ms": ms(m.queue_wait_p95),
            "queueWaitP99Ms": ms(m.queue_wait_p99),
            "queueWaitMaxMs": ms(m.queue_wait_max),
            "queueDepth": m.queue_depth,
            "transactions": m.transactions,
            "rollbacks": m.rollbacks,
            "rowsWritten": m.rows_written,
            "commits": m.commits,
            "meanGroupSize": m.mean_group_size(),
            "walPages": m.wal_pages,
            "walOverLimit": over,
            "walOverLimitCount": m.wal_over_limit_count,
            "walOverLimitTimeMs": ms(m.wal_over_limit_time),
            "walPinnedBy": m.wal_pinned_by.as_ref().map(pinned),
            "checkpointHolds": m.checkpoint_holds,
            "checkpointHoldMaxMs": ms(m.checkpoint_hold_max),
            "checkpointHoldTimeMs": ms(m.checkpoint_hold_time),
        })
        .to_string())
    }

    /// litelane: one checkpoint; `[walFrames, checkpointedFrames, busy]`.
    #[napi]
    pub fn checkpoint(&self, mode: String) -> napi::Result<Vec<f64>> {
        let mode = match mode.to_ascii_uppercase().as_str() {
            "PASSIVE" => CheckpointMode::Passive,
            "FULL" => CheckpointMode::Full,
            "RESTART" => CheckpointMode::Restart,
            "TRUNCATE" => CheckpointMode::Truncate,
            other => {
                return Err(kind_err(
                    "TypeError",
                    format!("unknown checkpoint mode {other:?}"),
                ))
            }
        };
        let r = self.db()?.checkpoint(mode).map_err(to_js_err)?;
        Ok(vec![
            r.wal_frames as f64,
            r.checkpointed_frames as f64,
            if r.busy { 1.0 } else { 0.0 },
        ])
    }
}

/// `sqlite3_serialize` of `schema` on `c`: a copy of its pages, empty for a
/// database with none.
fn serialize_schema(
    c: &Connection,
    schema: &std::ffi::CStr,
    name: &str,
) -> litelane::Result<Vec<u8>> {
    use rusqlite::ffi;
    let mut size: ffi::sqlite3_int64 = -1;
    let ptr = unsafe { ffi::sqlite3_serialize(c.handle(), schema.as_ptr(), &mut size, 0) };
    if ptr.is_null() {
        if size == 0 {
            return Ok(Vec::new());
        }
        let known: bool = c
            .query_row(
                "SELECT count(*) > 0 FROM pragma_database_list WHERE name = ?1 COLLATE NOCASE",
                [name],
                |r| r.get(0),
            )
            .map_err(from_rusqlite)?;
        if !known {
            // better-sqlite3 says "Out of memory" (sqlite3_serialize's NULL).
            return Err(js_kind("Error", format!("unknown database {name}")));
        }
        if size > 0 {
            return Err(js_kind("Error", "Out of memory"));
        }
        let code = unsafe { ffi::sqlite3_extended_errcode(c.handle()) };
        let msg = unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(c.handle())) }
            .to_string_lossy()
            .into_owned();
        return Err(Error::Sqlite {
            code: code & 0xff,
            os: None,
            extended_code: code,
            message: msg,
            context: format!("serializing {name}"),
        });
    }
    let bytes = unsafe { std::slice::from_raw_parts(ptr, size.max(0) as usize) }.to_vec();
    unsafe { ffi::sqlite3_free(ptr.cast()) };
    Ok(bytes)
}

/// The header of a serialized database made that of a file of its own, so
/// that `new Database(db.serialize())` serializes to the same bytes: a WAL
/// database's image says "rollback journal" (there is no -wal beside it),
/// and the file change counter (with its copy, "version valid for") and
/// the schema cookie, which say how often a file was changed and which SQLite
/// sets anew when the image is copied into a database, are 1.
fn standalone_header(bytes: &mut [u8]) {
    if bytes.len() < 100 {
        return;
    }
    if bytes[18] == 2 && bytes[19] == 2 {
        bytes[18] = 1;
        bytes[19] = 1;
    }
    for at in [24, 40, 92] {
        bytes[at..at + 4].copy_from_slice(&1u32.to_be_bytes());
    }
}

/// SQLite's backup API from `src`'s `main` into `dst`'s `main`, all pages
/// in one step.
fn copy_database(src: &Connection, dst: &Connection) -> litelane::Result<()> {
    use rusqlite::ffi;
    let (from, to) = unsafe { (src.handle(), dst.handle()) };
    let b = unsafe { ffi::sqlite3_backup_init(to, c"main".as_ptr(), from, c"main".as_ptr()) };
    let fail = |code: i32, message: String| Error::Sqlite {
        code: code & 0xff,
        os: None,
        extended_code: code,
        message,
        context: "copying a serialized database in".into(),
    };
    if b.is_null() {
        let code = unsafe { ffi::sqlite3_extended_errcode(to) };
        let msg = unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(to)) };
        return Err(fail(code, msg.to_string_lossy().into_owned()));
    }
    let rc = unsafe { ffi::sqlite3_backup_step(b, -1) };
    let finished = unsafe { ffi::sqlite3_backup_finish(b) };
    if rc != ffi::SQLITE_DONE {
        let msg = unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errstr(rc)) };
        return Err(fail(rc, msg.to_string_lossy().into_owned()));
    }
    if finished != ffi::SQLITE_OK {
        let msg = unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(to)) };
        return Err(fail(finished, msg.to_string_lossy().into_owned()));
    }
    Ok(())
}

#[napi]
pub fn sqlite_version() -> String {
    litelane::sqlite_version().to_string()
}
