"""``OutcomeUnknown`` and ``WritesStopped`` (issue 18): the classes a failed
fsync at COMMIT raises, and where they sit in the exception hierarchy.

An fsync failure cannot be injected from Python (the package has no test
hook, on purpose); the engine raises them under the fault-injecting VFS in
``crates/litelane-faultvfs/tests/faults.rs``, and the mapping of the engine
error to these classes (with ``sqlite_errorcode`` 1034) is tested in
``crates/litelane-py/src/errors.rs``.
"""

import sqlite3

import litelane
import litelane.dbapi


def test_outcome_unknown_is_an_operational_error_in_both_apis():
    assert litelane.OutcomeUnknown is litelane.dbapi.OutcomeUnknown
    assert "OutcomeUnknown" in litelane.__all__
    assert "OutcomeUnknown" in litelane.dbapi.__all__
    assert issubclass(litelane.OutcomeUnknown, litelane.dbapi.OperationalError)
    # Code written for the standard library still catches it.
    assert issubclass(litelane.OutcomeUnknown, sqlite3.OperationalError)
    assert issubclass(litelane.OutcomeUnknown, sqlite3.DatabaseError)


def test_writes_stopped_is_an_operational_error_and_not_an_unknown_outcome():
    assert litelane.WritesStopped is litelane.dbapi.WritesStopped
    assert issubclass(litelane.WritesStopped, sqlite3.OperationalError)
    assert not issubclass(litelane.WritesStopped, litelane.OutcomeUnknown)
    assert not issubclass(litelane.OutcomeUnknown, litelane.WritesStopped)


def test_outcome_unknown_carries_sqlites_codes_like_the_other_classes():
    e = litelane.OutcomeUnknown("outcome unknown: the commit may or may not be durable")
    assert e.sqlite_errorcode is None and e.sqlite_errorname is None
    e.sqlite_errorcode = 1034
    e.sqlite_errorname = "SQLITE_IOERR_FSYNC"
    try:
        raise e
    except sqlite3.OperationalError as caught:
        assert caught.sqlite_errorcode == 1034
        assert "may or may not" in str(caught)
