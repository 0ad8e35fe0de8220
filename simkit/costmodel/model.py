"""The step-time cost model: device time of one forward pass and host time of one engine step,
from a BatchDescriptor. Called once per simulated step, so step_cost is plain float arithmetic
on constants folded in advance; device_terms/host_terms give the same model term by term."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simkit.catalog.hardware import HardwareSpec
from simkit.catalog.models import ModelSpec
from simkit.catalog.vllm_versions import DEFAULT_VERSION
from simkit.costmodel.batch import BatchDescriptor, GraphMode, StepCost
from simkit.costmodel.coefficients import (ATTN_EFFICIENCY, DRAFTER_COEFS, GEMM_EFFICIENCY, HBM_EFFICIENCY,
                                           LINK_EFFICIENCY, Coefficients)
from simkit.drafters.base import NO_DRAFTER

SAMPLER_LOGIT_PASSES = 3      # fp32 logits read/written ~3 times (penalties/temperature, softmax, argmax)
ACT_PASSES_HIDDEN = 8         # activation reads/writes per token per layer in units of hidden (norms,
                              # residual, rope, GEMM inputs/outputs)
ACT_PASSES_FFN = 3            # ... in units of the per-GPU FFN width (gate/up output, act, down input)


def kernels_per_layer(model: ModelSpec, tp: int) -> int:
    """Kernel launches of one decoder layer when run eagerly (torch.compile fusions applied)."""
    k = 10                                     # 2 fused add+norm, qkv, rope, cache write, attn, o, gate_up, act, down
    if model.attention == "mla":
        k += 4                                 # q/kv low-rank projections, their norms, absorbed matmuls
    if model.is_moe:
        k += 6                                 # router GEMM, top-k, align/sort, two grouped GEMMs, combine
    if tp > 1:
        k += 2                                 # two all-reduces
    return k


def piecewise_launches_per_layer(model: ModelSpec) -> int:
    """Launches per layer outside the graph in PIECEWISE: attention kernels + one piece replay."""
    return (3 if model.attention == "mla" else 2) + 1


def _step_cost_maker():
    """A StepCost factory about twice as fast as the frozen dataclass __init__: it fills the
    slots through their descriptors (same object, same equality); falls back to __init__ if
    StepCost ever stops using slots."""
    try:
        set_d, set_h, set_s = (StepCost.device_s.__set__, StepCost.host_s.__set__, StepCost.step_s.__set__)
    except AttributeError:
        return StepCost
    new = object.__new__

    def make(device_s: float, host_s: float, step_s: float) -> StepCost:
        obj = new(StepCost)
        set_d(obj, device_s)
        set_h(obj, host_s)
        set_s(obj, step_s)
        return obj

    return make


@dataclass(frozen=True)
class HostTime:
    """Host seconds of one step by component (reference CPU scaled by the host's speed)."""

    schedule: float
    prepare: float
    sample: float
    draft: float
    update: float
    frontend: float                 # detokenize/stream in the front-end process (overlaps the engine)
    dispatch: float = 0.0           # issuing a PIECEWISE/eager forward's launches (during the forward)

    @property
    def total(self) -> float:
        """Engine-core host seconds besides dispatch (front-end excluded: it runs in another
        process; dispatch runs while the forward does)."""
        return self.schedule + self.prepare + self.sample + self.draft + self.update


class CostModel:
    """StepCostModel for one (model, hardware, TP, coefficients) combination."""

    def __init__(self, model: ModelSpec, hw: HardwareSpec, tp: int, coefs: Coefficients | None = None,
                 label: str = "analytic", kv_capacity_tokens: int = 0, tp_chosen: bool = False,
                 host_speed: float | None = None, async_overlap: bool = True,
                 vllm_version: str = DEFAULT_VERSION) -> None:
        self.model, self.hw, self.tp = model, hw, tp
        self.coefs = coefs or Coefficients()
        self.label = label
        self.kv_capacity_tokens = kv_capacity_tokens
        self.tp_chosen = tp_chosen
        self.host_speed = hw.host_speed if host_speed is None else host_speed
        # False: async steps pay host and device in series, as in records whose measurement
        # synchronised the stream every step (stock vLLM overlaps them: True)
        self.async_overlap = async_overlap
        self.vllm_version = vllm_version      # whose engine rules go with it (the calibration's)
        self._derive()

    # ---- constants -------------------------------------------------------------------------
    def _derive(self) -> None:
        """Unscaled analytic constants (per GPU), then the same folded with the coefficients."""
        m, hw, tp = self.model, self.hw, self.tp
        bw = hw.hbm_tbps * 1e12 * HBM_EFFICIENCY
        bf16 = hw.peak_flops("bf16") * GEMM_EFFICIENCY
        wdt = m.weight_dtype if m.weight_dtype != "fp4" or hw.fp4_tflops else "bf16"
        lin = hw.peak_flops(wdt) * GEMM_EFFICIENCY
        parts = m.weight_bytes_parts()
        self.inv_bw = 1.0 / bw
        # dense GEMM group: attention projections, dense FFN layers, shared experts and router
        attn_p = m.layers * m.attn_params_per_layer()
        ffn_p = m.dense_layers * m.dense_mlp_params()
        shared_p = m.moe_layers * (m.experts_shared * m.expert_params() + m.hidden * m.experts_total)
        attn_peak = lin if m.linear_bytes("attn") == 1.0 else bf16
        self.dense_bytes = (parts["attn"] + parts["dense_ffn"] + parts["moe_shared"]) / tp
        self.dense_s_per_tok = 2.0 * (attn_p / attn_peak + (ffn_p + shared_p) / lin) / tp
        ffn_w = (m.experts_active + m.experts_shared) * m.moe_intermediate if m.is_moe else m.intermediate
        self.act_bytes_per_tok = 2.0 * m.layers * (ACT_PASSES_HIDDEN * m.hidden + ACT_PASSES_FFN * ffn_w / tp)
        # lm_head (bf16, vocab-parallel): rows = positions that are sampled
        self.lm_bytes = m.vocab * m.hidden * 2.0 / tp
        self.lm_s_per_row = 2.0 * m.vocab * m.hidden / bf16 / tp
        # routed experts
        if m.is_moe:
            self.expert_bytes_all = m.moe_layers * m.expert_params() * m.linear_bytes("ffn") / tp
            self.moe_s_per_tok = 2.0 * m.moe_layers * m.experts_active * m.expert_params() / lin / tp
            self.moe_E = float(m.experts_total)
            self.moe_log_miss = math.log1p(-m.experts_active / m.experts_total)
        else:
            self.expert_bytes_all = self.moe_s_per_tok = self.moe_E = self.moe_log_miss = 0.0
        # attention: KV bytes per context token (global layers) and per windowed token (local layers)
        kvl = m.kv_bytes_per_token_layer(tp)
        self.kv_full = m.full_attention_layers * kvl
        self.kv_local = (m.layers - m.full_attention_layers) * kvl
        self.window = float(m.sliding_window) if m.sliding_window else 0.0
        heads = max(1.0, m.heads / tp)
        if m.attention == "mla":
            fpp = 2.0 * heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        else:
            fpp = 4.0 * heads * m.head_dim
        attn_peak_attn = hw.peak_flops("bf16") * ATTN_EFFICIENCY
        self.attn_s_per_pair_full = fpp * m.full_attention_layers / attn_peak_attn
        self.attn_s_per_pair_local = fpp * (m.layers - m.full_attention_layers) / attn_peak_attn
        # TP communication (ring all-reduce of bf16 activations, 2 per layer; logits all-gather)
        link = hw.nvlink_gbps * 1e9 / 2 * LINK_EFFICIENCY
        ring = 2.0 * (tp - 1) / tp if tp > 1 else 0.0
        self.comm_s_per_tok = 2 * m.layers * ring * m.hidden * 2.0 / link if tp > 1 else 0.0
        self.comm_s_per_row = ((tp - 1) / tp) * m.vocab * 2.0 / link if tp > 1 else 0.0
        self.n_allreduce = 2.0 * m.layers if tp > 1 else 0.0
        self.sampler_s_per_row = SAMPLER_LOGIT_PASSES * m.vocab * 4.0 / bw
        self.kernels = float(m.layers * kernels_per_layer(m, tp))   # kernel boundaries per forward
        self.launches = {GraphMode.FULL: 0.0,
                         GraphMode.PIECEWISE: float(m.layers * piecewise_launches_per_layer(m)),
                         GraphMode.NONE: float(m.layers * kernels_per_layer(m, tp))}
        self._fold()

    def _fold(self) -> None:
        """Multiply the coefficients into the constants used by the fast step_cost."""
        c, hs = self.coefs, 1.0 / self.host_speed
        self._g_bw = self.inv_bw * c.gemm_scale
        self._g_dense_bytes = self.dense_bytes * self._g_bw
        self._g_act = self.act_bytes_per_tok * self._g_bw
        self._g_tok = self.dense_s_per_tok * c.gemm_scale
        self._g_lm_bytes = self.lm_bytes * self._g_bw
        self._g_lm_row = self.lm_s_per_row * c.gemm_scale
        self._m_bytes = self.expert_bytes_all * self.inv_bw * c.moe_scale
        self._m_tok = self.moe_s_per_tok * c.moe_scale
        self._a_bw = self.inv_bw * c.attn_scale
        self._a_full = self.attn_s_per_pair_full * c.attn_scale
        self._a_local = self.attn_s_per_pair_local * c.attn_scale
        self._c_tok = self.comm_s_per_tok * c.comm_scale
        self._c_row = self.comm_s_per_row * c.comm_scale
        self._ar = self.n_allreduce * c.allreduce_latency_s
        self._s_row = self.sampler_s_per_row * c.sampler_scale
        base = c.device_fixed_s + self._ar + self.kernels * c.kernel_gap_s
        self._fixed = {GraphMode.FULL: base,
                       GraphMode.PIECEWISE: base + self.launches[GraphMode.PIECEWISE] * c.launch_piecewise_s,
                       GraphMode.NONE: base + self.launches[GraphMode.NONE] * c.launch_none_s}
        self._h = self._host_constants(c, hs)
        ca = c.for_async_runner()          # the async runner's own host coefficients, if fitted
        self._h_async = self._host_constants(ca, hs)
        self._h_acc = ((c.sched_accept_s + c.prep_accept_s + c.update_accept_s) * hs,
                       c.frontend_accept_s * hs)
        self._h_acc_async = ((ca.sched_accept_s + ca.prep_accept_s + ca.update_accept_s) * hs,
                             c.frontend_accept_s * hs)
        self._dispatch = self._dispatch_constants(c, hs)
        self._dispatch_async = self._dispatch_constants(ca, hs)
        self._front_prefill = (c.frontend_prefill_s or 0.0) * hs
        self._draft = {NO_DRAFTER: (0.0, 0.0, 0.0),
                       **{d: tuple(getattr(c, name) * hs for name in names)
                          for d, names in DRAFTER_COEFS.items()}}
        self._build_fast()

    @staticmethod
    def _host_constants(c: Coefficients, hs: float) -> tuple[float, ...]:
        """The per-step host coefficients in this host's seconds, in the fast path's order."""
        return (c.sched_step_s * hs, c.sched_req_s * hs, c.prep_step_s * hs, c.prep_req_s * hs,
                c.prep_token_s * hs, c.sample_step_s * hs, c.sample_req_s * hs, c.rejection_token_s * hs,
                c.update_step_s * hs, c.update_req_s * hs, c.frontend_req_s * hs, c.async_serial_s * hs)

    def _dispatch_constants(self, c: Coefficients, hs: float) -> tuple[float, float, float] | None:
        """Host seconds to issue a forward's launches: per PIECEWISE forward, per eager forward,
        per scheduled token (each over every decoder layer); None when the coefficients carry
        no dispatch term (then a forward's issuing is inside its device time, as fitted)."""
        if c.dispatch_piecewise_s is None and c.dispatch_none_s is None and c.dispatch_token_s is None:
            return None
        layers = float(self.model.layers)
        return ((c.dispatch_piecewise_s or 0.0) * layers * hs, (c.dispatch_none_s or 0.0) * layers * hs,
                (c.dispatch_token_s or 0.0) * layers * hs)

    @property
    def prices_dispatch(self) -> bool:
        """Whether the coefficients carry the host dispatch terms (for either runner)."""
        return self._dispatch is not None or self._dispatch_async is not None

    def dispatch_time(self, b: BatchDescriptor) -> float:
        """Host seconds to issue the step's forward (0 for a FULL graph replay or without the
        dispatch terms)."""
        d = self._dispatch_async if b.async_scheduling else self._dispatch
        mode = GraphMode(b.graph_mode)
        if d is None or mode is GraphMode.FULL:
            return 0.0
        return (d[0] if mode is GraphMode.PIECEWISE else d[1]) + d[2] * b.num_tokens

    def frontend_time(self, b: BatchDescriptor) -> float:
        """Front-end seconds of the step (detokenize, stream; the prefill term where fitted)."""
        return self.host_time(b).frontend

    # ---- the fast path ---------------------------------------------------------------------
    def step_cost(self, b: BatchDescriptor) -> StepCost:
        """Device, host and wall seconds of one step (see docs/costmodel.md for every term)."""
        return self._fast(b)

    def _build_fast(self) -> None:
        """Bind the folded constants into a closure: locals are much cheaper than attributes,
        and the simulator calls this once per simulated step."""
        g_dense, g_act, g_tok = self._g_dense_bytes, self._g_act, self._g_tok
        g_lm, g_lm_row = self._g_lm_bytes, self._g_lm_row
        moe_e, moe_log, m_bytes, m_tok = self.moe_E, self.moe_log_miss, self._m_bytes, self._m_tok
        a_bw, a_full, a_local = self._a_bw, self._a_full, self._a_local
        kv_full, kv_local, window = self.kv_full, self.kv_local, self.window
        c_tok, row_s = self._c_tok, self._c_row + self._s_row
        rej = self.coefs.rejection_device_s
        full_mode, pw_mode = GraphMode.FULL, GraphMode.PIECEWISE
        f_full, f_pw, f_none = self._fixed[full_mode], self._fixed[pw_mode], self._fixed[GraphMode.NONE]
        fixed = self._fixed
        (h_ss, h_sr, h_ps, h_pr, h_pt, h_xs, h_xr, h_rt, h_us, h_ur, h_fr, h_as) = self._h
        h_step = h_ss + h_ps + h_xs + h_us
        h_req = h_sr + h_pr + h_xr + h_ur
        h_acc, h_facc = self._h_acc
        # the async runner's host constants (the same values unless the calibration has its own)
        (_, _, _, _, a_pt, _, _, a_rt, _, _, _, a_as) = self._h_async
        a = self._h_async
        a_step = a[0] + a[2] + a[5] + a[8]
        a_req = a[1] + a[3] + a[6] + a[9]
        a_acc = self._h_acc_async[0]
        disp, disp_a = self._dispatch, self._dispatch_async
        d_pw, d_none, d_tok = disp or (0.0, 0.0, 0.0)
        da_pw, da_none, da_tok = disp_a or (0.0, 0.0, 0.0)
        dispatch_on = disp is not None or disp_a is not None
        f_pre = self._front_prefill
        pf_tok = self.coefs.prefill_token_s or 0.0
        drafts = self._draft
        exp = math.exp
        make = _step_cost_maker()
        overlap_ok = getattr(self, "async_overlap", True)

        def fast(b: BatchDescriptor) -> StepCost:
            n = b.num_padded_tokens
            reqs = b.num_reqs
            spec = b.num_spec_tokens
            ntok = b.num_tokens
            rows = reqs + spec
            x = g_dense + n * g_act
            y = n * g_tok
            dev = x if x > y else y
            y = rows * g_lm_row
            dev += g_lm if g_lm > y else y
            if m_tok:
                x = moe_e * (1.0 - exp(n * moe_log)) * m_bytes
                y = n * m_tok
                dev += x if x > y else y
            if reqs:
                ctx = b.context_tokens
                mean = ctx / reqs
                pairs = (ntok - 0.5 * b.num_prefill_tokens) * mean
                if window:
                    win = mean if mean < window else window
                    x = (ctx * kv_full + reqs * win * kv_local) * a_bw
                    y = pairs * a_full + ntok * win * a_local
                else:
                    x = ctx * kv_full * a_bw
                    y = pairs * a_full
                dev += x if x > y else y
            gm = b.graph_mode   # identity tests: Enum.__hash__ is a slow Python-level call
            if gm is full_mode:
                dev += f_full
            elif gm is pw_mode:
                dev += f_pw
            else:
                dev += f_none if gm is GraphMode.NONE else fixed[GraphMode(gm)]
            dev += n * c_tok + rows * row_s
            if spec:
                dev += rej
            if pf_tok:
                dev += pf_tok * b.num_prefill_tokens
            acc = b.num_accepted_tokens
            asy = b.async_scheduling
            if asy:
                overlap = a_step + a_req * reqs + a_pt * ntok + a_rt * spec + a_acc * acc
            else:
                overlap = h_step + h_req * reqs + h_pt * ntok + h_rt * spec + h_acc * acc
            nd = b.num_drafting_reqs
            if nd:
                ds, dr, da = drafts[b.drafter]
                draft = ds + dr * nd + da * acc
            else:
                draft = 0.0
            if dispatch_on and gm is not full_mode:
                if asy:
                    issue = (da_pw if gm is pw_mode else da_none) + da_tok * ntok
                else:
                    issue = (d_pw if gm is pw_mode else d_none) + d_tok * ntok
                if asy and overlap_ok:     # issuing the forward is host work on the step's path
                    step = (dev if dev > overlap + issue else overlap + issue) + draft + a_as
                else:                      # the forward ends no earlier than its last launch
                    step = (dev if dev > issue else issue) + overlap + draft
            elif asy and overlap_ok:
                step = (dev if dev > overlap else overlap) + draft + a_as
            else:
                step = dev + overlap + draft
            front = h_fr * reqs + h_facc * acc
            if f_pre:
                front += f_pre * b.num_prefill_reqs
            return make(dev, overlap + draft, step if step > front else front)

        self._fast = fast
        self.step_cost = fast   # instance attribute: skips one call layer per step
        self.thread_parts = self._thread_parts_fn()

    def _thread_parts_fn(self):
        """thread_parts(b) = (host_time(b).frontend, .draft, .dispatch), the same floats by the
        same expressions, without host_time's other parts and its HostTime: a run in one engine
        thread (simkit.costmodel.run_conditions) asks for them once per step."""
        shared, hs = self.coefs, 1.0 / self.host_speed
        fr, fa, fp = shared.frontend_req_s, shared.frontend_accept_s, shared.frontend_prefill_s or 0.0
        by_runner = {flag: {d: tuple(getattr(c, name) for name in names)
                            for d, names in DRAFTER_COEFS.items()}
                     for flag, c in ((False, shared), (True, shared.for_async_runner()))}
        disp = {False: self._dispatch, True: self._dispatch_async}
        full_mode, pw_mode = GraphMode.FULL, GraphMode.PIECEWISE

        def thread_parts(b: BatchDescriptor) -> tuple[float, float, float]:
            asy, acc = b.async_scheduling, b.num_accepted_tokens
            coefs = by_runner[bool(asy)].get(b.drafter) if b.num_drafting_reqs else None
            if coefs is not None:
                step_s, req_s, acc_s = coefs
                draft = (step_s + req_s * b.num_drafting_reqs + acc_s * acc) * hs
            else:
                draft = 0.0
            front = (fr * b.num_reqs + fa * acc + fp * b.num_prefill_reqs) * hs
            d = disp[bool(asy)]
            gm = b.graph_mode
            mode = gm if gm.__class__ is GraphMode else GraphMode(gm)
            if d is None or mode is full_mode:
                return front, draft, 0.0
            return front, draft, (d[0] if mode is pw_mode else d[1]) + d[2] * b.num_tokens
        return thread_parts

    # ---- the same model, term by term ------------------------------------------------------
    def device_terms(self, b: BatchDescriptor | dict) -> dict[str, float]:
        """Unscaled device terms: analytic seconds (roofline groups) and event counts.
        device_time = sum(coefficient x term); the estimator fits those coefficients."""
        g = b.__getitem__ if isinstance(b, dict) else b.__getattribute__
        n, reqs, ntok = g("num_padded_tokens"), g("num_reqs"), g("num_tokens")
        rows = reqs + g("num_spec_tokens")
        mode = GraphMode(g("graph_mode"))
        gemm = max(self.dense_bytes * self.inv_bw + n * self.act_bytes_per_tok * self.inv_bw,
                   n * self.dense_s_per_tok)
        gemm += max(self.lm_bytes * self.inv_bw, rows * self.lm_s_per_row)
        moe = 0.0
        if self.moe_s_per_tok:
            distinct = self.moe_E * (1.0 - math.exp(n * self.moe_log_miss))
            moe = max(distinct * self.expert_bytes_all * self.inv_bw, n * self.moe_s_per_tok)
        attn = 0.0
        if reqs:
            ctx = g("context_tokens")
            mean = ctx / reqs
            win = min(mean, self.window) if self.window else 0.0
            attn = max((ctx * self.kv_full + reqs * win * self.kv_local) * self.inv_bw,
                       (ntok - 0.5 * g("num_prefill_tokens")) * mean * self.attn_s_per_pair_full
                       + ntok * win * self.attn_s_per_pair_local)
        return {
            "gemm": gemm, "moe": moe, "attn": attn,
            "comm": n * self.comm_s_per_tok + rows * self.comm_s_per_row,
            "sampler": rows * self.sampler_s_per_row,
            "allreduce": self.n_allreduce,
            "rejection": 1.0 if g("num_spec_tokens") else 0.0,
            "launch_piecewise": self.launches[GraphMode.PIECEWISE] if mode is GraphMode.PIECEWISE else 0.0,
            "launch_none": self.launches[GraphMode.NONE] if mode is GraphMode.NONE else 0.0,
            "fixed": 1.0,
            "kernel_gap": self.kernels,
            "prefill": float(g("num_prefill_tokens")),
        }

    DEVICE_TERM_COEF = {"gemm": "gemm_scale", "moe": "moe_scale", "attn": "attn_scale", "comm": "comm_scale",
                        "sampler": "sampler_scale", "allreduce": "allreduce_latency_s",
                        "rejection": "rejection_device_s", "launch_piecewise": "launch_piecewise_s",
                        "launch_none": "launch_none_s", "fixed": "device_fixed_s", "kernel_gap": "kernel_gap_s",
                        "prefill": "prefill_token_s"}

    def device_breakdown(self, b: BatchDescriptor) -> dict[str, float]:
        """Device seconds per term (coefficient x term)."""
        return {k: v * (getattr(self.coefs, self.DEVICE_TERM_COEF[k]) or 0.0)   # absent optional: 0
                for k, v in self.device_terms(b).items()}

    def device_time(self, b: BatchDescriptor) -> float:
        """Device seconds of the step (forward, lm_head, sampler kernels)."""
        return sum(self.device_breakdown(b).values())

    def host_time(self, b: BatchDescriptor) -> HostTime:
        """Host seconds of the step by component, on this hardware's host CPU (the async
        runner's own coefficients for its steps where the calibration has them)."""
        shared, hs = self.coefs, 1.0 / self.host_speed
        c = shared.for_async_runner() if b.async_scheduling else shared
        reqs, spec, acc = b.num_reqs, b.num_spec_tokens, b.num_accepted_tokens
        if b.num_drafting_reqs and b.drafter in DRAFTER_COEFS:
            step_s, req_s, acc_s = (getattr(c, name) for name in DRAFTER_COEFS[b.drafter])
            draft = (step_s + req_s * b.num_drafting_reqs + acc_s * acc) * hs
        else:
            draft = 0.0
        return HostTime(
            schedule=(c.sched_step_s + c.sched_req_s * reqs + c.sched_accept_s * acc) * hs,
            prepare=(c.prep_step_s + c.prep_req_s * reqs + c.prep_token_s * b.num_tokens
                     + c.prep_accept_s * acc) * hs,
            sample=(c.sample_step_s + c.sample_req_s * reqs + c.rejection_token_s * spec) * hs,
            draft=draft,
            update=(c.update_step_s + c.update_req_s * reqs + c.update_accept_s * acc) * hs,
            frontend=(shared.frontend_req_s * reqs + shared.frontend_accept_s * acc
                      + (shared.frontend_prefill_s or 0.0) * b.num_prefill_reqs) * hs,
            dispatch=self.dispatch_time(b),
        )

    def step_time(self, device_s: float, host: HostTime, async_scheduling: bool) -> float:
        """Wall time from the parts. Sync (V1): device + all engine host work. Async: the
        schedule/prepare/sample/update work of the next step overlaps this step's device time;
        drafting (needs this step's sampled tokens) and a small serial part do not. Issuing a
        PIECEWISE/eager forward's launches (host.dispatch, where fitted) is host work on the
        async path and a floor under the forward on the synchronous one. The front-end process
        runs beside the engine and bounds the step from below."""
        if async_scheduling and self.async_overlap:
            overlap = host.schedule + host.prepare + host.sample + host.update + host.dispatch
            serial = self.coefs.for_async_runner().async_serial_s
            step = max(device_s, overlap) + host.draft + serial / self.host_speed
        else:
            step = max(device_s, host.dispatch) + host.total
        return max(step, host.frontend)

    def __getstate__(self) -> dict:
        """Picklable (spawned worker processes): the bound closure is rebuilt on load."""
        state = dict(self.__dict__)
        state.pop("_fast", None)
        state.pop("step_cost", None)
        state.pop("thread_parts", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._build_fast()

    def describe(self) -> str:
        """One line saying what this model is: model, hardware, TP (chosen or given), label."""
        how = "chosen" if self.tp_chosen else "given"
        return (f"{self.model.name} on {self.hw.name} TP={self.tp} ({how}), vLLM "
                f"{self.vllm_version}, cost model: {self.label}, "
                f"KV capacity {self.kv_capacity_tokens:,} tokens")

    def __repr__(self) -> str:
        return f"CostModel({self.describe()})"


__all__ = ["CostModel", "HostTime", "kernels_per_layer", "piecewise_launches_per_layer"]
