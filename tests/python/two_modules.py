"""Running one scenario on the standard library's ``sqlite3`` and on
``litelane.dbapi`` and comparing what each did (the drop-in's tests)."""

import sqlite3

import litelane.dbapi as dbapi

#: The two modules every scenario runs on.
MODULES = [sqlite3, dbapi]


def outcome(con, sql, params=()):
    """The rows of `sql`, or its error's class and message."""
    try:
        return con.execute(sql, params).fetchall()
    except Exception as e:  # noqa: BLE001 - the outcome is compared
        return (type(e).__name__, str(e))


def both(scenario, tmp_path):
    """Runs ``scenario(module, tmp_path)`` on both modules, asserts they
    agree, and returns ``sqlite3``'s result."""
    got = {m.__name__: scenario(m, tmp_path) for m in MODULES}
    assert got["litelane.dbapi"] == got["sqlite3"]
    return got["sqlite3"]
