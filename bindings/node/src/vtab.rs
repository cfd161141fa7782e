//! Virtual tables written in JavaScript (`Database#table`).
//!
//! A table is a generator function: its parameters are hidden columns
//! (`$1`, `$2`... or the names given), constrained with `=` in `WHERE` or
//! passed as table-valued-function arguments, and each row it yields is one
//! row of the table. index.js keeps the definitions and the running
//! generators; this module is the SQLite side and asks index.js, through one
//! dispatcher function per module, to
//!
//! * `0` connect: `(0, create, module, database, table, ...args)` →
//!   `[key, declaration, columns, parameters, directOnly, safeIntegers]`,
//! * `1` filter: `(1, key, cursor, ...parameters)` → the first row or `null`,
//! * `2` next: `(2, key, cursor)` → the next row or `null`,
//! * `3` close: `(3, key, cursor)`.
//!
//! A row arrives as an array of exactly the table's column count, checked by
//! index.js. Everything runs on the JavaScript thread, as user functions do.

use std::borrow::Cow;
use std::ffi::{c_int, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use litelane::rusqlite::vtab::{
    Context, CreateVTab, Filters, IndexConstraintOp, IndexInfo, Module, VTab, VTabConfig,
    VTabConnection, VTabCursor, VTabKind,
};
use litelane::rusqlite::{self, types::ValueRef, Connection};
use litelane::Value;
use napi::{JsObject, NapiRaw, ValueType};

use crate::{to_js, to_value, JsFn};

/// What `Connection::create_module` keeps for a module: the dispatcher.
pub(crate) struct TableAux {
    f: Arc<JsFn>,
}

/// One table of the module on one connection.
#[repr(C)]
pub(crate) struct JsTable {
    base: rusqlite::vtab::sqlite3_vtab,
    f: Arc<JsFn>,
    key: f64,
    columns: usize,
    parameters: usize,
    safe_ints: bool,
}

static NEXT_CURSOR: AtomicU64 = AtomicU64::new(1);

/// A running scan: the generator lives in JavaScript under `id`.
#[repr(C)]
pub(crate) struct JsCursor {
    base: rusqlite::vtab::sqlite3_vtab_cursor,
    f: Arc<JsFn>,
    key: f64,
    id: u64,
    columns: usize,
    safe_ints: bool,
    /// The parameters of this scan, `None` where not given.
    params: Vec<Option<Value>>,
    row: Option<Vec<Value>>,
    rowid: i64,
    /// The generator was started (and must be let go of on close).
    started: bool,
}

fn module_error(message: impl Into<String>) -> rusqlite::Error {
    rusqlite::Error::ModuleError(message.into())
}

/// SQL's `=` between two non-NULL values: integers and reals compare as
/// numbers (SQLite may hand the same bound number over as either).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Integer(x), Value::Real(y)) | (Value::Real(y), Value::Integer(x)) => {
            *x as f64 == *y
        }
        _ => a == b,
    }
}

/// A row from index.js: `null` when the generator is done.
fn to_row(out: napi::JsUnknown, columns: usize) -> napi::Result<Option<Vec<Value>>> {
    if out.get_type()? == ValueType::Null {
        return Ok(None);
    }
    let arr: JsObject = unsafe { out.cast() };
    let mut row = Vec::with_capacity(columns);
    for i in 0..columns as u32 {
        let v: napi::JsUnknown = arr.get_element(i)?;
        row.push(to_value(&v)?);
    }
    Ok(Some(row))
}

impl JsTable {
    fn open_or_create(
        create: bool,
        db: &mut VTabConnection,
        aux: Option<&TableAux>,
        names: [&[u8]; 3],
        args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, CStr>, JsTable)> {
        let aux = aux.ok_or_else(|| module_error("a JavaScript table without its module"))?;
        let f = Arc::clone(&aux.f);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (key, decl, columns, parameters, direct_only, safe_ints) = f.call_js(
            |env, out| {
                out.push(unsafe { env.create_double(0.0)?.raw() });
                out.push(unsafe { env.get_boolean(create)?.raw() });
                for b in names.iter().chain(args.iter()) {
                    out.push(unsafe { env.create_string(&text(b))?.raw() });
                }
                Ok(())
            },
            |_, out| {
                let arr: JsObject = unsafe { out.cast() };
                let num = |i: u32| -> napi::Result<f64> {
                    arr.get_element::<napi::JsNumber>(i)?.get_double()
                };
                let flag = |i: u32| -> napi::Result<bool> {
                    arr.get_element::<napi::JsBoolean>(i)?.get_value()
                };
                let decl = arr
                    .get_element::<napi::JsString>(1)?
                    .into_utf8()?
                    .as_str()?
                    .to_owned();
                Ok((num(0)?, decl, num(2)?, num(3)?, flag(4)?, flag(5)?))
            },
        )?;
        if direct_only {
            db.config(VTabConfig::DirectOnly)?;
        }
        let decl = CString::new(decl).map_err(|_| module_error("a NUL in a column name"))?;
        Ok((
            Cow::Owned(decl),
            JsTable {
                base: rusqlite::vtab::sqlite3_vtab::default(),
                f,
                key,
                columns: columns as usize,
                parameters: parameters as usize,
                safe_ints,
            },
        ))
    }
}

unsafe impl<'vtab> VTab<'vtab> for JsTable {
    type Aux = TableAux;
    type Cursor = JsCursor;

    fn connect(
        db: &mut VTabConnection,
        aux: Option<&TableAux>,
        module: &[u8],
        database: &[u8],
        table: &[u8],
        args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, CStr>, JsTable)> {
        JsTable::open_or_create(false, db, aux, [module, database, table], args)
    }

    /// Parameters must be constrained with `=` (anything else is an error:
    /// a generator cannot be asked for `x > 5`); each `=` on a parameter is
    /// passed to `filter`, in constraint order, with the parameter's index
    /// in `idx_str`. A plan in which a parameter's value is not known yet
    /// (it comes from a later table of a join) is refused, so that SQLite
    /// puts this table inside the loop.
    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<bool> {
        let first = self.columns as c_int;
        let mut map: Vec<usize> = Vec::new();
        let mut usable = true;
        for (c, mut usage) in info.constraints_and_usages() {
            let col = c.column();
            match c.operator() {
                IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_LIMIT
                | IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_OFFSET => continue,
                _ if col < first => continue,
                IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ => {}
                _ => {
                    return Err(module_error(
                        "a parameter of a JavaScript virtual table can only be constrained with =",
                    ))
                }
            }
            if !c.is_usable() {
                usable = false;
                continue;
            }
            map.push((col - first) as usize);
            usage.set_argv_index(map.len() as c_int);
            usage.set_omit(true);
        }
        if !usable {
            return Ok(false);
        }
        let mut given = map.clone();
        given.sort_unstable();
        given.dedup();
        let cost = 1e9 / (given.len() as f64 + 1.0);
        info.set_estimated_cost(cost);
        info.set_estimated_rows(cost as i64);
        let text: Vec<String> = map.iter().map(usize::to_string).collect();
        info.set_idx_str(&text.join(","));
        Ok(true)
    }

    fn open(&mut self) -> rusqlite::Result<JsCursor> {
        Ok(JsCursor {
            base: rusqlite::vtab::sqlite3_vtab_cursor::default(),
            f: Arc::clone(&self.f),
            key: self.key,
            id: NEXT_CURSOR.fetch_add(1, Ordering::Relaxed),
            columns: self.columns,
            safe_ints: self.safe_ints,
            params: vec![None; self.parameters],
            row: None,
            rowid: 0,
            started: false,
        })
    }
}

impl CreateVTab<'_> for JsTable {
    const KIND: VTabKind = VTabKind::Default;

    fn create(
        db: &mut VTabConnection,
        aux: Option<&TableAux>,
        module: &[u8],
        database: &[u8],
        table: &[u8],
        args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, CStr>, JsTable)> {
        JsTable::open_or_create(true, db, aux, [module, database, table], args)
    }
}

impl JsCursor {
    fn fetch(&mut self, op: f64, params: bool) -> rusqlite::Result<()> {
        let columns = self.columns;
        let safe_ints = self.safe_ints;
        let row = self.f.call_js(
            |env, out| {
                out.push(unsafe { env.create_double(op)?.raw() });
                out.push(unsafe { env.create_double(self.key)?.raw() });
                out.push(unsafe { env.create_double(self.id as f64)?.raw() });
                if params {
                    for p in &self.params {
                        let v = match p {
                            Some(v) => to_js(env, ValueRef::from(v), safe_ints)?,
                            None => env.get_undefined()?.into_unknown(),
                        };
                        out.push(unsafe { v.raw() });
                    }
                }
                Ok(())
            },
            |_, out| to_row(out, columns),
        );
        match row {
            Ok(row) => {
                self.row = row;
                self.rowid += 1;
                Ok(())
            }
            Err(e) => {
                self.row = None;
                Err(e)
            }
        }
    }
}

unsafe impl VTabCursor for JsCursor {
    /// A `NULL` parameter, or one parameter constrained to two different
    /// values, gives no rows without calling the generator.
    fn filter(
        &mut self,
        _idx_num: c_int,
        idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<()> {
        self.close_generator();
        self.params.iter_mut().for_each(|p| *p = None);
        self.row = None;
        self.rowid = 0;
        let map: Vec<usize> = idx_str
            .unwrap_or("")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap_or(usize::MAX))
            .collect();
        for (i, &p) in map.iter().enumerate() {
            let v: Value = args.get(i)?;
            if v == Value::Null {
                return Ok(());
            }
            let Some(slot) = self.params.get_mut(p) else {
                return Err(module_error("a JavaScript virtual table's plan is corrupt"));
            };
            match slot {
                Some(prev) if !same_value(prev, &v) => return Ok(()),
                _ => *slot = Some(v),
            }
        }
        self.started = true;
        self.fetch(1.0, true)
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.fetch(2.0, false)
    }

    fn eof(&self) -> bool {
        self.row.is_none()
    }

    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        let i = i as usize;
        let value = if i < self.columns {
            self.row.as_ref().and_then(|r| r.get(i))
        } else {
            self.params.get(i - self.columns).and_then(Option::as_ref)
        };
        match value {
            Some(v) => ctx.set_result(v),
            None => ctx.set_result(&Value::Null),
        }
    }

    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.rowid)
    }
}

impl JsCursor {
    /// Lets index.js drop the generator of the last scan, keeping any error
    /// the statement is about to report.
    fn close_generator(&mut self) {
        if !self.started {
            return;
        }
        self.started = false;
        let saved = crate::FN_ERROR.with(|e| e.borrow_mut().take());
        let _ = self.f.call_js(
            |env, out| {
                out.push(unsafe { env.create_double(3.0)?.raw() });
                out.push(unsafe { env.create_double(self.key)?.raw() });
                out.push(unsafe { env.create_double(self.id as f64)?.raw() });
                Ok(())
            },
            |_, _| Ok(()),
        );
        crate::FN_ERROR.with(|e| *e.borrow_mut() = saved);
    }
}

impl Drop for JsCursor {
    fn drop(&mut self) {
        self.close_generator();
    }
}

/// Registers the module `name` on `conn`, its calls going to `f`. An
/// `eponymous` table (defined by its columns and generator) is usable by
/// name at once (`SELECT * FROM t`, `t(?, ?)`) and refuses
/// `CREATE VIRTUAL TABLE ... USING t`; otherwise the module is a factory,
/// usable only through `CREATE VIRTUAL TABLE`.
pub(crate) fn register(
    conn: &Connection,
    name: &str,
    f: &Arc<JsFn>,
    eponymous: bool,
) -> rusqlite::Result<()> {
    const EPONYMOUS: Module<'static, JsTable> = Module::eponymous_only_module();
    const FACTORY: Module<'static, JsTable> = Module::read_only_module();
    let aux = TableAux { f: Arc::clone(f) };
    if eponymous {
        conn.create_module(name, &EPONYMOUS, Some(aux))
    } else {
        conn.create_module(name, &FACTORY, Some(aux))
    }
}
