"""Load shapes of a server replay: when each request of a pass may be sent.

A pass's requests come in the one arrival order; every turn of a session waits for the
response of the turn before it (:mod:`prefixcache.replay.server.schedule` runs them).
On top of that order, the shape says when a turn is *due*:

* ``--concurrency N`` alone — every turn is due at once: N workers send the next ready
  turn of any session (sessions run side by side; sequential when N = 1, the default);
* ``--rate R`` — open loop: the requests, in arrival order, are due at the arrival times
  of a Poisson process of R requests/s (exponential gaps), or of a gamma process with
  ``--burstiness B`` (shape B, scale 1/(R·B): the same mean rate, burstier below 1, more
  regular above; 1 = Poisson) — vLLM ``bench serve``'s ``--request-rate`` /
  ``--burstiness``; seeded (``--seed``), so a run is reproducible;
* ``--schedule logged --time-scale X`` — due at the logged offsets multiplied by X
  (0.1 = ten times faster);
* ``--users N --think-time S`` — closed loop: N users, each replays one session at a time
  (the next unstarted one in arrival order), sending a turn S seconds after the previous
  turn's response came back.

``--warmup N`` (the first N sends) or ``--warmup Ts`` (sends in the first T seconds) marks
requests left out of the figures; ``--duration S`` stops sending new requests S seconds
into the pass (those not sent are counted, never dropped silently). Offsets are seconds
from the pass's start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from prefixcache.analyzer.errors import ConfigError

SCHEDULES = ("none", "logged")


@dataclass(frozen=True, slots=True)
class Warmup:
    """Requests left out of the figures: the first ``requests`` sent, or those sent in the
    first ``seconds`` of a pass (one of them; both 0 = none)."""

    requests: int = 0
    seconds: float = 0.0

    @classmethod
    def parse(cls, text: str | None) -> "Warmup":
        """``N`` (requests) or ``Ts`` / ``T.5s`` (seconds); ConfigError otherwise."""
        if text is None or not text.strip():
            return cls()
        t = text.strip().lower()
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*s", t)
        if m:
            return cls(seconds=float(m.group(1)))
        if t.isdigit():
            return cls(requests=int(t))
        raise ConfigError(f"--warmup {text}: give a number of requests (20) or seconds (30s)")

    @property
    def name(self) -> str:
        """``20 requests``, ``30 s`` or ``none``."""
        return (f"{self.requests} requests" if self.requests else f"{self.seconds:g} s" if self.seconds else "none")


@dataclass(frozen=True, slots=True)
class LoadShape:
    """``concurrency``: requests in flight at most (1 = sequential; None = unbounded, only
    with a rate, schedule or users); ``rate``: arrivals per second (None = as fast as the
    concurrency allows) with ``burstiness`` (gamma shape; 1 = Poisson); ``schedule``:
    ``none`` or ``logged`` with ``time_scale`` (multiplies logged gaps); ``users`` /
    ``think_time`` (closed loop, seconds); ``warmup``; ``duration`` (seconds of sending;
    None = until every request is sent); ``seed``: the arrival generator's. Raises
    ConfigError for nonsense values or contradicting shapes."""

    concurrency: int | None = 1
    rate: float | None = None
    schedule: str = "none"
    time_scale: float = 1.0
    seed: int = 0
    burstiness: float = 1.0
    users: int | None = None
    think_time: float = 0.0
    warmup: Warmup = Warmup()
    duration: float | None = None

    def __post_init__(self) -> None:
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError(f"--concurrency {self.concurrency}: must be ≥ 1")
        if self.rate is not None and not self.rate > 0:
            raise ConfigError(f"--rate {self.rate}: must be > 0 requests/s")
        if not self.burstiness > 0:
            raise ConfigError(f"--burstiness {self.burstiness}: must be > 0 (1 = Poisson)")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"--schedule {self.schedule}: choose from {', '.join(SCHEDULES)}")
        if self.rate is not None and self.schedule != "none":
            raise ConfigError("--rate and --schedule logged both set send times: give one")
        if not self.time_scale > 0:
            raise ConfigError(f"--time-scale {self.time_scale}: must be > 0")
        if self.burstiness != 1 and self.rate is None:
            raise ConfigError("--burstiness shapes the arrivals of --rate: give --rate too")
        if self.time_scale != 1 and self.schedule != "logged":
            raise ConfigError("--time-scale scales the logged arrival times: give --schedule logged too")
        if self.users is not None:
            if self.users < 1:
                raise ConfigError(f"--users {self.users}: must be ≥ 1")
            if self.rate is not None or self.schedule != "none":
                raise ConfigError("--users is a closed loop (a user sends when its previous answer is back); "
                                  "--rate and --schedule are open loops: give one")
        if self.think_time < 0 or (self.think_time and self.users is None):
            raise ConfigError("--think-time must be ≥ 0 seconds and needs --users")
        if self.duration is not None and not self.duration > 0:
            raise ConfigError(f"--duration {self.duration}: must be > 0 seconds")

    @property
    def name(self) -> str:
        """A short description (``sequential``, ``concurrency 4``, ``poisson 2/s seed 0``, ``logged ×0.1``,
        ``closed loop 8 users, think 1 s``), with warm-up and duration when set."""
        parts = []
        if self.rate is not None:
            kind = "poisson" if self.burstiness == 1 else f"gamma (burstiness {self.burstiness:g})"
            parts.append(f"{kind} {self.rate:g}/s seed {self.seed}")
        if self.schedule == "logged":
            parts.append(f"logged ×{self.time_scale:g}")
        if self.users is not None:
            parts.append(f"closed loop {self.users} users, think {self.think_time:g} s")
        if (self.concurrency != 1 or not parts) and not (self.users is not None and self.concurrency is None):
            parts.append("sequential" if self.concurrency == 1 else
                         "unbounded concurrency" if self.concurrency is None else f"concurrency {self.concurrency}")
        if self.warmup.name != "none":
            parts.append(f"warm-up {self.warmup.name}")
        if self.duration is not None:
            parts.append(f"duration {self.duration:g} s")
        return ", ".join(parts)

    def offsets(self, clocks: Sequence[float]) -> list[float]:
        """Due offsets (seconds from the pass start) of requests whose logical clocks (logged
        seconds, in arrival order) are ``clocks``: all 0 without a rate or schedule. With a
        rate the first request is due at 0 and the gaps are drawn (numpy ``default_rng(seed)``:
        ``exponential(1/rate)``, or ``gamma(burstiness, 1/(rate·burstiness))``), then scaled so
        that the last is due at (n − 1)/rate, as ``vllm bench serve`` rescales its draws
        (vLLM 0.32 ``benchmarks/serve.py`` ``get_request``): the run's arrival rate is the target
        whatever the sample (for Poisson, arrivals conditioned on their count: uniform spacings),
        where a raw draw of 100–300 gaps is off by 10–16% at seed 0."""
        n = len(clocks)
        if self.rate is not None:
            rng = np.random.default_rng(self.seed)
            if self.burstiness == 1:
                gaps = rng.exponential(1.0 / self.rate, n)
            else:
                gaps = rng.gamma(self.burstiness, 1.0 / (self.rate * self.burstiness), n)
            due = np.cumsum(gaps[1:])
            if n > 1 and due[-1] > 0:
                due *= ((n - 1) / self.rate) / due[-1]
            return [0.0] + [float(x) for x in due] if n else []
        if self.schedule == "logged" and n:
            return [max(0.0, (c - clocks[0]) * self.time_scale) for c in clocks]
        return [0.0] * n

    def limit(self) -> int | None:
        """Requests in flight at most: the concurrency (None = unbounded; with ``users``
        never more than the users)."""
        if self.users is not None:
            return min(self.users, self.concurrency or self.users)
        return self.concurrency

    def check_input(self, requests: int, sessions: int) -> tuple[str, ...]:
        """Check the shape against a pass of ``requests`` requests in ``sessions`` sessions.

        Raises ConfigError when ``--warmup N`` would leave every request of a pass out of the
        figures (N ≥ ``requests``: the summary would be all zero). Returns warnings (``warning:
        …`` lines) for a shape the input cannot fill: ``--users`` above the number of sessions
        (a user replays one session at a time, so only ``sessions`` users are ever busy)."""
        if self.warmup.requests and self.warmup.requests >= requests:
            raise ConfigError(f"--warmup {self.warmup.requests}: each cache pass sends {requests:,} request(s), so "
                              "every one would be left out of the figures (the summary would be all zero); give a "
                              f"warm-up below {requests:,}, or none")
        if self.users is not None and self.users > sessions:
            return (f"warning: --users {self.users}: the input has {sessions:,} session(s), and a user replays one "
                    f"session at a time, so at most {sessions:,} user(s) are ever busy; the load is that of "
                    f"--users {sessions}",)
        return ()
