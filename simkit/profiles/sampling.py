"""Stratified, calibrated profile samples: which requests of a corpus a profile keeps, and how many
corpus requests each kept request stands for (its weight).

Why: a profile ships the per-position acceptance tables of a sample only (size, first-predict
speed), but throughput is carried by a heavy tail (capped repetition loops that suffix decoding
accepts almost whole hold ~30 % of mix's output tokens in 5 % of its requests), which an
evenly spaced sample of 128 holds too few of (-19 % on mix, docs/acceptance.md).

The rule (RULE, version RULE_VERSION), on the figures of a warm whole-corpus replay in which every
request is drafted (request_stats), at the size sized_sample chooses (the whole corpus when its
outputs fit POSITION_BUDGET positions, else as many requests as fit it, at least SAMPLE_SIZE):
1. strata: requests whose output hit their source's generation cap (traces.caps), and the rest;
   the sample size is split between them in proportion to their sum of sqrt(output length)
   (largest remainders, at least one each), so long outputs are kept more often than their
   share of requests;
2. within a stratum, requests sorted by (output length, accepted drafts at the largest K, index)
   are cut into contiguous blocks of equal sqrt(output length) mass, and the middle request of
   each block stands for the block (base weight = block size; the weights sum to the corpus);
3. calibration: the weights are tilted (raking, w = base * exp(z . lambda)) until the weighted
   sample totals equal the corpus totals of: requests, capped requests, output tokens, prompt
   tokens, and per K in CAL_KS the accepted drafts and the context tokens summed over decode
   steps (attention and KV load; vanilla too). A variable that is constant in the corpus,
   collinear in the sample or that would push a weight beyond MAX_TILT x its base is left out;
   the provenance lists the ones used.
The engine draws requests from a weighted sample in proportion to the weights
(simkit.engine.sim.weighted_order), so a run has the corpus's mix of requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

RULE = "stratified-calibrated"
RULE_VERSION = 1
ALPHA = 0.5                 # block mass = output_len ** ALPHA
CAL_KS = (4, 6, 8, 12)      # the K of the default ladder (K > 12 reads column 12's drafts)
STATS_VERSION = 1           # bump when request_stats changes
POSITION_BUDGET = 160_000   # output positions a sample may ship beyond the minimum size
MAX_TILT = 20.0             # a calibrated weight stays within [1/MAX_TILT, MAX_TILT] x its base
SAMPLE_SIZE = 128           # a profile's minimum sample size (and the even rule's default size)


@dataclass(frozen=True)
class RequestStats:
    """Per-request figures of a warm whole-corpus replay (every request drafted)."""

    prompt_len: np.ndarray          # (n,) int64
    output_len: np.ndarray          # (n,) int64
    capped: np.ndarray              # (n,) bool: the output hit its source's generation cap
    accepted: np.ndarray            # (n, len(ks)) int64: accepted drafts of a static-K replay
    context: np.ndarray             # (n, 1 + len(ks)) float64: context tokens summed over decode
    ks: tuple[int, ...] = CAL_KS    # steps; column 0 = vanilla (one token per step)


@dataclass
class Sample:
    """A profile sample: corpus indices (increasing), weights (None = each stands for itself)."""

    indices: np.ndarray
    weights: np.ndarray | None
    info: dict = field(default_factory=dict)


def _walk(acc: np.ndarray, offsets: np.ndarray, out_len: np.ndarray,
          prompt_len: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(accepted drafts, context tokens over decode steps) per request of a static-K replay from
    t = 1, all requests in lockstep; a step at t accepts a (at most the remaining output - 1)."""
    n = out_len.shape[0]
    t = np.ones(n, np.int64)
    tot_a = np.zeros(n, np.int64)
    ctx = np.zeros(n, np.float64)
    live = np.flatnonzero(t < out_len)
    while live.size:
        tt = t[live]
        a = np.minimum(acc[offsets[live] + tt].astype(np.int64), out_len[live] - tt - 1)
        ctx[live] += prompt_len[live] + tt
        tot_a[live] += a
        t[live] = tt + a + 1
        live = live[t[live] < out_len[live]]
    return tot_a, ctx


def request_stats(table, capped: Sequence[bool], ks: tuple[int, ...] = CAL_KS) -> RequestStats:
    """The throughput drivers of every request of a whole-corpus suffix table (rows in corpus
    order) and the capped flags of the same requests."""
    plen = np.asarray(table.prompt_len, np.int64)
    olen = np.asarray(table.output_len, np.int64)
    offs = np.asarray(table.offsets, np.int64)
    caps = np.asarray(capped, bool)
    if caps.shape != olen.shape:
        raise ValueError(f"{caps.size} capped flags for {olen.size} requests")
    steps = np.maximum(olen - 1, 0).astype(np.float64)
    acc = np.zeros((olen.size, len(ks)), np.int64)
    ctx = np.zeros((olen.size, 1 + len(ks)), np.float64)
    ctx[:, 0] = steps * plen + steps * (steps + 1) / 2          # vanilla: P+1 .. P+L-1
    for j, k in enumerate(ks):
        acc[:, j], ctx[:, j + 1] = _walk(table.accepted[:, min(k, table.kmax) - 1], offs, olen,
                                         plen)
    return RequestStats(plen, olen, caps, acc, ctx, tuple(ks))


def _stats_path(requests: Sequence, params, kmax: int, ks: tuple[int, ...]) -> Path:
    from simkit.acceptance.cache import store_dir, table_key
    from simkit.choices import Ordering
    from simkit.drafters.base import SUFFIX_DRAFTER

    spec = {**params.as_dict(), "tree": "warm", "stats": STATS_VERSION, "ks": list(ks)}
    key = table_key(requests, SUFFIX_DRAFTER, spec, kmax, Ordering.SEQUENTIAL)
    return store_dir() / f"suffix-warmstats-{key}.npz"


def cached_request_stats(requests: Sequence, *, params=None, kmax: int = 16, model: str = "",
                         corpus: str = "", progress: bool = False,
                         ks: tuple[int, ...] = CAL_KS):
    """(RequestStats, whole-corpus table or None): from the cache (a small npz keyed like the
    tables) or from a warm replay drafting every request, which is then returned too (its rows
    are every sample's warm rows). Capped flags are recomputed (traces.caps) each time."""
    from simkit.acceptance.build import build_warm_table
    from simkit.drafters.suffix.cache import SuffixParams
    from traces.request_caps import capped_flags

    params = params or SuffixParams()
    capped = np.asarray(capped_flags(requests), bool)
    path = _stats_path(requests, params, kmax, ks)
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as z:
                acc, ctx = z["accepted"], z["context"]
                plen, olen = z["prompt_len"], z["output_len"]
            if acc.shape == (len(requests), len(ks)) and ctx.shape == (len(requests), len(ks) + 1):
                return RequestStats(plen, olen, capped, acc, ctx, tuple(ks)), None
        except (OSError, KeyError, ValueError):
            pass                                           # damaged: rebuilt below
    from simkit.acceptance.cache import load_cached, load_or_build, warm_path

    whole = warm_path(requests, range(len(requests)), params, kmax)
    if whole.exists():                 # a cached whole-corpus table (e.g. a benchmark's reference)
        stats = request_stats(load_cached(whole), capped, ks)
        _save_stats(stats, path)
        return stats, None

    def build(step):
        return build_warm_table(requests, range(len(requests)), params=params, kmax=kmax,
                                model=model, corpus=corpus, progress=step)

    table = load_or_build(path, build, total=int(sum(len(r.output_ids) for r in requests)),
                           label=f"whole-corpus acceptance {model}/{corpus}", model=model,
                           corpus=corpus, progress=progress, use_cache=False)
    stats = request_stats(table, capped, ks)
    _save_stats(stats, path)
    return stats, table


def _save_stats(stats: RequestStats, path: Path) -> None:
    """The acceptance-derived arrays of `stats` as an npz (atomic rename)."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez(tmp, prompt_len=stats.prompt_len, output_len=stats.output_len,
             accepted=stats.accepted, context=stats.context)
    os.replace(tmp, path)


def _allocate(masses: list[float], caps: list[int], size: int) -> list[int]:
    """Split `size` over strata in proportion to `masses` (largest remainders), at least one per
    non-empty stratum and at most its request count."""
    total = sum(masses)
    want = [size * m / total if total > 0 else 0.0 for m in masses]
    out = [min(c, max(1 if c else 0, int(np.floor(x)))) for x, c in zip(want, caps)]
    order = sorted(range(len(masses)), key=lambda j: (-(want[j] - np.floor(want[j])), j))
    while sum(out) < min(size, sum(caps)):
        grown = False
        for j in order:
            if sum(out) >= size:
                break
            if out[j] < caps[j]:
                out[j] += 1
                grown = True
        if not grown:
            break
    return out


def _blocks(mass: np.ndarray, k: int) -> list[tuple[int, int]]:
    """k contiguous (start, end) blocks of a sorted stratum with about equal mass each, none empty."""
    n = mass.size
    if k >= n:
        return [(i, i + 1) for i in range(n)]
    cm = np.cumsum(mass)
    step = cm[-1] / k
    cuts = [0]
    for j in range(1, k):
        c = int(np.searchsorted(cm, step * j, side="left")) + 1
        c = max(c, cuts[-1] + 1)
        c = min(c, n - (k - j))
        cuts.append(c)
    cuts.append(n)
    return list(zip(cuts[:-1], cuts[1:]))


def _columns(stats: RequestStats) -> tuple[np.ndarray, list[str]]:
    """The calibration variables (one column per variable, every corpus request) and their names."""
    cols = [np.ones(stats.output_len.size), stats.capped.astype(np.float64),
            stats.output_len.astype(np.float64), stats.prompt_len.astype(np.float64)]
    names = ["requests", "capped_requests", "output_tokens", "prompt_tokens"]
    for j, k in enumerate(stats.ks):
        cols.append(stats.accepted[:, j].astype(np.float64))
        names.append(f"accepted_k{k}")
    cols.append(stats.context[:, 0])
    names.append("context_vanilla")
    for j, k in enumerate(stats.ks):
        cols.append(stats.context[:, j + 1])
        names.append(f"context_k{k}")
    return np.stack(cols, 1), names


def _rake(z: np.ndarray, base: np.ndarray, target: np.ndarray) -> np.ndarray | None:
    """Weights base * exp(z @ lam) whose z-totals equal `target` (Newton with step halving), or
    None when they do not converge or leave [1/MAX_TILT, MAX_TILT] x base."""
    lam = np.zeros(z.shape[1])

    def resid(lm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = base * np.exp(np.clip(z @ lm, -50, 50))
        return w, w @ z - target

    w, g = resid(lam)
    for _ in range(100):
        err = float(np.abs(g / target).max())
        if err < 1e-12:
            break
        h = (z * w[:, None]).T @ z
        try:
            d = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            return None
        s = 1.0
        while s > 1e-6:
            w2, g2 = resid(lam - s * d)
            if float(np.abs(g2 / target).max()) < err:
                break
            s /= 2
        else:
            return None
        lam = lam - s * d
        w, g = w2, g2
    if float(np.abs(g / target).max()) > 1e-9:
        return None
    tilt = w / base
    if tilt.max() > MAX_TILT or tilt.min() < 1 / MAX_TILT:
        return None
    return w


def calibrate(stats: RequestStats, idx: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Raking of the base weights of the sampled requests `idx` to the corpus totals; returns the
    weights and the variables they match. Variables are added in a fixed order and one is
    dropped when it is constant in the corpus, collinear in the sample, or breaks convergence."""
    x, names = _columns(stats)
    scale = x.mean(0)
    keep: list[int] = []
    w = base.astype(np.float64)
    for j in range(x.shape[1]):
        if scale[j] <= 0:
            continue
        trial = keep + [j]
        z = x[idx][:, trial] / scale[trial]
        if np.linalg.matrix_rank(z) < len(trial):
            continue
        got = _rake(z, base.astype(np.float64), x[:, trial].sum(0) / scale[trial])
        if got is None:
            continue
        keep, w = trial, got
    return w, [names[j] for j in keep]


def stratified_sample(stats: RequestStats, size: int, alpha: float = ALPHA) -> Sample:
    """The profile sample of RULE (module docstring): indices increasing, calibrated weights
    rounded to 1e-6 (byte-stable provenance); all requests, unweighted, when n <= size."""
    n = stats.output_len.size
    if size <= 0 or n <= size:
        return Sample(np.arange(n, dtype=np.int64), None,
                      {"rule": "all", "size": size, "corpus_requests": n})
    mass = np.maximum(stats.output_len, 1).astype(np.float64) ** alpha
    order_key = stats.accepted[:, -1] if stats.accepted.shape[1] else np.zeros(n, np.int64)
    strata = [("capped", np.flatnonzero(stats.capped)), ("uncapped", np.flatnonzero(~stats.capped))]
    alloc = _allocate([float(mass[g].sum()) for _, g in strata], [g.size for _, g in strata], size)
    picks, base, info_strata = [], [], {}
    for (name, g), k in zip(strata, alloc):
        info_strata[name] = {"corpus": int(g.size), "sample": int(k)}
        if k == 0:
            continue
        members = g[np.lexsort((g, order_key[g], stats.output_len[g]))]
        for a, b in _blocks(mass[members], k):
            picks.append(int(members[a + (b - a - 1) // 2]))
            base.append(b - a)
    pos = np.argsort(picks, kind="stable")
    idx = np.asarray(picks, np.int64)[pos]
    base_w = np.asarray(base, np.float64)[pos]
    weights, used = calibrate(stats, idx, base_w)
    weights = np.round(weights, 6)
    tilt = weights / base_w
    info = {"rule": RULE, "version": RULE_VERSION, "size": int(idx.size), "alpha": alpha,
            "corpus_requests": int(n), "strata": info_strata, "calibrated_on": used,
            "calibration_ks": list(stats.ks),
            "weight_tilt_range": [round(float(tilt.min()), 4), round(float(tilt.max()), 4)]}
    return Sample(idx, weights, info)


def sized_sample(stats: RequestStats, min_size: int, budget: int = POSITION_BUDGET) -> Sample:
    """The sample size per corpus: the whole corpus when its outputs total <= `budget` positions
    (exact, unweighted); else the largest of min_size * 2^j requests (j >= 0) whose sampled
    outputs total <= budget (min_size whatever its total). Short-output corpora thus ship more
    requests (lower variance, the corpus's own prompt-prefix sharing), long ones min_size."""
    n = stats.output_len.size
    total = int(stats.output_len.sum())
    if n <= min_size or total <= budget:
        out = Sample(np.arange(n, dtype=np.int64), None,
                     {"rule": "all", "size": min_size, "corpus_requests": n})
    else:
        out = stratified_sample(stats, min_size)
        size = 2 * min_size
        while size < n:
            cand = stratified_sample(stats, size)
            if int(stats.output_len[cand.indices].sum()) > budget:
                break
            out, size = cand, 2 * size
    out.info.update(min_size=min_size, position_budget=budget, corpus_positions=total)
    return out


def rule_text(info: dict) -> str:
    """One sentence for the provenance: the rule and its parameters."""
    size = (f"size: the whole corpus when its outputs total <= {info['position_budget']:,} "
            f"positions, else the largest of {info['min_size']} x 2^j requests whose outputs do "
            f"(at least {info['min_size']}); ") if "position_budget" in info else ""
    if info.get("rule") == "all":
        return (f"{size}all {info['corpus_requests']} requests of the corpus "
                f"({info.get('corpus_positions', '?'):,} output positions), unweighted")
    st = ", ".join(f"{k} {v['sample']} of {v['corpus']}" for k, v in info["strata"].items())
    # "(simkit.sampling)" is the rule's name as the shipped profiles record it (this module's
    # name when they were built); the text must stay byte-identical to that provenance
    return (f"{size}{RULE} v{info['version']} (simkit.sampling): strata capped/uncapped ({st}) from a "
            f"warm whole-corpus replay drafting every request; within a stratum, sorted by "
            f"(output length, accepted drafts at K={info['calibration_ks'][-1]}), contiguous "
            f"blocks of equal output_len^{info['alpha']:g} mass, the middle request of each "
            "stands for its block; weights (corpus requests each stands for) raked to the "
            f"corpus totals of {', '.join(info['calibrated_on'])}; the engine draws requests "
            "in proportion to the weights")


SAMPLE_RULES = ("stratified", "even")


def sample_indices(n: int, size: int = SAMPLE_SIZE) -> np.ndarray:
    """The even rule: floor(i * n / size) for i < size, or every index when n <= size."""
    if size <= 0 or n <= size:
        return np.arange(n, dtype=np.int64)
    return (np.arange(size, dtype=np.int64) * n) // size


def choose_sample(requests: Sequence, size: int, rule: str = "stratified", *, params=None,
                  kmax: int = 16, model: str = "", corpus: str = "", progress: bool = False):
    """(Sample, whole-corpus warm table or None) of a corpus's requests under `rule`:
    "stratified" (this module; whole corpus when it fits POSITION_BUDGET or n <= size) or "even"
    (indices floor(i * n / size), unweighted: the rule before it). The table is returned when the
    stratified rule had to replay the whole corpus (its rows are the sample's warm rows)."""
    from simkit.errors import UnknownNameError

    n = len(requests)
    if rule not in SAMPLE_RULES:
        raise UnknownNameError("sample rule", rule, list(SAMPLE_RULES))
    if rule == "even" or size <= 0:
        kind = "even" if 0 < size < n else "all"
        return Sample(sample_indices(n, size), None,
                      {"rule": kind, "size": size, "corpus_requests": n}), None
    total = sum(len(r.output_ids) for r in requests)
    if n <= size or total <= POSITION_BUDGET:         # no whole-corpus replay needed
        return Sample(np.arange(n, dtype=np.int64), None,
                      {"rule": "all", "size": size, "corpus_requests": n, "min_size": size,
                       "position_budget": POSITION_BUDGET, "corpus_positions": total}), None
    stats, whole = cached_request_stats(requests, params=params, kmax=kmax, model=model,
                                        corpus=corpus, progress=progress)
    return sized_sample(stats, size), whole


def rule_is_current(info: dict, min_size: int) -> bool:
    """True when a profile's sample info is what the current stratified rule gives (same rule,
    version, minimum size and position budget), so its sample needs no recomputation."""
    if info.get("min_size") != min_size or info.get("position_budget") != POSITION_BUDGET:
        return False
    return info.get("rule") == "all" or (info.get("rule") == RULE
                                         and info.get("version") == RULE_VERSION)
