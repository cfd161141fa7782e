"""The PEP 249 exception hierarchy, shared by ``litelane`` and ``litelane.dbapi``.

Errors that come from SQLite carry ``sqlite_errorcode`` (the extended result
code) and ``sqlite_errorname`` (e.g. ``"SQLITE_CONSTRAINT_UNIQUE"``), as the
standard library's ``sqlite3.Error`` does since Python 3.11.
"""

from __future__ import annotations

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
]


class Warning(Exception):  # noqa: A001 - the name PEP 249 requires
    """Important warnings (PEP 249)."""


class Error(Exception):
    """Base class of every litelane error (PEP 249)."""

    sqlite_errorcode: int | None = None
    sqlite_errorname: str | None = None


class InterfaceError(Error):
    """An error of the interface rather than the database."""


class DatabaseError(Error):
    """An error of the database."""


class DataError(DatabaseError):
    """A value out of range or too big (``SQLITE_TOOBIG``)."""


class OperationalError(DatabaseError):
    """An error in the database's operation: syntax, missing table, I/O,
    a transaction wait that timed out."""


class IntegrityError(DatabaseError):
    """A constraint failed (unique, foreign key, not null, check)."""


class InternalError(DatabaseError):
    """An internal error of SQLite."""


class ProgrammingError(DatabaseError):
    """A misuse of the API: wrong number of parameters, unsupported
    parameter type, closed connection, several statements in execute()."""


class NotSupportedError(DatabaseError):
    """A method or feature litelane does not support."""
