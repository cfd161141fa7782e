//! Combined commits across processes: a one-statement write
//! ([`Database::execute`](crate::Database::execute)) that has to wait for
//! another process's turn is posted in the lock file's job slots
//! (`xproc/jobs.rs`), and the process holding the turn runs it in its own
//! transaction, in a savepoint, before its `COMMIT`: one turn, one commit
//! and one fsync for the writes of many processes. Its poster is told the
//! exact outcome through the slot.
//!
//! A statement runs on another process's connection only where that cannot
//! change what it does: both connections are *plain* ([`is_plain`]: no
//! setups from [`Database::configure`](crate::Database::configure) — no
//! application functions or collations — no temporary schema objects, no
//! attached databases, foreign keys as litelane opens every connection
//! (on, or off with `Options::stock_settings`, which posters and leaders
//! must share: it is part of the job slot's format word) and recursive
//! triggers off), and the statement is one `INSERT`,
//! `REPLACE`, `UPDATE` or `DELETE` that returns no rows ([`may_run_elsewhere`]:
//! never a `PRAGMA`, `ATTACH` or `CREATE TEMP`, which would change the
//! connection that runs it). The leader refuses anything else back to its
//! poster, which then runs it in its own turn.

use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::tx::{Executed, Job, Ran, Tx};
use crate::xproc::{clip, JobOutcome, Taken};
use crate::Value;

/// Runs one statement that writes and returns no rows. Refuses (as
/// [`Error::InvalidInput`]) a statement that returns rows or writes
/// nothing, and a text with more than one statement.
pub(crate) fn execute(conn: &Connection, sql: &str, params: &[Value]) -> Result<Executed> {
    let mut stmt = conn
        .prepare_cached(sql)
        .map_err(|e| Error::from_sqlite(e, "preparing the statement"))?;
    check_statement(&stmt)?;
    for (i, v) in params.iter().enumerate() {
        stmt.raw_bind_parameter(i + 1, v)
            .map_err(|e| Error::from_sqlite(e, format!("binding parameter {}", i + 1)))?;
    }
    if params.len() != stmt.parameter_count() {
        return Err(Error::invalid(format!(
            "the statement has {} parameters and {} were given",
            stmt.parameter_count(),
            params.len()
        )));
    }
    stmt.raw_execute()
        .map_err(|e| Error::from_sqlite(e, "running the statement"))?;
    Ok(Executed {
        changes: conn.changes(),
        last_insert_rowid: conn.last_insert_rowid(),
    })
}

fn check_statement(stmt: &rusqlite::Statement<'_>) -> Result<()> {
    if stmt.column_count() > 0 || stmt.readonly() {
        return Err(Error::invalid(
            "execute runs one statement that writes and returns no rows; use read or write \
             for others",
        ));
    }
    Ok(())
}

/// True for the statements another process may run for this one: `INSERT`,
/// `REPLACE`, `UPDATE`, `DELETE` (and those under a `WITH`), by their first
/// keyword. Never a `PRAGMA`, `ATTACH`, `CREATE TEMP ...` or transaction
/// control, which would change the connection that runs them.
pub(crate) fn may_run_elsewhere(sql: &str) -> bool {
    let word: String = sql
        .trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    ["INSERT", "REPLACE", "UPDATE", "DELETE", "WITH"]
        .iter()
        .any(|k| word.eq_ignore_ascii_case(k))
}

/// True when `conn` may run, or have run elsewhere, the statements of
/// other connections opened by litelane: see the module documentation.
/// `stock`: the connections were opened with SQLite's stock settings
/// (foreign keys off). Foreign keys and attached databases are asked of
/// SQLite's C interface (no statement); the temporary schema and
/// recursive triggers by one cached query, run only when those two pass
/// (a statement on the pragma tables costs several µs each: this runs
/// before every posted statement and every turn that takes posts).
pub(crate) fn is_plain(conn: &Connection, stock: bool) -> bool {
    const SQL: &str = "SELECT (SELECT count(*) FROM temp.sqlite_schema) \
         + (SELECT recursive_triggers FROM pragma_recursive_triggers)";
    let foreign_keys = conn.db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_FKEY);
    // Schemas 0 and 1 are `main` and `temp`: a third is an attached one.
    let attached = conn.db_name(2).is_ok();
    foreign_keys.is_ok_and(|on| on != stock)
        && !attached
        && conn
            .prepare_cached(SQL)
            .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
            .is_ok_and(|n| n == 0)
}

/// A one-statement write of this process, as the writer's own job: it may
/// be posted for another process to run ([`Job::statement`]).
pub(crate) struct StatementJob<'a> {
    label: &'a str,
    enqueued: std::time::Instant,
    sql: &'a str,
    params: &'a [Value],
    out: Option<Result<Executed>>,
    verdict: Option<Result<()>>,
}

impl<'a> StatementJob<'a> {
    pub fn new(label: &'a str, sql: &'a str, params: &'a [Value]) -> Self {
        StatementJob {
            label,
            enqueued: std::time::Instant::now(),
            sql,
            params,
            out: None,
            verdict: None,
        }
    }

    /// What the caller is told: the statement's error first; otherwise
    /// what it did, exactly when it was committed.
    pub fn finish(self) -> Result<Executed> {
        match (self.out, self.verdict) {
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(done)), Some(Ok(()))) => Ok(done),
            (_, Some(Err(e))) => Err(e),
            _ => Err(Error::invalid(
                "the writer ended this write's turn without an outcome (internal error; nothing \
                 was committed)",
            )),
        }
    }
}

impl Job for StatementJob<'_> {
    fn label(&self) -> &str {
        self.label
    }

    fn enqueued(&self) -> std::time::Instant {
        self.enqueued
    }

    fn run(&mut self, tx: &Tx<'_>) -> Ran {
        let out = execute(tx, self.sql, self.params);
        let ran = match &out {
            Ok(_) => Ran::Ok,
            Err(e) => Ran::Err(e.clone()),
        };
        self.out = Some(out);
        ran
    }

    fn settle(&mut self, verdict: Result<()>) {
        debug_assert!(self.verdict.is_none(), "a job settled twice");
        self.verdict = Some(verdict);
    }

    fn statement(&self) -> Option<(&str, &[Value])> {
        Some((self.sql, self.params))
    }

    fn ran_elsewhere(&mut self, outcome: Result<Executed>) {
        self.verdict = Some(outcome.as_ref().map(|_| ()).map_err(Error::clone));
        self.out = Some(outcome);
    }
}

/// The outcome another process wrote for this process's statement, as the
/// caller is told it. `db_path` names the database in an unknown outcome.
pub(crate) fn from_remote(
    outcome: JobOutcome,
    db_path: &str,
    own: &Connection,
) -> Result<Executed> {
    match outcome {
        JobOutcome::Done {
            changes,
            last_insert_rowid,
            ..
        } => Ok(Executed {
            changes,
            last_insert_rowid: as_if_here(own, last_insert_rowid),
        }),
        JobOutcome::Failed {
            code,
            extended_code,
            message,
        } if code != 0 => Err(Error::Sqlite {
            code,
            extended_code,
            message,
            context: "run by the process holding the write turn, in its transaction".into(),
            os: None,
        }),
        JobOutcome::Failed { message, .. } => Err(Error::Io {
            context: "the commit of the process holding the write turn".into(),
            message,
            os: None,
        }),
        // The leader died in its commit, or its fsync failed (the message
        // says which).
        JobOutcome::Unknown { message } => Err(Error::OutcomeUnknown {
            path: db_path.to_string(),
            file: String::new(),
            code: rusqlite::ffi::SQLITE_IOERR,
            extended_code: rusqlite::ffi::SQLITE_IOERR,
            cause: message,
            context: "a statement committed by another process".into(),
            os: None,
        }),
    }
}

/// What the leader reports as `last_insert_rowid` for a statement that
/// inserted no row (an `UPDATE`, a `DELETE`, an `INSERT OR IGNORE` that
/// ignored, an upsert that updated): `i64::MIN`, a rowid no insert
/// produces unless asked for it.
const NOT_INSERTED: i64 = i64::MIN;

/// The poster's `last_insert_rowid` for a statement another process ran,
/// as if it had run on the poster's connection `own`: the rowid it
/// inserted, which `own` then reports too, or `own`'s value unchanged when
/// it inserted nothing.
fn as_if_here(own: &Connection, remote: i64) -> i64 {
    if remote == NOT_INSERTED {
        return own.last_insert_rowid();
    }
    crate::ffi::set_last_insert_rowid(own, remote);
    remote
}

/// The SQLite codes behind `e`, if it has some.
fn codes_of(e: &Error) -> Option<(i32, i32)> {
    match e {
        Error::Sqlite {
            code,
            extended_code,
            ..
        } => Some((*code, *extended_code)),
        Error::RolledBack { cause, .. } => codes_of(cause),
        _ => None,
    }
}

/// Another process's statement, taken from its slot, as a job of this
/// writer's transaction.
pub(crate) struct RemoteJob {
    taken: Option<Taken>,
    label: String,
    enqueued: std::time::Instant,
    done: Option<Executed>,
    /// `Metrics::combined_here`: raised when it commits.
    committed: std::sync::Arc<crate::metrics::Recorder>,
}

impl RemoteJob {
    pub fn new(taken: Taken, recorder: std::sync::Arc<crate::metrics::Recorder>) -> Self {
        RemoteJob {
            label: format!("a statement of another process: {}", clip(&taken.sql, 80)),
            taken: Some(taken),
            enqueued: std::time::Instant::now(),
            done: None,
            committed: recorder,
        }
    }
}

impl Job for RemoteJob {
    fn label(&self) -> &str {
        &self.label
    }

    fn enqueued(&self) -> std::time::Instant {
        self.enqueued
    }

    fn run(&mut self, tx: &Tx<'_>) -> Ran {
        let Some(t) = &self.taken else {
            return Ran::Ok;
        };
        // Prepared here first: a statement this connection cannot prepare,
        // or may not run for another, goes back to its poster, whose own
        // connection gives the exact answer.
        let runnable = may_run_elsewhere(&t.sql)
            && tx.prepare_cached(&t.sql).is_ok_and(|s| {
                check_statement(&s).is_ok() && s.parameter_count() == t.params.len()
            });
        if !runnable {
            if let Some(t) = self.taken.take() {
                t.refuse();
            }
            return Ran::Ok;
        }
        // Whether the statement inserted a row, told by a value no insert
        // leaves; the leader's own connection keeps its value.
        let before = tx.last_insert_rowid();
        crate::ffi::set_last_insert_rowid(tx, NOT_INSERTED);
        let out = execute(tx, &t.sql, &t.params);
        crate::ffi::set_last_insert_rowid(tx, before);
        match out {
            Ok(done) => {
                self.done = Some(done);
                Ran::Ok
            }
            Err(e) => Ran::Err(e),
        }
    }

    fn settle(&mut self, verdict: Result<()>) {
        let Some(t) = self.taken.take() else { return };
        let outcome = match verdict {
            Ok(()) => {
                self.committed
                    .combined_here
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let done = self.done.unwrap_or(Executed {
                    changes: 0,
                    last_insert_rowid: 0,
                });
                JobOutcome::Done {
                    changes: done.changes,
                    last_insert_rowid: done.last_insert_rowid,
                    durable_at: 0,
                }
            }
            // Undone by another statement's rollback before the commit: it
            // runs again, in another turn.
            Err(Error::RolledBack {
                retryable: true, ..
            }) if !t.is_committing() => return t.give_back(),
            Err(Error::OutcomeUnknown { file, cause, .. }) => JobOutcome::Unknown {
                message: format!("the fsync of {file} failed: {cause}"),
            },
            Err(e) => {
                let (code, extended_code) = codes_of(&e).unwrap_or((0, 0));
                JobOutcome::Failed {
                    code,
                    extended_code,
                    message: match &e {
                        Error::Sqlite { message, .. } => message.clone(),
                        e => e.to_string(),
                    },
                }
            }
        };
        t.finish(&outcome);
    }

    fn committing(&mut self) {
        if let Some(t) = &mut self.taken {
            t.committing();
        }
    }

    /// Right after the `COMMIT`: writes the outcome its poster gets if
    /// this process dies before the commit is durable (the poster then
    /// waits for the shared fsync that covers `seq` itself). The job stays
    /// in the group and is settled after the fsync, as before.
    fn committed_at(&mut self, seq: u64) -> bool {
        if let Some(t) = &mut self.taken {
            let done = self.done.unwrap_or(Executed {
                changes: 0,
                last_insert_rowid: 0,
            });
            t.committed(&JobOutcome::Done {
                changes: done.changes,
                last_insert_rowid: done.last_insert_rowid,
                durable_at: seq,
            });
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_plain_with_the_foreign_keys_it_was_opened_with() {
        let conn = Connection::open_in_memory().unwrap();
        for (fk, stock, plain) in [
            ("ON", false, true),
            ("OFF", false, false),
            ("OFF", true, true),
            ("ON", true, false),
        ] {
            conn.execute_batch(&format!("PRAGMA foreign_keys = {fk}"))
                .unwrap();
            assert_eq!(
                is_plain(&conn, stock),
                plain,
                "foreign_keys {fk}, stock {stock}"
            );
        }
        conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();
        assert!(is_plain(&conn, false), "foreign keys back on");
        for (change, undo) in [
            ("CREATE TEMP TABLE x(a)", "DROP TABLE temp.x"),
            ("CREATE TEMP VIEW v AS SELECT 1", "DROP VIEW temp.v"),
            ("ATTACH ':memory:' AS other", "DETACH other"),
            (
                "PRAGMA recursive_triggers = ON",
                "PRAGMA recursive_triggers = OFF",
            ),
        ] {
            conn.execute_batch(change).unwrap();
            assert!(!is_plain(&conn, false), "after {change}");
            conn.execute_batch(undo).unwrap();
            assert!(is_plain(&conn, false), "after {undo}");
        }
        // The flag `PRAGMA foreign_keys` sets, set through the C interface.
        use rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_FKEY;
        conn.set_db_config(SQLITE_DBCONFIG_ENABLE_FKEY, false)
            .unwrap();
        assert!(
            !is_plain(&conn, false),
            "foreign keys off by sqlite3_db_config"
        );
        assert!(
            is_plain(&conn, true),
            "stock, foreign keys off by sqlite3_db_config"
        );
    }

    #[test]
    fn only_plain_writes_may_run_on_another_process_connection() {
        for sql in [
            "INSERT INTO t VALUES (1)",
            "  insert or ignore into t values (1)",
            "REPLACE INTO t VALUES (1)",
            "UPDATE t SET a = 1",
            "DELETE FROM t",
            "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x",
        ] {
            assert!(may_run_elsewhere(sql), "{sql}");
        }
        for sql in [
            "PRAGMA synchronous = OFF",
            "PRAGMA foreign_keys = OFF",
            "ATTACH 'x.db' AS x",
            "DETACH x",
            "CREATE TEMP TABLE t(a)",
            "CREATE TABLE t(a)",
            "DROP TABLE t",
            "BEGIN",
            "SAVEPOINT s",
            "VACUUM",
            "-- a comment\nINSERT INTO t VALUES (1)",
            "",
        ] {
            assert!(!may_run_elsewhere(sql), "{sql}");
        }
    }
}
