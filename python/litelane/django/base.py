"""``litelane.django``'s ``DatabaseWrapper``: Django's SQLite backend on
``litelane.dbapi``.

What differs from ``django.db.backends.sqlite3`` (see docs/django.md):

- connections come from ``litelane.dbapi``; every connection of the process
  to one database shares one litelane engine (one writer behind a FIFO queue
  shared with the other processes, a pool of readers);
- the engine outlives Django's connections: it is kept open for the process
  (``CONN_MAX_AGE=0`` opens and closes a connection per request; that costs
  a registry lookup, not an engine), and what Django sets up on each new
  SQLite connection (its SQL functions and aggregates, ``legacy_alter_table``
  off, ``init_command``) is set up once per engine;
- ``PRAGMA foreign_keys`` (switched off around schema changes) is applied to
  the engine's writer outside any transaction;
- a connection inherited through ``fork()`` is dropped in the child and a new
  one opened on the child's own engine.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from itertools import tee
from typing import Any, Dict, List, Optional

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.sqlite3 import base as _stock
from django.db.backends.sqlite3._functions import register as _register_functions

import litelane.dbapi as Database

from .. import _litelane
from . import _engines as _held
from ._engines import _Engine, _engines

# Where programs (and docs/django.md) find them.
from ._engines import release_all_engines as release_all_engines
from ._engines import release_engine as release_engine
from .creation import DatabaseCreation


def _register_types() -> None:
    """Django registers its converters ("bool", "date", "time", "datetime",
    "timestamp") and adapters (Decimal, date, datetime) on the standard
    library's module when its SQLite backend is imported; litelane.dbapi keeps
    registries of its own, so the same callables go there too (process-wide,
    as Django's are; done at each new connection, a few dict stores)."""
    for name in ("BOOL", "DATE", "TIME", "DATETIME", "TIMESTAMP"):
        if name in sqlite3.converters:
            Database.register_converter(name, sqlite3.converters[name])
    for (type_, proto), adapter in list(sqlite3.adapters.items()):
        if proto is sqlite3.PrepareProtocol and type_.__module__ in ("decimal", "datetime"):
            Database.register_adapter(type_, adapter)


#: Statements of ``init_command`` that litelane does not run: the journal
#: mode and ``synchronous`` come from the profile, the wait for other
#: processes from the ``busy_timeout`` option, ``foreign_keys`` is Django's
#: own business (see docs/django.md).
_IGNORED_PRAGMAS = ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")


def _is_private_memory(name: str) -> bool:
    """A database no other connection can share (":memory:", "", or a
    ``file:`` URI of a memory database without ``cache=shared``)."""
    if name in ("", ":memory:"):
        return True
    if name.startswith("file:"):
        query = name.partition("?")[2].split("&")
        memory = "mode=memory" in query or name.startswith("file::memory:")
        return memory and "cache=shared" not in query
    return False


class DatabaseWrapper(_stock.DatabaseWrapper):
    """Django's SQLite ``DatabaseWrapper`` with ``litelane.dbapi`` as its
    driver."""

    vendor = "sqlite"
    display_name = "SQLite"
    Database = Database
    creation_class = DatabaseCreation

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._litelane_pid = os.getpid()
        self._litelane_fk_off = False

    # -- connecting -----------------------------------------------------------

    def get_connection_params(self) -> Dict[str, Any]:
        kwargs = super().get_connection_params()
        kwargs["detect_types"] = Database.PARSE_DECLTYPES | Database.PARSE_COLNAMES
        name = kwargs["database"]
        if not isinstance(name, (str, bytes, os.PathLike)):
            raise ImproperlyConfigured(
                f"settings.DATABASES[{self.alias!r}]['NAME'] must be a path or a file: URI, not {type(name).__name__}"
            )
        kwargs["database"] = os.fsdecode(os.fspath(name))
        # litelane's connection settings (foreign keys on, as Django turns
        # them on itself; "x" always an identifier), as before the drop-in
        # took SQLite's stock ones: Django needs none of the stock ones, and
        # with them its writes combine across processes (docs/django.md).
        kwargs.setdefault("strict", True)
        return kwargs

    def get_new_connection(self, conn_params: Dict[str, Any]) -> Any:
        _register_types()
        conn = Database.connect(**conn_params)
        try:
            self._litelane_pid = os.getpid()
            name = conn_params["database"]
            if _is_private_memory(name):
                self._set_up_engine(conn)
                return conn
            key = (os.getpid(), name)
            with _held._engines_lock:
                held = _engines.get(key)
                if held is None or held.handle.closed:
                    # A second handle on the engine conn just opened or
                    # joined, whatever its options: it keeps the engine open
                    # when Django closes its connections.
                    held = _Engine(_litelane.open(name, None, None, None, default_profile="safe"))
                    _engines[key] = held
            with held.lock:
                if not held.ready:
                    self._set_up_engine(conn)
                    held.ready = True
        except BaseException:
            conn.close()
            raise
        return conn

    def _set_up_engine(self, conn: Any) -> None:
        """What Django's SQLite backend does on each new connection, done once
        per engine: its SQL functions and aggregates (installed on the writer
        and every reader), ``legacy_alter_table`` off, ``init_command``."""
        _register_functions(conn)
        engine = conn.engine
        engine.execute_outside_transaction("PRAGMA foreign_keys = ON")
        engine.execute_outside_transaction("PRAGMA legacy_alter_table = OFF")
        for command in self.init_commands:
            command = command.strip()
            if not command:
                continue
            words = command.lower().replace("=", " ").split()
            if words[0] != "pragma":
                engine.execute_write(command)
                continue
            if len(words) >= 2 and words[1].split(".")[-1] in _IGNORED_PRAGMAS:
                continue
            try:
                # A setting of the writer's connection (cache_size...).
                engine.execute_outside_transaction(command)
            except Database.IntegrityError as e:
                if getattr(e, "sqlite_errorname", "") != "SQLITE_CONSTRAINT_COMMITHOOK":
                    raise
                # A pragma that writes the file (user_version...): the engine
                # commits writes only in its own transactions.
                engine.execute_write(command)

    def create_cursor(self, name: Optional[str] = None) -> Any:
        return self.connection.cursor(factory=SQLiteCursorWrapper)

    # -- fork -------------------------------------------------------------------

    def _drop_inherited_connection(self) -> None:
        """In a forked child: the parent's connection cannot run here (its
        engine is the parent's); drop it and the state of its transaction,
        so the next use opens a connection on the child's own engine."""
        conn, self.connection = self.connection, None
        self._litelane_pid = os.getpid()
        if conn is not None:
            try:
                conn.close()
            except Database.Error:
                pass
        self.in_atomic_block = False
        self.savepoint_ids = []
        self.atomic_blocks = []
        self.needs_rollback = False
        self.closed_in_transaction = False
        self._litelane_fk_off = False

    def ensure_connection(self) -> None:
        if self.connection is not None and self._litelane_pid != os.getpid():
            self._drop_inherited_connection()
        super().ensure_connection()

    def is_usable(self) -> bool:
        return self.connection is not None and self._litelane_pid == os.getpid()

    def _close(self) -> None:
        if self.connection is not None and self._litelane_pid != os.getpid():
            self._drop_inherited_connection()
            return
        if self._litelane_fk_off and self.connection is not None:
            # The writer is shared: switch foreign keys back on for the
            # other connections before this one goes.
            self._litelane_fk_off = False
            with self.wrap_database_errors:
                self.connection.rollback()
                self.connection.engine.execute_outside_transaction("PRAGMA foreign_keys = ON")
        super()._close()

    # -- foreign keys ----------------------------------------------------------

    def _foreign_keys_on(self, cursor: Any) -> bool:
        if self.connection.in_transaction:
            return bool(cursor.execute("PRAGMA foreign_keys").fetchone()[0])
        rows = self.connection.engine.execute_outside_transaction("PRAGMA foreign_keys").rows
        return bool(rows[0][0])

    def disable_constraint_checking(self) -> bool:
        """``PRAGMA foreign_keys = OFF`` on the engine's writer (outside a
        transaction; inside one it does nothing, as in SQLite). The writer is
        shared by every connection of the process to this database, so until
        ``enable_constraint_checking`` they all write without foreign key
        checks (Django does this only around schema changes)."""
        with self.cursor() as cursor:
            if not self.connection.in_transaction:
                with self.wrap_database_errors:
                    self.connection.engine.execute_outside_transaction("PRAGMA foreign_keys = OFF")
                self._litelane_fk_off = True
            with self.wrap_database_errors:
                return not self._foreign_keys_on(cursor)

    def enable_constraint_checking(self) -> None:
        with self.cursor():
            if not self.connection.in_transaction:
                with self.wrap_database_errors:
                    self.connection.engine.execute_outside_transaction("PRAGMA foreign_keys = ON")
                self._litelane_fk_off = False


class SQLiteCursorWrapper(Database.Cursor):
    """A ``litelane.dbapi`` cursor taking Django's "format" (``%s``) and
    "pyformat" (``%(name)s``) parameters, converted the way Django's SQLite
    backend converts them (its ``convert_query``)."""

    _convert_query = staticmethod(_stock.SQLiteCursorWrapper.convert_query)

    def execute(self, query: str, params: Any = None) -> Any:
        if params is None:
            return super().execute(query)
        names = list(params) if isinstance(params, Mapping) else None
        return super().execute(self._convert_query(self, query, param_names=names), params)

    def executemany(self, query: str, param_list: Any) -> Any:
        peek, param_list = tee(iter(param_list))
        first = next(peek, None)
        names: Optional[List[str]] = list(first) if first and isinstance(first, Mapping) else None
        return super().executemany(self._convert_query(self, query, param_names=names), param_list)
