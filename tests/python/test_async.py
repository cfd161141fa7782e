"""asyncio: one hop per call or transaction."""

import asyncio

import litelane
import pytest


def run(coro):
    return asyncio.run(coro)


def test_aexecute_aquery_and_gathered_writes(db_path):
    async def main():
        db = litelane.open(db_path)
        await db.aexecute("CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)")
        results = await asyncio.gather(*(db.aexecute("INSERT INTO t(v) VALUES (?)", (i,)) for i in range(300)))
        assert all(r.rowcount == 1 for r in results)
        assert await db.aquery("SELECT count(*), sum(v) FROM t") == [(300, sum(range(300)))]
        assert await db.aquery("SELECT v FROM t WHERE v = ?", (5,), dicts=True) == [{"v": 5}]
        await db.aexecutemany("INSERT INTO t(v) VALUES (?)", ((i,) for i in range(10)))
        rep = await db.ainsert_many("t", [(None, i) for i in range(100)])
        assert rep["rows"] == 100
        assert (await db.aquery("SELECT count(*) FROM t")) == [(410,)]
        with pytest.raises(litelane.OperationalError, match="no such table"):
            await db.aquery("SELECT * FROM missing")
        db.close()

    run(main())


def test_atransaction_commit_rollback_and_concurrent_writers(db_path):
    async def main():
        db = litelane.open(db_path)
        await db.aexecute("CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)")
        async with db.atransaction() as tx:
            await tx.execute("INSERT INTO t(v) VALUES (1)")
            assert await tx.query("SELECT count(*) FROM t") == [(1,)]
            await tx.executemany("INSERT INTO t(v) VALUES (?)", [(2,), (3,)])
        with pytest.raises(KeyError):
            async with db.atransaction() as tx:
                await tx.execute("INSERT INTO t(v) VALUES (99)")
                raise KeyError("boom")
        assert await db.aquery("SELECT v FROM t ORDER BY v") == [(1,), (2,), (3,)]

        # many coroutines, each a transaction, while others autocommit: the
        # transactions' statements never wait behind the executor's threads
        async def one(i):
            async with db.atransaction() as tx:
                await tx.execute("INSERT INTO t(v) VALUES (?)", (100 + i,))
                await asyncio.sleep(0)
                await tx.execute("INSERT INTO t(v) VALUES (?)", (1000 + i,))

        await asyncio.gather(
            *(one(i) for i in range(20)), *(db.aexecute("INSERT INTO t(v) VALUES (?)", (5000 + i,)) for i in range(50))
        )
        assert await db.aquery("SELECT count(*) FROM t") == [(3 + 40 + 50,)]
        assert db.metrics()["busy_errors"] == 0
        db.close()

    run(main())


def test_awrite_runs_the_whole_transaction_in_one_hop(db_path):
    async def main():
        db = litelane.open(db_path)
        await db.aexecute("CREATE TABLE t(v)")

        def fill(tx):
            for i in range(1000):
                tx.execute("INSERT INTO t VALUES (?)", (i,))
            return tx.query("SELECT count(*) FROM t")[0][0]

        assert await db.awrite(fill) == 1000
        assert await db.aquery("SELECT count(*) FROM t") == [(1000,)]
        db.close()

    run(main())


def test_atransaction_explicit_commit_and_rollback(db_path):
    async def main():
        db = litelane.open(db_path)
        await db.aexecute("CREATE TABLE t(v)")
        async with db.atransaction() as tx:
            await tx.execute("INSERT INTO t VALUES (1)")
            await tx.rollback()
        async with db.atransaction() as tx:
            await tx.execute("INSERT INTO t VALUES (2)")
            await tx.commit()
        async with db.atransaction() as tx:
            with pytest.raises(litelane.OperationalError, match="no such table"):
                await tx.execute("INSERT INTO missing VALUES (3)")
            await tx.execute("INSERT INTO t VALUES (3)")  # the transaction goes on
        assert await db.aquery("SELECT v FROM t ORDER BY v") == [(2,), (3,)]
        db.close()

    run(main())


def test_importing_litelane_loads_neither_asyncio_nor_json():
    """Start-up: `import litelane.dbapi` took about 55 ms, 40 of them
    loading asyncio, which only the async methods use (they run inside an
    event loop, so asyncio is loaded by then); now about 10 ms."""
    import subprocess
    import sys

    code = "import sys, litelane, litelane.dbapi\nprint(sorted(m for m in ('asyncio', 'json') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
