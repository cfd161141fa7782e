"""What both runs of Django's own test suite share (scripts/django-tests):
the settings Django's tests/test_sqlite.py gives, with the engine chosen by
the module that imports this one, and a runner that records each test's
outcome."""

SECRET_KEY = "litelane-django-suite"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = False
TEST_RUNNER = "outcomes.OutcomeRunner"


def databases(engine, **options):
    """Django's two test aliases, "default" and "other", on ``engine``."""
    return {alias: {"ENGINE": engine, "OPTIONS": dict(options)} for alias in ("default", "other")}
