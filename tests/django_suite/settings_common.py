"""What both runs of Django's own test suite share (scripts/django-tests):
the settings module of the Django version under test, its tests/test_sqlite.py
(runtests.py's directory is on sys.path), with a runner that records each
test's outcome; the module that imports this one picks the engine."""

from test_sqlite import *  # noqa: F401,F403
from test_sqlite import DATABASES as _SUITE_DATABASES

TEST_RUNNER = "outcomes.OutcomeRunner"


def databases(engine, **options):
    """The suite's own DATABASES with every alias on ``engine``."""
    return {alias: dict(cfg, ENGINE=engine, OPTIONS=dict(options)) for alias, cfg in _SUITE_DATABASES.items()}
