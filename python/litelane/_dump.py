"""``Connection.iterdump()``: the database as SQL text, in the order and
form the standard library's ``sqlite3`` gives it (tables by name with their
rows, then indexes, triggers and views, then ``sqlite_sequence``), with
values written by SQLite's own ``quote()``."""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Sequence

Query = Callable[[str], List[Sequence[Any]]]


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _rows(query: Query, table: str) -> Iterator[str]:
    """``INSERT`` statements for every row of ``table``."""
    columns = [row[1] for row in query(f"PRAGMA table_info({_ident(table)})")]
    if not columns:
        return
    values = " || ',' || ".join(f"quote({_ident(c)})" for c in columns)
    head = _literal(f"INSERT INTO {_ident(table)} VALUES(")
    for (line,) in query(f"SELECT {head} || {values} || ')' FROM {_ident(table)}"):
        yield line + ";"


def iterdump(query: Query) -> Iterator[str]:
    """Yields the dump, one statement at a time; ``query(sql)`` returns the
    rows of one statement."""
    yield "BEGIN TRANSACTION;"
    writable_schema = False
    sequence = False
    tables = query(
        'SELECT "name", "sql" FROM "sqlite_master" WHERE "sql" NOT NULL AND "type" == \'table\' ORDER BY "name"'
    )
    for name, sql in tables:
        if name == "sqlite_sequence":
            sequence = True
            continue
        if name == "sqlite_stat1":
            yield 'ANALYZE "sqlite_master";'
        elif name.startswith("sqlite_"):
            continue
        elif sql.startswith("CREATE VIRTUAL TABLE"):
            if not writable_schema:
                writable_schema = True
                yield "PRAGMA writable_schema=ON;"
            yield (
                "INSERT INTO sqlite_master(type,name,tbl_name,rootpage,sql)"
                f"VALUES('table',{_literal(name)},{_literal(name)},0,{_literal(sql)});"
            )
            continue
        else:
            yield f"{sql};"
        yield from _rows(query, name)
    others = query(
        'SELECT "name", "type", "sql" FROM "sqlite_master" '
        "WHERE \"sql\" NOT NULL AND \"type\" IN ('index', 'trigger', 'view')"
    )
    for _name, _kind, sql in others:
        yield f"{sql};"
    if writable_schema:
        yield "PRAGMA writable_schema=OFF;"
    if sequence:
        yield 'DELETE FROM "sqlite_sequence";'
        yield from _rows(query, "sqlite_sequence")
    yield "COMMIT;"
