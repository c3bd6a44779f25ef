"""Without the ``replay`` extra (torch, httpx, ...) replay says which package to install:
one line, exit 2, never a traceback. The missing packages are shadowed by stubs that raise
ImportError, in a fresh interpreter (the suite itself has them installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import EXAMPLES

CASES = {
    "torch": (["--pass", "cold", "--max-requests", "2", "--template", "chatml_tools"], "replay (in-process)"),
    "httpx": (["--server", "http://127.0.0.1:9"], "replay --server"),
}


@pytest.mark.parametrize("module", sorted(CASES))
def test_missing_replay_extra_is_one_clear_line(tmp_path: Path, module: str) -> None:
    args, what = CASES[module]
    stub = tmp_path / module
    stub.mkdir()
    (stub / "__init__.py").write_text(f"raise ModuleNotFoundError('No module named {module}', name={module!r})\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "200"}
    code = "import sys; from prefixcache.cli.app import main; sys.exit(main())"
    res = subprocess.run([sys.executable, "-c", code, "replay", str(EXAMPLES / "agent_session.jsonl"), *args],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert res.stderr.strip() == (f"error: {what} needs the replay extra, and {module} is not installed: "
                                  "pip install 'prefixcache[replay]'")
