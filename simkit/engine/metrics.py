"""Per-run measurements: per-step and per-request records, and their summary over a steady window.

Steady-state window (closed loop): from the moment the C-th request completes (the synchronized
start of C prefills has dispersed) to the moment the last request is submitted (after it, fewer
than C requests are in flight: the drain). Open loop: from the arrival of the request at 10% of the
arrival sequence to the last arrival. Throughput = output tokens emitted by steps ending inside the
window / window length. Latencies (TTFT, TPOT, ITL) use requests that arrived inside the window.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from simkit.costmodel.batch import GraphMode

_MODE_CODE = {GraphMode.FULL: 0, GraphMode.PIECEWISE: 1, GraphMode.NONE: 2}
_FULL, _PIECEWISE = GraphMode.FULL, GraphMode.PIECEWISE


class Recorder:
    """Collects plain Python lists during a run (cheap appends), turned into arrays at the end."""

    def __init__(self) -> None:
        self.step_end: list[float] = []
        self.step_s: list[float] = []
        self.host_s: list[float] = []          # host_frac * step_s
        self.mode: list[int] = []
        self.tokens: list[int] = []            # scheduled tokens
        self.padded: list[int] = []            # tokens after graph padding
        self.pad_drafts: list[int] = []
        self.emitted: list[int] = []
        self.accepted: list[int] = []
        self.decodes: list[int] = []
        self.decode_tokens: list[int] = []
        self.reqs: list[int] = []
        self.k: list[int] = []
        self.kv_used: list[float] = []
        self.req_arrival: list[float] = []
        self.req_first: list[float] = []
        self.req_done: list[float] = []
        self.req_out: list[int] = []
        self.req_preempt: list[int] = []
        self.itl_time: list[float] = []        # arrival time of the request (for the window)
        self.itl: list[float] = []
        self._arrays: tuple | None = None      # arrays(): (list lengths, the arrays)

    def step(self, end: float, cost, desc, outcome: tuple[int, int, int, int], k: int,
             kv_used: float) -> None:
        emitted, accepted, decodes, decode_tokens = outcome
        self.step_end.append(end)
        self.step_s.append(cost.step_s)
        self.host_s.append(cost.host_frac * cost.step_s)
        gm = desc.graph_mode      # identity tests: a GraphMode's hash is a Python-level call
        self.mode.append(0 if gm is _FULL else 1 if gm is _PIECEWISE else _MODE_CODE[gm])
        self.tokens.append(desc.num_tokens)
        self.padded.append(desc.num_padded_tokens)
        self.pad_drafts.append(desc.num_pad_drafts)
        self.emitted.append(emitted)
        self.accepted.append(accepted)
        self.decodes.append(decodes)
        self.decode_tokens.append(decode_tokens)
        self.reqs.append(desc.num_reqs)
        self.k.append(k)
        self.kv_used.append(kv_used)

    def finish(self, req, now: float) -> None:
        self.req_arrival.append(req.arrival)
        self.req_first.append(req.first_time)
        self.req_done.append(now)
        self.req_out.append(req.out_len)
        self.req_preempt.append(req.preemptions)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every list as a NumPy array, made once per run length (a run is summarised over
        several windows: converting the lists again for each took a third of summarize)."""
        size = (len(self.step_end), len(self.req_done), len(self.itl))
        if self._arrays is None or self._arrays[0] != size:
            self._arrays = (size, {name: np.asarray(values, _DTYPES.get(name))
                                   for name, values in vars(self).items()
                                   if isinstance(values, (list, np.ndarray))})
        return self._arrays[1]


# the integer lists' dtypes (the rest: float64)
_DTYPES = {"mode": np.int8, "tokens": np.int64, "padded": np.int64, "pad_drafts": np.int64,
           "emitted": np.int64, "accepted": np.int64, "decodes": np.int64,
           "decode_tokens": np.int64, "reqs": np.int64, "req_out": np.int64}


@dataclass
class RunMetrics:
    """Summary of one simulated run (all times in seconds unless the name says ms)."""

    output_tok_s: float
    request_throughput: float
    window_start_s: float
    window_end_s: float
    window_kind: str                   # "steady", "full-run" (too few requests for a window)
    #                                    or "overloaded" (an open loop's queue grew through it)
    sim_time_s: float
    steps: int
    requests_done: int
    output_tokens: int
    ttft_ms_p50: float
    ttft_ms_p90: float
    ttft_ms_p99: float
    tpot_ms_p50: float
    tpot_ms_p90: float
    tpot_ms_p99: float
    itl_ms_p50: float
    itl_ms_p90: float
    itl_ms_p99: float
    full_steps_frac: float
    piecewise_steps_frac: float
    none_steps_frac: float
    full_time_frac: float
    piecewise_time_frac: float
    none_time_frac: float
    padded_token_waste: float          # (graph padding + placeholder drafts) / padded tokens run
    mean_accepted: float               # accepted drafts per decode request-step
    tokens_per_step: float             # output tokens per decode request-step (incl. bonus)
    host_frac: float                   # host-bound share of step time (time-weighted)
    mean_step_ms: float
    mean_batch_reqs: float
    mean_k: float
    kv_usage_mean: float
    kv_usage_peak: float
    preemptions: int

    def to_dict(self) -> dict:
        return asdict(self)


def _p50_90_99(values: np.ndarray) -> list[float]:
    """[p50, p90, p99] of `values` (NaN when empty) from one partition instead of three: the
    same floats as three np.percentile calls, numpy's linear interpolation being elementwise."""
    if not values.size:
        return [float("nan")] * 3
    return [float(v) for v in np.percentile(values, (50, 90, 99))]


def _run_of(sel: np.ndarray) -> slice | np.ndarray:
    """`sel` as a slice where its True entries are one run (a window over step ends, which only
    grow: always), else `sel`: the same elements either way, a slice without copying each of
    the step arrays (13 copies per summary; ~6 % of a concurrency sweep's time)."""
    if not sel.size:
        return sel
    i0 = int(sel.argmax())
    n = int(np.count_nonzero(sel))
    if n and sel[i0:i0 + n].all():
        return slice(i0, i0 + n)
    return sel


def summarize(rec: Recorder, window: tuple[float, float] | None, preemptions: int) -> RunMetrics:
    """Reduce a Recorder over the steady window (None or empty -> the whole run)."""
    a = rec.arrays()
    end = a["step_end"]
    sim_time = float(end[-1]) if end.size else 0.0
    kind = "steady"
    if window is None or window[1] <= window[0]:
        window, kind = (0.0, sim_time), "full-run"
    w0, w1 = window
    sel = (end > w0) & (end <= w1)
    if not sel.any():
        sel = np.ones_like(end, dtype=bool)
        w0, w1, kind = 0.0, sim_time, "full-run"
    dur = w1 - w0
    pick = _run_of(sel)
    (step_s, host_s, mode, padded, tokens, pad_drafts, emitted, decodes, decode_tokens, reqs,
     accepted, kv, ks) = (a[name][pick] for name in (
        "step_s", "host_s", "mode", "padded", "tokens", "pad_drafts", "emitted", "decodes",
        "decode_tokens", "reqs", "accepted", "kv_used", "k"))
    n_steps = int(sel.sum())
    t_total = float(step_s.sum())

    arr, first, done, out = a["req_arrival"], a["req_first"], a["req_done"], a["req_out"]
    rsel = (arr >= w0) & (arr <= w1) if kind == "steady" else np.ones_like(arr, dtype=bool)
    ttft = (first - arr)[rsel] * 1e3
    multi = rsel & (out > 1)
    tpot = ((done - first)[multi] / (out[multi] - 1)) * 1e3
    itl_t, itl = a["itl_time"], a["itl"]
    itl = (itl[(itl_t >= w0) & (itl_t <= w1)] if kind == "steady" else itl) * 1e3
    completions = int(((done > w0) & (done <= w1)).sum())
    dec_total = int(decodes.sum())
    ran = int(padded.sum())

    def share(code: int, by_time: bool) -> float:
        if not n_steps:
            return 0.0
        if by_time:
            return float(step_s[mode == code].sum() / t_total) if t_total > 0 else 0.0
        return float((mode == code).mean())

    ttft_p, tpot_p, itl_p = _p50_90_99(ttft), _p50_90_99(tpot), _p50_90_99(itl)
    return RunMetrics(
        output_tok_s=float(emitted.sum() / dur) if dur > 0 else 0.0,
        request_throughput=completions / dur if dur > 0 else 0.0,
        window_start_s=float(w0), window_end_s=float(w1), window_kind=kind,
        sim_time_s=sim_time, steps=len(rec.step_end), requests_done=len(rec.req_done),
        output_tokens=int(a["emitted"].sum()),
        ttft_ms_p50=ttft_p[0], ttft_ms_p90=ttft_p[1], ttft_ms_p99=ttft_p[2],
        tpot_ms_p50=tpot_p[0], tpot_ms_p90=tpot_p[1], tpot_ms_p99=tpot_p[2],
        itl_ms_p50=itl_p[0], itl_ms_p90=itl_p[1], itl_ms_p99=itl_p[2],
        full_steps_frac=share(0, False), piecewise_steps_frac=share(1, False),
        none_steps_frac=share(2, False), full_time_frac=share(0, True),
        piecewise_time_frac=share(1, True), none_time_frac=share(2, True),
        padded_token_waste=float((padded - tokens).sum() + pad_drafts.sum()) / ran if ran else 0.0,
        mean_accepted=float(accepted.sum()) / dec_total if dec_total else 0.0,
        tokens_per_step=float(decode_tokens.sum()) / dec_total if dec_total else 0.0,
        host_frac=float(host_s.sum() / t_total) if t_total > 0 else 0.0,
        mean_step_ms=float(step_s.mean() * 1e3) if n_steps else 0.0,
        mean_batch_reqs=float(reqs.mean()) if n_steps else 0.0, mean_k=float(ks.mean()) if n_steps else 0.0,
        kv_usage_mean=float(kv.mean()) if n_steps else 0.0,
        kv_usage_peak=float(a["kv_used"].max()) if a["kv_used"].size else 0.0,
        preemptions=preemptions,
    )


def queue_growth(rec: Recorder, window: tuple[float, float]) -> tuple[int, int]:
    """(growth, arrivals) of an open loop's requests in the server over the second half of
    `window`: those arrived and not finished at its end less those at its midpoint, and the
    requests that arrived in between. Past saturation the server keeps a share of every arrival
    (the queue grows with the window); at a rate it sustains the count stays level once the run
    has settled."""
    a = rec.arrays()
    arr, done = a["req_arrival"], a["req_done"]
    w0, w1 = window
    mid = (w0 + w1) / 2

    def inside(t: float) -> int:
        return int(((arr <= t) & (done > t)).sum())

    return inside(w1) - inside(mid), int(((arr > mid) & (arr <= w1)).sum())


# an open loop's window is overloaded when the requests in the server grow through its second
# half by more than this share of the arrivals there (and by OVERLOAD_MIN_REQUESTS at least):
# a rate r past a capacity c keeps (r - c) / r of them; a sustained rate keeps the count level
OVERLOAD_SHARE = 0.25
OVERLOAD_MIN_REQUESTS = 8


def overloaded(growth: int, arrivals: int) -> bool:
    """True when an open loop's queue grew through the window (metrics.queue_growth): the
    rate is past what the server sustains (or the run is too short to settle), so the window's
    tok/s is no steady rate."""
    return growth >= max(OVERLOAD_MIN_REQUESTS, OVERLOAD_SHARE * arrivals)


def summarize_open(rec: Recorder, window: tuple[float, float] | None,
                   preemptions: int) -> RunMetrics:
    """summarize() over an open loop's window, its kind 'overloaded' where the queue grew
    through it (overloaded): the figures are kept, the label says they are no steady rate."""
    from dataclasses import replace

    m = summarize(rec, window, preemptions)
    if m.window_kind == "steady" and overloaded(*queue_growth(rec, window)):
        m = replace(m, window_kind="overloaded")
    return m
