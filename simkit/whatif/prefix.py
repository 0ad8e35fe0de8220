"""Prefix: a longer shared system prompt (an agent's fixed tool preamble of N tokens).

Every prompt of the corpus sample gets the same N-token preamble in front (a fixed, seeded
sequence of token ids; only its length and that it is shared matter), and the ladder runs with
automatic prefix caching on and off. With caching on, only the first request pays the preamble's
prefill (whole 16-token blocks hit afterwards, as long as they stay cached); off, every request
prefills it. Block hashes are recomputed from the sampled prompts' token ids (raw traces needed;
nothing is written). Assumption: the preamble does not change the drafts (the acceptance tables
are the corpus's own; a real preamble also enters suffix decoding's per-prompt tree).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from simkit.app.options import RunOptions
from simkit.engine.config import WHATIF_CONFIGS, parse_configs
from simkit.engine.workload import Workload
from simkit.errors import InputError
from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import WhatIfResult, cost_of, ladder_of, requests_per_run, workload_note

COLUMNS = ["preamble", "config", "output_tok_s", "vs_first", "prefix_hit_rate",
           "no_cache_tok_s", "cache_gain", "ttft_ms_p50", "no_cache_ttft_ms_p50"]
PREAMBLE_SEED = 20261201


def preamble_ids(n: int) -> np.ndarray:
    """The fixed N-token preamble (seeded ids inside every supported vocabulary)."""
    return np.random.default_rng(PREAMBLE_SEED).integers(1000, 30000, n).astype(np.int32)


def with_preamble(workload: Workload, prompts: list[np.ndarray], n: int) -> Workload:
    """The workload with the preamble in front of every prompt: lengths + n, hashes recomputed."""
    from simkit.block_hash import pack, prompt_block_hashes

    pre = preamble_ids(n)
    hashes = pack(prompt_block_hashes(np.concatenate([pre, np.asarray(p, np.int32)]))
                  for p in prompts)
    return dataclasses.replace(workload, prompt_len=workload.prompt_len + np.int32(n),
                               name=f"{workload.name}+preamble{n}", block_hashes=hashes,
                               _columns={})


def parse_levels(text: str) -> list[int]:
    """'0,500,2000' -> [0, 500, 2000] (sorted, unique); InputError on anything else."""
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise InputError(f"preamble lengths must be integers, got {text!r}",
                         field="preamble") from None
    if not levels or levels[0] < 0:
        raise InputError("preamble lengths must be >= 0 tokens", field="preamble")
    return levels


def prefix(run: RunOptions = RunOptions(), *, preamble: str = "0,500,2000",
           configs: str = WHATIF_CONFIGS) -> WhatIfResult:
    """The ladder at each preamble length, prefix caching on and off (the setting varied),
    under the other settings of `run`."""
    from simkit.app.capped import apply_capped_outputs
    from simkit.profiles.corpus_profile import load_profile, sampled_prompts

    model, corpus, concurrency, seeds = run.model, run.corpus, run.concurrency, run.seeds

    levels = parse_levels(preamble)
    specs = parse_configs(configs, run.vllm_version)
    prof = load_profile(model, corpus, source=run.source, history=run.history)
    base = apply_capped_outputs(Workload.from_profile(prof), run.capped_outputs, run.max_tokens)
    base.name = base.name or f"{model}/{corpus}"
    num_requests = requests_per_run(run.num_requests, base, concurrency)
    prompts = sampled_prompts(prof)
    cost = cost_of(run)
    on = run.but(prefix_caching=True).server(cost)
    off = dataclasses.replace(on, prefix_caching=False)
    rows, first = [], {}
    for n in levels:
        w = with_preamble(base, prompts, n)
        cached = ladder_of(run, w, cost, specs, server=on, num_requests=num_requests).rows
        plain = ladder_of(run, w, cost, specs, server=off, num_requests=num_requests).rows
        for r, p in zip(cached, plain):
            first.setdefault(r.config, r.output_tok_s)
            rows.append({"preamble": n, "config": r.config, "output_tok_s": r.output_tok_s,
                         "vs_first": r.output_tok_s / first[r.config] if first[r.config] else None,
                         "prefix_hit_rate": r.prefix_hit_rate,
                         "no_cache_tok_s": p.output_tok_s,
                         "cache_gain": r.output_tok_s / p.output_tok_s - 1 if p.output_tok_s else None,
                         "ttft_ms_p50": r.ttft_ms_p50, "no_cache_ttft_ms_p50": p.ttft_ms_p50})
    notes = [cost.describe(),
             f"closed loop, concurrency {concurrency}; {num_requests} requests per run, {seeds} "
             f"seed(s); {workload_note(base.name, base.origin)}",
             "preamble: the same fixed N tokens in front of every prompt; prompts over "
             "max_model_len after it are skipped",
             "vs_first: tok/s against the first preamble length, caching on; cache_gain: caching "
             "on against off at the same preamble",
             "assumed: the preamble does not change the drafts (acceptance tables unchanged)"]
    if base.proxy_note:
        notes.append(base.proxy_note)
    return WhatIfResult("prefix", f"a shared preamble of {', '.join(map(str, levels))} tokens "
                        f"for {model}/{corpus} on {cost.hw.name} TP{cost.tp}", COLUMNS, rows,
                        {"model": model, "corpus": corpus, "hardware": cost.hw.name,
                         "tp": cost.tp, "preamble": levels, "configs": configs,
                         "concurrency": concurrency, "seeds": seeds,
                         "num_requests": num_requests}, notes)


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Output tok/s against preamble length per config, caching on (solid) and off (dashed)."""
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for name in dict.fromkeys(r["config"] for r in result.rows):
        pts = [r for r in result.rows if r["config"] == name]
        xs = [r["preamble"] for r in pts]
        line, = ax.plot(xs, [r["output_tok_s"] for r in pts], marker="o", ms=3, label=name)
        ax.plot(xs, [r["no_cache_tok_s"] for r in pts], ls="--", color=line.get_color(), lw=0.8)
    ax.set_xlabel("shared preamble (tokens)")
    ax.set_ylabel("output tok/s (dashed: no prefix caching)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(result.question, fontsize=9)
    fig.tight_layout()
    save_png(fig, path)
