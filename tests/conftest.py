"""Shared fixtures: paths to the real samples and cases in ../shared, offline mode."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SAMPLES = SHARED / "samples"
CASES = SHARED / "cases"
EXAMPLES = ROOT / "examples"


def need(path: Path) -> Path:
    """Skip the test when the ../shared reference material is not beside the checkout."""
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


@pytest.fixture
def samples() -> Path:
    return need(SAMPLES)


@pytest.fixture
def cases() -> Path:
    return need(CASES)
