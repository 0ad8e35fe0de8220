"""Quantization (W4A4): faster weight/activation arithmetic plus a changed acceptance.

Arithmetic: the dense-GEMM and routed-expert weight bytes are multiplied by `weight_bytes_factor`
and their FLOP time divided by `flop_speedup` (attention, KV cache, lm_head, sampler and
communication stay bf16); the bytes saved per GPU go to the KV cache. Defaults, NVFP4 on a GPU
with FP4 tensor cores: 4-bit values plus one FP8 scale per 16 weights = 0.5625 bytes per weight
(factor 0.28125 from bf16, 0.5625 from fp8) and the FP4/weight-dtype peak ratio (B200 bf16: 4x);
without FP4 tensor cores the FLOP speed-up is 1.

Acceptance: quantized weights change the outputs, so the drafts match differently. Either give
the quantized model's outputs as traces (a corpus name for simkit.profiles.corpus_profile, `quant_corpus`), or
an `acceptance_scale` s: every accepted length a(t, K) becomes min(d(t, K), floor(s a + u)) with
one seeded uniform u per table row (unbiased: the mean becomes s x the mean, before the cap).
That knob is a parametric stand-in, not a model of how quantization changes text.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from simkit.costmodel import CostModel
from simkit.app.options import RunOptions
from simkit.engine.config import WHATIF_CONFIGS, parse_configs
from simkit.app.verdict import fastest
from simkit.engine.workload import Workload
from simkit.errors import InputError
from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import (
    WhatIfResult, cost_of, ladder_of, requests_per_run, skip_note, skipped_of, workload_note,
    workload_of)

NVFP4_BYTES_PER_WEIGHT = 0.5 + 1.0 / 16     # 4-bit value + an FP8 scale per 16-weight block

CAUTION = ("CAUTION (reference study): W4A4 changes the model's outputs. The study applied it "
           "only behind an output-equivalence gate (it is the one rung of the ladder marked "
           "'changes output: yes'); on Llama-3.1-70B it gained +7 % overall and +16..29 % on code "
           "but lost on the mix corpus. Throughput here is meaningless unless the quantized "
           "model's outputs pass your own quality gate.")

COLUMNS = ["config", "base_tok_s", "w4a4_same_acceptance_tok_s", "w4a4_tok_s",
           "gain_arithmetic", "gain_total", "mean_accepted_base", "mean_accepted_w4a4"]


class QuantizedCostModel(CostModel):
    """A CostModel whose linear-layer weight bytes and FLOP time are scaled (see module doc)."""

    def __init__(self, base: CostModel, weight_bytes_factor: float, flop_speedup: float,
                 kv_capacity_tokens: int, label: str) -> None:
        if not 0 < weight_bytes_factor <= 1 or not flop_speedup >= 1:
            raise InputError("need 0 < weight_bytes_factor <= 1 and flop_speedup >= 1",
                             field="quantization")
        self.weight_bytes_factor = weight_bytes_factor
        self.flop_speedup = flop_speedup
        super().__init__(base.model, base.hw, base.tp, base.coefs, label, kv_capacity_tokens,
                         base.tp_chosen, host_speed=base.host_speed,
                         vllm_version=base.vllm_version)

    def _derive(self) -> None:
        super()._derive()
        self.dense_bytes *= self.weight_bytes_factor
        self.expert_bytes_all *= self.weight_bytes_factor
        self.dense_s_per_tok /= self.flop_speedup
        self.moe_s_per_tok /= self.flop_speedup
        self._fold()


def default_factors(cost: CostModel) -> tuple[float, float]:
    """(weight_bytes_factor, flop_speedup) of NVFP4 W4A4 against the model's weight dtype."""
    m, hw = cost.model, cost.hw
    src = m.linear_bytes("ffn")
    wbf = min(1.0, NVFP4_BYTES_PER_WEIGHT / src)
    fs = hw.peak_flops("fp4") / hw.peak_flops(m.weight_dtype) if hw.fp4_tflops else 1.0
    return wbf, max(1.0, fs)


def quantized_cost_model(cost: CostModel, weight_bytes_factor: float | None = None,
                         flop_speedup: float | None = None, gmu: float = 0.85) -> QuantizedCostModel:
    """The W4A4 version of `cost`, with the KV capacity its freed weight memory allows."""
    from simkit.costmodel.memory import BLOCK_SIZE, kv_budget_bytes

    dw, df = default_factors(cost)
    wbf = dw if weight_bytes_factor is None else weight_bytes_factor
    fs = df if flop_speedup is None else flop_speedup
    parts = cost.model.weight_bytes_parts()
    linear = parts["attn"] + parts["dense_ffn"] + parts["moe_shared"] + parts["experts"]
    budget = kv_budget_bytes(cost.model, cost.hw, cost.tp, gmu) + linear * (1 - wbf) / cost.tp
    per_tok = cost.model.kv_bytes_per_token(cost.tp)
    cap = int(budget // per_tok) // BLOCK_SIZE * BLOCK_SIZE if budget > 0 else 0
    return QuantizedCostModel(cost, wbf, fs, cap,
                              f"{cost.label}, W4A4 (weight bytes x{wbf:.3g}, FLOPs /{fs:.3g})")


def scale_acceptance(workload: Workload, scale: float, seed: int = 0) -> Workload:
    """The workload with every accepted length scaled by `scale` (stochastic rounding, one seeded
    uniform per row, capped at the drafted length, or at K for a drafter whose filler slots are
    verified too: vLLM 0.34's suffix_gpu)."""
    from simkit.drafters.base import drafter_names, get_drafter

    if not scale >= 0:
        raise InputError(f"acceptance scale must be >= 0, got {scale}", field="acceptance_scale")
    tables = {}
    for name, tab in workload.tables.items():
        u = np.random.default_rng([seed, 11]).random(tab.accepted.shape[0])[:, None]
        acc = np.floor(tab.accepted.astype(np.float64) * scale + u)
        fills = name in drafter_names() and get_drafter(name).fills_k_slots
        cap = np.arange(1, tab.accepted.shape[1] + 1) if fills else tab.drafted
        acc = np.minimum(acc, cap).astype(np.uint8)
        tables[name] = replace(tab, accepted=acc,
                               provenance={**tab.provenance, "acceptance_scale": scale})
    return Workload(workload.prompt_len, workload.output_len, tables,
                    name=f"{workload.name} (acceptance x{scale:g})",
                    proxy_note=workload.proxy_note, origin=workload.origin,
                    block_hashes=workload.block_hashes,     # same prompts: same prefix sharing
                    weights=workload.weights, history=workload.history)


def quantization(run: RunOptions = RunOptions(model="llama-3.1-70b", hardware="b200"), *,
                 weight_bytes_factor: float | None = None, flop_speedup: float | None = None,
                 acceptance_scale: float = 0.9, quant_corpus: str | None = None,
                 configs: str = WHATIF_CONFIGS, workload: Workload | None = None
                 ) -> WhatIfResult:
    """Base vs W4A4 with the same acceptance vs W4A4 with the changed acceptance, per config,
    under the settings `run`."""
    model, corpus, concurrency, seeds = run.model, run.corpus, run.concurrency, run.seeds
    workload = workload_of(run, workload)
    num_requests = requests_per_run(run.num_requests, workload, concurrency)
    base = cost_of(run)
    quant = quantized_cost_model(base, weight_bytes_factor, flop_speedup)
    if quant_corpus:
        qwork = workload_of(run, corpus=quant_corpus)
        how = f"acceptance from traces of the quantized outputs (corpus {quant_corpus})"
    else:
        qwork = scale_acceptance(workload, acceptance_scale)
        how = (f"acceptance scaled x{acceptance_scale:g} (parametric assumption, not measured: "
               "give --quant-corpus for the quantized model's own outputs)")
    specs = parse_configs(configs, run.vllm_version)
    ladders = [(name, ladder_of(run, w, c, specs, num_requests=num_requests,
                                phase=f"{name} (model {i} of 3)"))
               for i, (name, w, c) in enumerate((("base", workload, base),
                                                 ("W4A4 arithmetic", workload, quant),
                                                 ("W4A4", qwork, quant)), 1)]
    r_base, r_arith, r_quant = (lad.rows for _, lad in ladders)
    rows = []
    for a, b, c in zip(r_base, r_arith, r_quant):
        rows.append({"config": a.config, "base_tok_s": a.output_tok_s,
                     "w4a4_same_acceptance_tok_s": b.output_tok_s, "w4a4_tok_s": c.output_tok_s,
                     "gain_arithmetic": b.output_tok_s / a.output_tok_s - 1,
                     "gain_total": c.output_tok_s / a.output_tok_s - 1,
                     "mean_accepted_base": a.mean_accepted, "mean_accepted_w4a4": c.mean_accepted})
    best_base = fastest(r_base)
    best_q = fastest(r_quant)
    notes = [CAUTION, base.describe(), quant.describe(), how,
             f"best base {best_base.config} {best_base.output_tok_s:,.0f} tok/s -> best W4A4 "
             f"{best_q.config} {best_q.output_tok_s:,.0f} tok/s "
             f"({best_q.output_tok_s / best_base.output_tok_s - 1:+.1%})",
             f"closed loop, concurrency {concurrency}, {num_requests} requests, {seeds} seed(s); "
             + workload_note(workload.name, workload.origin)]
    if quant_corpus and len(qwork.prompt_len) != len(workload.prompt_len):
        notes.append("the quantized corpus has other requests than the base corpus: the "
                     "comparison mixes a traffic change with the quantization")
    if skip_note([(name, skipped_of(lad)) for name, lad in ladders]):
        notes.append(skip_note([(name, skipped_of(lad)) for name, lad in ladders]))
    return WhatIfResult("quantization", f"W4A4 for {model} on {base.hw.name} TP{base.tp}",
                        COLUMNS, rows,
                        {"model": model, "corpus": corpus, "hardware": base.hw.name,
                         "tp": base.tp, "weight_bytes_factor": quant.weight_bytes_factor,
                         "flop_speedup": quant.flop_speedup,
                         "acceptance_scale": None if quant_corpus else acceptance_scale,
                         "quant_corpus": quant_corpus, "configs": configs,
                         "concurrency": concurrency, "seeds": seeds,
                         "num_requests": num_requests,
                         "kv_capacity_base": base.kv_capacity_tokens,
                         "kv_capacity_w4a4": quant.kv_capacity_tokens}, notes,
                        {"caution": CAUTION})


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Bars per config: base, W4A4 with the same acceptance, W4A4 with the changed acceptance."""
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(7.5, 4))
    names = [r["config"] for r in result.rows]
    keys = (("base_tok_s", "base"), ("w4a4_same_acceptance_tok_s", "W4A4, same acceptance"),
            ("w4a4_tok_s", "W4A4, changed acceptance"))
    for j, (key, label) in enumerate(keys):
        ax.bar([i + j * 0.27 for i in range(len(names))], [r[key] for r in result.rows], 0.27,
               label=label)
    ax.set_xticks([i + 0.27 for i in range(len(names))], names)
    ax.set_ylabel("output tok/s")
    ax.set_title(result.question, fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.text(0.01, 0.01, "W4A4 changes outputs: only behind an output-equivalence gate",
             fontsize=7, color="darkred")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save_png(fig, path)
