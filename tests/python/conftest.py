import os

import pytest

# The shared two-module helpers' asserts report both sides, as in a test.
pytest.register_assert_rewrite("two_modules")


@pytest.fixture
def db_path(tmp_path):
    """A fresh database file path (the file does not exist yet)."""
    return str(tmp_path / "test.db")


@pytest.fixture
def dbapi20_path():
    path = os.environ.get("LITELANE_DBAPI20")
    if not path or not os.path.exists(path):
        pytest.fail("LITELANE_DBAPI20 must name dbapi20.py (scripts/test fetches it from psycopg2's sdist)")
    return path
