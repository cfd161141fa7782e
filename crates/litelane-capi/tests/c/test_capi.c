/*
** The C ABI as a C program uses it, and misuses it: every function, each
** misuse ending in its status and message, never a crash. Run by
** scripts/build-capi --test under AddressSanitizer and
** UndefinedBehaviorSanitizer.
**
**   test_capi DIR    (a scratch directory for the databases)
*/
#include "litelane.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int checks = 0;

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    checks++;                                                             \
    if (!(cond)) {                                                        \
      failures++;                                                         \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, " (errmsg: %s)\n", litelane_errmsg());              \
    }                                                                     \
  } while (0)

/* True when the thread's last message contains `part` (any when NULL). */
static int said(const char *part) {
  return part == NULL || strstr(litelane_errmsg(), part) != NULL;
}

/* A status, and the thread's message containing `part`. */
#define EXPECT(call, status, part)                                        \
  do {                                                                    \
    int rc_ = (call);                                                     \
    CHECK(rc_ == (status), "%s returned %d, expected %d", #call, rc_,     \
          (status));                                                      \
    CHECK(said(part), "%s: message lacks the expected text", #call);      \
  } while (0)

#define OK(call) EXPECT(call, LITELANE_OK, NULL)

static litelane_value int_value(int64_t i) {
  litelane_value v;
  memset(&v, 0, sizeof v);
  v.kind = LITELANE_INTEGER;
  v.integer = i;
  return v;
}

static litelane_value bytes_value(int32_t kind, const void *data, size_t len) {
  litelane_value v;
  memset(&v, 0, sizeof v);
  v.kind = kind;
  v.data = data;
  v.len = len;
  return v;
}

static int64_t count_rows(litelane_db *db) {
  litelane_rows *rows = NULL;
  litelane_value v;
  int64_t n = -1;
  OK(litelane_query(db, "SELECT count(*) FROM t", NULL, 0, &rows));
  if (litelane_rows_next(rows) == LITELANE_ROW &&
      litelane_rows_value(rows, 0, &v) == LITELANE_OK) {
    n = v.integer;
  }
  OK(litelane_rows_free(&rows));
  return n;
}

static void test_versions(void) {
  CHECK(litelane_abi_version() == LITELANE_ABI_VERSION, "abi %u",
        litelane_abi_version());
  CHECK(strlen(litelane_version()) > 0, "empty version");
}

static void test_open_misuse(const char *dir) {
  litelane_db *db = (litelane_db *)1;
  char path[4096];
  litelane_options opts;
  EXPECT(litelane_open(NULL, NULL, &db), LITELANE_MISUSE, "path is NULL");
  CHECK(db == NULL, "out not cleared on failure");
  EXPECT(litelane_open(":memory:", NULL, NULL), LITELANE_MISUSE, "out is NULL");
  memset(&opts, 0, sizeof opts);
  opts.size = sizeof opts;
  opts.profile = "durable";
  EXPECT(litelane_open(":memory:", &opts, &db), LITELANE_MISUSE,
         "unknown profile 'durable'");
  /* An invalid UTF-8 path. */
  EXPECT(litelane_open("bad\xff.db", NULL, &db), LITELANE_MISUSE, "not UTF-8");
  /* A directory that does not exist: SQLite's CANTOPEN (14). */
  snprintf(path, sizeof path, "%s/no/such/dir/x.db", dir);
  EXPECT(litelane_open(path, NULL, &db), LITELANE_ERROR, path);
  CHECK(litelane_errcode() == LITELANE_ERROR, "errcode %d", litelane_errcode());
  CHECK(litelane_sqlite_errcode() == 14, "sqlite code %d",
        litelane_sqlite_errcode());
  /* An options struct from an older header (only `size` and `profile`):
  ** the fields past its size are not read. */
  opts.profile = "fast";
  opts.busy_timeout_ms = 0xdeadbeef;
  opts.size = sizeof(size_t) + sizeof(const char *);
  OK(litelane_open(":memory:", &opts, &db));
  OK(litelane_close(&db));
  CHECK(db == NULL, "close did not clear the handle");
}

static void test_write_and_read(litelane_db *db) {
  litelane_statement stmts[2];
  litelane_executed done[2];
  litelane_value params[5];
  litelane_rows *rows = NULL;
  litelane_value v;
  size_t n = 0;
  const char *name = NULL;
  static const unsigned char blob[4] = {0, 1, 0xfe, 0xff};

  memset(stmts, 0, sizeof stmts);
  stmts[0].sql = "CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, z)";
  OK(litelane_write(db, stmts, 1, NULL));

  params[0] = int_value(42);
  memset(&params[1], 0, sizeof params[1]);
  params[1].kind = LITELANE_REAL;
  params[1].real = 2.5;
  params[2] = bytes_value(LITELANE_TEXT, "h\xc3\xa9llo", 6);
  params[3] = bytes_value(LITELANE_BLOB, blob, sizeof blob);
  memset(&params[4], 0, sizeof params[4]);
  params[4].kind = LITELANE_NULL;
  stmts[0].sql = "INSERT INTO t VALUES (?, ?, ?, ?, ?)";
  stmts[0].params = params;
  stmts[0].n_params = 5;
  stmts[1] = stmts[0];
  OK(litelane_write(db, stmts, 2, done));
  CHECK(done[0].changes == 1 && done[1].changes == 1, "changes %llu %llu",
        (unsigned long long)done[0].changes,
        (unsigned long long)done[1].changes);
  CHECK(done[1].last_insert_rowid == done[0].last_insert_rowid + 1,
        "rowids %lld %lld", (long long)done[0].last_insert_rowid,
        (long long)done[1].last_insert_rowid);

  OK(litelane_query(db, "SELECT i, r, s, b, z FROM t WHERE i = ?", params, 1,
                    &rows));
  OK(litelane_rows_column_count(rows, &n));
  CHECK(n == 5, "columns %zu", n);
  OK(litelane_rows_column_name(rows, 2, &name));
  CHECK(name != NULL && strcmp(name, "s") == 0, "name %s", name);
  EXPECT(litelane_rows_column_name(rows, 5, &name), LITELANE_MISUSE,
         "column 5 of 5");
  EXPECT(litelane_rows_value(rows, 0, &v), LITELANE_MISUSE, "no current row");
  CHECK(litelane_rows_next(rows) == LITELANE_ROW, "no first row");
  OK(litelane_rows_value(rows, 0, &v));
  CHECK(v.kind == LITELANE_INTEGER && v.integer == 42, "i %d %lld", v.kind,
        (long long)v.integer);
  OK(litelane_rows_value(rows, 1, &v));
  CHECK(v.kind == LITELANE_REAL && v.real == 2.5, "r %d %f", v.kind, v.real);
  OK(litelane_rows_value(rows, 2, &v));
  CHECK(v.kind == LITELANE_TEXT && v.len == 6 &&
            memcmp(v.data, "h\xc3\xa9llo", 6) == 0 &&
            ((const char *)v.data)[6] == '\0',
        "s %d %zu", v.kind, v.len);
  OK(litelane_rows_value(rows, 3, &v));
  CHECK(v.kind == LITELANE_BLOB && v.len == 4 && memcmp(v.data, blob, 4) == 0,
        "b %d %zu", v.kind, v.len);
  OK(litelane_rows_value(rows, 4, &v));
  CHECK(v.kind == LITELANE_NULL, "z %d", v.kind);
  EXPECT(litelane_rows_value(rows, 9, &v), LITELANE_MISUSE, "column 9 of 5");
  CHECK(litelane_rows_next(rows) == LITELANE_ROW, "no second row");
  CHECK(litelane_rows_next(rows) == LITELANE_DONE, "a third row");
  CHECK(litelane_rows_next(rows) == LITELANE_DONE, "DONE is not sticky");
  EXPECT(litelane_rows_value(rows, 0, &v), LITELANE_MISUSE, "no current row");
  OK(litelane_rows_free(&rows));
  CHECK(rows == NULL, "rows not cleared");
}

static void test_write_failures(litelane_db *db) {
  litelane_statement stmts[2];
  litelane_value bad = bytes_value(LITELANE_TEXT, "\xff\xfe", 2);
  litelane_value nodata = bytes_value(LITELANE_BLOB, NULL, 3);
  litelane_value weird = int_value(1);
  int64_t before = count_rows(db);

  memset(stmts, 0, sizeof stmts);
  stmts[0].sql = "INSERT INTO t(i) VALUES (7)";
  stmts[1].sql = "INSERT INTO nowhere VALUES (1)";
  EXPECT(litelane_write(db, stmts, 2, NULL), LITELANE_ERROR, "statement 2 of 2");
  CHECK(litelane_sqlite_errcode() == 1, "sqlite code %d",
        litelane_sqlite_errcode());
  CHECK(strstr(litelane_errmsg(), "nowhere") != NULL, "which table");
  CHECK(count_rows(db) == before, "the first statement was not rolled back");

  stmts[1].sql = "INSERT INTO t(i) VALUES (?)";
  stmts[1].params = &bad;
  stmts[1].n_params = 1;
  EXPECT(litelane_write(db, stmts, 2, NULL), LITELANE_MISUSE,
         "statement 2 of 2: parameter 1: text is not UTF-8 (byte 0)");
  stmts[1].params = &nodata;
  EXPECT(litelane_write(db, stmts, 2, NULL), LITELANE_MISUSE,
         "data is NULL with len 3");
  weird.kind = 77;
  stmts[1].params = &weird;
  EXPECT(litelane_write(db, stmts, 2, NULL), LITELANE_MISUSE, "unknown kind 77");
  stmts[1].params = NULL;
  EXPECT(litelane_write(db, stmts, 2, NULL), LITELANE_MISUSE,
         "params is NULL with 1 parameters");
  stmts[1].sql = NULL;
  EXPECT(litelane_write(db, stmts, 2, NULL), LITELANE_MISUSE, "the SQL is NULL");
  EXPECT(litelane_write(db, NULL, 2, NULL), LITELANE_MISUSE, "stmts is NULL");
  /* A statement that returns rows is refused. */
  stmts[0].sql = "SELECT 1";
  EXPECT(litelane_write(db, stmts, 1, NULL), LITELANE_ERROR, "statement 1 of 1");
  CHECK(count_rows(db) == before, "rows changed");
}

static void test_transactions(litelane_db *db) {
  litelane_tx *tx = NULL, *stale = NULL;
  litelane_rows *rows = NULL;
  litelane_executed done;
  litelane_value v = int_value(1000);
  int64_t before = count_rows(db);

  OK(litelane_begin(db, "C test", &tx));
  OK(litelane_tx_execute(tx, "INSERT INTO t(i) VALUES (?)", &v, 1, &done));
  CHECK(done.changes == 1, "changes %llu", (unsigned long long)done.changes);
  /* A failing statement leaves the transaction open. */
  EXPECT(litelane_tx_execute(tx, "INSERT INTO nowhere VALUES (1)", NULL, 0, NULL),
         LITELANE_ERROR, "nowhere");
  OK(litelane_tx_query(tx, "SELECT count(*) FROM t WHERE i = 1000", NULL, 0,
                       &rows));
  CHECK(litelane_rows_next(rows) == LITELANE_ROW, "no row");
  OK(litelane_rows_value(rows, 0, &v));
  CHECK(v.integer == 1, "the transaction does not see its own write: %lld",
        (long long)v.integer);
  OK(litelane_rows_free(&rows));
  /* Readers do not see it before the commit. */
  CHECK(count_rows(db) == before, "an uncommitted row is visible");
  stale = tx;
  OK(litelane_rollback(&tx));
  CHECK(tx == NULL, "tx not cleared");
  CHECK(count_rows(db) == before, "rollback kept the row");
  EXPECT(litelane_commit(&stale), LITELANE_MISUSE, "not open");
  EXPECT(litelane_tx_execute(stale, "SELECT 1", NULL, 0, NULL), LITELANE_MISUSE,
         "not open");

  OK(litelane_begin(db, NULL, &tx));
  v = int_value(2000);
  OK(litelane_tx_execute(tx, "INSERT INTO t(i) VALUES (?)", &v, 1, NULL));
  OK(litelane_commit(&tx));
  CHECK(count_rows(db) == before + 1, "commit lost the row");
}

static void test_handle_misuse(litelane_db *db, const char *dir) {
  litelane_db *other = NULL, *closed = NULL, *null_db = NULL;
  litelane_tx *tx = NULL;
  litelane_rows *rows = NULL, *freed = NULL;
  litelane_statement s;
  char path[4096];

  memset(&s, 0, sizeof s);
  s.sql = "INSERT INTO t(i) VALUES (1)";
  EXPECT(litelane_write(NULL, &s, 1, NULL), LITELANE_MISUSE, "NULL");
  EXPECT(litelane_query(NULL, "SELECT 1", NULL, 0, &rows), LITELANE_MISUSE,
         "NULL");
  EXPECT(litelane_begin(NULL, NULL, &tx), LITELANE_MISUSE, "NULL");
  EXPECT(litelane_close(&null_db), LITELANE_MISUSE, "NULL");
  EXPECT(litelane_close(NULL), LITELANE_MISUSE, "db is NULL");
  EXPECT(litelane_rows_next(NULL), LITELANE_MISUSE, "NULL");
  EXPECT(litelane_rows_free(NULL), LITELANE_MISUSE, "rows is NULL");
  EXPECT(litelane_commit(NULL), LITELANE_MISUSE, "tx is NULL");
  EXPECT(litelane_checkpoint(NULL, LITELANE_CHECKPOINT_PASSIVE, NULL),
         LITELANE_MISUSE, "NULL");
  /* Use after close and double close, through a saved copy. */
  snprintf(path, sizeof path, "%s/other.db", dir);
  OK(litelane_open(path, NULL, &other));
  closed = other;
  OK(litelane_close(&other));
  EXPECT(litelane_close(&closed), LITELANE_MISUSE, "not open");
  EXPECT(litelane_write(closed, &s, 1, NULL), LITELANE_MISUSE, "not open");
  EXPECT(litelane_query(closed, "SELECT 1", NULL, 0, &rows), LITELANE_MISUSE,
         "not open");
  /* Double free. */
  OK(litelane_query(db, "SELECT 1", NULL, 0, &rows));
  freed = rows;
  OK(litelane_rows_free(&rows));
  EXPECT(litelane_rows_free(&freed), LITELANE_MISUSE, "not open");
  EXPECT(litelane_rows_next(freed), LITELANE_MISUSE, "not open");
  /* A handle of another kind. */
  OK(litelane_query(db, "SELECT 1", NULL, 0, &rows));
  EXPECT(litelane_write((litelane_db *)rows, &s, 1, NULL), LITELANE_MISUSE,
         "the handle is a result, not a database");
  EXPECT(litelane_rows_next((litelane_rows *)db), LITELANE_MISUSE,
         "the handle is a database, not a result");
  OK(litelane_rows_free(&rows));
  /* A pointer that was never a handle. */
  EXPECT(litelane_rows_next((litelane_rows *)&s), LITELANE_MISUSE, "not open");
  /* Checkpoint modes. */
  EXPECT(litelane_checkpoint(db, 9, NULL), LITELANE_MISUSE, "unknown mode 9");
}

/* Threads running one prepared statement at once. */
#define STMT_THREADS 8
static void *stmt_reader(void *arg) {
  litelane_stmt *stmt = (litelane_stmt *)arg;
  litelane_rows *rows = NULL;
  litelane_value p = int_value(0), v;
  long bad = 0;
  int i;
  for (i = 0; i < 50; i++) {
    p = int_value(i);
    if (litelane_stmt_query(stmt, &p, 1, &rows) != LITELANE_OK ||
        litelane_rows_next(rows) != LITELANE_ROW ||
        litelane_rows_value(rows, 0, &v) != LITELANE_OK || v.integer != i * 2)
      bad++;
    if (rows != NULL) litelane_rows_free(&rows);
  }
  return (void *)bad;
}

static void test_prepared(litelane_db *db, const char *dir) {
  litelane_stmt *stmt = NULL, *freed = NULL, *orphan = NULL;
  litelane_rows *rows = NULL, *got = NULL;
  litelane_db *other = NULL, *other_closed = NULL;
  litelane_value p[2], v;
  litelane_statement w;
  pthread_t t[STMT_THREADS];
  char path[4096];
  const char bad_utf8[] = {'S', 'E', 'L', 'E', 'C', 'T', ' ', '\'', (char)0xff, '\'', 0};
  int64_t before;
  long bad = 0;
  int i;

  /* Prepared once, run many times with other values. */
  OK(litelane_prepare(db, "SELECT ?1 + ?2, typeof(?2)", &stmt));
  CHECK(stmt != NULL, "no statement");
  for (i = 0; i < 3; i++) {
    p[0] = int_value(40);
    p[1] = int_value(i);
    OK(litelane_stmt_query(stmt, p, 2, &rows));
    CHECK(litelane_rows_next(rows) == LITELANE_ROW, "no row");
    OK(litelane_rows_value(rows, 0, &v));
    CHECK(v.kind == LITELANE_INTEGER && v.integer == 40 + i, "sum %lld",
          (long long)v.integer);
    OK(litelane_rows_value(rows, 1, &v));
    CHECK(v.kind == LITELANE_TEXT && strcmp((const char *)v.data, "integer") == 0,
          "typeof %d", v.kind);
    CHECK(litelane_rows_next(rows) == LITELANE_DONE, "a second row");
    OK(litelane_rows_free(&rows));
  }
  /* The wrong number of parameters, NULL parameters, NULL out. */
  EXPECT(litelane_stmt_query(stmt, p, 1, &rows), LITELANE_MISUSE,
         "takes 2 parameters and 1 were given");
  CHECK(rows == NULL, "rows set on failure");
  EXPECT(litelane_stmt_query(stmt, NULL, 2, &rows), LITELANE_MISUSE,
         "params is NULL");
  EXPECT(litelane_stmt_query(stmt, p, 2, NULL), LITELANE_MISUSE, "out is NULL");
  OK(litelane_stmt_free(&stmt));
  CHECK(stmt == NULL, "stmt not cleared");

  /* A prepared read sees what was committed after it was prepared. */
  OK(litelane_prepare(db, "SELECT count(*) FROM t", &stmt));
  before = count_rows(db);
  memset(&w, 0, sizeof w);
  w.sql = "INSERT INTO t(i) VALUES (7)";
  OK(litelane_write(db, &w, 1, NULL));
  OK(litelane_stmt_query(stmt, NULL, 0, &rows));
  CHECK(litelane_rows_next(rows) == LITELANE_ROW, "no count");
  OK(litelane_rows_value(rows, 0, &v));
  CHECK(v.integer == before + 1, "count %lld, expected %lld", (long long)v.integer,
        (long long)(before + 1));
  OK(litelane_rows_free(&rows));
  OK(litelane_stmt_free(&stmt));

  /* What cannot be prepared, each leaving *out NULL. */
  stmt = (litelane_stmt *)&w;
  EXPECT(litelane_prepare(db, "INSERT INTO t(i) VALUES (1)", &stmt),
         LITELANE_MISUSE, "the statement writes");
  CHECK(stmt == NULL, "out not cleared on failure");
  EXPECT(litelane_prepare(db, "SELEC 1", &stmt), LITELANE_ERROR, "syntax error");
  EXPECT(litelane_prepare(db, "SELECT * FROM nowhere", &stmt), LITELANE_ERROR,
         "nowhere");
  CHECK(litelane_prepare(db, "SELECT 1; SELECT 2", &stmt) != LITELANE_OK &&
            stmt == NULL,
        "two statements were prepared as one");
  EXPECT(litelane_prepare(db, NULL, &stmt), LITELANE_MISUSE, "the SQL is NULL");
  EXPECT(litelane_prepare(db, bad_utf8, &stmt), LITELANE_MISUSE, "not UTF-8");
  EXPECT(litelane_prepare(NULL, "SELECT 1", &stmt), LITELANE_MISUSE, "NULL");
  EXPECT(litelane_prepare(db, "SELECT 1", NULL), LITELANE_MISUSE, "out is NULL");

  /* Handles of the wrong kind, double free, NULL. */
  OK(litelane_prepare(db, "SELECT 1", &stmt));
  OK(litelane_query(db, "SELECT 1", NULL, 0, &rows));
  EXPECT(litelane_stmt_query((litelane_stmt *)rows, NULL, 0, &got),
         LITELANE_MISUSE, "the handle is a result, not a statement");
  CHECK(got == NULL, "out set on failure");
  OK(litelane_rows_free(&rows));
  EXPECT(litelane_rows_next((litelane_rows *)stmt), LITELANE_MISUSE,
         "the handle is a statement, not a result");
  EXPECT(litelane_stmt_query((litelane_stmt *)db, NULL, 0, &got),
         LITELANE_MISUSE, "the handle is a database, not a statement");
  EXPECT(litelane_prepare((litelane_db *)stmt, "SELECT 1", &orphan),
         LITELANE_MISUSE, "the handle is a statement, not a database");
  freed = stmt;
  OK(litelane_stmt_free(&stmt));
  EXPECT(litelane_stmt_free(&freed), LITELANE_MISUSE, "not open");
  EXPECT(litelane_stmt_query(freed, NULL, 0, &got), LITELANE_MISUSE, "not open");
  EXPECT(litelane_stmt_free(NULL), LITELANE_MISUSE, "stmt is NULL");

  /* A statement of a database closed since: refused, and still freed. */
  snprintf(path, sizeof path, "%s/prepared-other.db", dir);
  OK(litelane_open(path, NULL, &other));
  OK(litelane_prepare(other, "SELECT 1", &orphan));
  other_closed = other;
  OK(litelane_close(&other));
  EXPECT(litelane_stmt_query(orphan, NULL, 0, &got), LITELANE_MISUSE,
         "the statement's database is closed");
  EXPECT(litelane_prepare(other_closed, "SELECT 1", &stmt), LITELANE_MISUSE,
         "not open");
  OK(litelane_stmt_free(&orphan));

  /* One statement run by many threads at once. */
  OK(litelane_prepare(db, "SELECT ?1 * 2", &stmt));
  for (i = 0; i < STMT_THREADS; i++) pthread_create(&t[i], NULL, stmt_reader, stmt);
  for (i = 0; i < STMT_THREADS; i++) {
    void *r = NULL;
    pthread_join(t[i], &r);
    bad += (long)r;
  }
  CHECK(bad == 0, "%ld prepared reads failed", bad);
  OK(litelane_stmt_free(&stmt));
}

static void test_checkpoint(litelane_db *db) {
  litelane_checkpoint_report r;
  memset(&r, 0xff, sizeof r);
  OK(litelane_checkpoint(db, LITELANE_CHECKPOINT_TRUNCATE, &r));
  CHECK(r.busy == 0 || r.busy == 1, "busy %d", r.busy);
}

static void test_metrics(litelane_db *db) {
  litelane_metrics_report m;
  litelane_metrics_report old;
  memset(&m, 0, sizeof m);
  m.size = sizeof m;
  OK(litelane_metrics(db, &m));
  CHECK(m.transactions > 0 && m.commits > 0 && m.rows_written > 0,
        "transactions %llu commits %llu rows %llu",
        (unsigned long long)m.transactions, (unsigned long long)m.commits,
        (unsigned long long)m.rows_written);
  CHECK(m.rollbacks > 0, "the failed writes were not counted as rollbacks");
  /* A small database, no read pinning it: within its limit; the explicit
     TRUNCATE of test_checkpoint held the writers (a hold is counted). */
  CHECK(m.wal_over_limit_reason == LITELANE_WAL_WITHIN_LIMIT && m.wal_over_limit_us == 0,
        "over limit: reason %d for %llu us", m.wal_over_limit_reason,
        (unsigned long long)m.wal_over_limit_us);
  CHECK(m.wal_over_limit_count == 0 && m.wal_over_limit_time_us == 0,
        "over limit %llu times", (unsigned long long)m.wal_over_limit_count);
  CHECK(m.checkpoint_holds >= 1 && m.checkpoint_hold_max_us <= m.checkpoint_hold_time_us,
        "holds %llu, max %llu us of %llu us", (unsigned long long)m.checkpoint_holds,
        (unsigned long long)m.checkpoint_hold_max_us,
        (unsigned long long)m.checkpoint_hold_time_us);
  /* The struct as the first version of the header had it: the appended
     fields are not written. */
  memset(&old, 0xab, sizeof old);
  old.size = offsetof(litelane_metrics_report, wal_over_limit_reason);
  OK(litelane_metrics(db, &old));
  CHECK(old.wal_file_bytes != 0xababababababababULL,
        "wal_file_bytes not written");
  CHECK(old.checkpoint_hold_time_us == 0xababababababababULL,
        "an appended field was written past size");
  /* A struct from an older header: nothing past its size is written. */
  memset(&old, 0xab, sizeof old);
  old.size = offsetof(litelane_metrics_report, queue_wait_p95_us);
  OK(litelane_metrics(db, &old));
  CHECK(old.queue_wait_p95_us == 0xababababababababULL,
        "a field past size was written");
  old.size = 0;
  EXPECT(litelane_metrics(db, &old), LITELANE_MISUSE, "out->size is 0");
  EXPECT(litelane_metrics(db, NULL), LITELANE_MISUSE, "out is NULL");
}

static void on_progress(void *ctx, uint64_t done, uint64_t total) {
  uint64_t *calls = (uint64_t *)ctx;
  (*calls)++;
  CHECK(done <= total, "progress %llu of %llu", (unsigned long long)done,
        (unsigned long long)total);
}

static void test_backup(litelane_db *db, const char *dir) {
  char dest[4096];
  uint64_t calls = 0, pages = 0;
  litelane_db *copy = NULL;
  snprintf(dest, sizeof dest, "%s/backup.db", dir);
  OK(litelane_backup(db, dest, on_progress, &calls, &pages));
  CHECK(calls > 0 && pages > 0, "calls %llu pages %llu",
        (unsigned long long)calls, (unsigned long long)pages);
  /* An existing, non-empty file is never overwritten. */
  EXPECT(litelane_backup(db, dest, NULL, NULL, NULL), LITELANE_ERROR, dest);
  EXPECT(litelane_backup(db, NULL, NULL, NULL, NULL), LITELANE_MISUSE,
         "dest is NULL");
  OK(litelane_open(dest, NULL, &copy));
  CHECK(count_rows(copy) == count_rows(db), "the copy differs");
  OK(litelane_close(&copy));
}

#define BULK_ROWS 1000

static void test_insert(litelane_db *db) {
  static litelane_value values[2 * BULK_ROWS];
  const char *columns[2] = {"i", "s"};
  const char *missing[2] = {"i", "nope"};
  litelane_value bad = bytes_value(LITELANE_TEXT, "\xc3", 1);
  uint64_t inserted = 0;
  int64_t before = count_rows(db);
  int r;
  for (r = 0; r < BULK_ROWS; r++) {
    values[r] = int_value(r);
    values[BULK_ROWS + r] = bytes_value(LITELANE_TEXT, "bulk", 4);
  }
  OK(litelane_insert(db, "t", columns, 2, values, BULK_ROWS, &inserted));
  CHECK(inserted == BULK_ROWS, "inserted %llu", (unsigned long long)inserted);
  CHECK(count_rows(db) == before + BULK_ROWS, "rows %lld",
        (long long)count_rows(db));
  EXPECT(litelane_insert(db, "t", missing, 2, values, BULK_ROWS, NULL),
         LITELANE_ERROR, "nope");
  EXPECT(litelane_insert(db, "t", columns, 2, NULL, BULK_ROWS, NULL),
         LITELANE_MISUSE, "values is NULL");
  EXPECT(litelane_insert(db, "t", NULL, 2, values, BULK_ROWS, NULL),
         LITELANE_MISUSE, "no columns");
  values[BULK_ROWS + 7] = bad;
  EXPECT(litelane_insert(db, "t", columns, 2, values, BULK_ROWS, NULL),
         LITELANE_MISUSE, "row 8, column s: text is not UTF-8");
  CHECK(count_rows(db) == before + BULK_ROWS, "a refused insert wrote rows");
}

#define THREADS 8
#define PER_THREAD 200

static void *writer(void *arg) {
  litelane_db *db = (litelane_db *)arg;
  litelane_statement s;
  litelane_value v = int_value(7);
  long bad = 0;
  int i;
  memset(&s, 0, sizeof s);
  s.sql = "INSERT INTO t(i) VALUES (?)";
  s.params = &v;
  s.n_params = 1;
  for (i = 0; i < PER_THREAD; i++) {
    if (litelane_write(db, &s, 1, NULL) != LITELANE_OK) bad++;
  }
  return (void *)bad;
}

static void test_threads(litelane_db *db) {
  pthread_t t[THREADS];
  int64_t before = count_rows(db);
  long bad = 0;
  int i;
  for (i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, writer, db);
  for (i = 0; i < THREADS; i++) {
    void *r = NULL;
    pthread_join(t[i], &r);
    bad += (long)r;
  }
  CHECK(bad == 0, "%ld writes failed", bad);
  CHECK(count_rows(db) == before + THREADS * PER_THREAD, "rows %lld",
        (long long)count_rows(db));
}

/* Writes `text` to DIR/name and the path to `path`. */
static void write_file(const char *dir, const char *name, const char *text,
                       char *path, size_t cap) {
  FILE *f;
  snprintf(path, cap, "%s/%s", dir, name);
  f = fopen(path, "wb");
  CHECK(f != NULL, "cannot write %s", path);
  if (f == NULL) return;
  fputs(text, f);
  fclose(f);
}

/* Writes a CSV of `n` rows "id,label" to DIR/name. */
static long write_rows(const char *dir, const char *name, int n, char *path,
                       size_t cap) {
  FILE *f;
  long size;
  int i;
  snprintf(path, cap, "%s/%s", dir, name);
  f = fopen(path, "wb");
  CHECK(f != NULL, "cannot write %s", path);
  if (f == NULL) return -1;
  fputs("id,label\n", f);
  for (i = 1; i <= n; i++) fprintf(f, "%d,row number %d\n", i, i);
  size = ftell(f);
  fclose(f);
  return size;
}

static int64_t count_of(litelane_db *db, const char *table) {
  char sql[256];
  litelane_rows *rows = NULL;
  litelane_value v;
  int64_t n = -1;
  snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\"", table);
  OK(litelane_query(db, sql, NULL, 0, &rows));
  if (litelane_rows_next(rows) == LITELANE_ROW &&
      litelane_rows_value(rows, 0, &v) == LITELANE_OK) {
    n = v.integer;
  }
  OK(litelane_rows_free(&rows));
  return n;
}

static litelane_import_options import_options(const char *source) {
  litelane_import_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.source = source;
  return o;
}

static litelane_import_summary import_summary(void) {
  litelane_import_summary s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  s.rows_inserted = 999;
  s.outcome = -1;
  return s;
}

/* What the progress callback saw. */
typedef struct {
  int calls;
  int rejects;
  int backwards;        /* a call whose rows or bytes went down */
  uint64_t last_rows;
  uint64_t last_bytes;
  int64_t total;
  uint64_t reject_line;
  char reason[256];
  uint64_t stop_at;     /* nonzero: stop once rows reach it */
} import_seen;

static int on_import(void *ctx, const litelane_import_progress *p) {
  import_seen *seen = (import_seen *)ctx;
  seen->calls++;
  if (p->kind == LITELANE_IMPORT_REJECTED) {
    seen->rejects++;
    seen->reject_line = p->line;
    snprintf(seen->reason, sizeof seen->reason, "%s",
             p->reason ? p->reason : "(null)");
    return 0;
  }
  if (p->rows < seen->last_rows || p->bytes_read < seen->last_bytes)
    seen->backwards++;
  seen->last_rows = p->rows;
  seen->last_bytes = p->bytes_read;
  seen->total = p->total_bytes;
  return seen->stop_at != 0 && p->rows >= seen->stop_at;
}

static void test_import_read_back(litelane_db *db, const char *dir) {
  static const char *want_name[] = {"Ada", "Alan", "Grace"};
  static const int64_t want_age[] = {36, 41, 85};
  static const char *want_note[] = {"first, \"programmer\"", "x",
                                    "two\nlines"};
  char path[4096];
  const char *types[] = {"age=INTEGER"};
  litelane_import_options o;
  litelane_import_summary s = import_summary();
  litelane_rows *rows = NULL;
  litelane_value v;
  int r = 0;
  write_file(dir, "people.csv",
             "name,age,note\n"
             "Ada,36,\"first, \"\"programmer\"\"\"\n"
             "Alan,41,x\n"
             "Grace,85,\"two\nlines\"\n",
             path, sizeof path);
  o = import_options(path);
  o.types_for = types;
  o.n_types_for = 1;
  OK(litelane_import(db, &o, NULL, NULL, &s));
  CHECK(s.outcome == LITELANE_IMPORT_DONE, "outcome %d", s.outcome);
  CHECK(s.rows_inserted == 3, "inserted %llu",
        (unsigned long long)s.rows_inserted);
  CHECK(s.rows_rejected == 0, "rejected %llu",
        (unsigned long long)s.rows_rejected);
  CHECK(s.table != NULL && strcmp(s.table, "people") == 0, "table %s",
        s.table ? s.table : "(null)");
  CHECK(s.elapsed_us > 0, "elapsed %llu", (unsigned long long)s.elapsed_us);
  OK(litelane_query(db, "SELECT name, age, note FROM people ORDER BY rowid",
                    NULL, 0, &rows));
  while (litelane_rows_next(rows) == LITELANE_ROW && r < 4) {
    if (r < 3) {
      OK(litelane_rows_value(rows, 0, &v));
      CHECK(v.kind == LITELANE_TEXT && strcmp(v.data, want_name[r]) == 0,
            "row %d name", r);
      OK(litelane_rows_value(rows, 1, &v));
      CHECK(v.kind == LITELANE_INTEGER && v.integer == want_age[r],
            "row %d age kind %d value %lld", r, v.kind, (long long)v.integer);
      OK(litelane_rows_value(rows, 2, &v));
      CHECK(v.kind == LITELANE_TEXT && v.len == strlen(want_note[r]) &&
                memcmp(v.data, want_note[r], v.len) == 0,
            "row %d note", r);
    }
    r++;
  }
  CHECK(r == 3, "%d rows read back", r);
  OK(litelane_rows_free(&rows));
  /* Mode create again: the table exists. */
  s = import_summary();
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_ERROR, "people");
  /* Mode append, into a named table, with a summary from an older header
     (only size, outcome, rows_inserted). */
  o.mode = "append";
  o.types_for = NULL;
  o.n_types_for = 0;
  s = import_summary();
  s.size = offsetof(litelane_import_summary, rows_rejected);
  s.rows_rejected = 77;
  OK(litelane_import(db, &o, NULL, NULL, &s));
  CHECK(s.rows_inserted == 3 && s.rows_rejected == 77 && s.table == NULL,
        "older summary: %llu %llu", (unsigned long long)s.rows_inserted,
        (unsigned long long)s.rows_rejected);
  CHECK(count_of(db, "people") == 6, "people %lld",
        (long long)count_of(db, "people"));
}

static void test_import_rejects(litelane_db *db, const char *dir) {
  char path[4096];
  const char *types[] = {"age=INTEGER"};
  litelane_import_options o;
  litelane_import_summary s = import_summary();
  import_seen seen;
  memset(&seen, 0, sizeof seen);
  write_file(dir, "ages.csv", "name,age\nA,1\nB,2\nC,old\nD,4\n", path,
             sizeof path);
  o = import_options(path);
  o.types_for = types;
  o.n_types_for = 1;
  o.strict = 1;
  OK(litelane_import(db, &o, on_import, &seen, &s));
  CHECK(s.outcome == LITELANE_IMPORT_REJECTS, "outcome %d", s.outcome);
  CHECK(s.rows_inserted == 3 && s.rows_rejected == 1, "%llu in, %llu out",
        (unsigned long long)s.rows_inserted,
        (unsigned long long)s.rows_rejected);
  CHECK(seen.rejects == 1, "%d rejects told", seen.rejects);
  CHECK(seen.reject_line == 4, "reject at line %llu",
        (unsigned long long)seen.reject_line);
  CHECK(strlen(seen.reason) > 0 && strcmp(seen.reason, "(null)") != 0,
        "reason '%s'", seen.reason);
  CHECK(count_of(db, "ages") == 3, "ages %lld",
        (long long)count_of(db, "ages"));
}

#define IMPORT_ROWS 50000

static void test_import_progress(litelane_db *db, const char *dir) {
  char path[4096];
  litelane_import_options o;
  litelane_import_summary s = import_summary();
  import_seen seen;
  long size = write_rows(dir, "many.csv", IMPORT_ROWS, path, sizeof path);
  memset(&seen, 0, sizeof seen);
  o = import_options(path);
  o.delimiter = ',';
  o.header = LITELANE_IMPORT_HEADER;
  OK(litelane_import(db, &o, on_import, &seen, &s));
  CHECK(s.rows_inserted == IMPORT_ROWS, "inserted %llu",
        (unsigned long long)s.rows_inserted);
  CHECK(seen.calls >= 3, "progress called %d times", seen.calls);
  CHECK(seen.backwards == 0, "%d calls went backwards", seen.backwards);
  CHECK(seen.last_rows == IMPORT_ROWS, "last rows %llu",
        (unsigned long long)seen.last_rows);
  CHECK(seen.total == size, "total %lld, file %ld", (long long)seen.total,
        size);
  CHECK((long)seen.last_bytes == size,
        "last bytes %llu", (unsigned long long)seen.last_bytes);
  CHECK(count_of(db, "many") == IMPORT_ROWS, "many %lld",
        (long long)count_of(db, "many"));
}

static void test_import_stop(litelane_db *db, const char *dir) {
  char path[4096];
  litelane_import_options o;
  litelane_import_summary s = import_summary();
  import_seen seen;
  int64_t kept;
  write_rows(dir, "stopped.csv", IMPORT_ROWS, path, sizeof path);
  memset(&seen, 0, sizeof seen);
  seen.stop_at = 10000;
  o = import_options(path);
  o.table = "stopped_rows";
  o.commit_every = 1000;
  EXPECT(litelane_import(db, &o, on_import, &seen, &s), LITELANE_INTERRUPTED,
         "stopped by the progress callback");
  CHECK(litelane_errcode() == LITELANE_INTERRUPTED, "errcode %d",
        litelane_errcode());
  CHECK(s.outcome == LITELANE_IMPORT_STOPPED, "outcome %d", s.outcome);
  CHECK(s.table != NULL && strcmp(s.table, "stopped_rows") == 0, "table %s",
        s.table ? s.table : "(null)");
  kept = count_of(db, "stopped_rows");
  CHECK(kept >= 9000 && kept < IMPORT_ROWS && kept % 1000 == 0,
        "%lld rows kept", (long long)kept);
  CHECK(!said("Ctrl-C") && said("opts->resume"), "words for the command");
  /* The same import again is refused; resumed, it continues from the last
     commit, and the table ends with every row once. */
  s = import_summary();
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_ERROR,
         "interrupted");
  o.resume = 1;
  s = import_summary();
  OK(litelane_import(db, &o, NULL, NULL, &s));
  CHECK(s.outcome == LITELANE_IMPORT_DONE, "outcome %d", s.outcome);
  CHECK((int64_t)s.rows_inserted == IMPORT_ROWS - kept, "resumed %llu",
        (unsigned long long)s.rows_inserted);
  CHECK(count_of(db, "stopped_rows") == IMPORT_ROWS, "stopped_rows %lld",
        (long long)count_of(db, "stopped_rows"));
}

static void test_import_misuse(litelane_db *db, const char *dir) {
  char path[4096], missing[4096];
  const char *bad_utf8 = "\xff\xfe.csv";
  litelane_import_options o;
  litelane_import_summary s = import_summary();
  litelane_db *mem = NULL;
  litelane_db *closed = NULL;
  write_file(dir, "misuse.csv", "a,b\n1,2\n", path, sizeof path);
  o = import_options(path);
  EXPECT(litelane_import(NULL, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "handle is NULL");
  EXPECT(litelane_import(db, NULL, NULL, NULL, &s), LITELANE_MISUSE,
         "opts is NULL");
  o.size = sizeof(size_t);
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "opts->size is");
  o.size = 0;
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "opts->size is 0");
  o = import_options(path);
  s.size = 2;
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "out->size is 2");
  s = import_summary();
  o.source = NULL;
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "opts->source is NULL");
  o.source = bad_utf8;
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "opts->source is not UTF-8");
  o = import_options(path);
  o.table = bad_utf8;
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "opts->table is not UTF-8");
  o = import_options(path);
  o.mode = "upsert";
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE, "mode");
  o = import_options(path);
  o.format = "xlsx";
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE, "xlsx");
  o = import_options(path);
  o.header = 7;
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "header 7");
  o = import_options(path);
  o.n_types_for = 2;
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "types_for is NULL");
  o = import_options(path);
  o.delimiter = 0xD800;
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "not a character");
  /* A file that is not there: the path and the OS errno. */
  snprintf(missing, sizeof missing, "%s/no-such-file.csv", dir);
  o = import_options(missing);
  EXPECT(litelane_import(db, &o, NULL, NULL, &s), LITELANE_ERROR, missing);
  CHECK(litelane_os_errno() == ENOENT, "errno %d", litelane_os_errno());
  CHECK(s.rows_inserted == 999, "summary written on failure");
  /* An options struct from an older header: the fields past its size are
     not read (this format would be refused). */
  o = import_options(path);
  o.size = offsetof(litelane_import_options, format);
  o.table = "older";
  o.format = "xlsx";
  OK(litelane_import(db, &o, NULL, NULL, NULL));
  CHECK(count_of(db, "older") == 1, "older %lld",
        (long long)count_of(db, "older"));
  /* An in-memory database, and a closed handle. */
  o = import_options(path);
  OK(litelane_open(":memory:", NULL, &mem));
  EXPECT(litelane_import(mem, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "in memory");
  closed = mem;
  OK(litelane_close(&mem));
  EXPECT(litelane_import(closed, &o, NULL, NULL, &s), LITELANE_MISUSE,
         "not open");
}

int main(int argc, char **argv) {
  litelane_db *db = NULL;
  char path[4096];
  litelane_options opts;
  if (argc != 2) {
    fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  test_versions();
  test_open_misuse(argv[1]);
  snprintf(path, sizeof path, "%s/capi.db", argv[1]);
  memset(&opts, 0, sizeof opts);
  opts.size = sizeof opts;
  opts.profile = "safe";
  opts.busy_timeout_ms = 2000;
  OK(litelane_open(path, &opts, &db));
  if (db == NULL) return 1;
  test_write_and_read(db);
  test_write_failures(db);
  test_transactions(db);
  test_handle_misuse(db, argv[1]);
  test_prepared(db, argv[1]);
  test_checkpoint(db);
  test_insert(db);
  test_threads(db);
  test_metrics(db);
  test_backup(db, argv[1]);
  test_import_read_back(db, argv[1]);
  test_import_rejects(db, argv[1]);
  test_import_progress(db, argv[1]);
  test_import_stop(db, argv[1]);
  test_import_misuse(db, argv[1]);
  OK(litelane_close(&db));
  printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
