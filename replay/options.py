"""ReplayOptions: what one replay run is asked to do, in-process or through ``--server`` (one typed object).

:func:`prefixcache.replay.open_replay` takes one :class:`ReplayOptions` and dispatches on
``server``: None runs the in-process engine (:mod:`prefixcache.replay.local`), a URL
replays through that server (:mod:`prefixcache.replay.server`). The fields both stacks
read come first; then the in-process engine's and verification's; then the server's.
Every value is checked when the object is made (ConfigError naming the flag), before
any log is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from prefixcache.analyzer.cache.base import DEFAULT_BLOCK_SIZE
from prefixcache.analyzer.cache.capacity import Capacity
from prefixcache.analyzer.errors import ConfigError

PASSES = ("cold", "warm", "canonical")
#: How a server replay sends a request: our token ids, or the logged chat messages.
SENDS = ("tokens", "chat")


def at_least_one(*options: tuple[str, int | None]) -> None:
    """Raise ConfigError naming the first ``(option, value)`` whose value is below 1 (None = unset)."""
    for name, value in options:
        if value is not None and value < 1:
            raise ConfigError(f"{name} {value}: must be ≥ 1")


def check_passes(passes: tuple[str, ...]) -> None:
    """ConfigError for an unknown pass name, no pass, or a pass listed twice."""
    bad = [p for p in passes if p not in PASSES]
    if bad or not passes:
        raise ConfigError(f"--pass {','.join(bad) or '(none)'}: choose from {', '.join(PASSES)}")
    twice = sorted({p for p in passes if passes.count(p) > 1})
    if twice:
        raise ConfigError(f"--pass {','.join(passes)}: {', '.join(twice)} listed twice; give each pass once")


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """The ``replay`` command's flags, typed.

    Both stacks: ``input_format`` (log reader, ``auto`` = detect), ``template``
    (``model`` = the model's own chat template, else any ``--template`` spec),
    ``passes``, ``block_size`` (tokens; None = the default, 16, in-process, and the
    engine's own with ``--server``), ``capacity`` (None = unbounded; in-process resolved
    against the engine's KV bytes per token and the prompts; with ``--server`` blocks or
    tokens only, default the engine's ``num_gpu_blocks − 1`` for vLLM),
    ``max_new_tokens``, ``max_requests`` (the first N replayable requests),
    ``max_prompt_tokens`` (tokens; truncated from the end, prefix kept), ``out`` (the
    per-request JSONL) and ``resume`` (continue it).

    ``model``: in-process the weights to load (None = the built-in SmolLM2; a folder, a
    ``.gguf`` file, an HF id in the local cache); with ``--server`` the served model name
    requests must name (None = the server's first).

    In-process: ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``),
    ``dtype``, ``policy`` (the cache index's eviction policy), ``verify`` (``none``,
    ``sample``, ``all``), ``verify_every``, ``tol`` (max |Δlogit|; None = by dtype),
    ``repeat`` (prefills timed per request).

    Server: ``server`` (the base URL; None = in-process), ``api_key`` (sent as a bearer
    token, never shown), ``send`` (``tokens`` or ``chat``), ``tokenizer`` (ours; None = the folder the
    server loaded), the load shape (:mod:`prefixcache.replay.server.load`: ``concurrency``:
    None = 1, unbounded with ``rate``, ``schedule`` or ``users``; ``rate`` requests/s with
    ``burstiness``; ``schedule`` ``none`` / ``logged`` with ``time_scale``; ``users`` and
    ``think_time`` seconds; ``warmup`` ``N`` or ``Ts``; ``duration`` seconds; ``seed``),
    ``slo`` (``ttft=500ms,tpot=50ms``: goodput targets), ``timeout`` (seconds per read) and
    ``retries`` (resends of a failed request).
    ``kv_events``: the engine's KV-event publisher to subscribe to (``tcp://HOST:PORT``, or
    ``bind:tcp://127.0.0.1:PORT``; :mod:`prefixcache.replay.server.kvevents`; None = none).

    Raises ConfigError for counts below 1, a capacity below one block, ``resume``
    without ``out``, and nonsense server values.
    """

    input_format: str = "auto"
    template: str = "model"
    passes: tuple[str, ...] = PASSES
    block_size: int | None = None
    capacity: Capacity | None = None
    max_new_tokens: int = 1
    max_requests: int | None = None
    max_prompt_tokens: int | None = None
    out: Path | None = None
    resume: bool = False
    model: str | None = None
    device: str = "auto"
    dtype: str = "float32"
    policy: str = "lru"
    verify: str = "sample"
    verify_every: int = 4
    tol: float | None = None
    repeat: int = 1
    server: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never shown in a repr, error or log
    send: str = "tokens"
    tokenizer: str | None = None
    concurrency: int | None = None
    rate: float | None = None
    schedule: str = "none"
    time_scale: float = 1.0
    seed: int = 0
    burstiness: float = 1.0
    users: int | None = None
    think_time: float = 0.0
    warmup: str | None = None
    duration: float | None = None
    slo: str | None = None
    timeout: float = 300.0
    retries: int = 0
    kv_events: str | None = None

    def __post_init__(self) -> None:
        check_passes(self.passes)
        at_least_one(("--max-requests", self.max_requests), ("--max-prompt-tokens", self.max_prompt_tokens),
                     ("--block-size", self.block_size), ("--max-new-tokens", self.max_new_tokens))
        if self.resume and self.out is None:
            raise ConfigError("--resume needs --out (the results file to continue)")
        cap = self.capacity
        if self.server is None:
            bs = self.block_size or DEFAULT_BLOCK_SIZE
            if cap is not None and (cap.value <= 0 or (cap.unit in ("blocks", "tokens") and cap.blocks(bs, 0) < 1)):
                raise ConfigError(f"--capacity {cap.text}: less than one block of {bs} tokens")
            return
        if self.send not in SENDS:
            raise ConfigError(f"--send {self.send}: choose from {', '.join(SENDS)}")
        if self.retries < 0 or not self.timeout > 0:
            raise ConfigError("--retries must be ≥ 0 and --timeout > 0")
        if self.send == "chat" and self.max_prompt_tokens:
            raise ConfigError("--max-prompt-tokens truncates token ids: it needs --send tokens")
        if not self.server.startswith(("http://", "https://")):
            raise ConfigError(f"--server {self.server}: give an http:// or https:// URL")
        if cap is not None and cap.unit not in ("blocks", "tokens"):
            raise ConfigError(f"--capacity {cap.text}: with --server give blocks or tokens")
        from prefixcache.analyzer.serving import parse_slo

        parse_slo(self.slo)


#: Top-level modules of the ``replay`` extra (pyproject ``[project.optional-dependencies]``).
EXTRA_MODULES = frozenset({"torch", "transformers", "accelerate", "httpx", "sniffio", "prometheus_client", "zmq",
                           "msgpack"})


def missing_extra(exc: ImportError, what: str) -> ConfigError | None:
    """The one error for a replay stack whose optional dependencies are not installed
    (``exc`` raised while importing it; ``what``: the stack, as the user asked for it), or
    None when the missing module is not one of :data:`EXTRA_MODULES` (a real bug: re-raise)."""
    name = (exc.name or "").split(".")[0]
    if name not in EXTRA_MODULES:
        return None
    return ConfigError(f"{what} needs the replay extra, and {name} is not installed: pip install 'prefixcache[replay]'")
