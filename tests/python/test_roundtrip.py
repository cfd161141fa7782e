"""Seeded random values (hostile strings, extreme numbers, blobs) go in and
come back exactly as the standard library's sqlite3 gives them back, through
every path that converts parameters: dbapi execute/executemany (qmark and
named), native execute, transactions and insert_many."""

import math
import random
import sqlite3

import litelane
import litelane.dbapi as dbapi
import pytest

SEEDS = range(8)


def random_value(rng):
    kind = rng.randrange(7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([0, 1, -1, 2**63 - 1, -(2**63), 2**31, rng.randrange(-(2**63), 2**63)])
    if kind == 2:
        return rng.choice([0.0, -0.0, 1.5, 1e308, -1e-308, float("inf"), float("-inf"), rng.uniform(-1e12, 1e12)])
    if kind == 3:
        alphabet = ["a", "Z", "'", '"', ";", "\x00", "\n", "é", "中", "\U0001f600", "--", "/*", "?", ":x"]
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    if kind == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
    if kind == 5:
        return rng.choice([True, False])
    return "x" * rng.randrange(0, 100_000, 997)


def normalized(v):
    if isinstance(v, bool):
        return int(v)
    return v


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("seed", SEEDS)
def test_values_roundtrip_like_sqlite3(tmp_path, seed):
    rng = random.Random(seed)
    rows = [tuple(random_value(rng) for _ in range(4)) for _ in range(60)]
    std = sqlite3.connect(":memory:")
    std.execute("CREATE TABLE v(i INTEGER PRIMARY KEY, a, b, c, d)")
    std.executemany("INSERT INTO v(a, b, c, d) VALUES (?, ?, ?, ?)", rows)
    expected = std.execute("SELECT a, b, c, d FROM v ORDER BY i").fetchall()
    # sqlite3 stores what it was given (bools as 0/1)
    assert all(same(normalized(x), y) for r, e in zip(rows, expected, strict=True) for x, y in zip(r, e, strict=True))

    path = str(tmp_path / f"rt{seed}.db")
    con = dbapi.connect(path)
    con.execute("CREATE TABLE v(i INTEGER PRIMARY KEY, a, b, c, d)")
    half = len(rows) // 2
    for r in rows[:half]:
        con.execute("INSERT INTO v(a, b, c, d) VALUES (:a, :b, :c, :d)", dict(zip("abcd", r, strict=True)))
    con.executemany("INSERT INTO v(a, b, c, d) VALUES (?, ?, ?, ?)", rows[half:])
    con.commit()
    got = con.execute("SELECT a, b, c, d FROM v ORDER BY i").fetchall()
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert all(same(x, y) for x, y in zip(g, e, strict=True)), (g, e)

    db = litelane.open(str(tmp_path / f"rt{seed}-native.db"))
    db.execute("CREATE TABLE v(i INTEGER PRIMARY KEY, a, b, c, d)")
    db.insert_many("v", rows[:half], columns=["a", "b", "c", "d"], batch=7)
    with db.transaction() as tx:
        for r in rows[half:]:
            tx.execute("INSERT INTO v(a, b, c, d) VALUES (?, ?, ?, ?)", r)
    got = db.query("SELECT a, b, c, d FROM v ORDER BY i")
    for g, e in zip(got, expected, strict=True):
        assert all(same(x, y) for x, y in zip(g, e, strict=True)), (g, e)
    # parameters come back unchanged through a SELECT too
    for r in rows[:10]:
        assert db.query("SELECT ?, ?, ?, ?", r)[0] == tuple(normalized(x) for x in r)
    db.close()


def test_unencodable_string_is_an_error_not_a_crash(db_path):
    con = dbapi.connect(db_path)
    with pytest.raises(UnicodeEncodeError):
        con.execute("SELECT ?", ("\udc80",))
    assert con.execute("SELECT 1").fetchone() == (1,)
