"""Concurrency: throughput and latency against the number of closed-loop clients (1..256) per
configuration, and the concurrency from which speculative decoding stops paying (its throughput
falls to or below vanilla's at the same concurrency)."""

from __future__ import annotations

from pathlib import Path

from simkit.app.options import RunOptions
from simkit.engine.config import WHATIF_CONFIGS, parse_configs
from simkit.engine.runner import default_num_requests
from simkit.engine.workload import Workload
from simkit.errors import InputError
from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import (
    WhatIfResult, cost_of, ladders_of, skip_note, skipped_of, workload_note, workload_of)

COLUMNS = ["concurrency", "config", "output_tok_s", "speedup_vs_vanilla", "tpot_ms_p50",
           "ttft_ms_p50", "tpot_ms_p99", "num_requests"]


def stops_paying(rows: list[dict], name: str) -> int | None:
    """Smallest concurrency from which `name` no longer beats vanilla (speedup <= 1 there and at
    every larger concurrency measured); None if it pays everywhere measured."""
    pts = sorted((r["concurrency"], r["speedup_vs_vanilla"]) for r in rows if r["config"] == name)
    first = None
    for c, s in pts:
        if s is not None and s <= 1.0:
            first = c if first is None else first
        else:
            first = None
    return first


EXACT_K_SET = "0,2,4,8,12,16"      # the K set of a vLLM whose suffix rows verify exactly K slots


def k_set_configs(configs: str, ks: str | None, version_key: str | None) -> tuple[str, list[int]]:
    """(configs plus suffix:K for each K of the set, the set) on a vLLM whose decode requests
    verify exactly K slots (0.34: the fixed-K rows are suffix:K, K 0 = vanilla); elsewhere
    (configs, []), and a K set given there is refused (K-pad rows are kpad:K in --configs)."""
    from simkit.catalog.vllm_versions import get_vllm_version

    version = get_vllm_version(version_key)
    if version.method("suffix").slots != "exact-k":
        if ks:
            raise InputError(f"a K set per level is for a vLLM where every request verifies "
                             f"exactly K slots (0.34); on {version.label} give kpad:K in "
                             "--configs", field="ks")
        return configs, []
    try:
        kset = sorted({int(k) for k in (ks or EXACT_K_SET).split(",") if k.strip()})
    except ValueError:
        raise InputError(f"K values must be integers, got {ks!r}", field="ks") from None
    if not kset or kset[0] < 0 or kset[-1] > 64:
        raise InputError("K values must be in 0..64", field="ks")
    extra = (["vanilla"] if 0 in kset else []) + [f"suffix:{k}" for k in kset if k > 0]
    return ",".join([configs, *extra]), kset


def best_k_lines(rows: list[dict], specs, kset: list[int], cs: list[int]) -> tuple[list[str], dict]:
    """The note on the best K of the set at each level (ties to the smaller K) and where no K
    beats vanilla, and {level: K} (simkit.whatif.ktable.best_k_per_level)."""
    from simkit.whatif.ktable import best_k_per_level

    name = {}
    for s in specs:
        k = s.k if s.speculative else 0
        if (not s.speculative or (not s.ks and not s.policy)) and k in kset:
            name.setdefault(k, s.name)
    tok = {k: [next(r["output_tok_s"] for r in rows if r["concurrency"] == c and
                    r["config"] == n) for c in cs] for k, n in name.items()}
    if len(tok) < 2 or any(v != v for row in tok.values() for v in row):
        return [], {}
    choices = best_k_per_level(cs, tok)
    text = ("best K of the set " + ",".join(map(str, sorted(tok))) + " (0 = vanilla) per "
            "concurrency: " + ", ".join(f"{ch.level}: K {ch.k}" for ch in choices))
    stop = [ch.level for ch in choices if ch.k == 0]
    text += ("; no K beats vanilla at " + ", ".join(map(str, stop)) if stop else
             "; some K beats vanilla at every level") + " (a K per batch-size range across " \
        "them: simkit whatif ktable)"
    return [text], {str(ch.level): ch.k for ch in choices}


def concurrency(run: RunOptions = RunOptions(), *, levels: str = "1,2,4,8,16,32,64,128,256",
                configs: str = WHATIF_CONFIGS, min_requests: int = 32, ks: str | None = None,
                workload: Workload | None = None) -> WhatIfResult:
    """Ladder at each concurrency under the settings `run` (its concurrency and requests per
    run are the ones varied). Each level runs as many requests as `simkit predict` does at
    that concurrency (simkit.engine.runner.default_num_requests: the profile's count, at least
    4 x C, and a weighted corpus's 1,024 draws), at least min_requests: with 4 x C alone a
    level of 32 drew 128 requests of the mix and contradicted predict's verdict at 32 (the
    per-seed spread is ~9 % at 128 draws, ~1 % at 1,024)."""
    model, corpus, seeds = run.model, run.corpus, run.seeds
    try:
        cs = sorted({int(c) for c in levels.split(",") if c.strip()})
    except ValueError:
        raise InputError(f"concurrency levels must be integers, got {levels!r}",
                         field="levels") from None
    if not cs or cs[0] < 1:
        raise InputError("concurrency levels must be >= 1", field="levels")
    from simkit.checks import positive_int

    positive_int(cs[-1], "levels")
    if cs[-1] > run.max_num_seqs:
        raise InputError(f"at most --max-num-seqs ({run.max_num_seqs:,}) clients, got "
                         f"{cs[-1]:,}: vLLM runs at most max_num_seqs sequences a step, so more "
                         "clients only wait in its queue (raise --max-num-seqs to try more)",
                         field="levels")
    configs, kset = k_set_configs(configs, ks, run.vllm_version)
    specs = parse_configs(configs, run.vllm_version)
    if all(s.speculative for s in specs):
        raise InputError("the concurrency what-if compares against vanilla: include it",
                         field="configs")
    workload = workload_of(run, workload)
    cost = cost_of(run)
    server = run.server(cost)
    rows, unavailable, skipped = [], {}, {}
    sizes = [max(min_requests, default_num_requests(workload, c)) for c in cs]
    ladders = ladders_of(run, workload, cost, specs, server=server, levels=list(zip(cs, sizes)),
                         phase="concurrency")
    for c, n, ladder in zip(cs, sizes, ladders):
        unavailable.update(ladder.unavailable)
        skipped = skipped or skipped_of(ladder)      # one workload and server: the same
        for r in ladder.rows:
            rows.append({"concurrency": c, "config": r.config, "output_tok_s": r.output_tok_s,
                         "speedup_vs_vanilla": r.speedup_vs_vanilla,
                         "tpot_ms_p50": r.tpot_ms_p50, "ttft_ms_p50": r.ttft_ms_p50,
                         "tpot_ms_p99": r.tpot_ms_p99, "num_requests": n})
    spec_names = [s.name for s in specs if s.speculative and s.name not in unavailable]
    verdicts = {name: stops_paying(rows, name) for name in spec_names}
    best_per_c = {}
    for c in cs:
        cand = [r for r in rows if r["concurrency"] == c and r["config"] in spec_names]
        if cand:
            top = max(cand, key=lambda r: r["output_tok_s"])
            best_per_c[c] = (top["config"], top["speedup_vs_vanilla"])
    overall = None
    for c in cs:
        s = best_per_c.get(c, (None, None))[1]
        if s is not None and s <= 1.0:
            overall = c if overall is None else overall
        else:
            overall = None
    notes = [cost.describe(),
             f"closed loop; at each level the requests simkit predict runs there (at least "
             f"{min_requests}), {seeds} seed(s); " + workload_note(workload.name, workload.origin)]
    for name, c in verdicts.items():
        notes.append(f"{name}: " + (f"stops paying from concurrency {c}" if c else
                                    f"pays at every concurrency measured (up to {cs[-1]})"))
    if not best_per_c:                       # nothing to compare: say so, claim nothing
        notes.append("best speculative config: none was run (--configs "
                     f"{configs} has no speculative config with an acceptance table)")
    else:
        notes.append("best speculative config: " + (
            f"no longer beats vanilla from concurrency {overall}" if overall else
            f"beats vanilla at every concurrency measured (up to {cs[-1]})"))
    best_k: dict = {}
    if kset:
        lines, best_k = best_k_lines(rows, [s for s in specs if s.name not in unavailable],
                                     kset, cs)
        notes.extend(lines)
    for name, why in sorted(unavailable.items()):
        notes.append(f"not run: {why}")
    if workload.proxy_note:
        notes.append(workload.proxy_note)   # "proxy outputs: ..." or "own outputs"
    if skip_note([("every level", skipped)]):
        notes.append(skip_note([("every level", skipped)]))
    return WhatIfResult("concurrency", f"throughput vs concurrency for {model} on "
                        f"{cost.hw.name} TP{cost.tp}", COLUMNS, rows,
                        {"model": model, "corpus": corpus, "hardware": cost.hw.name, "tp": cost.tp,
                         "levels": cs, "configs": configs, "seeds": seeds,
                         "min_requests": min_requests}, notes,
                        {"stops_paying": verdicts, "best_stops_paying": overall,
                         "best_per_concurrency": {str(c): list(v) for c, v in best_per_c.items()},
                         **({"best_k_per_concurrency": best_k} if kset else {})})


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Left: output tok/s vs concurrency; right: speedup over vanilla (1.0 line)."""
    plt = plt_agg()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name in dict.fromkeys(r["config"] for r in result.rows):
        pts = [r for r in result.rows if r["config"] == name]
        xs = [r["concurrency"] for r in pts]
        a1.plot(xs, [r["output_tok_s"] for r in pts], marker="o", ms=3, label=name)
        if name != "vanilla":
            a2.plot(xs, [r["speedup_vs_vanilla"] for r in pts], marker="o", ms=3, label=name)
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency (closed-loop clients)")
        ax.grid(alpha=0.3)
    a2.axhline(1.0, color="k", lw=0.8)
    a1.set_ylabel("output tok/s")
    a2.set_ylabel("speedup vs vanilla")
    a1.legend(fontsize=8)
    fig.suptitle(result.question, fontsize=9)
    fig.tight_layout()
    save_png(fig, path)
