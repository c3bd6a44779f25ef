"""pytest wiring only (helpers live in :mod:`tests.helpers`): the fixture paths as
fixtures, and strict skips.

With ``PREFIXCACHE_STRICT_SKIPS=1`` (set by ``make test`` and therefore CI) a skipped
test fails: every input the suite needs is in the repository, so a skip means a
test silently stopped checking anything.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import CASES, SAMPLES, existing


@pytest.fixture
def samples() -> Path:
    return existing(SAMPLES)


@pytest.fixture
def cases() -> Path:
    return existing(CASES)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("PREFIXCACHE_STRICT_SKIPS") == "1":
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under PREFIXCACHE_STRICT_SKIPS=1: {reason}"
