"""``Connection.blobopen()``: a ``Blob`` with the standard library's
interface (read, write, seek, tell, indexing and slicing, ``len``, a context
manager) over one value of one row.

litelane runs statements on several SQLite connections (a reader outside a
transaction, the writer inside one), so a blob is not one open
``sqlite3_blob`` handle: each read is a ``substr`` of the value and each
write stores the whole value again, in the connection's transaction if one
is open and as a write of its own otherwise (no implicit ``BEGIN``, as with
``sqlite3``). The size is fixed, as with ``sqlite3``."""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from ._errors import OperationalError, ProgrammingError


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Blob:
    """One value of one row, read and written as bytes (made by
    ``Connection.blobopen``, not directly)."""

    __iter__ = None  # not iterable, and `x in blob` is a TypeError, as in sqlite3

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"cannot create '{type(self).__module__}.{type(self).__qualname__}' instances")

    @classmethod
    def _open(
        cls,
        run: Callable[[str, Sequence[Any], bool], Any],
        table: str,
        column: str,
        row: int,
        readonly: bool,
        name: str,
    ) -> "Blob":
        self = object.__new__(cls)
        self._run = run
        self._where = f"FROM {_ident(name)}.{_ident(table)} WHERE rowid = ?"
        self._target = (name, table, column)
        self._column = _ident(column)
        self._row = row
        self._readonly = readonly
        self._pos = 0
        self._closed = False
        found = run(f"SELECT typeof({self._column}), length(CAST({self._column} AS BLOB)) {self._where}", (row,), False)
        if not found:
            raise OperationalError(f"no such rowid: {row}")
        kind, length = found[0]
        if kind == "null":
            raise OperationalError("cannot open value of type null")
        self._len = int(length)
        return self

    # -- state --------------------------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise ProgrammingError("Cannot operate on a closed blob.")

    def close(self) -> None:
        """Closes the blob; later calls raise ``ProgrammingError``."""
        self._closed = True

    def __enter__(self) -> "Blob":
        self._check()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._check()
        self.close()

    def __len__(self) -> int:
        self._check()
        return self._len

    # -- reading and writing --------------------------------------------------

    def _read_at(self, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        rows = self._run(
            f"SELECT substr(CAST({self._column} AS BLOB), ?, ?) {self._where}",
            (offset + 1, length, self._row),
            False,
        )
        if not rows:
            raise OperationalError(f"no such rowid: {self._row} (the row is gone)")
        return bytes(rows[0][0] or b"")

    def _write_at(self, offset: int, data: bytes) -> None:
        if self._readonly:
            raise OperationalError("attempt to write a readonly database")
        whole = bytearray(self._read_at(0, self._len))
        whole[offset : offset + len(data)] = data
        name, table, _ = self._target
        self._run(
            f"UPDATE {_ident(name)}.{_ident(table)} SET {self._column} = ? WHERE rowid = ?",
            (bytes(whole), self._row),
            True,
        )

    def read(self, length: int = -1, /) -> bytes:
        """Reads ``length`` bytes (all that remain if negative) from the
        current position, and moves past them."""
        self._check()
        remaining = self._len - self._pos
        n = remaining if length < 0 else min(length, remaining)
        data = self._read_at(self._pos, n)
        self._pos += len(data)
        return data

    def write(self, data: Any, /) -> None:
        """Writes ``data`` at the current position and moves past it; the
        blob's length cannot change."""
        self._check()
        data = bytes(memoryview(data))
        if self._pos + len(data) > self._len:
            raise ValueError("data longer than blob length")
        self._write_at(self._pos, data)
        self._pos += len(data)

    def tell(self) -> int:
        """The current position, in bytes from the start."""
        self._check()
        return self._pos

    def seek(self, offset: int, origin: int = os.SEEK_SET, /) -> None:
        """Moves to ``offset`` relative to the start, the current position or
        the end (``os.SEEK_SET``, ``SEEK_CUR``, ``SEEK_END``)."""
        self._check()
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._len}.get(origin)
        if base is None:
            raise ValueError("'origin' should be os.SEEK_SET, os.SEEK_CUR, or os.SEEK_END")
        if not isinstance(offset, int):
            raise TypeError(f"'{type(offset).__name__}' object cannot be interpreted as an integer")
        pos = base + offset
        if not -(2**31) <= pos < 2**31:
            raise OverflowError("seek offset results in overflow")
        if not 0 <= pos <= self._len:
            raise ValueError("offset out of blob range")
        self._pos = pos

    # -- indexing -------------------------------------------------------------

    def _index(self, i: int) -> int:
        if not -(2**63) <= i < 2**63:
            raise IndexError("cannot fit 'int' into an index-sized integer")
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("Blob index out of range")
        return i

    def __getitem__(self, key: Any) -> Any:
        self._check()
        if isinstance(key, slice):
            start, stop, step = key.indices(self._len)
            if step == 1:
                return self._read_at(start, stop - start)
            return self._read_at(0, self._len)[key]
        if not hasattr(key, "__index__"):
            raise TypeError("Blob indices must be integers")
        return self._read_at(self._index(key.__index__()), 1)[0]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check()
        if isinstance(key, slice):
            start, stop, step = key.indices(self._len)
            view = memoryview(value)
            if not view.contiguous:
                raise BufferError("underlying buffer is not C-contiguous")
            data = view.tobytes()
            positions = range(start, stop, step)
            if len(data) != len(positions):
                raise IndexError("Blob slice assignment is wrong size")
            if step == 1:
                self._write_at(start, data)
                return
            whole = bytearray(self._read_at(0, self._len))
            for p, b in zip(positions, data, strict=False):
                whole[p] = b
            self._write_at(0, bytes(whole))
            return
        if not hasattr(key, "__index__"):
            raise TypeError("Blob indices must be integers")
        if not isinstance(value, int):
            raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer")
        index = self._index(key.__index__())
        if not 0 <= value < 256:
            raise ValueError("byte must be in range(0, 256)")
        self._write_at(index, bytes([value]))

    def __delitem__(self, key: Any) -> None:
        raise TypeError("Blob doesn't support item deletion")

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._len} bytes"
        return f"<litelane.dbapi.Blob {state}>"
