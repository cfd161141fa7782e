"""The engines ``litelane.django`` keeps open for the process, one per
database, between Django's connections; ``release_engine`` lets go of one
(the test database code calls it before deleting a file). Apart from
``base.py`` (which opens them) and ``creation.py`` (which releases them), so
neither imports the other for it.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, Tuple


class _Engine:
    """The process's hold on one database's engine: keeps it open between
    Django's connections and remembers what was set up on it."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.ready = False
        self.lock = threading.Lock()


_engines: Dict[Tuple[int, str], _Engine] = {}
_engines_lock = threading.Lock()


def _forget_after_fork() -> None:
    # The parent's engines are the parent's: a child opens its own (the
    # handles refuse to run in the child; dropping them is quiet).
    _engines.clear()
    global _engines_lock
    _engines_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def release_engine(name: Any) -> None:
    """Lets go of the process's hold on the engine of database ``name`` (the
    engine closes once no connection uses it). The test database code calls
    it before a database file is deleted; a program rarely needs to."""
    key = (os.getpid(), os.fspath(name))
    with _engines_lock:
        held = _engines.pop(key, None)
    if held is not None:
        held.handle.close()


def release_all_engines() -> None:
    """Lets go of every engine this process holds (see ``release_engine``)."""
    with _engines_lock:
        held = list(_engines.values())
        _engines.clear()
    for h in held:
        h.handle.close()
