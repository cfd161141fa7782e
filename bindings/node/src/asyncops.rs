//! The two operations that run off the JavaScript thread, on libuv's thread
//! pool (napi `AsyncTask`), and settle a promise once:
//!
//! - `writeAsync`: a whole write transaction given in advance (statements
//!   and their parameters), one turn of the engine's fair write queue
//!   (`Database::write_labeled`, so it may be group-committed with other
//!   writers), resolved once committed, rejected when rolled back or when
//!   its outcome is unknown. JavaScript is entered once, to settle.
//! - `importFile`: `litelane_import::run_into` on the engine this handle
//!   holds; progress is relayed to JavaScript through a threadsafe function
//!   (at most every [`PROGRESS_EVERY`]), and a stop flag that index.js sets
//!   from an `AbortSignal` stops it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use litelane::Error;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{
    ErrorStrategy, ThreadSafeCallContext, ThreadsafeFunction, ThreadsafeFunctionCallMode,
};
use napi::{Env, JsFunction, JsObject, JsUnknown, ValueType};
use napi_derive::napi;

use crate::{kind_err, run_statement, to_js_err, NativeDatabase, Params, Shared};

/// An engine error of an asynchronous operation: as `to_js_err`, except
/// that a commit whose outcome is unknown, and a write refused because an
/// earlier one's was, have kinds of their own.
fn async_err(e: Error) -> napi::Error {
    if e.is_outcome_unknown() {
        kind_err("LITELANE_OUTCOME_UNKNOWN", e)
    } else if matches!(e, Error::WritesStopped { .. }) {
        kind_err("LITELANE_WRITES_STOPPED", e)
    } else {
        to_js_err(e)
    }
}

/// `writeAsync`'s work: the statements, run in order in one transaction.
pub struct WriteJob {
    shared: Arc<Shared>,
    statements: Vec<(String, Params)>,
}

/// One statement's result as `writeAsync` resolves it before index.js
/// reads it: the last insert rowid as a `BigInt`, exact whatever its size;
/// index.js makes it a number unless `defaultSafeIntegers` is on, as
/// `Statement#run` does.
#[napi(object)]
pub struct ExactRunResult {
    pub changes: i64,
    pub last_insert_rowid: BigInt,
}

impl Task for WriteJob {
    type Output = Vec<(i64, i64)>;
    type JsValue = Vec<ExactRunResult>;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let statements = std::mem::take(&mut self.statements);
        self.shared
            .db
            .write_labeled("node writeAsync", move |tx| {
                let mut out = Vec::with_capacity(statements.len());
                for (sql, params) in &statements {
                    out.push(run_statement(tx, sql, params)?);
                }
                Ok(out)
            })
            .map_err(async_err)
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        Ok(output
            .into_iter()
            .map(|(changes, last_insert_rowid)| ExactRunResult {
                changes,
                last_insert_rowid: BigInt::from(last_insert_rowid),
            })
            .collect())
    }
}

/// What `importFile` is told to stop by: index.js makes one per import and
/// calls `stop()` when the `AbortSignal` fires.
#[napi]
pub struct ImportStop {
    flag: Arc<AtomicBool>,
}

#[napi]
impl ImportStop {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        ImportStop {
            flag: Arc::new(AtomicBool::new(false)),
        }
    }

    #[napi]
    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }
}

/// How often the `progress` callback is called at most while rows flow.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// One progress report: rows so far, bytes read, the input's size.
type Tick = (u64, u64, Option<u64>);

/// The import's `Progress`: relays row counts to JavaScript (throttled,
/// non-blocking: a report the queue cannot take is dropped) and reads the
/// stop flag.
struct Relay {
    progress: Option<ThreadsafeFunction<Tick, ErrorStrategy::Fatal>>,
    stop: Arc<AtomicBool>,
    total: Option<u64>,
    last: Option<Instant>,
    latest: (u64, u64),
    stopped_note: Option<String>,
    /// The first [`REJECTS_KEPT`] rejected records, for the summary.
    rejects: Vec<serde_json::Value>,
    /// The last report made, sent again with the result so that index.js
    /// can make sure the callback saw it before the promise settles.
    last_tick: Option<Tick>,
}

/// How many rejected records the summary lists (all are counted).
const REJECTS_KEPT: usize = 100;

impl Relay {
    fn tell(&mut self) {
        let tick = (self.latest.0, self.latest.1, self.total);
        self.last_tick = Some(tick);
        if let Some(f) = &self.progress {
            f.call(tick, ThreadsafeFunctionCallMode::NonBlocking);
        }
        self.last = Some(Instant::now());
    }
}

impl litelane_import::Progress for Relay {
    fn start(&mut self, total_bytes: Option<u64>) {
        self.total = total_bytes;
        self.latest = (0, 0);
        self.last = None;
    }

    fn rows(&mut self, rows: u64, bytes_read: u64) {
        self.latest = (rows, bytes_read);
        if self.last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
            self.tell();
        }
    }

    fn finish(&mut self) {
        self.tell();
    }

    fn rejected(&mut self, r: &litelane_import::Rejected<'_>) {
        if self.rejects.len() < REJECTS_KEPT {
            self.rejects.push(serde_json::json!({
                "source": r.input,
                "line": r.line,
                "record": r.record,
                "reason": r.reason,
                "raw": String::from_utf8_lossy(r.raw),
            }));
        }
    }

    fn note(&mut self, note: &litelane_import::Note<'_>) {
        if note.kind == litelane_import::NoteKind::Stopped {
            self.stopped_note = Some(note.text.to_string());
        }
    }

    fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// `importFile`'s work.
pub struct ImportJob {
    shared: Arc<Shared>,
    options: Option<litelane_import::ImportOptions>,
    relay: Option<Relay>,
}

impl Task for ImportJob {
    /// `{"summary": ..., "progress": [rows, bytes, totalBytes] or null}`,
    /// or when stopped `{"aborted": "what was kept"}`, as JSON.
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<String> {
        let (Some(opts), Some(mut relay)) = (self.options.take(), self.relay.take()) else {
            return Err(kind_err("Error", "importFile ran twice"));
        };
        let source = opts.source.clone();
        let result = litelane_import::run_into(&self.shared.db, opts, &mut relay);
        // The callback is released here, on this thread: nothing more is
        // queued for JavaScript once the promise settles.
        drop(relay.progress.take());
        let outcome = result.map_err(|e| import_err(&source, e))?;
        if outcome.status == litelane_import::EXIT_INTERRUPTED {
            let note = relay
                .stopped_note
                .map(|n| {
                    n.replace("interrupted (Ctrl-C) ", "")
                        .replace("interrupted (Ctrl-C); ", "")
                        .replace("--resume", "the resume option")
                })
                .unwrap_or_else(|| "nothing past the last commit was kept".into());
            return Ok(serde_json::json!({"aborted": note}).to_string());
        }
        let Some(summary) = outcome.summary else {
            return Err(kind_err(
                "Error",
                format!("litelane import of {source}: finished without a summary"),
            ));
        };
        let v = serde_json::to_value(&summary)
            .map_err(|e| kind_err("Error", format!("the import's summary: {e}")))?;
        let mut v = camel_keys(v);
        if let serde_json::Value::Object(m) = &mut v {
            m.insert(
                "rejectedRecords".into(),
                serde_json::Value::Array(std::mem::take(&mut relay.rejects)),
            );
        }
        let tick = relay
            .last_tick
            .map(|(r, b, t)| serde_json::json!([r, b, t]));
        Ok(serde_json::json!({"summary": v, "progress": tick}).to_string())
    }

    fn resolve(&mut self, _env: Env, output: String) -> napi::Result<String> {
        Ok(output)
    }
}

/// An import error for JavaScript: an engine error keeps its SQLite code
/// (or `LITELANE_OUTCOME_UNKNOWN`); a bad input, option or table is
/// `LITELANE_IMPORT_INPUT`, a file that could not be read or written
/// `LITELANE_IMPORT_IO`. The message names the file.
fn import_err(source: &str, e: litelane_import::Error) -> napi::Error {
    let message = format!("litelane import of {source} failed: {e}");
    match e.engine() {
        Some(inner) if inner.is_outcome_unknown() => kind_err("LITELANE_OUTCOME_UNKNOWN", message),
        Some(inner) => {
            let kind = match inner.sqlite_extended_code() {
                Some(x) => litelane::SqliteCode::name_of(x),
                None => "SQLITE_ERROR",
            };
            kind_err(kind, message)
        }
        None => match e.kind() {
            litelane_import::ErrorKind::Io => kind_err("LITELANE_IMPORT_IO", message),
            _ => kind_err("LITELANE_IMPORT_INPUT", message),
        },
    }
}

/// The summary's keys (`rows_inserted`) as JavaScript spells them
/// (`rowsInserted`); the keys of `kept_as_text` and `null_tokens` are data
/// (column names, null tokens) and stay as they are.
fn camel_keys(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let v = if k == "kept_as_text" || k == "null_tokens" {
                        v
                    } else {
                        camel_keys(v)
                    };
                    (camel(&k), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(camel_keys).collect()),
        other => other,
    }
}

fn camel(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut up = false;
    for c in k.chars() {
        if c == '_' && !out.is_empty() {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Sets one import option from index.js's JSON (keys already checked and
/// spelled as `ImportOptions`' fields).
fn set_option(
    o: &mut litelane_import::ImportOptions,
    key: &str,
    v: &serde_json::Value,
) -> napi::Result<()> {
    use serde_json::Value;
    let bad = |why: String| kind_err("TypeError", format!("importFile: {why}"));
    if v.is_null() {
        return Ok(());
    }
    let flag = |field: &mut bool| -> napi::Result<()> {
        match v {
            Value::Bool(b) => {
                *field = *b;
                Ok(())
            }
            _ => Err(bad(format!("the {key} option takes true or false"))),
        }
    };
    let text = || -> napi::Result<String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(bad(format!("the {key} option takes a string"))),
        }
    };
    let texts = || -> napi::Result<Vec<String>> {
        match v {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(a) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad(format!("the {key} option takes strings")))
                })
                .collect(),
            _ => Err(bad(format!(
                "the {key} option takes a string or an array of strings"
            ))),
        }
    };
    let count = || -> napi::Result<u64> {
        v.as_u64()
            .ok_or_else(|| bad(format!("the {key} option takes a whole number >= 0")))
    };
    fn named<T: std::str::FromStr<Err = String>>(t: String) -> napi::Result<T> {
        t.parse()
            .map_err(|e: String| kind_err("TypeError", format!("importFile: {e}")))
    }
    match key {
        "table" => o.table = Some(text()?),
        "more" => o.more = texts()?,
        "format" => o.format = Some(named(text()?)?),
        "types" => o.types = Some(named(text()?)?),
        "mode" => o.mode = Some(named(text()?)?),
        "on_conflict" => o.on_conflict = Some(named(text()?)?),
        "header" => flag(&mut o.header)?,
        "no_header" => flag(&mut o.no_header)?,
        "no_default_nulls" => flag(&mut o.no_default_nulls)?,
        "strict" => flag(&mut o.strict)?,
        "alter" => flag(&mut o.alter)?,
        "resume" => flag(&mut o.resume)?,
        "delimiter" => {
            let t = text()?;
            let mut chars = t.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => o.delimiter = Some(c),
                _ => return Err(bad(format!("delimiter takes one character, not {t:?}"))),
            }
        }
        "plan" => o.plan = Some(text()?.into()),
        "rejects" => o.rejects = Some(text()?.into()),
        "pk" => o.pk = Some(texts()?.join(",")),
        "source_column" => o.source_column = Some(text()?),
        "rejects_table" => o.rejects_table = Some(text()?),
        "commit_every" => o.commit_every = Some(count()?.max(1)),
        "max_rejects" => o.max_rejects = Some(count()?),
        "nulls" => o.nulls = texts()?,
        "types_for" => o.types_for = texts()?,
        other => return Err(bad(format!("unknown option {other:?}"))),
    }
    Ok(())
}

/// A JavaScript value of a statement entry (`[sql, anon, named]`, as
/// index.js normalizes it) read into owned parameters.
fn statement_from_js(entry: JsUnknown) -> napi::Result<(String, Params)> {
    if entry.get_type()? != ValueType::Object {
        return Err(kind_err("TypeError", "a writeAsync entry is not an array"));
    }
    let entry: JsObject = unsafe { entry.cast() };
    let sql: napi::JsString = entry.get_element(0)?;
    let sql = sql.into_utf8()?.as_str()?.to_owned();
    let anon: JsObject = entry.get_element(1)?;
    let n = anon.get_array_length()?;
    let mut values = Vec::with_capacity(n as usize);
    for i in 0..n {
        values.push(anon.get_element::<JsUnknown>(i)?);
    }
    let named: JsUnknown = entry.get_element(2)?;
    let named = match named.get_type()? {
        ValueType::Null | ValueType::Undefined => None,
        _ => Some(unsafe { named.cast::<JsObject>() }),
    };
    Ok((sql, Params::from_js(values, named)?))
}

#[napi]
impl NativeDatabase {
    /// litelane: one write transaction of `statements` (an array of
    /// `[sql, anonymousValues, namedObjectOrNull]`), run on libuv's pool in
    /// a turn of the engine's write queue; resolves with each statement's
    /// `{ changes, lastInsertRowid }` once committed.
    #[napi(ts_return_type = "Promise<ExactRunResult[]>")]
    pub fn write_async(&self, statements: Vec<JsUnknown>) -> napi::Result<AsyncTask<WriteJob>> {
        let shared = self.async_shared("writeAsync")?;
        let statements = statements
            .into_iter()
            .map(statement_from_js)
            .collect::<napi::Result<Vec<_>>>()?;
        Ok(AsyncTask::new(WriteJob { shared, statements }))
    }

    /// litelane: imports `source` with `options` (JSON, keys as
    /// `ImportOptions`' fields) on libuv's pool; resolves with the summary
    /// as JSON text. `progress(rows, bytes, totalBytes)` is called on this
    /// thread at most every 100 ms; `stop` stops it.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn import_file(
        &self,
        env: Env,
        source: String,
        options: String,
        progress: Option<JsFunction>,
        stop: &ImportStop,
    ) -> napi::Result<AsyncTask<ImportJob>> {
        let shared = self.async_shared("importFile")?;
        let Some(db_path) = shared.db.path().map(std::path::Path::to_path_buf) else {
            return Err(kind_err(
                "TypeError",
                "importFile: the database is in memory; an import needs a database file",
            ));
        };
        let mut opts = litelane_import::ImportOptions::new(source, db_path);
        let parsed: serde_json::Value = serde_json::from_str(&options)
            .map_err(|e| kind_err("TypeError", format!("importFile options: {e}")))?;
        if let serde_json::Value::Object(m) = parsed {
            for (k, v) in &m {
                set_option(&mut opts, k, v)?;
            }
        }
        let progress = match progress {
            None => None,
            Some(f) => {
                let mut tsfn: ThreadsafeFunction<Tick, ErrorStrategy::Fatal> = f
                    .create_threadsafe_function(16, |ctx: ThreadSafeCallContext<Tick>| {
                        let (rows, bytes, total) = ctx.value;
                        let mut o = ctx.env.create_object()?;
                        o.set_named_property("rows", ctx.env.create_double(rows as f64)?)?;
                        o.set_named_property("bytes", ctx.env.create_double(bytes as f64)?)?;
                        match total {
                            Some(t) => o.set_named_property(
                                "totalBytes",
                                ctx.env.create_double(t as f64)?,
                            )?,
                            None => o.set_named_property("totalBytes", ctx.env.get_null()?)?,
                        }
                        Ok(vec![o])
                    })?;
                // The pending import keeps the process alive, not this.
                tsfn.unref(&env)?;
                Some(tsfn)
            }
        };
        let relay = Relay {
            progress,
            stop: Arc::clone(&stop.flag),
            total: None,
            last: None,
            latest: (0, 0),
            stopped_note: None,
            rejects: Vec::new(),
            last_tick: None,
        };
        Ok(AsyncTask::new(ImportJob {
            shared,
            options: Some(opts),
            relay: Some(relay),
        }))
    }
}

impl NativeDatabase {
    /// The engine, for an operation that runs its own transaction on
    /// another thread: refused while this handle holds the writer (the
    /// operation would wait for a commit that JavaScript, awaiting it,
    /// never makes).
    fn async_shared(&self, what: &str) -> napi::Result<Arc<Shared>> {
        let Some(shared) = self.db.clone() else {
            return Err(kind_err("TypeError", "The database connection is not open"));
        };
        if self.held.is_some() {
            return Err(kind_err(
                "TypeError",
                format!(
                    "{what} runs a transaction of its own and cannot run inside the transaction this connection has open"
                ),
            ));
        }
        Ok(shared)
    }
}
