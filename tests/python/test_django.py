"""litelane.django, Django's SQLite backend on litelane.dbapi: the ORM round
trip, transactions and savepoints, Django's SQL functions on every SQLite
connection of the engine, foreign keys switched off and on around a schema
change, threads and a forked process writing at once, and one engine kept for
the process across Django's connection-per-request (CONN_MAX_AGE=0)."""

import datetime
import os
import tempfile
import threading
import time

import pytest

django = pytest.importorskip(
    "django", reason="Django is not installed (pip install Django): litelane.django's tests need it"
)

from django.conf import settings  # noqa: E402

_DIR = tempfile.mkdtemp(prefix="litelane-django-pytest-")
DB = os.path.join(_DIR, "site.db")

if not settings.configured:
    settings.configure(
        DATABASES={"default": {"ENGINE": "litelane.django", "NAME": DB, "CONN_MAX_AGE": 0, "OPTIONS": {"timeout": 30}}},
        INSTALLED_APPS=["litelane_django_app"],
        USE_TZ=False,
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()

import litelane  # noqa: E402
import litelane.dbapi  # noqa: E402
from django.db import IntegrityError, NotSupportedError, connection, connections, transaction  # noqa: E402
from django.db.models.functions import ExtractYear  # noqa: E402
from litelane.django import base as lbase  # noqa: E402
from litelane_django_app.models import Author, Book  # noqa: E402

pytestmark = pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "litelane.django",
    reason="Django was configured by another test module",
)


@pytest.fixture(scope="module", autouse=True)
def tables():
    # litelane.django registers Django's converters and adapters on
    # litelane.dbapi (process-wide, as Django does on sqlite3): put back what
    # the other test modules expect when this one is done.
    converters, adapters = dict(litelane.dbapi.converters), dict(litelane.dbapi.adapters)
    with connection.schema_editor() as editor:
        editor.create_model(Author)
        editor.create_model(Book)
    yield
    connections.close_all()
    lbase.release_all_engines()
    litelane.dbapi.converters.clear()
    litelane.dbapi.converters.update(converters)
    litelane.dbapi.adapters.clear()
    litelane.dbapi.adapters.update(adapters)


@pytest.fixture(autouse=True)
def empty():
    Book.objects.all().delete()
    Author.objects.all().delete()
    yield
    connections.close_all()


def test_the_connection_is_litelane_dbapi_on_the_shared_engine():
    connection.ensure_connection()
    assert isinstance(connection.connection, litelane.dbapi.Connection)
    assert connection.vendor == "sqlite"
    with litelane.open(DB) as db:  # joins the process's engine
        assert db.query("PRAGMA journal_mode") == [("wal",)]


def test_a_model_saved_and_queried_back():
    a = Author.objects.create(name="Ursula")
    when = datetime.datetime(2021, 3, 4, 5, 6, 7, 890000)
    Book.objects.create(title="The Dispossessed", author=a, published=when)
    b = Book.objects.select_related("author").get(title="The Dispossessed")
    assert b.author.name == "Ursula"
    assert b.published == when  # the datetime converter, through litelane.dbapi
    assert Book.objects.filter(author__name__startswith="Urs").count() == 1
    Book.objects.filter(pk=b.pk).update(title="Changed")
    assert list(Book.objects.values_list("title", flat=True)) == ["Changed"]


def test_atomic_commits_and_rolls_back_and_savepoints_roll_back_alone():
    with transaction.atomic():
        Author.objects.create(name="kept")
        try:
            with transaction.atomic():  # a savepoint
                Author.objects.create(name="inner, rolled back")
                raise ValueError
        except ValueError:
            pass
        sid = transaction.savepoint()
        Author.objects.create(name="rolled back by savepoint_rollback")
        transaction.savepoint_rollback(sid)
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            Author.objects.create(name="outer, rolled back")
            raise RuntimeError
    assert sorted(Author.objects.values_list("name", flat=True)) == ["kept"]
    assert connection.get_autocommit()
    assert not connection.connection.in_transaction


def test_an_integrity_error_leaves_the_connection_usable():
    a = Author.objects.create(name="a")
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            Book.objects.create(title="orphan", author_id=a.pk + 1000)
    Book.objects.create(title="fine", author=a)
    assert Book.objects.count() == 1


def test_djangos_sql_functions_run_on_the_writer_and_on_every_reader():
    a = Author.objects.create(name="Le Guin")
    Book.objects.create(title="Lathe", author=a, published=datetime.datetime(1971, 1, 1))
    Book.objects.create(title="Earthsea", author=a, published=datetime.datetime(1968, 1, 1))

    def queries():
        years = sorted(Book.objects.annotate(y=ExtractYear("published")).values_list("y", flat=True))
        regex = Book.objects.filter(title__regex=r"^L.t").count()
        sha = Book.objects.extra(select={"h": "SHA1(title)"}).values_list("h", flat=True)[0]
        return years, regex, len(sha)

    expected = ([1968, 1971], 1, 40)
    with transaction.atomic():  # on the writer, inside the transaction
        assert queries() == expected
    assert queries() == expected  # outside: the free writer or a reader

    # While another connection holds the writer, reads go to the readers:
    # each must know Django's functions.
    holder = litelane.dbapi.connect(DB, check_same_thread=False)
    holder.execute("INSERT INTO litelane_django_app_author(name) VALUES ('holding the writer')")
    try:
        results, errors = [], []

        def reader():
            try:
                for _ in range(5):
                    results.append(queries())
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        holder.rollback()
        holder.close()
    assert errors == []
    assert results == [expected] * 20
    rows = litelane.open(DB).query("SELECT regexp('^a.c$', 'abc'), django_date_extract('year', '2024-05-06')")
    assert rows == [(1, 2024)]


def _writer_fk():
    """PRAGMA foreign_keys on the engine's writer connection."""
    connection.ensure_connection()
    if connection.connection.in_transaction:  # runs on the writer, in the transaction
        with connection.cursor() as c:
            return c.execute("PRAGMA foreign_keys").fetchone()[0]
    return connection.connection.engine.execute_outside_transaction("PRAGMA foreign_keys").rows[0][0]


def test_foreign_keys_are_off_during_a_schema_change_and_on_again_after():
    from django.db import models

    a = Author.objects.create(name="x")
    Book.objects.create(title="t", author=a)
    assert _writer_fk() == 1
    old = Book._meta.get_field("writer")
    new = models.CharField(max_length=80, default="")
    new.set_attributes_from_name("writer")
    new.model = Book
    with connection.schema_editor() as editor:  # what a migration does
        assert _writer_fk() == 0
        editor.alter_field(Book, old, new, strict=True)  # rebuilds the table
    assert _writer_fk() == 1
    with connection.schema_editor() as editor:
        editor.alter_field(Book, new, old, strict=True)
    assert _writer_fk() == 1
    assert Book.objects.get().author_id == a.pk
    with pytest.raises(IntegrityError):
        Book.objects.create(title="orphan", author_id=a.pk + 999)
    # Inside a transaction, as on the stock backend, it cannot be switched off.
    with pytest.raises(NotSupportedError):
        with transaction.atomic():
            with connection.schema_editor():
                pass
    assert _writer_fk() == 1


def test_closing_a_connection_with_foreign_keys_off_switches_them_on_for_the_others():
    connection.ensure_connection()
    assert connection.disable_constraint_checking() is True
    assert _writer_fk() == 0
    connection.close()
    assert _writer_fk() == 1


def test_threads_write_at_once_without_database_is_locked():
    a = Author.objects.create(name="threads")
    errors = []

    def work(n):
        try:
            for i in range(25):
                with transaction.atomic():
                    Book.objects.create(title=f"t{n}-{i}", author_id=a.pk, writer=f"thread{n}")
                    Book.objects.filter(writer=f"thread{n}").count()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert Book.objects.count() == 8 * 25


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_writes_beside_its_parent_without_database_is_locked():
    a = Author.objects.create(name="fork")
    Book.objects.create(title="before the fork", author=a)  # the parent's connection is open
    assert connection.connection is not None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            for i in range(40):
                with transaction.atomic():
                    Book.objects.create(title=f"child {i}", author_id=a.pk, writer="child")
            code = 0
        except BaseException as e:
            os.write(w, repr(e).encode()[:2000])
        finally:
            os._exit(code)
    os.close(w)
    for i in range(40):
        with transaction.atomic():
            Book.objects.create(title=f"parent {i}", author=a, writer="parent")
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child hung")
        time.sleep(0.01)
    message = os.read(r, 2000).decode()
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0, message
    assert Book.objects.filter(writer="child").count() == 40
    assert Book.objects.filter(writer="parent").count() == 40


def test_conn_max_age_0_reuses_the_engine_across_connections():
    connection.ensure_connection()
    first = connection.connection
    held = lbase._engines[(os.getpid(), DB)].handle
    assert held.same_engine(first.engine)
    opened = held.metrics()
    for i in range(5):  # five "requests", each opening and closing a connection
        Author.objects.create(name=f"request {i}")
        connection.close()
        assert connection.connection is None
    connection.ensure_connection()
    assert connection.connection is not first
    assert held.same_engine(connection.connection.engine)
    assert lbase._engines[(os.getpid(), DB)].handle is held
    # The engine's counters kept running: it was never closed and reopened.
    assert held.metrics()["commits"] >= opened["commits"] + 5
    assert Author.objects.count() == 5


def test_init_command_runs_once_per_engine_and_litelanes_own_pragmas_are_skipped(tmp_path):
    from django.db.backends.sqlite3.base import DatabaseWrapper as Stock
    from litelane.django.base import DatabaseWrapper

    path = str(tmp_path / "init.db")
    cfg = {
        "NAME": path,
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF;"
            "PRAGMA user_version = 7; PRAGMA cache_size = -8000;"
            'CREATE TABLE IF NOT EXISTS "inits"("n")'
        },
    }
    for key in (
        "ENGINE",
        "CONN_MAX_AGE",
        "CONN_HEALTH_CHECKS",
        "AUTOCOMMIT",
        "ATOMIC_REQUESTS",
        "TIME_ZONE",
        "USER",
        "PASSWORD",
        "HOST",
        "PORT",
        "TEST",
    ):
        cfg.setdefault(key, connection.settings_dict[key])
    assert issubclass(DatabaseWrapper, Stock)
    w = DatabaseWrapper(cfg, alias="init")
    for _ in range(3):
        w.ensure_connection()
        with w.cursor() as c:
            c.execute('INSERT INTO "inits" VALUES (1)')
        w.close()
    db = litelane.open(path)
    assert db.query('SELECT count(*) FROM "inits"') == [(3,)]
    assert db.query("PRAGMA journal_mode") == [("wal",)]  # the profile's, not init_command's
    assert db.query("PRAGMA user_version") == [(7,)]
    with db.transaction() as tx:  # on the writer
        assert tx.query("PRAGMA cache_size") == [(-8000,)]
    db.close()
    lbase.release_engine(path)


def test_unknown_options_are_refused_with_their_name(tmp_path):
    from django.db.utils import ProgrammingError
    from litelane.django.base import DatabaseWrapper

    cfg = dict(connection.settings_dict, NAME=str(tmp_path / "x.db"), OPTIONS={"no_such_option": 1})
    w = DatabaseWrapper(cfg, alias="bad")
    with pytest.raises((ProgrammingError, litelane.dbapi.ProgrammingError), match="no_such_option"):
        w.ensure_connection()
