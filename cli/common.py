"""What every command shares: consoles, error handling, skip reports, output checks, progress.

Exit codes (all commands): 0 clean, 1 findings at or above the threshold, 2 usage
or input error. Library errors (:class:`PrefixcacheError`) become one red line on
stderr and exit 2 — never a traceback.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from prefixcache.analyzer import redact
from prefixcache.analyzer.errors import ConfigError, PrefixcacheError
from prefixcache.analyzer.ingest import skipped_message
from prefixcache.analyzer.model import Skipped
from prefixcache.cli.output import same_file

if sys.stdin is None:  # a closed stdin (``<&-``): ``-`` reads as empty input, not an AttributeError
    sys.stdin = open(os.devnull)  # noqa: SIM115 (lives as long as the process)


def _width() -> int | None:
    """Console width: the terminal's (None: rich measures it), else ``$COLUMNS`` when set, else 160
    for pipes and CI logs (rich would otherwise cut tables to 80 columns)."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else 160


class _Console(Console):
    """A rich console that reports a closed pipe (``| head -1``) as :class:`BrokenPipeError`
    for :func:`handle_errors` (rich itself would exit 1) and prints nothing more after it."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


# emoji off: a session id or value like ``cuda:x:`` must print as written
console = _Console(highlight=False, soft_wrap=False, width=_width(), emoji=False)
err = _Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

F = TypeVar("F", bound=Callable)

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 request`` / ``2 requests`` (``many``: an irregular plural), thousands comma-grouped."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def fail(message: str) -> typer.Exit:
    """Print ``message`` as an error and return the exit-2 exception to raise. Quoted input in
    it is hashed when the library turned redaction on for the command (rendering: errors are
    raised before any report exists)."""
    message = redact.redact_message(message) if redact.active() else message
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    return typer.Exit(EXIT_ERROR)


_code_when_stopped = EXIT_OK


def exit_code_if_stopped(code: int) -> None:
    """Tell :func:`handle_errors` the command's exit code, known before it prints its report:
    a closed stdout pipe while printing then exits with it (default: 0)."""
    global _code_when_stopped
    _code_when_stopped = code


def stdout_closed() -> None:
    """The reader of stdout went away (``| head -1``): point stdout at the null device, so
    that later writes and the interpreter's last flush succeed silently (no "Exception
    ignored" message, no exit 120)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests capture stdout)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def handle_errors(fn: F) -> F:
    """Turn :class:`PrefixcacheError` (and an OSError naming a file) into one line and exit 2,
    and a closed stdout pipe into a silent stop: exit 0, or the code the command announced
    with :func:`exit_code_if_stopped` (nobody reads the rest)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        console.width = _width()  # per command: $COLUMNS as it is now, not at import
        console.quiet = err.quiet = False
        exit_code_if_stopped(EXIT_OK)
        redact.enable(False)  # the library turns it on for a command run with redact (lint --redact)
        try:
            return fn(*args, **kwargs)
        except PrefixcacheError as exc:
            raise fail(str(exc).replace("[", r"\[")) from None
        except BrokenPipeError:
            stdout_closed()
            raise typer.Exit(_code_when_stopped) from None
        except OSError as exc:
            if exc.filename is None:
                raise
            raise fail(escape(f"{exc.filename}: {exc.strerror or exc}")) from None

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
    when there were such records and the command must exit 2. Under ``--redact`` the
    library's run already holds redacted reasons.
    """
    fatal = False
    for s in skipped:
        is_error = s.bad and not skip_bad
        fatal |= is_error
        label = "[red]error:[/]" if is_error else "[yellow]skipped:[/]"
        line = skipped_message(s)
        err.print(f"{label} {escape(line)}", highlight=False)
    return fatal


def check_output(path: str | Path, inputs: Iterable[str], force: bool = False, flag: str = "--force",
                 make_parents: bool = False) -> None:
    """Refuse (ConfigError, exit 2) to write ``path`` when it is empty, a symbolic link (writing
    through it or replacing it would both surprise), a directory or anything but a regular file,
    one of the ``inputs`` (never overwritten, even with ``force``), or an existing file without
    ``force`` (an earlier run's output; ``flag`` names the option that allows it); and when its
    folder does not exist (``make_parents``: when the nearest existing ancestor is no folder)."""
    if not str(path).strip():
        raise ConfigError("the output path is empty; give a file name")
    path = Path(path)
    if path.is_symlink():
        raise ConfigError(f"{path}: is a symbolic link (to {os.readlink(path)}); write to the file itself "
                          "or to another path")
    target = path.resolve()
    for item in inputs:
        if item != "-" and Path(item).exists() and (Path(item).resolve() == target or same_file(path, Path(item))):
            raise ConfigError(f"{path}: is an input of this run; write the output elsewhere")
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory; give a file name for the output")
    if path.exists() and not stat.S_ISREG(mode := path.stat().st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise ConfigError(f"{path}: is not a regular file ({kind}); give a file name for the output")
    if path.exists() and not force:
        raise ConfigError(f"{path}: exists (an earlier run's output?); pass {flag} to overwrite it")
    _check_folder(path, make_parents)


def _check_folder(path: Path, make_parents: bool) -> None:
    """ConfigError unless ``path``'s folder exists (or, with ``make_parents``, can be made:
    its nearest existing ancestor is a folder)."""
    folder = path.parent
    if make_parents:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
    if not folder.exists():
        raise ConfigError(f"{path}: folder {folder} does not exist")
    if not folder.is_dir():
        raise ConfigError(f"{path}: {folder} is not a folder")


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
