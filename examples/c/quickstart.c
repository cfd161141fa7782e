/* litelane's C ABI, start to finish (docs/c-api.md): open a database with a
** profile, write through the fair queue (told the exact outcome), bulk
** insert, an interactive transaction, a read on the reader pool, metrics.
**
**   scripts/build-capi DIR
**   cc -std=c99 examples/c/quickstart.c \
**       $(PKG_CONFIG_PATH=DIR/lib/pkgconfig pkg-config --cflags --libs litelane)
**   LD_LIBRARY_PATH=DIR/lib ./a.out notes.db
**
** Prints the notes it stored and exits 0; on any failure prints
** litelane_errmsg() and exits 1.
*/
#include <litelane.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "quickstart: %s: %s\n", what, litelane_errmsg());
  return 1;
}

static litelane_value text(const char *s) {
  litelane_value v = {LITELANE_TEXT, 0, 0.0, s, strlen(s)};
  return v;
}

static litelane_value integer(int64_t i) {
  litelane_value v = {LITELANE_INTEGER, i, 0.0, NULL, 0};
  return v;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "quickstart.db";
  litelane_db *db = NULL;
  litelane_options opts = {sizeof opts, "safe", 2000, 0};
  if (litelane_open(path, &opts, &db) != LITELANE_OK) return fail("open");

  /* One write transaction of two statements: all or nothing. */
  litelane_value first = text("hello from C");
  litelane_statement setup[2] = {
      {"CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, body TEXT,"
       " stars INTEGER)",
       NULL, 0},
      {"INSERT INTO notes(body, stars) VALUES (?, 5)", &first, 1},
  };
  litelane_executed done[2];
  switch (litelane_write(db, setup, 2, done)) {
    case LITELANE_OK:
      printf("note %lld stored\n", (long long)done[1].last_insert_rowid);
      break;
    case LITELANE_OUTCOME_UNKNOWN:
      /* The commit may have happened: a real program reads back. */
      return fail("write (outcome unknown)");
    default:
      return fail("write");
  }

  /* Bulk insert, column-major: values[c * n_rows + r]. */
  const char *columns[2] = {"body", "stars"};
  litelane_value values[6] = {text("bulk one"), text("bulk two"),
                              text("bulk three"), integer(3), integer(4),
                              integer(1)};
  uint64_t inserted = 0;
  if (litelane_insert(db, "notes", columns, 2, values, 3, &inserted) !=
      LITELANE_OK)
    return fail("insert");
  printf("%llu rows inserted in one transaction\n",
         (unsigned long long)inserted);

  /* An interactive transaction: the writer is held until commit. */
  litelane_tx *tx = NULL;
  if (litelane_begin(db, "quickstart", &tx) != LITELANE_OK)
    return fail("begin");
  litelane_executed bumped;
  if (litelane_tx_execute(tx, "UPDATE notes SET stars = stars + 1", NULL, 0,
                          &bumped) != LITELANE_OK) {
    litelane_rollback(&tx);
    return fail("update");
  }
  if (litelane_commit(&tx) != LITELANE_OK) return fail("commit");
  printf("%llu notes starred once more\n", (unsigned long long)bumped.changes);

  /* A read on the reader pool: never waits for the writer. */
  litelane_value min_stars = integer(3);
  litelane_rows *rows = NULL;
  if (litelane_query(db, "SELECT body, stars FROM notes WHERE stars >= ?"
                         " ORDER BY id",
                     &min_stars, 1, &rows) != LITELANE_OK)
    return fail("query");
  int rc;
  while ((rc = litelane_rows_next(rows)) == LITELANE_ROW) {
    litelane_value body, stars;
    if (litelane_rows_value(rows, 0, &body) != LITELANE_OK ||
        litelane_rows_value(rows, 1, &stars) != LITELANE_OK)
      return fail("value");
    printf("%-14s %lld stars\n", (const char *)body.data,
           (long long)stars.integer);
  }
  litelane_rows_free(&rows);
  if (rc != LITELANE_DONE) return fail("rows");

  litelane_metrics_report m;
  memset(&m, 0, sizeof m);
  m.size = sizeof m;
  if (litelane_metrics(db, &m) != LITELANE_OK) return fail("metrics");
  printf("%llu write transactions, longest wait for the writer %llu us\n",
         (unsigned long long)m.transactions,
         (unsigned long long)m.queue_wait_max_us);

  if (litelane_close(&db) != LITELANE_OK) return fail("close");
  return 0;
}
