"""Fleet traffic: real corpus requests with arrival times from a stated generator and repeats from
a stated popularity model (all seeded: the same spec gives the same traffic, byte for byte).

Arrivals (`arrival_times`): a renewal process at `rate` req/s whose gaps are gamma-distributed with
coefficient of variation `cv` (cv = 1: Poisson; cv > 1: bursty; cv < 1: smoother than Poisson),
optionally modulated by a daily cycle rate(t) = rate x (1 + A sin(2 pi t / period)) through a time
change (operational time u = integral of rate(t) / rate, so the cycle changes when requests come,
not how bursty they are at a given load).

Popularity (`prompt_draws`): which corpus request each arrival carries.
- `none`: every arrival a new request (a seeded permutation of the corpus, cycled when exhausted).
- `repeat`: with probability `repeat_share` an arrival repeats the request of the arrival
  `D` arrivals earlier, D ~ geometric with mean `reuse_distance` (clipped to the first arrival);
  otherwise a new request as under `none`.
- `zipf`: request of popularity rank r (ranks: a seeded permutation) with probability ~ r^-s.
A repeat is the same prompt with the same greedy output (the trace's), as a server would produce.

Sessions: a conversation id where the trace has one (MT-Bench `mt_bench/<id>/t<turn>` ->
`mt_bench/<id>`); every other arrival is its own session (`a<position>`): a repeated prompt
from another user is another session.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from simkit.errors import InputError

POPULARITY = ("none", "repeat", "zipf")
_TURN = re.compile(r"^(?P<conv>.+)/t(?P<turn>\d+)$")


@dataclass(frozen=True)
class TrafficSpec:
    """What generates the traffic; `label` is printed in every report."""

    rate: float = 40.0               # mean req/s over the whole fleet
    duration_s: float = 60.0         # arrivals in [0, duration_s)
    cv: float = 1.0                  # gap coefficient of variation (1 = Poisson)
    daily_amplitude: float = 0.0     # A in [0, 1): rate swings between (1 - A) and (1 + A) x rate
    period_s: float = 86400.0        # the cycle's period
    popularity: str = "repeat"
    repeat_share: float = 0.3
    reuse_distance: float = 200.0    # mean arrivals between a request and its repeat
    zipf_s: float = 1.0
    seed: int = 0

    def check(self) -> "TrafficSpec":
        """InputError naming the option when a value is out of range."""
        for name, val in (("rate", self.rate), ("duration", self.duration_s), ("cv", self.cv),
                          ("period", self.period_s), ("reuse-distance", self.reuse_distance),
                          ("zipf-s", self.zipf_s)):
            if not (math.isfinite(val) and val > 0):
                raise InputError(f"must be a finite number > 0, got {val}", field=name)
        if not (math.isfinite(self.daily_amplitude) and 0 <= self.daily_amplitude < 1):
            raise InputError(f"must be in [0, 1), got {self.daily_amplitude}",
                             field="daily-amplitude")
        if not (math.isfinite(self.repeat_share) and 0 <= self.repeat_share <= 1):
            raise InputError(f"must be in [0, 1], got {self.repeat_share}", field="repeat-share")
        if self.popularity not in POPULARITY:
            raise InputError(f"unknown popularity {self.popularity!r}; use "
                             f"{', '.join(POPULARITY)}", field="popularity")
        if self.rate * self.duration_s > 2_000_000:
            raise InputError("rate x duration exceeds 2,000,000 requests", field="duration")
        if self.seed < 0:
            raise InputError(f"must be >= 0, got {self.seed}", field="seed")
        return self

    @property
    def label(self) -> str:
        arr = "Poisson" if self.cv == 1 else f"gamma gaps cv {self.cv:g}"
        if self.daily_amplitude:
            arr += f", daily cycle +-{self.daily_amplitude:.0%} over {self.period_s:g} s"
        pop = {"none": "no repeats beyond corpus cycling",
               "repeat": f"repeat share {self.repeat_share:g}, mean reuse distance "
                         f"{self.reuse_distance:g} arrivals (geometric)",
               "zipf": f"Zipf s={self.zipf_s:g} over the corpus"}[self.popularity]
        return (f"{self.rate:g} req/s for {self.duration_s:g} s ({arr}); {pop}; seed "
                f"{self.seed}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def arrival_times(spec: TrafficSpec) -> np.ndarray:
    """Arrival times (float64 s, increasing) in [0, duration_s)."""
    rng = np.random.default_rng([spec.seed, 101])
    expect = spec.rate * spec.duration_s
    n = int(expect + 10 * math.sqrt(expect) * max(spec.cv, 1.0) + 100)
    shape = 1.0 / (spec.cv * spec.cv)
    while True:
        gaps = rng.gamma(shape, 1.0 / (spec.rate * shape), n)
        u = np.cumsum(gaps)
        if u[-1] >= _lam(spec, spec.duration_s):
            break
        n *= 2                           # (deterministic: the draw is redone with more gaps)
        rng = np.random.default_rng([spec.seed, 101])
    t = _time_change(u, spec) if spec.daily_amplitude else u
    return t[t < spec.duration_s]


def _lam(spec: TrafficSpec, t):
    """Operational time Lambda(t) = t + A P / (2 pi) (1 - cos(2 pi t / P)) (= t without a cycle)."""
    a, p = spec.daily_amplitude, spec.period_s
    return t + a * p / (2 * math.pi) * (1 - np.cos(2 * math.pi * np.asarray(t) / p))


def _time_change(u: np.ndarray, spec: TrafficSpec) -> np.ndarray:
    """Real times t with Lambda(t) = u (Lambda increasing since A < 1; linear interpolation on a
    grid of 200,001 points over the duration)."""
    grid = np.linspace(0.0, spec.duration_s, 200_001)
    return np.interp(u, _lam(spec, grid), grid, right=np.inf)


def prompt_draws(spec: TrafficSpec, n: int, pool_size: int) -> np.ndarray:
    """Pool index (int64) carried by each of n arrivals."""
    if pool_size < 1:
        raise InputError("the corpus has no usable request", field="corpus")
    rng = np.random.default_rng([spec.seed, 202])
    perm = rng.permutation(pool_size)
    if spec.popularity == "zipf":
        p = np.arange(1, pool_size + 1, dtype=np.float64) ** -spec.zipf_s
        ranks = rng.choice(pool_size, size=n, p=p / p.sum())
        return perm[ranks].astype(np.int64)
    out = np.empty(n, np.int64)
    fresh = 0
    rep = rng.random(n) < (spec.repeat_share if spec.popularity == "repeat" else 0.0)
    dist = rng.geometric(1.0 / max(spec.reuse_distance, 1.0), n)
    for i in range(n):
        if rep[i] and i > 0:
            out[i] = out[i - min(int(dist[i]), i)]
        else:
            out[i] = perm[fresh % pool_size]
            fresh += 1
    return out


def session_ids(request_ids: Sequence[str], draws: np.ndarray) -> list[str]:
    """Session of each arrival: the trace's conversation id where it has one, else its own."""
    out = []
    for pos, i in enumerate(draws.tolist()):
        m = _TURN.match(request_ids[i])
        out.append(m.group("conv") if m else f"a{pos}")
    return out


def reuse_summary(draws: np.ndarray, times: np.ndarray) -> dict[str, Any]:
    """Share of arrivals repeating an earlier arrival's request, and the reuse distance (to the
    previous arrival of the same request) in arrivals and in seconds: p50, p90, p99."""
    last: dict[int, int] = {}
    d_arr, d_s = [], []
    for pos, i in enumerate(draws.tolist()):
        if i in last:
            d_arr.append(pos - last[i])
            d_s.append(float(times[pos] - times[last[i]]))
        last[i] = pos
    n = int(draws.size)
    pct = lambda v, q: float(np.percentile(v, q)) if v else None  # noqa: E731
    return {"arrivals": n, "distinct_requests": len(last),
            "repeat_share": len(d_arr) / n if n else 0.0,
            "reuse_arrivals_p50": pct(d_arr, 50), "reuse_arrivals_p90": pct(d_arr, 90),
            "reuse_arrivals_p99": pct(d_arr, 99), "reuse_s_p50": pct(d_s, 50),
            "reuse_s_p90": pct(d_s, 90), "reuse_s_p99": pct(d_s, 99)}


@dataclass
class Traffic:
    """Arrivals in order: time, pool index, session; `pool` holds the requests (token ids)."""

    spec: TrafficSpec
    times: np.ndarray
    draws: np.ndarray
    sessions: list[str]
    pool: list                      # objects with prompt_ids, output_ids (int32 arrays)
    corpus: str = ""
    model: str = ""
    skipped: dict[str, int] | None = None

    @property
    def n(self) -> int:
        return int(self.times.size)

    def summary(self) -> dict[str, Any]:
        return reuse_summary(self.draws, self.times)


def make_traffic(spec: TrafficSpec, pool: list, request_ids: Sequence[str], *, corpus: str = "",
                 model: str = "", skipped: dict[str, int] | None = None) -> Traffic:
    """Traffic over `pool` (the corpus requests that fit the engine) under `spec`."""
    spec.check()
    times = arrival_times(spec)
    draws = prompt_draws(spec, int(times.size), len(pool))
    return Traffic(spec, times, draws, session_ids(request_ids, draws), pool, corpus, model,
                   skipped or {})
