"""What a ``prefixcache report`` shows, gathered from the library's own reports.

:func:`gather` runs :func:`~prefixcache.analyzer.lint.run.lint_paths` and
:func:`~prefixcache.analyzer.lint.simulated.simulate` over the logs (or reads a saved ``simulate
--json`` document), reads a replay run's rows, and keeps each document exactly as its
command's ``--json`` prints it (parsed JSON values of ``orjson.dumps(report)``), with the
command line that reproduces it. The page (:mod:`.page`) only formats and plots those
values, so every number in the HTML is one of the JSON's.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import orjson

from prefixcache.analyzer.cache.capacity import parse_capacities
from prefixcache.analyzer.cache.models import MODELS
from prefixcache.analyzer.cache.simulate.study import SimulateOptions
from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.html.bounded import bound_lint, bound_replay, bound_simulate
from prefixcache.analyzer.replay_rows import ServerRow
from prefixcache.analyzer.serving import serving_figures
from prefixcache.analyzer.html.excerpts import DIFF_WINDOW, break_diffs
from prefixcache.analyzer.html.sources import is_fleet, read_replay, read_simulate
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.lint.simulated import simulate
from prefixcache.analyzer.model import Skipped

#: The capacity sweep and policies simulated by default: the curves' points, LRU and the offline
#: bound (belady runs on block-chain caches only, :attr:`~.models.Traits.block_chain`; the others
#: get LRU alone).
DEFAULT_CAPACITY = "5%,10%,25%,50%,100%"
DEFAULT_POLICIES = ("lru", "belady")


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """What to put in the report. ``lint``: the lint settings (tokenizer, template, block size,
    redact, rules; its ``format`` is ignored); ``config``: the config file it came from (named
    in the reproducing command); ``input_format``: the log reader; ``cache`` / ``policies`` /
    ``capacity`` (a ``--capacity`` spec; ``policies`` None: :data:`DEFAULT_POLICIES` on the
    block caches, ``lru`` on the others) / ``block_size`` (tokens; None: the cache's default)
    / ``kv_model``: the simulation, unless ``simulate_path`` names a saved ``simulate --json``
    document (a fleet simulation's, ``simulate --replicas N --json``, fills the fleet section
    and the capacity simulation still runs here); ``replay_path``: a ``replay --out`` JSONL
    file for the replay section; ``diff_window``: tokens shown either side of each break's
    first divergent token; ``redact_key``: the key of ``lint.redact``'s hashes (None: a random
    key per run). ConfigError for a bad capacity spec or window, before any work."""

    lint: LintConfig = field(default_factory=LintConfig)
    config: str | None = None
    input_format: str = "auto"
    cache: str = "vllm"
    policies: tuple[str, ...] | None = None
    capacity: str = DEFAULT_CAPACITY
    block_size: int | None = None
    kv_model: str | None = None
    simulate_path: str | None = None
    replay_path: str | None = None
    diff_window: int = DIFF_WINDOW
    redact_key: str | None = None

    def __post_init__(self) -> None:
        parse_capacities(self.capacity)
        if self.diff_window < 1:
            raise ConfigError("--window must be >= 1")

    @property
    def policy_list(self) -> tuple[str, ...]:
        """The policies simulated."""
        if self.policies:
            return self.policies
        model = MODELS.get(self.cache)  # an unknown name is SimulateOptions' error to raise
        return DEFAULT_POLICIES if model is not None and model.traits.block_chain else ("lru",)

    @property
    def redact(self) -> bool:
        """Whether the page holds no prompt text (the lint settings' ``redact``)."""
        return self.lint.redact

    def simulate_options(self) -> SimulateOptions:
        """The simulation these options ask for (ConfigError for nonsense values)."""
        return SimulateOptions(cache=self.cache, policies=self.policy_list, capacities=tuple(parse_capacities(self.capacity)),
                               block_size=self.block_size, kv_model=self.kv_model, input_format=self.input_format,
                               tokenizer=self.lint.tokenizer, template=self.lint.template, survival=True)


@dataclass(frozen=True, slots=True)
class ReportDocuments:
    """The documents one report shows, as parsed JSON values, with the commands that print them:
    ``lint`` (``lint --json``), ``simulate`` (``simulate --json``, None when the logs had no
    prompts to simulate), ``replay`` (replay result rows, None without ``--replay``);
    ``commands``: section → command line; ``skipped``: the input records lint left out;
    ``seconds``: wall time per document (seconds); ``fleet``: a ``simulate --replicas N
    --json`` document (None without one); ``diffs``: the break markers' ``diff --json``
    excerpts (:func:`.excerpts.break_diffs`). On a big input ``lint`` is bounded
    (:func:`.bounded.bound_lint`: its ``report_bounded`` says what was left out) and so are the
    replay rows (``replay_bounded``, :func:`.bounded.bound_replay`). ``serving``: the serving figures
    per pass of a ``replay --server`` run (:func:`serving_by_pass`, from every row, before bounding)."""

    lint: dict[str, Any]
    simulate: dict[str, Any] | None
    replay: list[dict[str, Any]] | None
    commands: dict[str, str]
    redact: bool
    skipped: tuple[Skipped, ...]
    seconds: dict[str, float]
    fleet: dict[str, Any] | None = None
    diffs: list[dict[str, Any]] = field(default_factory=list)
    replay_bounded: dict[str, Any] | None = None
    serving: dict[str, Any] | None = None


def _json(report: object) -> Any:
    return orjson.loads(orjson.dumps(report))


def _command(name: str, paths: Sequence[str], flags: Sequence[tuple[str, object]]) -> str:
    args = ["prefixcache", name, *paths, "--json"]
    for flag, value in flags:
        if value is True:
            args.append(flag)
        elif value not in (None, False, ""):
            args += [flag, str(value)]
    return shlex.join(args)


def commands(paths: Sequence[str], options: ReportOptions, fleet: bool = False) -> dict[str, str]:
    """The command lines whose ``--json`` each section shows (``lint``, ``simulate``; ``fleet``
    when the saved document is a fleet simulation's)."""
    cfg = options.lint
    prep = [("--input-format", options.input_format if options.input_format != "auto" else None),
            ("--tokenizer", cfg.tokenizer), ("--template", cfg.template)]
    lint = _command("lint", paths, [*prep, ("--block-size", cfg.block_size), ("--redact", cfg.redact),
                                    ("--config", options.config)])
    sim = _command("simulate", paths, [*prep, ("--cache", options.cache), ("--policy", ",".join(options.policy_list)),
                                       ("--capacity", options.capacity), ("--block-size", options.block_size),
                                       ("--kv-model", options.kv_model), ("--survival", True)])
    saved = f"cat {shlex.quote(options.simulate_path)}" if options.simulate_path else None
    if fleet:
        return {"lint": lint, "simulate": sim, "fleet": saved or ""}
    return {"lint": lint, "simulate": saved or sim}


def gather(paths: Sequence[str], options: ReportOptions,
           on_request: Callable[[], None] | None = None) -> ReportDocuments:
    """Lint and simulate ``paths`` (or read the saved documents), read the replay rows.

    ``on_request`` is called once per request prepared (twice per request when the
    simulation runs here). Raises ConfigError for bad options or ``-`` among the paths
    (the logs are read twice), InputError for unreadable inputs.
    """
    if "-" in paths:
        raise ConfigError("report reads its logs twice (lint, then simulate): give files, not - (stdin)")
    sim_options = options.simulate_options()  # bad values fail first
    replay = read_replay(options.replay_path) if options.replay_path else None
    saved = read_simulate(options.simulate_path) if options.simulate_path else None
    fleet = saved if saved is not None and is_fleet(saved) else None
    if fleet is not None:
        saved = None  # the capacity curves are simulated here
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    run = lint_paths(paths, options.lint, options.input_format, None, on_request)  # skip reasons redacted there
    lint = bound_lint(_json(run.report()))
    seconds["lint"] = round(time.perf_counter() - t0, 3)
    if saved is None and lint["summary"]["prompt_tokens"]:
        t0 = time.perf_counter()
        saved = bound_simulate(_json(simulate(paths, sim_options, on_prepared=on_request)))
        seconds["simulate"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    cfg = options.lint
    diffs = break_diffs(paths, lint, options.input_format, cfg.template, cfg.tokenizer, cfg.redact, options.diff_window)
    seconds["diff"] = round(time.perf_counter() - t0, 3)
    serving = serving_by_pass(replay, options.replay_path or "") if replay is not None else None
    if replay is not None:
        replay = [{k: v for k, v in row.items() if k != "output_ids"} for row in replay]  # model text as ids
    replay, replay_note = bound_replay(replay)
    return ReportDocuments(lint, saved, replay, commands(paths, options, fleet is not None), cfg.redact,
                           run.skipped, seconds, fleet, diffs, replay_note, serving)


def serving_by_pass(rows: list[dict[str, Any]], path: str = "") -> dict[str, Any] | None:
    """``{pass: ServingFigures as JSON}`` of the ``replay --server`` rows among ``rows`` (those with
    ``t_send``; :func:`~prefixcache.analyzer.serving.serving_figures`, no SLO), a request recorded
    twice counted once by its latest row; None when there are none (an in-process replay).
    InputError naming ``path`` and the pass for a row that is not a server row."""
    served = [r for r in rows if "t_send" in r]
    if not served:
        return None
    latest: dict[tuple[str, int], ServerRow] = {}
    for r in served:
        try:
            row = ServerRow.from_json(r)
        except (TypeError, ValueError) as exc:
            raise InputError(f"pass {r.get('pass_name')} #{r.get('position')}: not a replay --server row ({exc})",
                             path) from None
        latest[row.key] = row
    passes = list(dict.fromkeys(k[0] for k in latest))
    return {p: _json(serving_figures([r for k, r in latest.items() if k[0] == p])) for p in passes}
