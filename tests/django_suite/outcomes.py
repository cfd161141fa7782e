"""A DiscoverRunner that writes every test's outcome to the JSON file named
by $LITELANE_DJANGO_OUTCOMES ({test id: "pass" | "fail" | "error" | "skip" |
"xfail" | "xpass"}), for scripts/django-tests to compare two runs. Outcomes
of tests run in parallel worker processes reach the parent's result object
and are recorded there."""

import json
import os
import unittest

from django.test.runner import DiscoverRunner

_RANK = {"pass": 0, "skip": 0, "xfail": 0, "xpass": 1, "fail": 2, "error": 3}


class OutcomeResult(unittest.TextTestResult):
    outcomes = {}

    def _record(self, test, outcome):
        key = test.id()
        old = self.outcomes.get(key)
        if old is None or _RANK[outcome] > _RANK[old]:
            self.outcomes[key] = outcome

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failure = issubclass(err[0], test.failureException)
            self._record(test, "fail" if failure else "error")

    def stopTestRun(self):
        super().stopTestRun()
        path = os.environ.get("LITELANE_DJANGO_OUTCOMES")
        if path:
            with open(path, "w") as f:
                json.dump(self.outcomes, f, indent=0, sort_keys=True)


class OutcomeRunner(DiscoverRunner):
    def get_resultclass(self):
        return super().get_resultclass() or OutcomeResult
