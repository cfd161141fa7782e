"""Test databases for ``litelane.django``: Django's SQLite test database code,
with copies made through litelane (a file copy of a WAL database would miss
what is still in its ``-wal`` file) and per-worker files for the parallel
test runner."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from typing import Any, Dict, Optional, Set

from django.db.backends.sqlite3.creation import DatabaseCreation as _StockCreation

from ._engines import release_engine

#: The files SQLite and litelane keep beside a database file.
_SIDE_FILES = ("-wal", "-shm", "-journal", "-lane")


def _remove_database_files(name: str) -> None:
    """Deletes a test database file and the files beside it (a stale
    ``-wal`` left next to a new file of the same name would be replayed
    into it)."""
    for suffix in ("",) + _SIDE_FILES:
        try:
            os.remove(name + suffix)
        except FileNotFoundError:
            pass


#: Directories holding the parallel test workers' copies of an in-memory test
#: database (made in the parent, inherited by the forked workers).
_clone_dirs: Set[str] = set()


def _is_clone(name: Any) -> bool:
    return isinstance(name, str) and os.path.dirname(name) in _clone_dirs


class DatabaseCreation(_StockCreation):
    """Django's SQLite test database creation, adapted to litelane:

    - a clone for a parallel test worker is copied with litelane's backup
      (one consistent snapshot, the WAL's content included);
    - an in-memory test database does not survive ``fork()`` under litelane
      (a forked worker opens engines of its own), so each worker of the
      parallel runner gets a file copy in a temporary directory instead,
      treated as Django treats the in-memory database it stands for (never
      closed, ``is_in_memory_db`` true);
    - deleting a test database first lets go of the process's engine on it
      and deletes its ``-wal``/``-shm``/``-lane`` files too.
    """

    _clone_dir: Optional[str] = None

    @staticmethod
    def is_in_memory_db(database_name: Any) -> bool:
        return _StockCreation.is_in_memory_db(database_name) or _is_clone(database_name)

    def _clone_path(self, suffix: Any) -> str:
        if self._clone_dir is None:
            self._clone_dir = tempfile.mkdtemp(prefix="litelane-django-test-")
            _clone_dirs.add(self._clone_dir)
        return os.path.join(self._clone_dir, f"{self.connection.alias}_{suffix}.sqlite3")

    def get_test_db_clone_settings(self, suffix: Any) -> Dict[str, Any]:
        orig = self.connection.settings_dict
        source = orig["NAME"] or ":memory:"
        if (
            _StockCreation.is_in_memory_db(source)
            and not _is_clone(source)
            and multiprocessing.get_start_method() == "fork"
        ):
            return {**orig, "NAME": self._clone_path(suffix)}
        return super().get_test_db_clone_settings(suffix)

    def setup_worker_connection(self, _worker_id: Any) -> None:
        name = self.connection.settings_dict["NAME"] or ":memory:"
        if _StockCreation.is_in_memory_db(name) and multiprocessing.get_start_method() == "fork":
            # The parent's connection is dropped (it cannot run in the child)
            # and the worker's own copy opened, as Django's "spawn" branch
            # opens its in-memory copy.
            self.connection.settings_dict.update(self.get_test_db_clone_settings(_worker_id))
            self.connection.ensure_connection()
            return
        super().setup_worker_connection(_worker_id)

    def _create_test_db(self, verbosity: int, autoclobber: bool, keepdb: bool = False) -> str:
        name = self._get_test_db_name()
        if not keepdb and not self.is_in_memory_db(name):
            release_engine(name)
            if os.access(name, os.F_OK) and autoclobber:
                _remove_database_files(name)
        return super()._create_test_db(verbosity, autoclobber, keepdb)

    def _clone_test_db(self, suffix: Any, verbosity: int, keepdb: bool = False) -> None:
        source = self.connection.settings_dict["NAME"]
        target = self.get_test_db_clone_settings(suffix)["NAME"]
        if not _is_clone(target) and self.is_in_memory_db(target):
            return super()._clone_test_db(suffix, verbosity, keepdb)
        if os.access(target, os.F_OK):
            if keepdb:
                return
            if verbosity >= 1:
                self.log(
                    "Destroying old test database for alias %s..."
                    % (self._get_database_display_str(verbosity, target),)
                )
            release_engine(target)
            _remove_database_files(target)
        self.connection.ensure_connection()
        with self.connection.wrap_database_errors:
            self.connection.connection.engine.backup(target)
        if verbosity >= 2:
            self.log(f"Cloned {source!r} to {target!r} with litelane's backup")

    def _destroy_test_db(self, test_database_name: str, verbosity: int) -> None:
        if test_database_name:
            release_engine(test_database_name)
        if _is_clone(test_database_name):
            _remove_database_files(test_database_name)
            try:
                os.rmdir(os.path.dirname(test_database_name))
            except OSError:
                pass  # other workers' copies are still there
        elif test_database_name and not self.is_in_memory_db(test_database_name):
            _remove_database_files(test_database_name)
