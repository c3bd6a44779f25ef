"""pytest wiring only (helpers live in :mod:`tests.helpers`): the fixture paths as
fixtures, the one replay model per test session, strict skips, and the ``slow`` marker
on every test that uses that model (``make test-fast`` leaves them out).

With ``PREFIXCACHE_STRICT_SKIPS=1`` (set by ``make test`` and therefore CI) a skipped
test fails: every input the suite needs is in the repository, so a skip means a
test silently stopped checking anything.

The suite is hermetic about tiktoken's rank-file cache: ``TIKTOKEN_CACHE_DIR`` points at an
empty folder of this test session, so an encoding somebody cached on the machine (under
``/tmp/data-gym-cache``, shared by every checkout) cannot change which tokenizer ``auto``
picks; only what the installed packages ship counts, as on a fresh CI machine.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ["TIKTOKEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="prefixcache-tiktoken-")
os.environ.pop("DATA_GYM_CACHE_DIR", None)

from tests.helpers import CASES, SAMPLES, existing


@pytest.fixture
def samples() -> Path:
    return existing(SAMPLES)


@pytest.fixture
def cases() -> Path:
    return existing(CASES)


@pytest.fixture(scope="session")
def loaded():
    from prefixcache.replay.local.hf import load_model

    return load_model(None, device="cpu", dtype="float32", threads=2)


@pytest.fixture(scope="session")
def engine(loaded):
    from prefixcache.replay.local.hf import HFEngine

    eng = HFEngine(loaded)
    eng.generate(list(range(100, 132)))  # one-time setup out of the way
    return eng


@pytest.fixture(scope="session")
def text_ids(loaded) -> list[int]:
    """~1,500 token ids of real agent-log text (a SWE-agent trajectory excerpt)."""
    path = existing(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj")
    text = path.read_text()[:6000]
    return loaded.tokenizer(text)["input_ids"]


#: Fixtures that load the torch replay model, or transformers' tokenizers (the render parity
#: tests' reference): a test that uses one is ``slow``.
MODEL_FIXTURES = frozenset({"loaded", "engine", "text_ids", "hf_smollm2", "hf_deepseek"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("PREFIXCACHE_STRICT_SKIPS") == "1":
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under PREFIXCACHE_STRICT_SKIPS=1: {reason}"
