"""The PEP 249 exception hierarchy, shared by ``litelane`` and ``litelane.dbapi``.

Errors that come from SQLite carry ``sqlite_errorcode`` (the extended result
code) and ``sqlite_errorname`` (e.g. ``"SQLITE_CONSTRAINT_UNIQUE"``), as the
standard library's ``sqlite3.Error`` does since Python 3.11.

Each class also derives from the standard library's class of the same name
(``litelane.IntegrityError`` is a ``sqlite3.IntegrityError``), so code that
catches ``sqlite3`` exceptions keeps working when ``litelane.dbapi`` stands in
for ``sqlite3``. Where Python was built without ``sqlite3``, they derive from
``Exception`` alone.
"""

from __future__ import annotations

from typing import Any, Tuple

try:
    import _sqlite3 as _std  # the C module: never an alias of litelane.dbapi
except ImportError:  # pragma: no cover - Python built without sqlite3
    _std = None

__all__ = [
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


def _std_base(name: str) -> Tuple[Any, ...]:
    """The standard library's class ``name`` as an extra base, if there is one."""
    cls = getattr(_std, name, None)
    return (cls,) if isinstance(cls, type) else ()


class Warning(*_std_base("Warning"), Exception):  # noqa: A001 - the name PEP 249 requires
    """Important warnings (PEP 249)."""


class Error(*_std_base("Error"), Exception):
    """Base class of every litelane error (PEP 249)."""

    sqlite_errorcode: int | None = None
    sqlite_errorname: str | None = None


class InterfaceError(Error, *_std_base("InterfaceError")):
    """An error of the interface rather than the database."""


class DatabaseError(Error, *_std_base("DatabaseError")):
    """An error of the database."""


class DataError(DatabaseError, *_std_base("DataError")):
    """A value out of range or too big (``SQLITE_TOOBIG``)."""


class OperationalError(DatabaseError, *_std_base("OperationalError")):
    """An error in the database's operation: syntax, missing table, I/O,
    a transaction wait that timed out."""


class OutcomeUnknown(OperationalError):
    """A commit whose fsync failed: it may or may not be durable (the change
    may be there after a crash, or not). Not a plain failure: do not retry
    blindly. Reopen the database (this handle takes no more writes), check
    whether the change is there, retry only if it is not, and check the
    disk. ``sqlite_errorcode`` is 1034 (``SQLITE_IOERR_FSYNC``) for a failed
    fsync. A subclass of ``OperationalError``, so code that catches
    ``sqlite3.OperationalError`` still catches it."""


class WritesStopped(OperationalError):
    """The database handle takes no more writes after a commit's outcome was
    unknown (``OutcomeUnknown``): nothing of this write was done. Reads go
    on; reopen the database to write again."""


class IntegrityError(DatabaseError, *_std_base("IntegrityError")):
    """A constraint failed (unique, foreign key, not null, check)."""


class InternalError(DatabaseError, *_std_base("InternalError")):
    """An internal error of SQLite."""


class ProgrammingError(DatabaseError, *_std_base("ProgrammingError")):
    """A misuse of the API: wrong number of parameters, unsupported
    parameter type, closed connection, several statements in execute()."""


class NotSupportedError(DatabaseError, *_std_base("NotSupportedError")):
    """A method or feature litelane does not support."""
