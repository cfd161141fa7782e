"""Django's test suite on its stock SQLite backend (the standard library's sqlite3)."""

from settings_common import *  # noqa: F401,F403
from settings_common import databases

DATABASES = databases("django.db.backends.sqlite3")
