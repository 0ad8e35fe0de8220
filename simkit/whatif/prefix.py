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
from simkit.whatif.common import (
    WhatIfResult, cost_of, ladder_of, requests_per_run, skip_note, skipped_of, workload_note)

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


def same_requests(workload: Workload, longest: int, max_model_len: int, max_tokens: int
                  ) -> tuple[Workload, np.ndarray]:
    """(the workload without the requests that do not fit whole, prompt and output under
    max_tokens, in max_model_len behind the longest preamble; the mask of those): every
    preamble row then replays the same requests, none cut short by the longer preamble. They
    are left out by an empty output, which the engine never runs and never draws
    (simkit.engine.sim.request_order), so the sample's other weights and tables stay as they
    are; InputError when no request is left."""
    live = workload.output_len > 0
    whole = workload.prompt_len + longest + np.minimum(workload.output_len, max_tokens)
    over = live & (whole > max_model_len)
    n = int(over.sum())
    if n and n == int(live.sum()):
        raise InputError(f"no sampled request fits whole in max_model_len {max_model_len:,} "
                         f"behind a {longest:,}-token preamble", field="preamble")
    if not n:
        return workload, over
    olen = np.where(over, 0, workload.output_len).astype(workload.output_len.dtype)
    return dataclasses.replace(workload, output_len=olen, _columns={}), over


def own_skips(skipped: dict[str, int], prompt_len: np.ndarray, left: np.ndarray,
              preamble: int, max_model_len: int) -> dict[str, int]:
    """The engine's skip counts at one preamble less the requests same_requests left out (the
    notes count those once): what the engine skipped on its own. A left-out request counts as
    over max_model_len where its prompt is over it at this preamble, else as an empty output."""
    out = dict(skipped)
    over = int(np.sum(left & (prompt_len + preamble >= max_model_len)))
    out["prompt_over_max_model_len"] = out.get("prompt_over_max_model_len", 0) - over
    out["empty_output"] = out.get("empty_output", 0) - (int(left.sum()) - over)
    return out


def parse_levels(text: str, max_model_len: int | None = None) -> list[int]:
    """'0,500,2000' -> [0, 500, 2000] (sorted, unique); InputError on anything else, and on a
    preamble that leaves no room under `max_model_len` for a prompt token and an output token
    (every request would be refused; 100,000,000 used to take 2 GB and never finish)."""
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise InputError(f"preamble lengths must be integers, got {text!r}",
                         field="preamble") from None
    if not levels or levels[0] < 0:
        raise InputError("preamble lengths must be >= 0 tokens", field="preamble")
    if max_model_len is not None and levels[-1] > max_model_len - 2:
        raise InputError(f"at most {max_model_len - 2:,} tokens (--max-model-len {max_model_len:,} "
                         f"less one prompt and one output token), got {levels[-1]:,}",
                         field="preamble")
    return levels


def prefix(run: RunOptions = RunOptions(), *, preamble: str = "0,500,2000",
           configs: str = WHATIF_CONFIGS) -> WhatIfResult:
    """The ladder at each preamble length, prefix caching on and off (the setting varied),
    under the other settings of `run`."""
    from simkit.app.capped import apply_capped_outputs
    from simkit.profiles.corpus_profile import load_profile, sampled_prompts

    model, corpus, concurrency, seeds = run.model, run.corpus, run.concurrency, run.seeds

    levels = parse_levels(preamble, run.max_model_len)
    specs = parse_configs(configs, run.vllm_version)
    prof = load_profile(model, corpus, source=run.source, history=run.history)
    base = apply_capped_outputs(Workload.from_profile(prof), run.capped_outputs, run.max_tokens)
    base.name = base.name or f"{model}/{corpus}"
    num_requests = requests_per_run(run.num_requests, base, concurrency)
    prompts = sampled_prompts(prof)
    cost = cost_of(run)
    on = run.but(prefix_caching=True).server(cost)
    off = dataclasses.replace(on, prefix_caching=False)
    base, left = same_requests(base, levels[-1], on.max_model_len, on.max_tokens)
    left_out = int(left.sum())
    rows, first, ran = [], {}, []
    for i, n in enumerate(levels, 1):
        w = with_preamble(base, prompts, n)
        step = f"preamble {n} (level {i} of {len(levels)})"
        cached_ladder = ladder_of(run, w, cost, specs, server=on, num_requests=num_requests,
                                  phase=f"{step}, prefix caching on")
        cached = cached_ladder.rows
        plain = ladder_of(run, w, cost, specs, server=off, num_requests=num_requests,
                          phase=f"{step}, prefix caching off").rows
        ran.append((f"preamble {n}", own_skips(skipped_of(cached_ladder), base.prompt_len,
                                               left, n, on.max_model_len)))
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
             "max_model_len after it are skipped" if not left_out else
             f"preamble: the same fixed N tokens in front of every prompt; {left_out:,} of "
             f"{base.num_requests:,} sampled requests do not fit whole (prompt and output) in "
             f"max_model_len {on.max_model_len:,} behind the {levels[-1]:,}-token preamble, so "
             "every row runs without them (all rows replay the same requests)",
             "vs_first: tok/s against the first preamble length, caching on; cache_gain: caching "
             "on against off at the same preamble",
             "assumed: the preamble does not change the drafts (acceptance tables unchanged)"]
    if base.proxy_note:
        notes.append(base.proxy_note)
    if skip_note(ran):
        notes.append(skip_note(ran))
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
