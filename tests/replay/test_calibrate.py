"""``prefixcache calibrate`` on the real embedded engine: measured prefill and restore curves, the file simulate reads."""

from __future__ import annotations

import orjson
import pytest
import torch
from typer.testing import CliRunner

from prefixcache.analyzer.cache.fleet.calibration import read_calibration
from prefixcache.analyzer.errors import EngineError
from prefixcache.cli.app import app
from prefixcache.replay.local.calibrate import measure
from tests.helpers import validate

pytestmark = pytest.mark.slow  # loads and runs the torch model


def test_measured_curves_on_the_embedded_engine(engine, tmp_path):
    cal = measure(engine, (32, 64, 128), repeat=1, workdir=tmp_path)
    curves = {m.curve for m in cal.measurements}
    assert curves == {"prefill", "cpu-unpinned", "disk"}  # pinned needs an accelerator
    assert cal.kv_bytes_per_token == engine.kv_bytes_per_token
    for m in cal.measurements:
        assert m.seconds > 0 and m.kv_bytes == engine.kv_bytes_per_token * m.tokens
    fits = {f.curve: f for f in cal.fits}
    assert fits["prefill"].fit.points == 3  # its slope is left unchecked: a shared 2-core machine is noisy
    # the KV of a prompt copies back from host memory far faster than the prompt prefills
    pre = {m.tokens: m.seconds for m in cal.measurements if m.curve == "prefill"}
    host = {m.tokens: m.seconds for m in cal.measurements if m.curve == "cpu-unpinned"}
    assert all(host[n] < pre[n] for n in pre)
    assert fits["cpu-unpinned"].bandwidth_bytes_s > 0
    with pytest.raises(EngineError, match="calibration lengths"):
        measure(engine, (64,), repeat=1)


def test_cli_writes_the_file_simulate_reads(tmp_path, loaded):
    out = tmp_path / "cal.json"
    res = CliRunner().invoke(app, ["calibrate", "--out", str(out), "--lengths", "16,48", "--repeat", "1",
                                   "--device", "cpu", "--json"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    validate(doc, "calibrate")
    assert doc == orjson.loads(out.read_bytes())
    assert doc["device"] == "cpu" and doc["threads"] == torch.get_num_threads()
    cal = read_calibration(out)
    assert cal is not None and [f.curve for f in cal.fits][0] == "prefill"
    again = CliRunner().invoke(app, ["calibrate", "--out", str(out), "--lengths", "16,48"])
    assert again.exit_code == 2 and "--force" in again.output
    bad = CliRunner().invoke(app, ["calibrate", "--out", str(tmp_path / "x.json"), "--lengths", "a,b"])
    assert bad.exit_code == 2
