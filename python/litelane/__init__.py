"""litelane: SQLite that never says "database is locked", from Python.

The native API::

    import litelane

    with litelane.open("app.db") as db:
        db.execute("CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v)")
        with db.transaction() as tx:
            tx.execute("INSERT INTO kv VALUES (?, ?)", ("a", 1))
        rows = db.query("SELECT k, v FROM kv", dicts=True)
        db.insert_many("kv", ((f"k{i}", i) for i in range(100_000)))

A drop-in for the standard library's ``sqlite3``: ``import litelane.dbapi as
sqlite3``. See docs/python.md.
"""

from __future__ import annotations

import atexit
import functools
import os
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    TypeVar,
)

if TYPE_CHECKING:
    import asyncio

# asyncio (about 40 ms) and json are imported where they are used: a program
# that never awaits litelane does not pay for them at start-up. The async
# methods run inside an event loop, so asyncio is loaded by then.

from . import _litelane
from ._errors import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    OutcomeUnknown,
    ProgrammingError,
    Warning,
    WritesStopped,
)

if hasattr(os, "register_at_fork"):
    # A forked child gets engines of its own; handles from the parent refuse
    # to run there (they say to reconnect) instead of using the parent's.
    os.register_at_fork(after_in_child=_litelane.after_fork_in_child)

# A shared in-memory database (``file:x?mode=memory&cache=shared``) lives in
# a file in /dev/shm while open; at exit, the files of those still open go
# (an engine Python never collected would leave them there).
atexit.register(_litelane.remove_shared_memory_files)

__all__ = [
    "open",
    "Database",
    "Transaction",
    "AsyncTransaction",
    "Executed",
    "sqlite_version",
    "Warning",
    "Error",
    "InterfaceError",
    "DatabaseError",
    "DataError",
    "OperationalError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
    "OutcomeUnknown",
    "WritesStopped",
]

__version__: str = _litelane.__version__
T = TypeVar("T")


def sqlite_version() -> str:
    """The version of the SQLite library litelane runs on."""
    return _litelane.sqlite_version()


class Executed(NamedTuple):
    """What ``execute`` did."""

    #: Rows changed by an INSERT/UPDATE/DELETE/REPLACE; -1 for other statements.
    rowcount: int
    #: The rowid of the last row inserted by the writer (0 if none yet).
    lastrowid: int


def _executed(result: Any) -> Executed:
    lastrowid = result.lastrowid
    return Executed(result.rowcount, lastrowid if lastrowid is not None else 0)


class Transaction:
    """A write transaction: ``with db.transaction() as tx:`` commits when the
    block ends normally and rolls back on an exception. Statements run on the
    writer, so the transaction reads its own writes."""

    def __init__(self, txn: Any) -> None:
        self._txn = txn

    def execute(self, sql: str, params: Any = None) -> Executed:
        """Runs one statement in the transaction."""
        return _executed(self._txn.execute(sql, params))

    def query(self, sql: str, params: Any = None, *, dicts: bool = False) -> List[Any]:
        """Runs one statement in the transaction and returns its rows."""
        return self._txn.query(sql, params, dicts)

    def executemany(self, sql: str, seq_of_params: Iterable[Any]) -> Executed:
        """Runs one statement for every parameter set."""
        return _executed(self._txn.executemany(sql, seq_of_params))

    def executescript(self, script: str) -> None:
        """Runs several statements (a failing script undoes only its own)."""
        self._txn.executescript(script)

    def commit(self) -> None:
        """Commits now (the ``with`` block then has nothing left to do)."""
        self._txn.commit()

    def rollback(self) -> None:
        """Rolls back now."""
        self._txn.rollback()

    @property
    def active(self) -> bool:
        """True until commit or rollback."""
        return bool(self._txn.active)

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self._txn.commit()
        else:
            self._txn.rollback()


def _resolve(fut: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
    if fut.cancelled():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class AsyncTransaction:
    """``async with db.atransaction() as tx:``: each ``await tx.execute(...)``
    is one hop: the statement goes to the transaction's own thread, which
    schedules the result on the event loop when it is done."""

    def __init__(self, db: "Database", timeout: Optional[float]) -> None:
        self._db = db
        self._txn: Any = None

    def _submit(self, send: Callable[..., None], *args: Any) -> "asyncio.Future[Any]":
        import asyncio

        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        send(*args, functools.partial(loop.call_soon_threadsafe, _resolve, fut))
        return fut

    async def __aenter__(self) -> "AsyncTransaction":
        # begin() does not block: the transaction queues for the writer on
        # its own thread, and the first statement waits for its turn.
        self._txn = self._db._engine.begin(3600.0, False)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self._submit(self._txn.submit_end, exc_type is None)

    async def execute(self, sql: str, params: Any = None) -> Executed:
        return _executed(await self._submit(self._txn.submit, sql, params, "outcome"))

    async def query(self, sql: str, params: Any = None, *, dicts: bool = False) -> List[Any]:
        return await self._submit(self._txn.submit, sql, params, "dicts" if dicts else "rows")

    async def executemany(self, sql: str, seq_of_params: Iterable[Any]) -> Executed:
        return _executed(await self._submit(self._txn.submit_many, sql, list(seq_of_params)))

    async def commit(self) -> None:
        """Commits now (the ``async with`` block then has nothing left to do)."""
        await self._submit(self._txn.submit_end, True)

    async def rollback(self) -> None:
        """Rolls back now."""
        await self._submit(self._txn.submit_end, False)


class Database:
    """An open database. Every ``open`` of the same file in the process shares
    one engine (one writer, one pool of readers). Thread-safe: share it
    between threads freely."""

    def __init__(self, engine: Any, default_timeout: float = 30.0) -> None:
        self._engine = engine
        self._default_timeout = default_timeout

    def _timeout(self, timeout: Optional[float]) -> float:
        return self._default_timeout if timeout is None else float(timeout)

    # -- info ------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The path the database was opened with."""
        return self._engine.path

    @property
    def profile(self) -> str:
        """The durability profile: ``"safe"``, ``"balanced"`` or ``"fast"``."""
        return self._engine.profile

    @property
    def closed(self) -> bool:
        return bool(self._engine.closed)

    # -- statements ------------------------------------------------------------

    def execute(self, sql: str, params: Any = None) -> Executed:
        """Runs one statement: a read-only one on a reader, any other as one
        write transaction of its own (sharing a commit with concurrent
        writers through group commit)."""
        return _executed(self._engine.execute(sql, params, True))

    def executemany(self, sql: str, seq_of_params: Iterable[Any]) -> Executed:
        """Runs one statement for every parameter set, in one transaction."""
        return _executed(self._engine.executemany(sql, seq_of_params))

    def executescript(self, script: str) -> None:
        """Runs a script of statements as one write transaction."""
        self._engine.executescript(script)

    def query(self, sql: str, params: Any = None, *, dicts: bool = False) -> List[Any]:
        """Runs a statement and returns all its rows, as tuples or (with
        ``dicts=True``) dicts keyed by column name. Read-only statements run
        on a reader, on one snapshot."""
        return self._engine.query(sql, params, dicts)

    def query_one(self, sql: str, params: Any = None, *, dicts: bool = False) -> Any:
        """The first row of ``query``, or None."""
        rows = self._engine.query(sql, params, dicts)
        return rows[0] if rows else None

    def iterate(self, sql: str, params: Any = None, *, dicts: bool = False, batch: int = 512) -> Iterator[Any]:
        """Streams the rows of a read-only statement, ``batch`` rows at a time
        from a reader (leased until the iterator is exhausted or closed)."""
        return self._engine.iterate(sql, params, dicts, batch)

    # -- transactions ----------------------------------------------------------

    def transaction(self, timeout: Optional[float] = None) -> Transaction:
        """A write transaction held across calls (see ``Transaction``).
        ``timeout`` (seconds, default 30) bounds the wait for the writer."""
        return Transaction(self._engine.begin(self._timeout(timeout)))

    def write(self, fn: Callable[[Transaction], T], timeout: Optional[float] = None) -> T:
        """Runs ``fn(tx)`` in one write transaction: commits if it returns,
        rolls back if it raises. Returns what ``fn`` returned."""
        with self.transaction(timeout) as tx:
            return fn(tx)

    # -- bulk ------------------------------------------------------------------

    def insert_many(
        self,
        table: str,
        rows: Iterable[Any],
        columns: Optional[List[str]] = None,
        *,
        batch: int = 2048,
        commit_every: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Inserts rows (tuples, lists or dicts) into ``table`` through one
        cached multi-row INSERT, in one transaction (or one per
        ``commit_every`` rows). Without ``columns``: dict rows use the first
        row's keys, tuple rows the table's columns in order. A dict missing a
        column inserts NULL there. Returns ``{"rows", "statements",
        "commits", "rows_per_statement", "elapsed"}``."""
        return self._engine.insert_many(table, rows, columns, batch, commit_every)

    def import_file(
        self,
        path: str,
        table: str,
        *,
        progress: Optional[Callable[[int, int, Optional[int]], Any]] = None,
        on_reject: Optional[Callable[[int, int, str, bytes], Any]] = None,
        **options: Any,
    ) -> Dict[str, Any]:
        """Imports a CSV/TSV/NDJSON file into ``table`` with the import
        library behind ``litelane import``, in this process (no subprocess),
        through this database's engine, the GIL released while it runs.
        ``options`` are the command's options by name (``delimiter=";"``,
        ``mode="append"``, ``strict=True``, ``null="NA"`` or a list,
        ``type="col=REAL"`` or a list; ``False``/``None`` leave one unset).
        ``progress(rows, bytes_read, total_bytes)`` is called at most every
        0.1 s and at the end of each file (``total_bytes`` None when
        unknown); ``on_reject(line, record, reason, raw)`` for each rejected
        record; an exception either raises stops the import and is raised.
        Returns the summary ``litelane import --json`` prints, as a dict. A
        failure raises ``OperationalError`` (an SQLite one its own class,
        with ``sqlite_errorcode``/``sqlite_errorname``); a bad option is a
        ``ProgrammingError``."""
        return self._engine.import_file(os.fspath(path), table, options, progress, on_reject)

    # -- engine ----------------------------------------------------------------

    def metrics(self) -> Dict[str, Any]:
        """The engine's metrics; durations in seconds."""
        return self._engine.metrics()

    def checkpoint(self, mode: str = "passive") -> Dict[str, Any]:
        """Runs one checkpoint: ``passive``, ``full``, ``restart`` or ``truncate``."""
        return self._engine.checkpoint(mode)

    def close(self) -> None:
        """Lets go of the engine (it closes when no handle or connection to
        the file is left)."""
        self._engine.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close()

    # -- asyncio: one hop per call or transaction ------------------------------

    async def _hop(self, fn: Callable[..., T], *args: Any) -> T:
        import asyncio

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args))

    async def aexecute(self, sql: str, params: Any = None) -> Executed:
        """``execute`` in one hop to a worker thread."""
        return await self._hop(self.execute, sql, params)

    async def aquery(self, sql: str, params: Any = None, *, dicts: bool = False) -> List[Any]:
        """``query`` in one hop."""
        return await self._hop(self._engine.query, sql, params, dicts)

    async def aexecutemany(self, sql: str, seq_of_params: Iterable[Any]) -> Executed:
        """``executemany`` in one hop (the parameters are read first)."""
        return await self._hop(self.executemany, sql, list(seq_of_params))

    async def ainsert_many(
        self, table: str, rows: Iterable[Any], columns: Optional[List[str]] = None, **kw: Any
    ) -> Dict[str, Any]:
        """``insert_many`` in one hop (rows are read on the worker thread)."""
        return await self._hop(functools.partial(self.insert_many, **kw), table, rows, columns)

    async def awrite(self, fn: Callable[[Transaction], T], timeout: Optional[float] = None) -> T:
        """``write(fn)`` in one hop: the whole transaction runs on a worker thread."""
        return await self._hop(self.write, fn, timeout)

    def atransaction(self, timeout: Optional[float] = None) -> AsyncTransaction:
        """``async with db.atransaction() as tx:``, commit on success. (The
        wait for the writer is not bounded here: use ``asyncio.wait_for``.)"""
        return AsyncTransaction(self, timeout)


def open(  # noqa: A001
    path: Any, profile: Optional[str] = None, readers: Optional[int] = None, **options: Any
) -> Database:
    """Opens (creating if needed) the database file at ``path``
    (``":memory:"``: a private in-memory database).

    ``profile``: ``"safe"`` (every acknowledged commit survives power loss),
    ``"balanced"`` (survives a process crash; the default) or ``"fast"``.
    The default is ``balanced`` as everywhere in litelane except the
    ``sqlite3`` drop-in ``litelane.dbapi.connect``, which defaults to
    ``safe`` to keep ``sqlite3``'s power-cut durability (docs/python.md).
    ``readers``: reader connections (default: cores, at least 2). Other
    ``options``: see docs/python.md (``busy_timeout``, ``group_commit``...).
    Every handle to one file in a process shares one engine: given no
    profile and no options, ``open`` joins the engine already open (from
    ``litelane.dbapi`` too) as it is.
    """
    timeout = float(options.pop("timeout", 30.0))
    engine = _litelane.open(os.fspath(path), profile, readers, options or None)
    return Database(engine, timeout)
