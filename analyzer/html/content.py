"""What a ``prefixcache report`` shows, gathered from the library's own reports.

:func:`gather` runs :func:`~prefixcache.analyzer.lint.run.lint_paths`,
:func:`~prefixcache.analyzer.lint.simulated.simulate` (or reads a saved ``simulate --json``
document) and :func:`~prefixcache.analyzer.canonical.run.canonicalize_paths` (``canonicalize
--review --to openai --json``) over the logs, reads a replay run's rows, and keeps each
document exactly as its command's ``--json`` prints it (parsed JSON values of
``orjson.dumps(report)``), with the command line that reproduces it. The page (:mod:`.page`)
only formats and plots those values, so every number in the HTML is one of the JSON's; the
first screen's four answers (:mod:`.answers`) pick and label them.

The cache simulated: ``--cache auto`` (the default) takes the provider of the logged models
(:func:`~prefixcache.analyzer.cache.provider.prices.provider_of`, the provider of most
requests) and simulates its rules with no capacity (a provider cache has none a user sizes);
a log with no hosted model gets ``vllm`` and the capacity sweep. Every simulation adds the
sizing line (``--sizing 0.9``) with the KV size of ``--kv-model`` (default
:data:`SIZING_KV_MODEL`), and an engine's ``--survival`` (reuse in time).
"""

from __future__ import annotations

import shlex
import time
from collections import Counter
from io import BytesIO
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import orjson

from prefixcache.analyzer.cache.capacity import PRESETS, parse_capacities
from prefixcache.analyzer.cache.models import MODELS
from prefixcache.analyzer.cache.provider.prices import provider_of
from prefixcache.analyzer.cache.simulate.sizing import DEFAULT_TARGET
from prefixcache.analyzer.cache.simulate.study import SimulateOptions
from prefixcache.analyzer.canonical.run import canonicalize_paths
from prefixcache.analyzer.errors import ConfigError, InputError
from prefixcache.analyzer.html.answers import first_screen, usd_per_token
from prefixcache.analyzer.html.bounded import bound_lint, bound_replay, bound_simulate
from prefixcache.analyzer.replay_rows import ServerRow
from prefixcache.analyzer.serving import serving_figures
from prefixcache.analyzer.html.excerpts import DIFF_WINDOW, break_diffs
from prefixcache.analyzer.html.sources import is_fleet, read_replay, read_simulate
from prefixcache.analyzer.lint.config import LintConfig
from prefixcache.analyzer.lint.run import lint_paths
from prefixcache.analyzer.lint.simulated import SimulatedTee
from prefixcache.analyzer.model import Skipped

#: The capacity sweep and policies simulated by default: the curves' points, LRU and the offline
#: bound (belady runs on block-chain caches only, :attr:`~.models.Traits.block_chain`; the others
#: get LRU alone).
DEFAULT_CAPACITY = "5%,10%,25%,50%,100%"
DEFAULT_POLICIES = ("lru", "belady")
#: The KV size preset of the sizing line when ``--kv-model`` is not given.
SIZING_KV_MODEL = "llama-3-8b"
#: The format canonicalize's figures are read back in (every log format can be written as it).
CANONICALIZE_TO = "openai"
#: Prompt tokens (lint's count) above which the report leaves canonicalize to its own command: it
#: tokenizes the log three times more (before, rewritten, written back), about 3× lint's time.
CANONICALIZE_MAX_TOKENS = 20_000_000


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """What to put in the report. ``lint``: the lint settings (tokenizer, template, block size,
    redact, rules; its ``format`` is ignored); ``config``: the config file it came from (named
    in the reproducing command); ``input_format``: the log reader; ``cache`` (``auto``: the
    logged models' provider, else ``vllm``, :meth:`cache_for`) / ``policies`` / ``capacity`` (a
    ``--capacity`` spec; None: :data:`DEFAULT_CAPACITY` on an engine cache, none on a
    provider's; ``policies`` None: :data:`DEFAULT_POLICIES` on the block caches, ``lru`` on the
    others) / ``block_size`` (tokens; None: the cache's default) / ``kv_model`` (None:
    :data:`SIZING_KV_MODEL`, for the sizing line's bytes): the simulation, unless
    ``simulate_path`` names a saved ``simulate --json`` document (a fleet simulation's,
    ``simulate --replicas N --json``, fills the fleet section and the capacity simulation still
    runs here); ``replay_path``: a ``replay --out`` JSONL file for the replay section;
    ``diff_window``: tokens shown either side of each break's first divergent token;
    ``redact_key``: the key of ``lint.redact``'s hashes (None: a random key per run).
    ConfigError for a bad cache, capacity spec or window, before any work."""

    lint: LintConfig = field(default_factory=LintConfig)
    config: str | None = None
    input_format: str = "auto"
    cache: str = "auto"
    policies: tuple[str, ...] | None = None
    capacity: str | None = None
    block_size: int | None = None
    kv_model: str | None = None
    simulate_path: str | None = None
    replay_path: str | None = None
    diff_window: int = DIFF_WINDOW
    redact_key: str | None = None

    def __post_init__(self) -> None:
        if self.capacity is not None:
            parse_capacities(self.capacity)
        if self.cache != "auto" and self.cache not in MODELS:
            raise ConfigError(f"unknown --cache {self.cache!r}; choose auto or one of {', '.join(MODELS)}")
        if self.diff_window < 1:
            raise ConfigError("--window must be >= 1")

    def cache_for(self, models: Iterable[str | None], traced: bool = False) -> tuple[str, str]:
        """The cache simulated for requests of ``models`` and why: ``--cache`` when given, else
        ``vllm`` for a block trace (``traced``: hash ids only; a provider's rules need tokens),
        else the provider of most of them (:func:`provider_of`), else ``vllm``."""
        if self.cache != "auto":
            return self.cache, "as --cache asks"
        if traced:
            return "vllm", "a block trace (hash ids, no tokens for a provider's rules), so a self-hosted vLLM cache"
        models = list(models)
        found = Counter(p for p in map(provider_of, models) if p is not None)
        if not found:
            return "vllm", "no hosted model in the log, so a self-hosted vLLM cache"
        provider, n = found.most_common(1)[0]
        named = Counter(m for m in models if provider_of(m) == provider).most_common(1)[0][0]
        return provider, f"the provider of the logged model ({named}; {n:,} of {len(models):,} requests)"

    def policy_list(self, cache: str) -> tuple[str, ...]:
        """The policies simulated on ``cache``."""
        if self.policies:
            return self.policies
        model = MODELS.get(cache)  # an unknown name is SimulateOptions' error to raise
        return DEFAULT_POLICIES if model is not None and model.traits.block_chain else ("lru",)

    def capacity_for(self, cache: str) -> str | None:
        """The ``--capacity`` spec simulated on ``cache`` (None: unbounded, a provider's cache)."""
        if self.capacity is not None:
            return self.capacity
        return None if self.hosted(cache) else DEFAULT_CAPACITY

    @property
    def sizing_kv_model(self) -> str:
        """The KV preset of the sizing line."""
        return self.kv_model or SIZING_KV_MODEL

    @property
    def redact(self) -> bool:
        """Whether the page holds no prompt text (the lint settings' ``redact``)."""
        return self.lint.redact

    def simulate_options(self, cache: str) -> SimulateOptions:
        """The simulation these options ask for on ``cache`` (ConfigError for nonsense values)."""
        spec = self.capacity_for(cache)
        return SimulateOptions(cache=cache, policies=self.policy_list(cache),
                               capacities=tuple(parse_capacities(spec)) if spec else (),
                               block_size=self.block_size, kv_model=self.sizing_kv_model, input_format=self.input_format,
                               tokenizer=self.lint.tokenizer, template=self.lint.template,
                               survival=not self.hosted(cache), sizing=DEFAULT_TARGET)

    @staticmethod
    def hosted(cache: str) -> bool:
        """Whether ``cache`` is a provider's (priced; no capacity a user sizes). The report runs
        ``--survival`` on engine caches only: on a provider's token-granular cache it replays
        every token (11 CPU seconds for the 3.6M-token Claude Code sample against 1.3 without)."""
        model = MODELS.get(cache)
        return model is not None and model.traits.priced


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
    replay rows (``replay_bounded``, :func:`.bounded.bound_replay`). ``canonicalize``: the
    ``canonicalize --review --to openai --json`` document (None when the logs hold no prompt
    text to rewrite); ``answers``: the first screen (:func:`.answers.first_screen`); ``serving``:
    the serving figures per pass of a ``replay --server`` run (:func:`serving_by_pass`, from every
    row, before bounding)."""

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
    canonicalize: dict[str, Any] | None = None
    answers: dict[str, Any] = field(default_factory=dict)
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


def commands(paths: Sequence[str], options: ReportOptions, cache: str, fleet: bool = False) -> dict[str, str]:
    """The command lines whose ``--json`` each section shows (``lint``, ``simulate`` on
    ``cache``, ``canonicalize``; ``fleet`` when the saved document is a fleet simulation's)."""
    cfg = options.lint
    prep = [("--input-format", options.input_format if options.input_format != "auto" else None),
            ("--tokenizer", cfg.tokenizer), ("--template", cfg.template)]
    lint = _command("lint", paths, [*prep, ("--block-size", cfg.block_size), ("--redact", cfg.redact),
                                    ("--config", options.config)])
    sim = _command("simulate", paths, [*prep, ("--cache", cache), ("--policy", ",".join(options.policy_list(cache))),
                                       ("--capacity", options.capacity_for(cache)), ("--block-size", options.block_size),
                                       ("--kv-model", options.sizing_kv_model),
                                       ("--survival", not options.hosted(cache)),
                                       ("--sizing", DEFAULT_TARGET)])
    canon = _command("canonicalize", paths, [*prep, ("--review", True), ("--to", CANONICALIZE_TO),
                                             ("--redact", cfg.redact)])
    saved = f"cat {shlex.quote(options.simulate_path)}" if options.simulate_path else None
    if fleet:
        return {"lint": lint, "simulate": sim, "fleet": saved or "", "canonicalize": canon}
    return {"lint": lint, "simulate": saved or sim, "canonicalize": canon}


def canonicalized(paths: Sequence[str], options: ReportOptions, tee: SimulatedTee | None = None
                  ) -> tuple[dict[str, Any] | None, str | None]:
    """``canonicalize --review --to openai --json`` over ``paths`` as a JSON value, or None and
    the reason (a log with no prompt text to rewrite: a block trace, usage-only records).
    ``tee``: lint's pass over the same ``paths``, whose staged token ids give canonicalize's
    ``before`` figures (:meth:`~prefixcache.analyzer.lint.simulated.SimulatedTee.reuse_of`)
    instead of preparing the log once more."""
    cfg = options.lint
    try:
        run = canonicalize_paths(paths, input_format=options.input_format, template=cfg.template,
                                 tokenizer=cfg.tokenizer, redact=cfg.redact,
                                 before=tee.reuse_of if tee is not None else None)
        buf = BytesIO()
        run.write(buf, CANONICALIZE_TO)
    except ConfigError as exc:
        return None, f"canonicalize: {exc}"
    return _json(run.report("", 0, buf.getvalue())), None


def gather(paths: Sequence[str], options: ReportOptions,
           on_request: Callable[[], None] | None = None) -> ReportDocuments:
    """Lint and simulate ``paths`` (or read the saved documents), read the replay rows.

    The logs are read, rendered and tokenized once: lint's pass hands each prepared request
    to the simulation (:class:`~prefixcache.analyzer.lint.simulated.SimulatedTee`), whose
    document is the one ``simulate --json`` prints. ``on_request`` is called once per request
    prepared. Raises ConfigError for bad options or ``-`` among the paths (the break
    excerpts read the logs again), InputError for unreadable inputs.
    """
    if "-" in paths:
        raise ConfigError("report reads its logs twice (lint and simulate, then the break excerpts): give files, not - (stdin)")
    sim_options = options.simulate_options(options.cache if options.cache != "auto" else "vllm")  # bad values fail first
    replay = read_replay(options.replay_path) if options.replay_path else None
    saved = read_simulate(options.simulate_path) if options.simulate_path else None
    fleet = saved if saved is not None and is_fleet(saved) else None
    if fleet is not None:
        saved = None  # the capacity curves are simulated here
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    tee = SimulatedTee(sim_options) if saved is None else None  # simulate from lint's prepared requests
    run = lint_paths(paths, options.lint, options.input_format, None, on_request, tee=tee)  # skip reasons redacted there
    results = run.results
    priced = [(r.model, r.prompt_tokens or r.reported_prompt_tokens or 0) for r in results]
    traced = any(not r.usage_only for r in results) and all(r.exact is None for r in results if not r.usage_only)
    cache, chosen_by = options.cache_for((m for m, _ in priced), traced)
    if fleet is not None and options.cache == "auto" and fleet.get("cache") in MODELS:
        cache, chosen_by = fleet["cache"], "the fleet document's cache (its replicas are self-hosted)"
    if saved is not None:
        cache, chosen_by = saved.get("cache", cache), f"the saved simulate document ({options.simulate_path})"
    lint = bound_lint(_json(run.report()))
    seconds["lint"] = round(time.perf_counter() - t0, 3)
    if tee is not None and lint["summary"]["prompt_tokens"]:
        t0 = time.perf_counter()
        saved = bound_simulate(_json(tee.report(run.ingest, run.notes, options.simulate_options(cache))))
        seconds["simulate"] = round(time.perf_counter() - t0, 3)
    canon, canon_note = None, None
    if lint["summary"]["prompt_tokens"] > CANONICALIZE_MAX_TOKENS and not traced:
        canon_note = (f"canonicalize: not run here on {lint['summary']['prompt_tokens']:,} prompt tokens (more than "
                      f"{CANONICALIZE_MAX_TOKENS:,}); run the canonicalize command shown for its figures")
    elif lint["summary"]["prompt_tokens"]:
        t0 = time.perf_counter()
        canon, canon_note = canonicalized(paths, options, tee)
        seconds["canonicalize"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    cfg = options.lint
    diffs = break_diffs(paths, lint, options.input_format, cfg.template, cfg.tokenizer, cfg.redact, options.diff_window)
    seconds["diff"] = round(time.perf_counter() - t0, 3)
    serving = serving_by_pass(replay, options.replay_path or "") if replay is not None else None
    if replay is not None:
        replay = [{k: v for k, v in row.items() if k != "output_ids"} for row in replay]  # model text as ids
    replay, replay_note = bound_replay(replay)
    per_token = usd_per_token(cache, priced) if saved is not None and saved.get("cost") is not None else None
    kv = options.sizing_kv_model
    answers = first_screen(lint, saved, canon, fleet, cache=cache, chosen_by=chosen_by,
                           user_capacity=options.capacity is not None, per_token=per_token,
                           kv_name=f"{kv} KV" + (f", {PRESETS[kv].bytes_per_token:,} bytes/token" if kv in PRESETS else ""),
                           notes=[n for n in (canon_note,) if n])
    return ReportDocuments(lint, saved, replay, commands(paths, options, cache, fleet is not None), cfg.redact,
                           run.skipped, seconds, fleet, diffs, replay_note, canon, answers, serving)


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
