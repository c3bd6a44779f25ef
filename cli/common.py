"""What every command shares: consoles, error handling, progress, input options.

Exit codes (all commands): 0 clean, 1 findings at or above the threshold, 2 usage
or input error. Library errors (:class:`PrefixcacheError`) become one red line on
stderr and exit 2 — never a traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from prefixcache.analyzer.errors import ConfigError, PrefixcacheError
from prefixcache.analyzer.ingest import skipped_message
from prefixcache.analyzer.model import Skipped

def _width() -> int | None:
    """Console width: the terminal's (None: rich measures it), else ``$COLUMNS`` when set, else 160
    for pipes and CI logs (rich would otherwise cut tables to 80 columns)."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else 160


console = Console(highlight=False, soft_wrap=False, width=_width())
err = Console(stderr=True, highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable)

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def fail(message: str) -> typer.Exit:
    """Print ``message`` as an error and return the exit-2 exception to raise."""
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    return typer.Exit(EXIT_ERROR)


def handle_errors(fn: F) -> F:
    """Turn :class:`PrefixcacheError` (and a broken stdout pipe) into exit codes."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        console.width = _width()  # per command: $COLUMNS as it is now, not at import
        try:
            return fn(*args, **kwargs)
        except PrefixcacheError as exc:
            raise fail(str(exc).replace("[", r"\[")) from None
        except BrokenPipeError:
            sys.stderr.close()
            raise typer.Exit(EXIT_OK) from None

    return wrapper  # type: ignore[return-value]


class Tracker:
    """Progress interface: ``advance(n)`` and ``total``; a no-op when disabled."""

    def __init__(self, progress: Progress | None, task: int | None) -> None:
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def describe(self, text: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=text)


def report_skipped(skipped: Iterable[Skipped], skip_bad: bool) -> bool:
    """Print every skipped input record on stderr (``file:line field F: reason``).

    Unreadable records (``bad``) print as errors unless ``skip_bad``; returns True
    when there were such records and the command must exit 2.
    """
    fatal = False
    for s in skipped:
        is_error = s.bad and not skip_bad
        fatal |= is_error
        label = "[red]error:[/]" if is_error else "[yellow]skipped:[/]"
        err.print(f"{label} {escape(skipped_message(s))}", highlight=False)
    return fatal


def check_output(path: Path, inputs: Iterable[str], force: bool = False, flag: str = "--force") -> None:
    """Refuse (ConfigError, exit 2) to write ``path`` when it is one of the ``inputs`` (never
    overwrite an input, even with ``--force``) or exists already without ``force`` (an earlier
    run's output); ``flag`` names the option that allows it."""
    target = path.resolve()
    for item in inputs:
        if item != "-" and Path(item).exists() and Path(item).resolve() == target:
            raise ConfigError(f"{path}: is an input of this run; write the output elsewhere")
    if path.exists() and not force:
        raise ConfigError(f"{path}: exists (an earlier run's output?); pass {flag} to overwrite it")


@contextmanager
def atomic_output(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` only once fully written (``path.part`` until then),
    so an error midway never leaves a half-written output behind."""
    tmp = path.with_name(path.name + ".part")
    try:
        with open(tmp, "wb") as fh:
            yield fh
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)


@contextmanager
def progress(description: str, total: int | None = None, enabled: bool | None = None) -> Iterator[Tracker]:
    """A rich progress bar on stderr that turns itself off when stderr is not a terminal."""
    on = err.is_terminal if enabled is None else enabled
    if not on:
        yield Tracker(None, None)
        return
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True,
    )
    with bar:
        yield Tracker(bar, bar.add_task(description, total=total))
