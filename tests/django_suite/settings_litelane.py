"""Django's test suite on litelane.django (litelane.dbapi), default options."""

from settings_common import *  # noqa: F401,F403
from settings_common import databases

DATABASES = databases("litelane.django")
