//! The registry of live handles. A handle C holds is an id (a number cast
//! to a pointer, never dereferenced); ids are never reused, so a closed or
//! freed handle, or one of another kind, is found out, not followed.

use litelane::{Database, HeldWrite};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// One cell of a result row, as C reads it: text and blobs are kept with a
/// NUL after them, so C may read text as a C string.
pub(crate) enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

/// A result set read whole, stepped by `litelane_rows_next`.
pub(crate) struct Rows {
    pub names: Vec<CString>,
    pub rows: Vec<Vec<Cell>>,
    /// The current row: `None` before the first `next` and after the last.
    pub at: Option<usize>,
    /// How many rows `next` has moved past.
    pub stepped: usize,
}

/// A read prepared by `litelane_prepare`: its database's handle, its SQL
/// (checked: one statement that reads) and how many parameters it takes.
pub(crate) struct Prepared {
    pub db: u64,
    pub sql: String,
    pub params: usize,
}

/// A transaction held across calls; `None` once committed or rolled back.
pub(crate) type Tx = Mutex<Option<HeldWrite>>;

/// What a handle is.
#[derive(Clone)]
pub(crate) enum Handle {
    Db(Database),
    Tx(Arc<Tx>),
    Rows(Arc<Mutex<Rows>>),
    Stmt(Arc<Prepared>),
}

impl Handle {
    fn kind(&self) -> &'static str {
        match self {
            Handle::Db(_) => "a database",
            Handle::Tx(_) => "a transaction",
            Handle::Rows(_) => "a result",
            Handle::Stmt(_) => "a statement",
        }
    }
}

struct Registry {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Handle>>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Registry {
        next: AtomicU64::new(1),
        live: Mutex::new(HashMap::new()),
    })
}

fn live() -> MutexGuard<'static, HashMap<u64, Handle>> {
    registry()
        .live
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Registers `h` and returns its id (never 0, never reused).
pub(crate) fn insert(h: Handle) -> u64 {
    let id = registry().next.fetch_add(1, Ordering::Relaxed);
    live().insert(id, h);
    id
}

/// Why an id is not a live handle of the kind asked for.
fn wrong(id: u64, want: &str, found: Option<&Handle>) -> String {
    match (id, found) {
        (0, _) => format!("{want} handle is NULL"),
        (_, None) => format!("{want} handle is not open (closed or freed already, or never made)"),
        (_, Some(h)) => format!("the handle is {}, not {want}", h.kind()),
    }
}

/// The database of id `id`.
pub(crate) fn db(id: u64) -> Result<Database, String> {
    match live().get(&id) {
        Some(Handle::Db(d)) => Ok(d.clone()),
        other => Err(wrong(id, "a database", other)),
    }
}

/// The transaction of id `id`.
pub(crate) fn tx(id: u64) -> Result<Arc<Tx>, String> {
    match live().get(&id) {
        Some(Handle::Tx(t)) => Ok(Arc::clone(t)),
        other => Err(wrong(id, "a transaction", other)),
    }
}

/// The result set of id `id`.
pub(crate) fn rows(id: u64) -> Result<Arc<Mutex<Rows>>, String> {
    match live().get(&id) {
        Some(Handle::Rows(r)) => Ok(Arc::clone(r)),
        other => Err(wrong(id, "a result", other)),
    }
}

/// The prepared statement of id `id`.
pub(crate) fn stmt(id: u64) -> Result<Arc<Prepared>, String> {
    match live().get(&id) {
        Some(Handle::Stmt(p)) => Ok(Arc::clone(p)),
        other => Err(wrong(id, "a statement", other)),
    }
}

/// Removes the handle `id` if it is of the kind `check` accepts.
pub(crate) fn remove(
    id: u64,
    want: &str,
    check: impl Fn(&Handle) -> bool,
) -> Result<Handle, String> {
    let mut live = live();
    match live.get(&id) {
        Some(h) if check(h) => Ok(live.remove(&id).expect("present")),
        other => Err(wrong(id, want, other)),
    }
}
