//! The constants the standard library's `sqlite3` module exports besides
//! the result codes (`SQLITE_DENY`, `SQLITE_LIMIT_LENGTH`...; the result
//! codes and their names are the engine's, [`litelane::SqliteCode`]). Each
//! value is taken from the bundled SQLite's own header (through
//! `libsqlite3-sys`), so a name that the header lacks fails the build
//! instead of carrying a wrong number.

use litelane::rusqlite::ffi;

macro_rules! table {
    ($($name:ident,)*) => {
        &[$((stringify!($name), ffi::$name as i32)),*]
    };
}

/// The authorizer's action and return codes, limit categories and
/// `sqlite3_db_config` verbs: exported, but not names of errors (their
/// values overlap the result codes).
pub const OTHER: &[(&str, i32)] = table![
    SQLITE_ALTER_TABLE,
    SQLITE_ANALYZE,
    SQLITE_ATTACH,
    SQLITE_CREATE_INDEX,
    SQLITE_CREATE_TABLE,
    SQLITE_CREATE_TEMP_INDEX,
    SQLITE_CREATE_TEMP_TABLE,
    SQLITE_CREATE_TEMP_TRIGGER,
    SQLITE_CREATE_TEMP_VIEW,
    SQLITE_CREATE_TRIGGER,
    SQLITE_CREATE_VIEW,
    SQLITE_CREATE_VTABLE,
    SQLITE_DBCONFIG_DEFENSIVE,
    SQLITE_DBCONFIG_DQS_DDL,
    SQLITE_DBCONFIG_DQS_DML,
    SQLITE_DBCONFIG_ENABLE_FKEY,
    SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER,
    SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION,
    SQLITE_DBCONFIG_ENABLE_QPSG,
    SQLITE_DBCONFIG_ENABLE_TRIGGER,
    SQLITE_DBCONFIG_ENABLE_VIEW,
    SQLITE_DBCONFIG_LEGACY_ALTER_TABLE,
    SQLITE_DBCONFIG_LEGACY_FILE_FORMAT,
    SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
    SQLITE_DBCONFIG_RESET_DATABASE,
    SQLITE_DBCONFIG_TRIGGER_EQP,
    SQLITE_DBCONFIG_TRUSTED_SCHEMA,
    SQLITE_DBCONFIG_WRITABLE_SCHEMA,
    SQLITE_DELETE,
    SQLITE_DENY,
    SQLITE_DETACH,
    SQLITE_DROP_INDEX,
    SQLITE_DROP_TABLE,
    SQLITE_DROP_TEMP_INDEX,
    SQLITE_DROP_TEMP_TABLE,
    SQLITE_DROP_TEMP_TRIGGER,
    SQLITE_DROP_TEMP_VIEW,
    SQLITE_DROP_TRIGGER,
    SQLITE_DROP_VIEW,
    SQLITE_DROP_VTABLE,
    SQLITE_FUNCTION,
    SQLITE_IGNORE,
    SQLITE_INSERT,
    SQLITE_LIMIT_ATTACHED,
    SQLITE_LIMIT_COLUMN,
    SQLITE_LIMIT_COMPOUND_SELECT,
    SQLITE_LIMIT_EXPR_DEPTH,
    SQLITE_LIMIT_FUNCTION_ARG,
    SQLITE_LIMIT_LENGTH,
    SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
    SQLITE_LIMIT_SQL_LENGTH,
    SQLITE_LIMIT_TRIGGER_DEPTH,
    SQLITE_LIMIT_VARIABLE_NUMBER,
    SQLITE_LIMIT_VDBE_OP,
    SQLITE_LIMIT_WORKER_THREADS,
    SQLITE_PRAGMA,
    SQLITE_READ,
    SQLITE_RECURSIVE,
    SQLITE_REINDEX,
    SQLITE_SAVEPOINT,
    SQLITE_SELECT,
    SQLITE_TRANSACTION,
    SQLITE_UPDATE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_codes_and_the_other_constants_are_apart() {
        let codes = litelane::SqliteCode::all();
        assert!(codes.len() > 100, "{}", codes.len());
        for (name, _) in OTHER {
            assert!(
                codes.iter().all(|c| c.name() != *name),
                "{name} is in both tables"
            );
        }
    }
}
