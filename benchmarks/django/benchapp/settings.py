"""Settings of the benchmark app. $BENCH_BACKEND picks the database:
"stock" (Django's SQLite backend configured as Django's documentation
recommends for concurrency: WAL through init_command, transaction_mode
IMMEDIATE, a busy timeout) or "litelane" (litelane.django, default options);
$BENCH_DB is the database file."""

import os

SECRET_KEY = "litelane-django-benchmark"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "benchapp.urls"
INSTALLED_APPS = ["benchapp"]
MIDDLEWARE = []
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGGING_CONFIG = None

_backend = os.environ.get("BENCH_BACKEND", "stock")
_timeout = float(os.environ.get("BENCH_TIMEOUT", "5"))
if _backend == "stock":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ["BENCH_DB"],
            "OPTIONS": {
                # WAL; synchronous stays SQLite's default, FULL, the same
                # durability as litelane's "safe" profile.
                "init_command": "PRAGMA journal_mode=WAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": _timeout,
            },
        }
    }
elif _backend == "litelane":
    DATABASES = {
        "default": {
            "ENGINE": "litelane.django",
            "NAME": os.environ["BENCH_DB"],
            "OPTIONS": {"timeout": _timeout},
        }
    }
else:
    raise ValueError(f"BENCH_BACKEND must be 'stock' or 'litelane', not {_backend!r}")
