//! The bulk inserter's statement, bound straight from the rows' borrowed
//! values.

use std::ffi::c_int;
use std::ptr;

use rusqlite::ffi;

/// A prepared `INSERT` for the bulk inserter (see the module documentation).
/// It borrows its connection, so it is finalized before the connection
/// closes.
pub(crate) struct BulkStatement<'c> {
    conn: &'c rusqlite::Connection,
    stmt: ptr::NonNull<ffi::sqlite3_stmt>,
    params: usize,
}

impl<'c> BulkStatement<'c> {
    /// Compiles `sql` (one statement) on `conn`, as a long-lived statement.
    pub(crate) fn prepare(conn: &'c rusqlite::Connection, sql: &str) -> rusqlite::Result<Self> {
        let len = c_int::try_from(sql.len()).map_err(|_| {
            rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_TOOBIG), None)
        })?;
        let mut stmt = ptr::null_mut();
        // SAFETY: the handle is the open connection `conn` borrows for 'c, on
        // this thread; pointer and length describe `sql`; the out-pointer is
        // valid. The statement is finalized in Drop, within 'c.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                conn.handle(),
                sql.as_ptr().cast(),
                len,
                ffi::SQLITE_PREPARE_PERSISTENT,
                &mut stmt,
                ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(last_error(conn, rc));
        }
        let stmt = ptr::NonNull::new(stmt).ok_or_else(|| {
            // Only comments or white space: nothing to run.
            rusqlite::Error::SqliteFailure(
                ffi::Error::new(ffi::SQLITE_MISUSE),
                Some("empty SQL".into()),
            )
        })?;
        // SAFETY: a live statement.
        let params = unsafe { ffi::sqlite3_bind_parameter_count(stmt.as_ptr()) };
        Ok(BulkStatement {
            conn,
            stmt,
            params: usize::try_from(params).unwrap_or(0),
        })
    }

    /// Binds `values` to parameters 1, 2, ... and runs the statement once;
    /// returns the rows it changed (`sqlite3_changes64`). `values` must fill
    /// every parameter, or nothing runs. Values are bound without a copy and
    /// are not read after this returns: the statement is reset, and only this
    /// method ever steps it, after binding every parameter again.
    pub(crate) fn execute<'v>(
        &mut self,
        values: impl IntoIterator<Item = rusqlite::types::ValueRef<'v>>,
    ) -> rusqlite::Result<usize> {
        use rusqlite::types::ValueRef;
        let stmt = self.stmt.as_ptr();
        let mut bound = 0usize;
        let mut rc = ffi::SQLITE_OK;
        for v in values {
            bound += 1;
            if bound > self.params {
                rc = ffi::SQLITE_RANGE;
                break;
            }
            let i = bound as c_int;
            // SAFETY: a live statement and an index within its parameters.
            // Text and blobs are bound SQLITE_STATIC: `values` borrows them
            // for 'v, which outlives this call, and SQLite reads them only
            // during the sqlite3_step below (see the reset at the end).
            rc = unsafe {
                match v {
                    ValueRef::Null => ffi::sqlite3_bind_null(stmt, i),
                    ValueRef::Integer(n) => ffi::sqlite3_bind_int64(stmt, i, n),
                    ValueRef::Real(f) => ffi::sqlite3_bind_double(stmt, i, f),
                    ValueRef::Text(t) => ffi::sqlite3_bind_text64(
                        stmt,
                        i,
                        t.as_ptr().cast(),
                        t.len() as u64,
                        ffi::SQLITE_STATIC(),
                        ffi::SQLITE_UTF8 as u8,
                    ),
                    ValueRef::Blob(b) => ffi::sqlite3_bind_blob64(
                        stmt,
                        i,
                        b.as_ptr().cast(),
                        b.len() as u64,
                        ffi::SQLITE_STATIC(),
                    ),
                }
            };
            if rc != ffi::SQLITE_OK {
                break;
            }
        }
        if rc == ffi::SQLITE_OK && bound != self.params {
            rc = ffi::SQLITE_RANGE;
        }
        let result = if rc != ffi::SQLITE_OK {
            Err(if rc == ffi::SQLITE_RANGE {
                rusqlite::Error::InvalidParameterCount(bound, self.params)
            } else {
                last_error(self.conn, rc)
            })
        } else {
            // SAFETY: a live statement with every parameter bound.
            match unsafe { ffi::sqlite3_step(stmt) } {
                ffi::SQLITE_DONE => {
                    // SAFETY: the open connection of this thread.
                    let n = unsafe { ffi::sqlite3_changes64(self.conn.handle()) };
                    Ok(usize::try_from(n).unwrap_or(0))
                }
                ffi::SQLITE_ROW => Err(rusqlite::Error::ExecuteReturnedResults),
                rc => Err(last_error(self.conn, rc)),
            }
        };
        // SAFETY: a live statement. Reset ends the step (its error code is the
        // step's, already taken). The bound pointers are left in place: they
        // are never read again, because this statement is private and only
        // this method steps it, after binding every parameter anew (a call
        // that fails to bind them all never steps). Clearing them after each
        // step would cost a second release of every value (measured: ~2% of
        // an import's writer instructions).
        unsafe { ffi::sqlite3_reset(stmt) };
        result
    }
}

impl Drop for BulkStatement<'_> {
    fn drop(&mut self) {
        // SAFETY: our own live statement, finalized once, while the
        // connection it belongs to is still open ('c).
        unsafe { ffi::sqlite3_finalize(self.stmt.as_ptr()) };
    }
}

/// The connection's last error after `rc`, as rusqlite reports errors
/// (extended code and message), so callers classify it the same way.
fn last_error(conn: &rusqlite::Connection, rc: c_int) -> rusqlite::Error {
    // SAFETY: the open connection of this thread; errmsg returns a string
    // owned by SQLite, copied before any other call on the connection.
    let (code, msg) = unsafe {
        let db = conn.handle();
        let code = ffi::sqlite3_extended_errcode(db);
        let msg = std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(db))
            .to_string_lossy()
            .into_owned();
        (code, msg)
    };
    // errcode can lag behind rc when the error came from the step itself.
    let code = if code & 0xff == rc & 0xff { code } else { rc };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(msg))
}

#[cfg(test)]
mod bulk_statement_tests {
    use super::BulkStatement;
    use rusqlite::types::{Value, ValueRef};
    use rusqlite::Connection;

    fn conn() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t(a UNIQUE, b)").unwrap();
        c
    }

    #[test]
    fn values_are_stored_exactly_and_the_statement_survives_every_error() {
        let c = conn();
        let mut st =
            BulkStatement::prepare(&c, "INSERT INTO t(a, b) VALUES (?, ?), (?, ?)").unwrap();
        let nul_text: &[u8] = b"x\0y";
        let bad_utf8: &[u8] = &[0xff, 0xfe];
        let row = [
            ValueRef::Integer(i64::MIN),
            ValueRef::Real(-0.0),
            ValueRef::Text(nul_text),
            ValueRef::Blob(bad_utf8),
        ];
        assert_eq!(st.execute(row).unwrap(), 2);
        // Too few and too many values: refused, nothing stored, still usable.
        for n in [0, 3, 5] {
            let many = vec![ValueRef::Integer(9); n];
            let e = st.execute(many).unwrap_err();
            assert!(
                matches!(e, rusqlite::Error::InvalidParameterCount(_, 4)),
                "{n}: {e:?}"
            );
        }
        // A constraint error: SQLite's extended code and message.
        let dup = [
            ValueRef::Integer(1),
            ValueRef::Null,
            ValueRef::Integer(1),
            ValueRef::Null,
        ];
        let e = st.execute(dup).unwrap_err();
        assert_eq!(
            e.sqlite_error().map(|f| f.extended_code),
            Some(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
        );
        assert!(
            e.to_string().contains("UNIQUE constraint failed: t.a"),
            "{e}"
        );
        // Values from a buffer that is dropped right after the call.
        {
            let owned = [
                Value::Text("e".repeat(10_000)),
                Value::Null,
                Value::Text(String::new()),
                Value::Blob(Vec::new()),
            ];
            assert_eq!(st.execute(owned.iter().map(ValueRef::from)).unwrap(), 2);
        }
        // With those values gone, a call that binds too few never steps (the
        // old pointers stay unread) and the next full call stores its own.
        assert!(st.execute([ValueRef::Integer(7)]).is_err());
        let got: Vec<(Value, Value)> = c
            .prepare("SELECT a, b FROM t ORDER BY rowid")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            got,
            vec![
                (Value::Integer(i64::MIN), Value::Real(-0.0)),
                (Value::Text("x\0y".into()), Value::Blob(vec![0xff, 0xfe])),
                (Value::Text("e".repeat(10_000)), Value::Null),
                (Value::Text(String::new()), Value::Blob(Vec::new())),
            ]
        );
    }

    #[test]
    fn a_statement_that_returns_rows_or_does_not_compile_is_an_error() {
        let c = conn();
        assert!(BulkStatement::prepare(&c, "INSERT INTO nope VALUES (?)").is_err());
        assert!(BulkStatement::prepare(&c, "-- nothing").is_err());
        let mut st = BulkStatement::prepare(&c, "SELECT ?").unwrap();
        assert!(matches!(
            st.execute([ValueRef::Integer(1)]),
            Err(rusqlite::Error::ExecuteReturnedResults)
        ));
    }
}
