"""Adapting Python values that are not None/int/float/str/bytes to SQLite
values: registered adapters, ``__conform__``, then the standard library's
default adapters for ``datetime.date`` and ``datetime.datetime``."""

from __future__ import annotations

import datetime
import os
import sys
import warnings
from typing import Any, Callable, Dict, Tuple

from ._errors import ProgrammingError

_HERE = (os.path.dirname(os.path.abspath(__file__)),)


def _deprecated_default(kind: str) -> None:
    """The DeprecationWarning ``sqlite3`` gives for its default date and
    datetime adapters from Python 3.12 on (naming the caller's line)."""
    if sys.version_info >= (3, 12):
        warnings.warn(
            f"the default {kind} adapter is deprecated as of Python 3.12",
            DeprecationWarning,
            skip_file_prefixes=_HERE,
        )


class PrepareProtocol:
    """The protocol object passed to ``__conform__`` (as in ``sqlite3``)."""


adapters: Dict[Tuple[type, Any], Callable[[Any], Any]] = {}


def register_adapter(type_: type, adapter: Callable[[Any], Any], /) -> None:
    """Registers ``adapter(value)`` for values of exactly ``type_`` (``int``,
    ``float``, ``str`` and ``bytes`` too, as in ``sqlite3``)."""
    adapters[(type_, PrepareProtocol)] = adapter
    if type_ in (int, float, str, bytes, bytearray):
        from . import _litelane

        _litelane.set_base_types_adapted()


def adapt_registered(obj: Any) -> Any:
    """``obj`` through the adapter registered for its exact type, or ``obj``
    itself (called by the extension once a base type has an adapter)."""
    fn = adapters.get((type(obj), PrepareProtocol))
    return obj if fn is None else fn(obj)


def adapt(obj: Any, position: int) -> Any:
    """Called by the extension for a parameter of another type."""
    fn = adapters.get((type(obj), PrepareProtocol))
    if fn is not None:
        return fn(obj)
    conform = getattr(obj, "__conform__", None)
    if conform is not None:
        try:
            value = conform(PrepareProtocol)
        except TypeError:  # as sqlite3: taken as "cannot adapt"; others propagate
            value = None
        if value is not None:
            return value
    if isinstance(obj, datetime.datetime):
        _deprecated_default("datetime")
        return obj.isoformat(" ")
    if isinstance(obj, datetime.date):
        _deprecated_default("date")
        return obj.isoformat()
    raise ProgrammingError(f"Error binding parameter {position}: type {type(obj).__name__!r} is not supported")
