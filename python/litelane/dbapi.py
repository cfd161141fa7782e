"""A DB-API 2.0 (PEP 249) module that stands in for the standard library's
``sqlite3``: ``import litelane.dbapi as sqlite3``.

Every connection to the same file in the process shares one litelane engine:
reads outside a transaction run on its pool of readers, writes and
transactions go to its one writer through a FIFO queue (autocommit
statements share commits with group commit), so threads never get
"database is locked" from each other. Transactions follow ``sqlite3``'s
rules: in the default (legacy) mode an implicit ``BEGIN`` comes before
INSERT/UPDATE/DELETE/REPLACE and lasts until ``commit()``/``rollback()``;
``autocommit=True`` and ``autocommit=False`` behave as in Python 3.12.
Differences from ``sqlite3`` are listed in docs/python.md.
"""

from __future__ import annotations

import collections.abc
import contextlib
import datetime
import os
import re
import sys
import threading
import time
import warnings
import weakref
from threading import get_ident as _get_ident
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from . import _blob, _dump, _litelane
from ._adapt import PrepareProtocol, adapters, register_adapter
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
    _std,
)

__all__ = [
    "connect",
    "Connection",
    "Cursor",
    "Row",
    "Blob",
    "PrepareProtocol",
    "apilevel",
    "threadsafety",
    "paramstyle",
    "sqlite_version",
    "sqlite_version_info",
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
    "Date",
    "Time",
    "Timestamp",
    "DateFromTicks",
    "TimeFromTicks",
    "TimestampFromTicks",
    "Binary",
    "STRING",
    "BINARY",
    "NUMBER",
    "DATETIME",
    "ROWID",
    "register_adapter",
    "register_converter",
    "adapters",
    "converters",
    "complete_statement",
    "enable_callback_tracebacks",
    "adapt",
    "PARSE_DECLTYPES",
    "PARSE_COLNAMES",
    "LEGACY_TRANSACTION_CONTROL",
]

apilevel = "2.0"
#: Threads may share the module, and connections if ``check_same_thread=False``
#: is given (calls on one connection are then serialized); by default a
#: connection refuses use from another thread, as ``sqlite3`` does.
threadsafety = 1
paramstyle = "qmark"  # named (:name, @name, $name) works too

sqlite_version: str = _litelane.sqlite_version()
sqlite_version_info: Tuple[int, ...] = tuple(int(x) for x in sqlite_version.split("."))
#: The version of this module's interface (the number ``sqlite3`` reports;
#: from Python 3.12 on, reading it warns, as there).
_VERSIONS = {"version": "2.6.0", "version_info": (2, 6, 0)}
if sys.version_info < (3, 12):
    globals().update(_VERSIONS)
    __all__ += list(_VERSIONS)

#: Where this package lives: warnings about what a caller did name the
#: caller's line, not one in here.
_HERE = (os.path.dirname(os.path.abspath(__file__)),)


def _deprecated(what: str) -> None:
    """The DeprecationWarning ``sqlite3`` gives from Python 3.12 on."""
    if sys.version_info >= (3, 12):
        warnings.warn(what, DeprecationWarning, skip_file_prefixes=_HERE)


PARSE_DECLTYPES = 1
PARSE_COLNAMES = 2
LEGACY_TRANSACTION_CONTROL = -1

# Every SQLITE_* constant the standard library exports (result codes,
# authorizer actions, limits, db_config verbs), with the bundled SQLite's values.
_SQLITE_CONSTANTS: Dict[str, int] = dict(_litelane.constants())
globals().update(_SQLITE_CONSTANTS)
__all__ += sorted(_SQLITE_CONSTANTS)


def _date_of(value: bytes) -> datetime.date:
    year, month, day = value.split(b"-")
    return datetime.date(int(year), int(month), int(day))


def _convert_date(value: bytes) -> datetime.date:
    """``date`` columns under ``PARSE_DECLTYPES`` (as ``sqlite3``'s default): ``b"2024-01-05"``."""
    _deprecated("the default date converter is deprecated as of Python 3.12")
    return _date_of(value)


def _convert_timestamp(value: bytes) -> datetime.datetime:
    """``timestamp`` columns under ``PARSE_DECLTYPES`` (as ``sqlite3``'s
    default): ``b"2024-01-05 10:20:30[.fraction]"``, the fraction padded or
    cut to microseconds."""
    _deprecated("the default timestamp converter is deprecated as of Python 3.12")
    day, _, clock = value.partition(b" ")
    hms, _, fraction = clock.partition(b".")
    hour, minute, second = (int(x) for x in hms.split(b":"))
    micro = int(fraction.decode()[:6].ljust(6, "0")) if fraction else 0
    return datetime.datetime.combine(_date_of(day), datetime.time(hour, minute, second, micro))


#: Converters by upper-case type name (``register_converter``); ``DATE`` and
#: ``TIMESTAMP`` are there by default, as in ``sqlite3``.
_MISSING = object()

Blob = _blob.Blob

#: The standard library's connection class (a ``backup`` target may be one).
_StdConnection: Any = getattr(_std, "Connection", ())

converters: Dict[str, Callable[[bytes], Any]] = {
    "DATE": _convert_date,
    "TIMESTAMP": _convert_timestamp,
}


def register_converter(typename: str, converter: Callable[[bytes], Any], /) -> None:
    """Registers ``converter`` for columns of type ``typename`` (matched
    case-insensitively): with ``detect_types``, a value of such a column is
    passed to it as ``bytes`` (a number as SQLite writes it as text) and the
    result is returned instead; NULL stays ``None``."""
    converters[typename.upper()] = converter


def _as_bytes(value: Any) -> bytes:
    """A value as ``sqlite3_column_blob`` gives it to a converter."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return repr(value).encode()  # int, or float (the shortest exact text)


def _converter_for(name: str, decltype: Optional[str], detect: int) -> Optional[Callable[[bytes], Any]]:
    """The converter a column gets under ``detect_types``, found as
    ``sqlite3`` finds it: ``[type]`` in the column name first
    (``PARSE_COLNAMES``), then the declared type's first word (``PARSE_DECLTYPES``)."""
    if detect & PARSE_COLNAMES:
        end = name.find("]")
        start = name.rfind("[", 0, end) if end >= 0 else -1
        if start >= 0:
            conv = converters.get(name[start + 1 : end].upper())
            if conv is not None:
                return conv
    if detect & PARSE_DECLTYPES and decltype:
        return converters.get(re.split(r"[ (]", decltype, maxsplit=1)[0].upper())
    return None


def _column_name(name: str, detect: int) -> str:
    """A column's name in ``cursor.description``: under ``PARSE_COLNAMES``,
    cut before ``[`` (and the one space before it), as ``sqlite3`` does."""
    if detect & PARSE_COLNAMES:
        i = name.find("[")
        if i >= 0:
            return name[: i - 1] if i > 0 and name[i - 1] == " " else name[:i]
    return name


def adapt(obj: Any, proto: Any = PrepareProtocol, alt: Any = _MISSING, /) -> Any:
    """Adapts ``obj`` with the adapter registered for its type and ``proto``
    (then ``obj.__conform__(proto)``, then ``proto.__adapt__(obj)``), as
    ``sqlite3.adapt`` does; without one, returns ``alt`` if given, else raises
    ``ProgrammingError``."""
    fn = adapters.get((type(obj), proto))
    if fn is not None:
        return fn(obj)
    conform = getattr(obj, "__conform__", None)
    value = conform(proto) if conform is not None else None
    if value is None and hasattr(proto, "__adapt__"):
        value = proto.__adapt__(obj)
    if value is not None:
        return value
    if alt is not _MISSING:
        return alt
    raise ProgrammingError("can't adapt")


def enable_callback_tracebacks(flag: bool, /) -> None:
    """Whether an exception raised in a user-defined function, aggregate,
    collation, authorizer, progress handler or trace callback is shown
    (through ``sys.unraisablehook``, as ``sqlite3`` does); off by default."""
    _litelane.enable_callback_tracebacks(bool(flag))


def enable_shared_cache(enable: int, /) -> None:
    """Deprecated in ``sqlite3`` (and a no-op here: every connection of the
    process to one file already shares one engine)."""
    warnings.warn(
        "enable_shared_cache() is deprecated and does nothing in litelane.dbapi; "
        "SQLite discourages shared cache (for a shared in-memory database, "
        "open a file: URI with cache=shared)",
        DeprecationWarning,
        stacklevel=2,
    )


def __getattr__(name: str) -> Any:
    if name in _VERSIONS:
        _deprecated(f"{name} is deprecated and will be removed in Python 3.14")
        return _VERSIONS[name]
    if name == "OptimizedUnicode":
        warnings.warn("OptimizedUnicode is deprecated; use str instead.", DeprecationWarning, stacklevel=2)
        return str
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def complete_statement(statement: str, /) -> bool:
    """True if ``statement`` ends with a complete SQL statement: a semicolon
    outside quotes, comments and trigger bodies (SQLite's ``sqlite3_complete``)."""
    if not isinstance(statement, str):
        raise TypeError(f"complete_statement() argument must be str, not {type(statement).__name__}")
    return _litelane.complete_statement(statement)


# --- PEP 249 type objects and constructors -------------------------------

Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime


def DateFromTicks(ticks: float) -> datetime.date:
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:
    return Timestamp(*time.localtime(ticks)[:6])


Binary = memoryview


def _affinity(decltype: str) -> str:
    """SQLite's column affinity for a declared type
    (https://sqlite.org/datatype3.html, section 3.1)."""
    t = decltype.upper()
    if "INT" in t:
        return "INTEGER"
    if "CHAR" in t or "CLOB" in t or "TEXT" in t:
        return "TEXT"
    if "BLOB" in t or not t.strip():
        return "BLOB"
    if "REAL" in t or "FLOA" in t or "DOUB" in t:
        return "REAL"
    return "NUMERIC"


class _DBAPITypeObject:
    """A PEP 249 type object: equal to the ``type_code`` (the declared type,
    ``cursor.description[i][1]``) of the columns it describes."""

    def __init__(self, name: str, test: Callable[[str], bool]) -> None:
        self.name = name
        self._test = test

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self._test(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"<litelane.dbapi.{self.name}>"


STRING = _DBAPITypeObject("STRING", lambda t: _affinity(t) == "TEXT")
BINARY = _DBAPITypeObject("BINARY", lambda t: _affinity(t) == "BLOB")
NUMBER = _DBAPITypeObject("NUMBER", lambda t: _affinity(t) in ("INTEGER", "REAL", "NUMERIC"))
DATETIME = _DBAPITypeObject("DATETIME", lambda t: "DATE" in t.upper() or "TIME" in t.upper())
ROWID = _DBAPITypeObject("ROWID", lambda t: t.upper() in ("ROWID", "INTEGER PRIMARY KEY"))


# --- statement classification ---------------------------------------------

# The first keyword after what ``sqlite3`` skips to decide whether a
# statement is DML (and needs the implicit BEGIN): whitespace and comments.
_KEYWORD = re.compile(r"(?:[ \t\n\f\r]+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*([A-Za-z]*)", re.S)
# The first keyword after what SQLite itself skips before a statement:
# also empty statements (";") and a byte-order mark. Transaction control
# (BEGIN, COMMIT, SAVEPOINT...) is what SQLite runs, so it is found this way.
_SQLITE_KEYWORD = re.compile(r"(?:[ \t\n\f\r;\ufeff]+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*([A-Za-z]*)", re.S)
_kinds: Dict[str, Tuple[str, str]] = {}


def _classify(sql: str) -> Tuple[str, str]:
    """(kind, savepoint name) of a statement: 'dml', 'begin', 'commit',
    'rollback', 'savepoint', 'release', 'rollback_to', 'empty', 'outside'
    (VACUUM: runs only outside a transaction) or 'other'."""
    hit = _kinds.get(sql)
    if hit is not None:
        return hit
    m = _KEYWORD.match(sql)
    dml = m.group(1).upper() in ("INSERT", "UPDATE", "DELETE", "REPLACE")
    if not dml:
        m = _SQLITE_KEYWORD.match(sql)
    kw = m.group(1).upper()
    rest = sql[m.end() :].split()
    words = [w.upper().rstrip(";") for w in rest]
    name = ""
    if not kw and not sql[m.end() :].strip():
        kind = "empty"  # only whitespace and comments: runs nothing, as in sqlite3
    elif dml:
        kind = "dml"
    elif kw == "BEGIN":
        kind = "begin"
    elif kw in ("COMMIT", "END"):
        kind = "commit"
    elif kw == "ROLLBACK":
        kind = "rollback_to" if "TO" in words else "rollback"
    elif kw == "VACUUM":
        kind = "outside"  # SQLite runs it only outside a transaction
    elif kw in ("ATTACH", "DETACH") or (kw == "CREATE" and words[:1] in (["TEMP"], ["TEMPORARY"])):
        kind = "local"
    elif kw == "PRAGMA" and _BUSY_TIMEOUT.match(sql, m.end()):
        kind = "busy_timeout"
        bt = _BUSY_TIMEOUT.match(sql, m.end())
        name = bt.group(1) or bt.group(2) or ""
    elif kw == "PRAGMA" and _JOURNAL_MODE_SET.match(sql, m.end()):
        kind = "journal_mode"
        jm = _JOURNAL_MODE_SET.match(sql, m.end())
        name = _unquote(jm.group(1) or jm.group(2))
    elif kw == "PRAGMA" and _sets_connection_state(sql[m.end() :]):
        kind = "local"
    elif kw == "SAVEPOINT":
        kind = "savepoint"
        name = rest[0].rstrip(";") if rest else ""
    elif kw == "RELEASE":
        kind = "release"
        names = [w for w, u in zip(rest, words, strict=False) if u != "SAVEPOINT"]
        name = names[0].rstrip(";") if names else ""
    else:
        kind = "other"
    if len(_kinds) > 2048:
        _kinds.clear()
    _kinds[sql] = (kind, name)
    return kind, name


# The pragmas whose value belongs to one SQLite connection (not to the file):
# setting one of them is connection-local state (SQLite's pragma.html).
_CONNECTION_PRAGMAS = frozenset(
    """analysis_limit automatic_index cache_size cache_spill case_sensitive_like
    cell_size_check checkpoint_fullfsync count_changes defer_foreign_keys empty_result_callbacks
    foreign_keys full_column_names fullfsync ignore_check_constraints journal_size_limit
    legacy_alter_table locking_mode max_page_count mmap_size query_only read_uncommitted
    recursive_triggers reverse_unordered_selects secure_delete short_column_names
    soft_heap_limit synchronous temp_store threads trusted_schema wal_autocheckpoint
    writable_schema""".split()
)
_PRAGMA_SET = re.compile(r"\s*(?:[\w\"`\[\]]+\s*\.\s*)?[\"`\[]?(\w+)[\"`\]]?\s*(=|\()", re.S)
# ``PRAGMA busy_timeout``, read or set (the value in group 1 or 2): the
# connection's ``timeout`` (see ``Connection._busy_timeout``).
_BUSY_TIMEOUT = re.compile(
    r"\s*(?:[\w\"`\[\]]+\s*\.\s*)?[\"`\[]?busy_timeout[\"`\]]?\s*"
    r"(?:=\s*([^;\s()]+)|\(\s*([^;\s()]+)\s*\))?\s*;?\s*\Z",
    re.S | re.I,
)
_BUSY_TIMEOUT_DESCRIPTION = (("timeout", None, None, None, None, None, None),)
# ``PRAGMA [main.]journal_mode = mode`` (the mode in group 1 or 2).
_JOURNAL_MODE_SET = re.compile(
    r"\s*(?:[\"`\[]?main[\"`\]]?\s*\.\s*)?[\"`\[]?journal_mode[\"`\]]?\s*"
    r"(?:=\s*([^;\s()]+)|\(\s*([^;\s()]+)\s*\))\s*;?\s*\Z",
    re.S | re.I,
)


def _sets_connection_state(rest: str) -> bool:
    """True for the text after ``PRAGMA`` that sets a connection's own pragma
    (``foreign_keys = OFF``, ``main.cache_size(100)``), not for one that
    reads it or acts on the file."""
    m = _PRAGMA_SET.match(rest)
    return m is not None and m.group(1).lower() in _CONNECTION_PRAGMAS


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] in "\"'`[":
        return name[1:-1]
    return name


# What the engine's calls return is an ``_litelane.Outcome`` (description,
# rows, rowcount, lastrowid, wrote), the description built and cached by the
# extension; this one stands for a statement that ran nothing.
_NO_RESULT = _litelane.Outcome(None, [], -1, None, False)

#: What ``Connection._serial`` gives a connection kept to its thread.
_UNSHARED = contextlib.nullcontext()


# --- Row --------------------------------------------------------------------


class Row:
    """A row that can be indexed by position or (case-insensitively) by
    column name, as ``sqlite3.Row``. Use ``conn.row_factory = Row``."""

    __slots__ = ("_values", "_names")

    def __init__(self, cursor: "Cursor", values: Tuple[Any, ...], /) -> None:
        if not issubclass(type(cursor), Cursor):
            raise TypeError(f"Row() argument 1 must be a Cursor, not {type(cursor).__name__}")
        if not isinstance(values, tuple):
            raise TypeError(f"Row() argument 2 must be tuple, not {type(values).__name__}")
        self._values = values
        desc = cursor.description or ()
        self._names = tuple(d[0] for d in desc)

    def keys(self) -> List[str]:
        return list(self._names)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            # Names match ignoring ASCII case only, as in sqlite3.
            low = key.encode("utf-8", "surrogatepass").lower()
            for i, n in enumerate(self._names):
                if n.encode("utf-8", "surrogatepass").lower() == low:
                    return self._values[i]
            raise IndexError("No item with that key")
        if isinstance(key, (int, slice)):
            return self._values[key]
        raise IndexError("Index must be int or string")

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        return self._names == other._names and self._values == other._values

    def __hash__(self) -> int:
        return hash((self._names, self._values))

    def __repr__(self) -> str:
        return f"<litelane.dbapi.Row {dict(zip(self._names, self._values, strict=False))!r}>"


collections.abc.Sequence.register(Row)


def _check_sql(sql: Any) -> None:
    """What ``sqlite3`` checks of a statement's text before compiling it (a
    lone surrogate fails with UnicodeEncodeError when the text reaches the
    extension)."""
    if not isinstance(sql, str):
        raise TypeError(f"argument 1 must be str, not {type(sql).__name__}")
    if "\0" in sql:
        raise ProgrammingError("the query contains a null character")


class Statement:
    """What calling a connection returns (``sqlite3``'s deprecated
    ``con(sql)``); not to be made directly."""

    __slots__ = ("sql",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"cannot create '{type(self).__module__}.{type(self).__qualname__}' instances")

    @classmethod
    def _make(cls, sql: str) -> "Statement":
        st = object.__new__(cls)
        st.sql = sql
        return st


# --- Connection ---------------------------------------------------------------

_ISOLATION_LEVELS = ("", "DEFERRED", "IMMEDIATE", "EXCLUSIVE")


def _check_isolation(level: Optional[str]) -> Optional[str]:
    """``level`` checked as ``sqlite3`` checks it (any case), upper-cased."""
    if level is None:
        return None
    if not isinstance(level, str):
        raise TypeError(f"isolation_level must be str or None, not {type(level).__name__}")
    if str.upper(level) not in _ISOLATION_LEVELS:
        raise ValueError("isolation_level string must be '', 'DEFERRED', 'IMMEDIATE', or 'EXCLUSIVE'")
    return str.upper(level)


def _check_autocommit(value: Any) -> Any:
    if value is True or value is False or value == LEGACY_TRANSACTION_CONTROL:
        return value
    raise ValueError("autocommit must be True, False, or sqlite3.LEGACY_TRANSACTION_CONTROL")


#: The open connections that share their file's engine, by file (see
#: ``Connection._setup``).
_sharing: Dict[str, "weakref.WeakSet[Connection]"] = {}


def _path_key(path: str) -> Optional[str]:
    """The key of a file's shared engine: its real path; None in memory."""
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return os.path.realpath(path)


def _open_after(error: "OperationalError", path: str, profile: Any, readers: Any, options: Any) -> Any:
    """What ``connect`` does when opening ``path`` failed with ``error``.

    A file this user may read but not write (a database owned by another
    user, whose ``-wal``/``-shm`` exist) is opened read-only, as SQLite
    opens it for ``sqlite3``: reads work, a write fails with "attempt to
    write a readonly database". A database the user may write in a
    directory it may not write fails as with ``sqlite3``, but the message
    names the file and the cause (SQLite must create ``-wal``/``-shm``
    beside it). Anything else is raised unchanged."""
    code = getattr(error, "sqlite_errorcode", None)
    plain = path not in ("", ":memory:") and not path.startswith("file:")
    if code is None or (code & 0xFF) != _SQLITE_CONSTANTS["SQLITE_READONLY"] or not plain or not os.path.exists(path):
        raise error
    if not os.access(path, os.W_OK):
        import urllib.parse  # here: its import (with ipaddress) costs every program about 5 ms

        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        return _litelane.open(uri, profile, readers, options or None, default_profile="safe", default_stock=True)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK):
        named = OperationalError(
            f"{error} (opening {path}: its directory {folder} is not writable, and SQLite must "
            f"create {os.path.basename(path)}-wal and -shm there; make the directory writable "
            "or open the file with a 'file:...?mode=ro' URI)"
        )
        named.sqlite_errorcode = code
        named.sqlite_errorname = getattr(error, "sqlite_errorname", None)
        raise named from error
    raise error


class Connection(_litelane.ConnectionBase):
    """A connection: a view on the process-wide engine of one file.

    The state statements read and change (``_engine``, ``_txn``,
    ``_autocommit``, ``_isolation_level``, ``_trace``, ``_timeout``,
    ``_detect_types``, ``_lastrowid``, ``_total_changes``,
    ``_savepoint_opened``, ``_check_same_thread``, ``_thread``,
    ``row_factory``, ``text_factory``) lives in the extension's
    ``ConnectionBase`` (``_engine`` None until opened), whose ``execute``
    and ``commit`` run the common cases in one call and fall back to
    ``Cursor._execute`` and ``_commit`` here."""

    _initialized = False  # until __init__ completes (sqlite3's "Base __init__ not called")

    Warning = Warning
    Error = Error
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(
        self,
        database: Any,
        timeout: float = 5.0,
        detect_types: int = 0,
        isolation_level: Optional[str] = "",
        check_same_thread: bool = True,
        factory: Any = None,
        cached_statements: int = 128,
        uri: bool = False,
        *,
        autocommit: Any = LEGACY_TRANSACTION_CONTROL,
        profile: Optional[str] = None,
        readers: Optional[int] = None,
        strict: Optional[bool] = None,
        **options: Any,
    ) -> None:
        self._initialized = False
        if strict is not None:
            # litelane's stricter connection settings instead of SQLite's
            # stock ones (foreign keys on, "x" always an identifier,
            # defensive mode, trusted_schema off): docs/python.md.
            options["stock_settings"] = not strict
        # Run again on a connection (sqlite3 closes it first): unusable
        # until the new open succeeds.
        self._engine = None
        if not isinstance(detect_types, int):
            raise TypeError(f"detect_types must be int, not {type(detect_types).__name__}")
        self._detect_types = detect_types
        if isinstance(database, bytes):
            database = os.fsdecode(database)
        path = os.fspath(database)
        if path.startswith("file:") and not uri:
            path = os.path.join(".", path)
        self._isolation_level = _check_isolation(isolation_level)
        self._autocommit = _check_autocommit(autocommit)
        self._timeout = float(timeout)
        self._check_same_thread = bool(check_same_thread)
        self._thread = threading.get_ident()
        try:
            self._engine: Optional[Any] = _litelane.open(
                path, profile, readers, options or None, default_profile="safe", default_stock=True
            )
        except OperationalError as e:
            self._engine = _open_after(e, path, profile, readers, options)
        # Bounds this connection's waits for another process's write turn
        # too (its transactions pass it to ``begin``).
        self._engine._set_timeout(self._timeout)
        # Functions, collations and hooks set on this connection:
        # key -> (callable, engine method, its arguments), see `_setup`.
        self._setups: Dict[Any, Tuple[Any, str, Tuple[Any, ...]]] = {}
        self._path_key = _path_key(path)
        if self._path_key is not None:
            _sharing.setdefault(self._path_key, weakref.WeakSet()).add(self)
        self._txn: Optional[Any] = None
        self._savepoint_opened: Optional[str] = None
        self._lastrowid = 0
        self._total_changes = 0
        self._lock = threading.RLock()
        self.row_factory = None
        self.text_factory: Any = str
        self._initialized = True

    # -- state ---------------------------------------------------------------

    def _check_init(self) -> None:
        if not self._initialized:
            raise ProgrammingError("Base Connection.__init__ not called.")

    def _check(self) -> Any:
        if not self._initialized:
            raise ProgrammingError("Base Connection.__init__ not called.")
        if self._check_same_thread and _get_ident() != self._thread:
            raise ProgrammingError(
                "SQLite objects created in a thread can only be used in that same thread. "
                f"The object was created in thread id {self._thread} and this is thread id "
                f"{threading.get_ident()}."
            )
        engine = self._engine
        if engine is None:
            raise ProgrammingError("Cannot operate on a closed database.")
        return engine

    @property
    def in_transaction(self) -> bool:
        """True while a transaction is open (always, with ``autocommit=False``)."""
        self._check()
        return self._txn is not None or self._autocommit is False

    @property
    def isolation_level(self) -> Optional[str]:
        self._check_init()
        return self._isolation_level

    @isolation_level.setter
    def isolation_level(self, value: Optional[str]) -> None:
        value = _check_isolation(value)
        if value is None and self._autocommit == LEGACY_TRANSACTION_CONTROL:
            self.commit()
        self._isolation_level = value

    @property
    def autocommit(self) -> Any:
        return self._autocommit

    @autocommit.setter
    def autocommit(self, value: Any) -> None:
        value = _check_autocommit(value)
        if value is True and self._autocommit is not True:
            self.commit()
        self._autocommit = value

    @property
    def total_changes(self) -> int:
        """Rows changed by INSERT/UPDATE/DELETE/REPLACE through this connection."""
        self._check()
        return self._total_changes

    @property
    def engine(self) -> Any:
        """The shared engine handle (``litelane._litelane.Engine``)."""
        return self._check()

    # -- transactions --------------------------------------------------------

    def _begin(self, sql: Optional[str] = None) -> Any:
        """Opens the transaction; ``sql`` is the statement ``sqlite3`` would
        run for it, shown to the trace callback (the implicit ``BEGIN`` by
        default)."""
        engine = self._check()
        if self._trace is not None:
            self._traced(f"BEGIN {self._isolation_level or ''}" if sql is None else sql)
        self._txn = engine.begin(self._timeout)
        return self._txn

    def _traced(self, sql: str) -> None:
        """Shows the trace callback a statement litelane runs for this
        connection outside SQLite's view of it (BEGIN, COMMIT, ROLLBACK)."""
        trace = self._trace
        if trace is not None and sql:
            try:
                trace(sql)
            except Exception:  # as sqlite3: a failing trace callback is ignored
                pass

    def _in_txn(self, method: Callable[..., Any], *args: Any) -> Any:
        txn = self._txn
        try:
            return method(*args)
        except BaseException:
            self._txn_failed(txn)
            raise

    def _begun_for(self, sql: str, run: Callable[[Any], Any]) -> Any:
        """``run(txn)`` in a transaction begun implicitly for ``sql``."""
        txn = self._begin()
        try:
            return run(txn)
        except BaseException:
            self._txn_failed(txn, sql)
            raise

    def _txn_failed(self, txn: Any, begun_for: Optional[str] = None) -> None:
        """After a statement of ``txn`` failed: forgets the transaction if
        the failure ended it. ``begun_for``: the statement whose implicit
        ``BEGIN`` opened ``txn``; if it failed before it ran (it does not
        prepare), the transaction is rolled back, as ``sqlite3`` prepares a
        statement before its implicit ``BEGIN`` (no transaction, no lock
        held after a mistyped statement)."""
        if begun_for is not None and txn is not None and txn.active:
            try:
                prepared = txn.prepares(begun_for)
            except Exception:  # the caller's exception is the one to raise
                prepared = True
            if not prepared:
                txn.rollback()
        if txn is not None and not txn.active:
            self._txn = None
            self._savepoint_opened = None

    def _commit(self, _sql: str = "COMMIT") -> None:
        """``commit`` where ``ConnectionBase.commit``'s fast path does not
        apply. ``commit()`` commits the open transaction (a no-op without
        one) and returns after the commit (under the ``safe`` profile, after
        the fsync)."""
        if self._engine is None or (self._check_same_thread and _get_ident() != self._thread):
            self._check()  # raises, saying why
        txn = self._txn
        self._savepoint_opened = None
        if txn is not None:
            self._txn = None
            if self._trace is not None:
                self._traced(_sql)
            txn.commit()

    def rollback(self, _sql: str = "ROLLBACK") -> None:
        """Rolls the open transaction back (a no-op without one)."""
        self._check()
        with self._serial():
            txn, self._txn = self._txn, None
            self._savepoint_opened = None
            if txn is not None:
                self._traced(_sql)
                txn.rollback()

    def _own_engine(self, sql: str) -> Any:
        """Before a statement that sets this connection's own state (a
        connection pragma, ``ATTACH``/``DETACH``, a ``TEMP`` object): the
        engine it must run on. The first such statement moves the connection
        from the engine it shares with the process's other connections to
        the file to an engine of its own (``_part``), so that its state stays
        its own, as with ``sqlite3``. ``None``: nothing to run (a
        ``PRAGMA foreign_keys`` inside a transaction, a no-op in SQLite)."""
        engine = self._check()
        if engine.private:
            return engine
        if self._txn is not None:
            m = _SQLITE_KEYWORD.match(sql)
            set_ = _PRAGMA_SET.match(sql, m.end()) if m.group(1).upper() == "PRAGMA" else None
            if set_ is not None and set_.group(1).lower() == "foreign_keys":
                return None  # SQLite ignores it inside a transaction
            raise OperationalError(
                f"litelane: {sql.strip()[:60]!r} sets this connection's own state, which "
                "litelane keeps on a SQLite connection of its own for it; it cannot move there "
                "inside a transaction: run it before the transaction begins or after it ends"
            )
        return self._part()

    def _part(self) -> Any:
        """Moves this connection to an engine of its own for the same file
        (its writer holds the connection's state; writes still queue with the
        process's others for the file's turn), taking its functions,
        collations and hooks along. Returns the new engine."""
        old = self._check()
        new = old.part()
        new._set_timeout(self._timeout)
        try:
            for _, method, args in self._setups.values():
                getattr(new, method)(*args)
        except BaseException:
            new.close()
            raise
        self._engine = new
        _sharing.get(self._path_key, weakref.WeakSet()).discard(self)
        old.close()
        return new

    def _setup(self, key: Any, func: Any, method: str, *args: Any) -> None:
        """Installs a function, collation or hook on this connection's engine
        and records it, to install it again if the connection moves to an
        engine of its own. A function or collation whose name another open
        connection sharing the engine holds with another callable moves this
        connection first: each keeps its own, as in ``sqlite3``."""
        engine = self._check()
        if key[0] != "hook" and not engine.private:
            for other in list(_sharing.get(self._path_key, ())):  # a copy: threads add
                theirs = other._setups.get(key) if other is not self else None
                if theirs is not None and theirs[0] is not func:
                    engine = self._part()
                    break
        getattr(engine, method)(*args)
        self._setups[key] = (func, method, args)

    def _serial(self) -> Any:
        """The lock a call holds while it runs when threads share this
        connection (``check_same_thread=False``), as ``sqlite3`` serializes
        them on the SQLite connection's mutex; a connection kept to its
        thread needs none. ``CursorBase.execute`` and ``commit`` take the
        same lock natively."""
        return _UNSHARED if self._check_same_thread else self._lock

    def close(self) -> None:
        """Rolls back any open transaction and lets go of the engine."""
        self._check_init()
        if self._engine is None:
            return
        if self._check_same_thread and threading.get_ident() != self._thread:
            self._check()
        with self._serial():
            txn, self._txn = self._txn, None
            if txn is not None:
                txn.rollback()
            engine, self._engine = self._engine, None
            if engine is None:
                return  # another thread closed it meanwhile
            _sharing.get(self._path_key, weakref.WeakSet()).discard(self)
            engine.close()

    def __enter__(self) -> "Connection":
        self._check()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def __del__(self) -> None:
        try:
            txn = self._txn
            if txn is not None:
                self._txn = None
                txn.rollback()
        except Exception:
            pass

    # -- running statements --------------------------------------------------

    def _control(self, kind: str, name: str, sql: str, params: Any) -> Any:
        if kind == "begin":
            if self._txn is not None or self._autocommit is False:
                raise OperationalError("cannot start a transaction within a transaction")
            self._begin(sql)
            return _NO_RESULT
        if kind == "commit":
            if self._txn is None:
                if self._autocommit is False:
                    return _NO_RESULT
                raise OperationalError("cannot commit - no transaction is active")
            self.commit(sql)
            return _NO_RESULT
        if kind == "rollback":
            if self._txn is None:
                if self._autocommit is False:
                    return _NO_RESULT
                raise OperationalError("cannot rollback - no transaction is active")
            self.rollback(sql)
            return _NO_RESULT
        if kind == "savepoint":
            if self._txn is None:
                self._begin("")  # the SAVEPOINT itself opens it
                self._savepoint_opened = _unquote(name).lower()
            return self._in_txn(self._txn.execute, sql, params)
        # release / rollback_to
        if self._txn is None:
            raise OperationalError(f"no such savepoint: {_unquote(name)}")
        result = self._in_txn(self._txn.execute, sql, params)
        if kind == "release" and self._savepoint_opened == _unquote(name).lower():
            # Releasing the savepoint that opened the transaction ends it
            # (the RELEASE itself was the statement traced).
            self.commit("")
        return result

    def _run(self, sql: str, params: Any) -> Any:
        engine = self._check()
        if type(sql) is not str and not isinstance(sql, str):
            raise TypeError(f"execute() argument 1 must be str, not {type(sql).__name__}")
        engine.check_sql_length(sql)
        kind, name = _kinds.get(sql) or _classify(sql)
        if kind == "empty":
            return _NO_RESULT
        if kind == "outside" and self._txn is None and self._autocommit is not False:
            return engine.execute_outside_transaction(sql, params)
        if kind == "busy_timeout":
            return self._busy_timeout(name)
        if kind == "journal_mode":
            self._check_journal_mode(engine, name)
            kind = "other"
        if kind == "local":
            engine = self._own_engine(sql)
            if engine is None:
                return _NO_RESULT
            if "immutable" in sql.lower() or "immutable" in repr(params).lower():
                # An ``ATTACH 'file:...?immutable=1'`` reads the file alone,
                # never its WAL: this process's commits go there first.
                _litelane.checkpoint_for_immutable()
        elif kind not in ("other", "dml", "outside"):
            return self._control(kind, name, sql, params)
        txn = self._txn
        if txn is not None:
            return self._in_txn(txn.execute, sql, params)
        ac = self._autocommit
        if ac is False:
            result = engine.execute(sql, params, False)
            if result is not None:
                return result
            return self._begun_for(sql, lambda txn: txn.execute(sql, params))
        if kind == "dml" and ac == LEGACY_TRANSACTION_CONTROL and self._isolation_level is not None:
            return self._begun_for(sql, lambda txn: txn.execute(sql, params))
        if kind == "dml":
            return engine.execute_write(sql, params)
        return engine.execute(sql, params, True)

    def _busy_timeout(self, value: str) -> Any:
        """``PRAGMA busy_timeout`` (``value``: the text of the value set, or
        ""): the connection's ``timeout`` in milliseconds, as ``sqlite3``
        sets SQLite's busy timeout from it. Setting it sets the timeout
        (what this connection's waits for the writer are bounded by), read
        as SQLite reads the value (its leading integer, 0 below 0), and
        returns it, as SQLite does; the connection keeps its engine."""
        if value:
            digits = re.match(r"[+-]?\d+", _unquote(value))
            ms = max(int(digits.group()), 0) if digits else 0
            self._timeout = ms / 1000
            self._check()._set_timeout(self._timeout)
        return _litelane.Outcome(_BUSY_TIMEOUT_DESCRIPTION, [(int(self._timeout * 1000),)], -1, None, False)

    def _check_journal_mode(self, engine: Any, mode: str) -> None:
        """Refuses ``PRAGMA journal_mode`` out of WAL on a database in WAL
        mode, saying why (SQLite's own error names a transaction the caller
        did not open); anything else runs as it is."""
        if mode.lower() == "wal":
            return
        rows = engine.execute("PRAGMA journal_mode", (), True).rows
        if not rows or str(rows[0][0]).lower() != "wal":
            return
        raise OperationalError(
            f"PRAGMA journal_mode = {mode}: litelane keeps the database in WAL mode, which "
            "its engine needs (readers run beside the writer, and the writers of every "
            "process queue for the WAL's write lock); the journal mode stays WAL "
            "(docs/python.md, difference 6)"
        )

    def _run_many(self, sql: str, seq: Any) -> Any:
        engine = self._check()
        engine.check_sql_length(sql)
        kind, _ = _classify(sql)
        if kind not in ("dml", "other"):
            raise ProgrammingError("executemany() can only execute DML statements.")
        if self._txn is None:
            ac = self._autocommit
            legacy_dml = ac == LEGACY_TRANSACTION_CONTROL and self._isolation_level is not None and kind == "dml"
            if not (legacy_dml or ac is False):
                return self._autocommit_many(engine, sql, seq)
            return self._begun_for(sql, lambda txn: txn.executemany(sql, seq))
        return self._in_txn(self._txn.executemany, sql, seq)

    def _autocommit_many(self, engine: Any, sql: str, seq: Any) -> Any:
        """``executemany`` with no transaction of the caller's. ``sqlite3``
        commits each set on its own, so a failing set leaves the sets before
        it stored. Here the sets run in one transaction of their own (one
        commit, one fsync); when a set fails, the sets before it, which the
        transaction keeps, are committed before the error is raised: the
        same rows as ``sqlite3``. A failure that ends the transaction itself
        (``OR ROLLBACK``, ``RAISE(ROLLBACK)``, a full disk) undoes those sets
        too: given a list or tuple, the sets then run again one at a time,
        each committing on its own, as ``sqlite3`` runs them; given a
        one-shot iterator, the error says that none was stored. No
        ``BEGIN``/``COMMIT`` is shown to the trace callback: ``sqlite3``
        runs none."""
        txn = engine.begin(self._timeout)
        try:
            out = txn.executemany(sql, seq)
        except BaseException as e:
            if txn.active:
                txn.commit()
                raise
            if not isinstance(e, Error):
                raise
            if not isinstance(seq, (list, tuple)):
                e.add_note(
                    "litelane: this failure ended executemany's transaction, so none of its "
                    "parameter sets were stored (sqlite3 keeps the sets before the failing one); "
                    "pass a list to have them run one at a time instead"
                )
                raise
            return self._each_on_its_own(engine, sql, seq)
        txn.commit()
        return out

    @staticmethod
    def _each_on_its_own(engine: Any, sql: str, sets: Sequence[Any]) -> Any:
        """Runs ``sql`` for each set in a transaction of its own, stopping at
        the first failure (raised, the sets before it committed)."""
        out, total = None, 0
        for params in sets:
            try:
                out = engine.executemany(sql, (params,))
            except BaseException:
                # Counted by Cursor.executemany with the failing call's own.
                engine.take_partial_changes()
                engine._add_partial_changes(total)
                raise
            total += max(out.rowcount, 0)
        if out is None:
            return _litelane.Outcome(None, [], 0, None, True)
        return _litelane.Outcome(out.description, out.rows, total, out.lastrowid, out.wrote)

    def _run_script(self, script: str) -> None:
        """``executescript``, as ``sqlite3`` runs it: in the legacy mode a
        pending transaction is committed first; then each statement runs in
        turn with no implicit transaction control (one outside ``BEGIN`` ...
        ``COMMIT`` commits on its own), and the first error stops the script
        with what ran before it kept."""
        engine = self._check()
        if not isinstance(script, str):
            raise TypeError(f"executescript() argument must be str, not {type(script).__name__}")
        if "\0" in script:
            raise ValueError("the query contains a null character")
        engine.check_sql_length(script)
        if self._autocommit == LEGACY_TRANSACTION_CONTROL:
            self.commit()
        for sql in _litelane.split_script(script):
            self._run_plain(sql)

    def _run_plain(self, sql: str) -> None:
        """One statement of a script: no implicit ``BEGIN``. The rows it
        changes count in ``total_changes``, as in ``sqlite3``."""
        kind, name = _classify(sql)
        if kind == "empty" or (kind == "local" and self._own_engine(sql) is None):
            return
        if kind == "outside" and self._txn is None and self._autocommit is not False:
            result = self._check().execute_outside_transaction(sql, ())
        elif kind not in ("dml", "other", "outside", "local"):
            result = self._control(kind, name, sql, ())
        elif self._txn is not None:
            result = self._in_txn(self._txn.execute, sql, ())
        elif self._autocommit is False:
            result = self._in_txn(self._begin().execute, sql, ())
        else:
            result = self._check().execute(sql, (), True)
        if result is not None and result.rowcount > 0:
            self._total_changes += result.rowcount

    def cursor(self, factory: Any = _MISSING) -> "Cursor":
        """A new cursor, made by ``factory(self)`` (``Cursor`` by default),
        which must return a ``Cursor`` (a subclass is fine)."""
        self._check()
        if factory is _MISSING:
            return Cursor(self)
        cur = factory(self)
        if not issubclass(type(cur), Cursor):
            raise TypeError("factory must return a cursor, not " + type(cur).__name__)
        return cur

    def __call__(self, *args: Any) -> "Statement":
        """``con(sql)``: checks ``sql`` as ``sqlite3`` does when a connection
        is called (a deprecated way to make a statement); compiles nothing."""
        engine = self._check()
        if len(args) != 1:
            raise TypeError(f"expected 1 argument, got {len(args)}")
        _check_sql(args[0])
        engine.check_sql_length(args[0])
        return Statement._make(args[0])

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> "Cursor":
        return Cursor(self).executemany(sql, parameters)  # as execute: a plain Cursor

    def executescript(self, script: str, /) -> "Cursor":
        return Cursor(self).executescript(script)

    # -- compatibility stubs -------------------------------------------------

    # Functions, aggregates and collations are engine-wide: every connection
    # to the file in this process sees them (sqlite3: per connection). The
    # authorizer, progress handler and trace callback are this connection's
    # own. See docs/python.md.

    def create_function(self, name: str, narg: int, func: Any, *, deterministic: bool = False) -> None:
        """Creates (``func`` None: removes) the SQL function ``name`` taking
        ``narg`` arguments (-1: any number), on the writer and every reader."""
        self._setup(("function", str(name).lower(), narg), func, "create_function", name, narg, func, deterministic)

    def create_aggregate(self, name: str, n_arg: int, aggregate_class: Any) -> None:
        """Creates (None: removes) an aggregate: ``aggregate_class()`` per
        group, ``step(*args)`` per row, ``finalize()`` for the result."""
        key = ("function", str(name).lower(), n_arg)
        self._setup(key, aggregate_class, "create_aggregate", name, n_arg, aggregate_class, False)

    def create_window_function(self, name: str, num_params: int, aggregate_class: Any, /) -> None:
        """Creates (None: removes) an aggregate window function: the class
        has ``step``, ``value``, ``inverse`` and ``finalize``."""
        key = ("function", str(name).lower(), num_params)
        self._setup(key, aggregate_class, "create_aggregate", name, num_params, aggregate_class, True)

    def create_collation(self, name: str, callable: Any, /) -> None:
        """Creates (None: removes) the collation ``name``: ``callable(a, b)``
        returns a negative, zero or positive int."""
        self._setup(("collation", str(name).lower()), callable, "create_collation", name, callable)

    def set_authorizer(self, authorizer_callback: Any) -> None:
        """Sets (None: clears) the authorizer of this connection's statements."""
        self._setup(("hook", "authorizer"), authorizer_callback, "set_authorizer", authorizer_callback)

    def set_progress_handler(self, progress_handler: Any, n: int) -> None:
        """Calls ``progress_handler()`` every ``n`` SQLite virtual machine
        instructions of this connection's statements; a true result aborts
        the statement. None clears it."""
        self._setup(("hook", "progress"), progress_handler, "set_progress_handler", progress_handler, n)

    def set_trace_callback(self, trace_callback: Any) -> None:
        """Calls ``trace_callback(sql)`` before each statement this connection
        runs (None clears it)."""
        self._setup(("hook", "trace"), trace_callback, "set_trace_callback", trace_callback)
        self._trace = trace_callback

    def enable_load_extension(self, enabled: bool) -> None:
        raise NotSupportedError("loading extensions is not supported by litelane.dbapi")

    def interrupt(self) -> None:
        """Accepted; litelane does not interrupt running statements."""
        self._check()

    def getlimit(self, category: int, /) -> int:
        """The limit ``category`` (``SQLITE_LIMIT_*``) in force."""
        return self._check().getlimit(category)

    def setlimit(self, category: int, limit: int, /) -> int:
        """Sets the limit ``category`` (``SQLITE_LIMIT_*``) and returns the
        one before; a negative ``limit`` changes nothing. It applies to every
        connection of the process to this file (they share one engine)."""
        return self._check().setlimit(category, limit)

    def blobopen(
        self, table: str, column: str, row: int, /, *, readonly: bool = False, name: str = "main"
    ) -> _blob.Blob:
        """Opens the value of ``column`` in row ``row`` (a rowid) of ``table``
        as a ``Blob`` of fixed size, as ``sqlite3``'s ``blobopen`` does (see
        ``litelane/_blob.py`` for how it runs on litelane)."""
        self._check()
        return _blob.Blob._open(self._run_rows, table, column, row, readonly, name)

    def _run_rows(self, sql: str, params: Any, write: bool) -> List[Tuple[Any, ...]]:
        """Runs one statement with no implicit ``BEGIN``: in the open
        transaction, else as a write of its own (``write``) or on a reader."""
        engine = self._check()
        if self._txn is not None:
            result = self._in_txn(self._txn.execute, sql, params)
        elif write:
            result = engine.execute_write(sql, params)
        else:
            result = engine.execute(sql, params, True)
        return result.rows

    def iterdump(self) -> Iterator[str]:
        """The database as SQL statements, as ``sqlite3``'s ``iterdump``
        gives them (inside this connection's transaction if one is open)."""
        self._check()
        return _dump.iterdump(lambda sql: self.execute(sql).fetchall())

    def backup(
        self,
        target: Any,
        *,
        pages: int = -1,
        progress: Optional[Callable[[int, int, int], Any]] = None,
        name: str = "main",
        sleep: float = 0.250,
    ) -> None:
        """Copies this database into ``target`` (a ``litelane.dbapi`` or a
        ``sqlite3`` connection), replacing what it holds, as ``sqlite3``'s
        ``backup`` does: ``pages`` per step (all at once if <= 0), calling
        ``progress(status, remaining, total)`` after each step.

        The copy is of one committed moment (a reader's snapshot: this
        connection's own uncommitted changes are not in it), made into a
        temporary file first, so writers of this database never wait for the
        target."""
        self._check()
        if not isinstance(target, (Connection, _StdConnection)):
            raise TypeError(f"target must be a Connection, not {type(target).__name__}")
        if target is self:
            raise ValueError("target cannot be the same connection instance")
        if progress is not None and not callable(progress):
            raise TypeError("progress argument must be a callable")
        if not isinstance(pages, int):
            raise TypeError(f"pages must be int, not {type(pages).__name__}")
        if name != "main":
            raise OperationalError(f"unknown database {name}")
        if target.in_transaction:
            raise OperationalError("target is in transaction")
        import tempfile  # here: its import (with shutil, bz2, lzma) costs every program about 10 ms

        with tempfile.TemporaryDirectory(prefix="litelane-backup-") as tmp:
            copy = os.path.join(tmp, "copy.db")
            self._check().backup(copy)
            # The copy of a WAL database is marked WAL in its header, which
            # SQLite's backup would carry into a target that cannot be WAL
            # (an in-memory one): make it a rollback-journal file first.
            plain = _StdConnection(copy)
            try:
                plain.execute("PRAGMA journal_mode = DELETE")
            finally:
                plain.close()
            if isinstance(target, Connection):
                target._check().restore(copy, pages, progress)
                return
            source = _StdConnection(copy)
            try:
                source.backup(target, pages=pages, progress=progress, sleep=sleep)
            finally:
                source.close()


_RECURSIVE = "Recursive use of cursors not allowed."


def _text(value: Any, text_factory: Any) -> Any:
    """A TEXT value as ``text_factory`` makes it (``str`` is the default)."""
    if not isinstance(value, str) or text_factory is str:
        return value
    return value.encode() if text_factory is bytes else text_factory(value.encode())


class Cursor(_litelane.CursorBase):
    """A cursor: results are fetched from memory (a statement's rows are
    read in full when it runs).

    Its state (``description``, ``rowcount``, ``lastrowid``, ``connection``,
    ``row_factory`` and the private ``_rows``, ``_pos``, ``_converters``,
    ``_closed`` (None until ``__init__`` ran) and ``_busy`` (converters,
    adapters or a parameter iterator are running)) lives in the extension's
    ``CursorBase``, whose ``execute`` and ``fetchone`` run the common cases
    in one call and fall back to ``_execute`` and ``_fetchone`` here."""

    # What a new cursor starts with (set per instance once it changes).
    arraysize = 1

    def __init__(self, connection: Connection, /) -> None:
        if self._busy:
            raise ProgrammingError(_RECURSIVE)
        if not issubclass(type(connection), Connection):
            raise TypeError("connection must be a litelane.dbapi.Connection")
        self.connection = connection
        self.row_factory = connection.row_factory
        self._closed = False

    def _check(self) -> None:
        closed = self._closed
        if closed is None:
            raise ProgrammingError("Base Cursor.__init__ not called.")
        if self._busy:
            raise ProgrammingError(_RECURSIVE)
        if closed:
            raise ProgrammingError("Cannot operate on a closed cursor.")
        self.connection._check()

    def _set(self, result: Any) -> None:
        desc, rows, rowcount = result.description, result.rows, result.rowcount
        self._converters = None
        detect = self.connection._detect_types
        if desc is not None and detect:
            convs = [_converter_for(d[0], d[1], detect) for d in desc]
            self._converters = convs if any(convs) else None
            desc = tuple((_column_name(d[0], detect),) + d[1:] for d in desc)
        self.description = desc
        self._rows = rows
        self._pos = 0
        self.rowcount = rowcount
        conn = self.connection
        if result.wrote and result.lastrowid is not None:
            conn._lastrowid = result.lastrowid
        if rowcount > 0:
            conn._total_changes += rowcount
        self.lastrowid = conn._lastrowid

    def _execute(self, sql: str, parameters: Any = (), /) -> "Cursor":
        """``execute`` where ``CursorBase.execute``'s fast path does not
        apply (and for every error it would raise)."""
        if self._busy or self._closed is not False:
            self._check()  # raises, saying why
        if type(sql) is not str or "\0" in sql:
            _check_sql(sql)
        self._rows = ()
        self.description = None
        self._busy = True  # adapters run user code while parameters bind
        try:
            result = self.connection._run(sql, parameters)
        finally:
            self._busy = False
        self._set(result)
        return self

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> "Cursor":
        self._check()
        if not isinstance(sql, str):
            raise TypeError(f"executemany() argument 1 must be str, not {type(sql).__name__}")
        self._rows = []
        self.description = None
        self.rowcount = -1  # what a failing executemany leaves, as in sqlite3
        self._busy = True  # the parameters' iterator runs user code
        conn = self.connection
        try:
            with conn._serial():
                try:
                    rowcount = conn._run_many(sql, seq_of_parameters).rowcount
                except BaseException:
                    # The sets before the failing one stay (as in sqlite3),
                    # and count in total_changes.
                    engine = conn._engine
                    if engine is not None:
                        conn._total_changes += engine.take_partial_changes()
                    raise
        finally:
            self._busy = False
        self.rowcount = rowcount
        if rowcount > 0:
            self.connection._total_changes += rowcount
        return self

    def executescript(self, sql_script: str, /) -> "Cursor":
        self._check()
        self._rows = []
        self.description = None
        with self.connection._serial():
            self.connection._run_script(sql_script)
        self.rowcount = -1
        return self

    def _convert(self, row: Tuple[Any, ...]) -> Any:
        tf = self.connection.text_factory
        convs = self._converters
        if convs is not None:
            self._busy = True  # converters run user code
            try:
                row = self._apply_converters(row, convs, tf)
            finally:
                self._busy = False
        elif tf is not str:
            row = tuple(_text(v, tf) for v in row)
        rf = self.row_factory
        return rf(self, row) if rf is not None else row

    @staticmethod
    def _apply_converters(row: Tuple[Any, ...], convs: List[Any], tf: Any) -> Tuple[Any, ...]:
        # A zero-length BLOB reaches no converter: sqlite3 reads it as NULL
        # (sqlite3_column_blob gives no pointer for it).
        return tuple(
            _text(v, tf) if conv is None else None if v is None or v == b"" else conv(_as_bytes(v))
            for v, conv in zip(row, convs, strict=False)
        )

    def _check_result(self) -> None:
        """Before a fetch: the cursor is usable. After a statement that
        returns no rows (or none at all), fetches return nothing (``None``,
        ``[]``), as in ``sqlite3``; PEP 249 would raise, which breaks programs
        written for ``sqlite3`` (peewee's ``pragma()`` fetches after every
        ``PRAGMA``)."""
        self._check()

    def _fetchone(self) -> Any:
        """``fetchone`` where ``CursorBase.fetchone``'s fast path does not
        apply (converters, a row factory or a text factory; errors)."""
        self._check_result()
        if self._pos >= len(self._rows):
            return None
        row = self._rows[self._pos]
        self._pos += 1
        return self._convert(row)

    def fetchmany(self, size: Optional[int] = None) -> List[Any]:
        self._check_result()
        n = self.arraysize if size is None else size
        chunk = self._rows[self._pos : self._pos + max(n, 0)]
        self._pos += len(chunk)
        return [self._convert(r) for r in chunk]

    def fetchall(self) -> List[Any]:
        self._check_result()
        chunk = self._rows[self._pos :]
        self._pos = len(self._rows)
        return [self._convert(r) for r in chunk]

    def __iter__(self) -> "Cursor":
        return self

    def __next__(self) -> Any:
        if self.description is None:
            raise StopIteration
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def close(self) -> None:
        if self._closed is None:
            raise ProgrammingError("Base Cursor.__init__ not called.")
        if self._busy:
            raise ProgrammingError(_RECURSIVE)
        self.connection._check()
        self._closed = True
        self._rows = []

    def nextset(self) -> None:
        """SQLite statements have one result set: always NotSupportedError."""
        raise NotSupportedError("SQLite statements return one result set; nextset() is not supported")

    def setinputsizes(self, sizes: Any) -> None:
        """Accepted and ignored (PEP 249)."""

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        """Accepted and ignored (PEP 249)."""


_litelane.register_dbapi(_kinds, Cursor)


def connect(*args: Any, **kwargs: Any) -> Connection:
    """connect(database, timeout=5.0, detect_types=0, isolation_level="",
    check_same_thread=True, factory=Connection, cached_statements=128,
    uri=False, *, autocommit=LEGACY_TRANSACTION_CONTROL, profile="safe",
    readers=None, **options)

    Opens a connection to the SQLite database file ``database``
    (``":memory:"`` for a private in-memory database). As in ``sqlite3``,
    every argument is passed on unchanged to ``factory`` (a ``Connection``
    subclass may take more).

    ``timeout`` (seconds, default 5.0) bounds how long a write waits for
    another process's write turn, and how long a transaction waits in the
    writer's queue behind transactions of this process, before it fails with
    ``OperationalError("database is locked ...")`` (naming the other
    process's pid and label); Ctrl-C ends such a wait with
    ``KeyboardInterrupt``; ``profile`` is the
    litelane durability profile: ``"safe"`` by default (a commit that returned
    survives power loss, as with ``sqlite3``'s default), ``"balanced"`` or
    ``"fast"`` by choice; ``readers`` and ``**options`` are engine options
    (see docs/python.md). The first connection to a file opens its engine;
    later ones share it: given no profile and no options they take it as it
    is, and they may not ask for other options than it has.
    """
    factory = args[5] if len(args) > 5 else kwargs.get("factory")
    return (factory or Connection)(*args, **kwargs)


#: ``sqlite3.dbapi2`` is the module itself under another name; programs and
#: libraries import it (``from sqlite3 import dbapi2``: SQLAlchemy's pysqlite
#: dialect, sqlite-utils), so ``from litelane.dbapi import dbapi2`` works too.
dbapi2 = sys.modules[__name__]
