"""``prefixcache calibrate``: measure restore vs recompute on the embedded engine, write the calibration file.

Parse the options, call :func:`prefixcache.replay.calibrate_tiers`, write the
:class:`~prefixcache.analyzer.cache.fleet.calibration.TierCalibration` as JSON to ``--out`` (what
``simulate --replicas N --tiers … --calibrate FILE`` reads) and print the fitted curves and
break-even lengths. A length list that is not numbers is a usage error (exit 2).
"""

from __future__ import annotations

import sys
from typing import Annotated

import orjson
import typer
from rich.table import Table

from prefixcache.cli.common import check_output, console, handle_errors, progress
from prefixcache.cli.options import AsJson, Force, format_option, out_option, output_format
from prefixcache.cli.tables import print_table


def _lengths(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give token counts, e.g. 128,512,2048", param_hint="--lengths") from None


def _render(cal) -> None:
    t = Table(title=f"calibration · {cal.model} on {cal.device} ({cal.dtype}, {cal.threads} threads) · "
                    f"{cal.kv_bytes_per_token:,} KV bytes/token", title_justify="left")
    for col in ("curve", "intercept ms", "µs/token", "GB/s", "mean rel err", "R²", "break-even tok"):
        t.add_column(col, justify="left" if col == "curve" else "right")
    for f in cal.fits:
        be = "—" if f.curve == "prefill" else ("never" if f.break_even_tokens is None else f"{f.break_even_tokens:,.0f}")
        t.add_row(f.curve, f"{1e3 * f.fit.intercept_s:.3f}", f"{1e6 * f.fit.per_token_s:.3f}",
                  "—" if not f.bandwidth_bytes_s else f"{f.bandwidth_bytes_s / 1e9:.2f}",
                  f"{100 * f.fit.mean_rel_error:.1f}%", f"{f.fit.r2:.4f}", be)
    print_table(console, t)
    t = Table(title="measured (median seconds)", title_justify="left")
    curves = list(dict.fromkeys(m.curve for m in cal.measurements))
    for col in ("tokens", *curves):
        t.add_column(col, justify="right")
    for n in sorted({m.tokens for m in cal.measurements}):
        got = {m.curve: m.seconds for m in cal.measurements if m.tokens == n}
        t.add_row(f"{n:,}", *(f"{got[c]:.5f}" if c in got else "—" for c in curves))
    print_table(console, t)
    for note in cal.notes:
        console.print(f"[yellow]{note}[/]" if note.startswith("warning:") else f"[dim]{note}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``calibrate`` command to ``app``."""

    @app.command("calibrate")
    @handle_errors
    def calibrate_cmd(
        out: out_option("Write the calibration JSON here (for simulate --tiers … --calibrate FILE).", "-o",
                        required=True),
        model: Annotated[str, typer.Option("--model", help="smollm2 (built in), a local HF folder, a .gguf file, or an HF id in the local cache.")] = "smollm2",
        device: Annotated[str, typer.Option("--device", help="auto (CUDA when present, else CPU), cpu, cuda, cuda:N.")] = "auto",
        dtype: Annotated[str, typer.Option("--dtype", help="float32, bfloat16 or float16.")] = "float32",
        threads: Annotated[int, typer.Option("--threads", min=1, help="CPU torch threads.")] = 2,
        lengths: Annotated[str, typer.Option("--lengths", help="Prompt lengths to time, tokens, comma-separated.")] = "128,256,512,1024,2048",
        repeat: Annotated[int, typer.Option("--repeat", min=1, help="Timed runs per length and curve (the median is kept).")] = 3,
        fmt: format_option("Output: rich (default) or json (the document written to --out).") = None,
        as_json: AsJson = False,
        force: Force = False,
    ) -> None:
        """Time prefill and KV restores (host memory, disk) at several lengths; fit them; write the file."""
        from prefixcache.replay import calibrate_tiers

        shown = output_format(fmt, as_json, ("rich", "json"), "rich")
        sizes = _lengths(lengths)
        check_output(out, [], force=force)
        with progress("calibrate", enabled=None if shown == "rich" else False):
            cal = calibrate_tiers(model, device, dtype, threads, sizes, repeat)
        data = orjson.dumps(cal, option=orjson.OPT_INDENT_2)
        with open(out, "wb") as fh:
            fh.write(data + b"\n")
        if shown == "json":
            sys.stdout.write(data.decode() + "\n")
        else:
            _render(cal)
            console.print(f"wrote {out}: use it with simulate --replicas N --tiers gpu=…,cpu=…,disk=… --calibrate {out}")
