"""Per-step recorder for an in-process vLLM engine (0.26, 0.33, 0.34): one row per engine step.

It wraps methods on the live objects of one engine (instance attributes, so engine start-up,
profiling and graph capture are never recorded) with time.perf_counter, and brackets the GPU work
with CUDA events that are only read after the engine itself has synchronised (no extra syncs).
Column meanings are in docs/calibration.md; the column contract is simkit/record_schema.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibrate.forcing import ForceApplier, ForcedOutputs, forced_rows
from calibrate.kpad import PLACEHOLDER
from calibrate.model_output import accepted_tokens

_now = time.perf_counter


@dataclass
class _Step:
    """Mutable scratch for the step in progress."""

    t_start: float
    t_schedule: float = 0.0
    t_exec_host: float = 0.0
    t_prepare: float = 0.0
    t_sample_host: float = 0.0
    t_draft: float = 0.0
    t_update: float = 0.0
    t_force: float = 0.0
    t_gap: float = 0.0
    exec_entry: float | None = None
    fwd_seen: bool = False
    stats: dict[str, int] = field(default_factory=dict)
    graph_mode: str = "NONE"
    num_padded_tokens: int = 0
    num_accepted: int = 0
    num_emitted: int = 0
    ev: dict[str, Any] = field(default_factory=dict)


def batch_stats(scheduler_output: Any, requests: dict[str, Any]) -> dict[str, int]:
    """Counts for one scheduled batch, read after Scheduler.schedule returned.

    schedule() has already advanced each request's num_computed_tokens by its scheduled tokens,
    so the pre-step value is num_computed_tokens - scheduled.
    """
    nst: dict[str, int] = scheduler_output.num_scheduled_tokens
    spec: dict[str, list[int]] = scheduler_output.scheduled_spec_decode_tokens
    prefill_tokens = prefill_reqs = context = 0
    for rid, n in nst.items():
        req = requests.get(rid)
        if req is None:
            continue
        before = int(req.num_computed_tokens) - int(n)
        p = min(int(n), max(0, int(req.num_prompt_tokens) - before))
        if p > 0:
            prefill_tokens += p
            prefill_reqs += 1
        context += before + int(n)
    n_spec = n_pad = drafting = 0
    for ids in spec.values():
        n_spec += len(ids)
        pads = sum(1 for t in ids if t == PLACEHOLDER)
        n_pad += pads
        drafting += 1 if len(ids) > pads else 0
    return {
        "num_reqs": len(nst),
        "num_tokens": int(scheduler_output.total_num_scheduled_tokens),
        "num_prefill_tokens": prefill_tokens,
        "num_prefill_reqs": prefill_reqs,
        "num_decode_reqs": len(nst) - prefill_reqs,
        "num_spec_tokens": n_spec,
        "num_pad_drafts": n_pad,
        "num_drafting_reqs": drafting,
        "context_tokens": context,
    }


def accepted_in_output(scheduler_output: Any, model_runner_output: Any) -> int:
    """Accepted draft tokens in one model output: sampled tokens beyond the first, per request
    with draft slots (indexed by req_id_to_index on 0.26/0.33, by req_ids on 0.34)."""
    return accepted_tokens(scheduler_output.scheduled_spec_decode_tokens, model_runner_output)


def runner_kind(runner: Any) -> str:
    """'v1' for vLLM's V1 GPUModelRunner (0.26/0.33 suffix), 'v2' for Model Runner V2 (0.33
    vanilla and ngram, everything on 0.34), from the runner's module: vLLM 0.34 removed V1, so a
    test for a V1-only method would call every runner V2 whatever it is."""
    for cls in type(runner).__mro__:         # a subclass (a platform's runner) counts as its base
        mod = cls.__module__
        if mod.startswith("vllm.v1.worker.gpu."):
            return "v2"
        if mod == "vllm.v1.worker.gpu_model_runner":
            return "v1"
    mod = type(runner).__module__
    raise RuntimeError(f"unknown vLLM model runner {mod}.{type(runner).__qualname__}: the "
                       "recorder knows vllm.v1.worker.gpu_model_runner (V1) and "
                       "vllm.v1.worker.gpu.* (Model Runner V2)")


class StepRecorder:
    """Wraps one engine's scheduler, model runner and core loop; collects per-step rows."""

    def __init__(self, forced: ForcedOutputs | None = None) -> None:
        self.forced = forced
        self.rows: list[dict[str, Any]] = []
        self.active = False
        self.run_id = ""
        self.t0 = 0.0
        self.runner_kind = "?"
        self._cur: _Step | None = None
        self._pending: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self._last_end: float | None = None
        self._sched_out: Any = None
        self.forced_rows_total = 0
        self.force_error = ""
        self._apply = ForceApplier()

    def force(self, logits: Any, ids: list[str], last: np.ndarray, rows: np.ndarray) -> None:
        """Overwrite the logits rows of this step so greedy sampling yields the trace's tokens."""
        assert self.forced is not None
        r, tok = forced_rows(self.forced, ids, last, rows)
        self._apply(logits, r, tok)
        self.forced_rows_total += int(r.size)

    def disable_forcing(self, exc: BaseException) -> None:
        """Forcing failed: keep the run going unforced and say why (the run row reports it)."""
        import traceback

        self.force_error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        print(f"FORCING DISABLED: {self.force_error}", flush=True)
        traceback.print_exc()
        self.forced = None

    # ------------------------------------------------------------------ run control
    def start_run(self, run_id: str) -> None:
        """Begin recording a run: clears rows and sets the time origin."""
        self.rows, self._pending = [], []
        self.run_id, self.active = run_id, True
        self.t0 = _now()
        self._last_end = None
        self.forced_rows_total = 0

    def stop_run(self) -> list[dict[str, Any]]:
        """Stop recording; synchronise once (after the run) to read the last CUDA events."""
        self.active = False
        try:
            import torch

            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - no GPU in a dry run
            pass
        self._resolve(final=True)
        return self.rows

    # ------------------------------------------------------------------ installation
    def install(self, llm_engine: Any) -> dict[str, Any]:
        """Wrap the live objects of an in-process LLMEngine; returns what was found."""
        core = llm_engine.engine_core.engine_core
        sched = core.scheduler
        runner = core.model_executor.driver_worker.worker.model_runner
        self.runner_kind = runner_kind(runner)
        rec = self

        step_fn, post_step = core.step_fn, core.post_step

        def step_fn_w():
            if not rec.active:
                return step_fn()
            t = _now()
            rec._cur = _Step(t_start=t, t_gap=(t - rec._last_end) if rec._last_end else 0.0)
            return step_fn()

        def post_step_w(model_executed: bool):
            if not rec.active or rec._cur is None:
                return post_step(model_executed=model_executed)
            t = _now()
            r = post_step(model_executed=model_executed)
            end = _now()
            rec._cur.t_update += end - t
            rec._finish(end)
            return r

        core.step_fn, core.post_step = step_fn_w, post_step_w

        schedule, update = sched.schedule, sched.update_from_output

        def schedule_w(*a, **k):
            if not rec.active or rec._cur is None:
                return schedule(*a, **k)
            t = _now()
            out = schedule(*a, **k)
            rec._cur.t_schedule += _now() - t
            if out.total_num_scheduled_tokens > 0:
                rec._cur.stats = batch_stats(out, sched.requests)
            return out

        def update_w(scheduler_output, model_runner_output):
            if not rec.active or rec._cur is None:
                return update(scheduler_output, model_runner_output)
            t = _now()
            acc = accepted_in_output(scheduler_output, model_runner_output)
            out = update(scheduler_output, model_runner_output)
            rec._cur.t_update += _now() - t
            rec._cur.num_accepted += acc
            for eco in (out or {}).values():
                for o in eco.outputs:
                    rec._cur.num_emitted += len(o.new_token_ids)
            return out

        sched.schedule, sched.update_from_output = schedule_w, update_w
        if self.runner_kind == "v1":
            self._install_v1(runner)
        else:
            self._install_v2(runner)
        return {"runner": self.runner_kind, "scheduler_cls": type(sched).__qualname__,
                "step_fn": getattr(step_fn, "__name__", "?")}

    def _event(self, name: str) -> None:
        import torch

        if self._cur is not None:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self._cur.ev[name] = e

    def _wrap_execute(self, runner: Any) -> None:
        rec, execute = self, runner.execute_model

        def execute_w(*a, **k):
            if not rec.active or rec._cur is None:
                return execute(*a, **k)
            cur = rec._cur
            cur.exec_entry, cur.fwd_seen = _now(), False
            rec._sched_out = a[0] if a else k.get("scheduler_output")
            out = execute(*a, **k)
            end = _now()
            cur.t_exec_host += end - cur.exec_entry
            if not cur.fwd_seen:  # no forward hook fired (empty batch): all host prep
                cur.t_prepare += end - cur.exec_entry
            if "F0" in cur.ev and rec.runner_kind == "v1":
                rec._event("F1")  # V1 computes logits inside execute_model
            return out

        runner.execute_model = execute_w

    def _mark_forward(self) -> None:
        cur = self._cur
        if cur is not None and not cur.fwd_seen and cur.exec_entry is not None:
            cur.fwd_seen = True
            cur.t_prepare += _now() - cur.exec_entry
            self._event("F0")

    def _wrap_host(self, obj: Any, name: str, attr: str) -> None:
        rec, fn = self, getattr(obj, name)

        def w(*a, **k):
            if not rec.active or rec._cur is None:
                return fn(*a, **k)
            t = _now()
            out = fn(*a, **k)
            setattr(rec._cur, attr, getattr(rec._cur, attr) + _now() - t)
            return out

        setattr(obj, name, w)

    def _install_v1(self, runner: Any) -> None:
        rec = self
        self._wrap_execute(runner)
        fwd = runner._model_forward

        def fwd_w(*a, **k):
            if rec.active:
                rec._mark_forward()
            return fwd(*a, **k)

        runner._model_forward = fwd_w
        det = runner._determine_batch_execution_and_padding

        def det_w(*a, **k):
            out = det(*a, **k)
            if rec.active and rec._cur is not None:
                rec._cur.graph_mode = str(getattr(out[0], "name", out[0]))
                rec._cur.num_padded_tokens = int(out[1].num_tokens)
            return out

        runner._determine_batch_execution_and_padding = det_w
        self._wrap_host(runner, "sample_tokens", "t_sample_host")
        if hasattr(runner, "propose_draft_token_ids"):
            self._wrap_host(runner, "propose_draft_token_ids", "t_draft")
        sample = runner._sample

        def sample_w(logits, spec_decode_metadata):
            if not rec.active or rec._cur is None:
                return sample(logits, spec_decode_metadata)
            rec._event("S0")
            if rec.forced is not None and logits is not None:
                t = _now()
                try:
                    ib = runner.input_batch
                    n = ib.num_reqs
                    ids = list(ib.req_ids[:n])
                    so = rec._sched_out
                    nsched = np.fromiter((so.num_scheduled_tokens[r] for r in ids), np.int64, n)
                    last = ib.num_computed_tokens_cpu[:n].astype(np.int64) + nsched - 1
                    if spec_decode_metadata is None:
                        rows = np.ones(n, np.int64)
                    else:
                        rows = np.asarray(spec_decode_metadata.num_draft_tokens, np.int64) + 1
                    rec.force(logits, ids, last, rows)
                except Exception as exc:  # noqa: BLE001 - record, stop forcing, keep measuring
                    rec.disable_forcing(exc)
                rec._cur.t_force += _now() - t
            out = sample(logits, spec_decode_metadata)
            rec._event("S1")
            return out

        runner._sample = sample_w

    def _install_v2(self, runner: Any) -> None:
        import vllm.v1.worker.gpu.model_runner as mr

        rec = self
        self._wrap_execute(runner)
        cgm = getattr(runner, "cudagraph_manager", None)
        for name in ("run_fullgraph", "run_pw_graph"):
            if cgm is not None and hasattr(cgm, name):
                fn = getattr(cgm, name)

                def w(*a, _fn=fn, **k):
                    if rec.active:
                        rec._mark_forward()
                    return _fn(*a, **k)

                setattr(cgm, name, w)
        sfc = mr.set_forward_context

        def sfc_w(*a, **k):  # eager (NONE) forwards enter this context first
            if rec.active:
                rec._mark_forward()
            return sfc(*a, **k)

        mr.set_forward_context = sfc_w
        dispatch = mr.dispatch_cg_and_sync_dp

        def dispatch_w(*a, **k):
            out = dispatch(*a, **k)
            if rec.active and rec._cur is not None:
                desc = out[0]
                rec._cur.graph_mode = str(getattr(desc.cg_mode, "name", desc.cg_mode))
                rec._cur.num_padded_tokens = int(desc.num_tokens)
            return out

        mr.dispatch_cg_and_sync_dp = dispatch_w
        self._wrap_host(runner, "sample_tokens", "t_sample_host")
        speculator = getattr(runner, "speculator", None)
        if speculator is not None and hasattr(speculator, "propose"):
            # host time of drafting (0.34: two Triton launches per step; the GPU time is inside
            # the step's GPU work and not split out)
            self._wrap_host(speculator, "propose", "t_draft")
        model = runner.model
        logits_fn = model.compute_logits

        def logits_w(*a, **k):
            out = logits_fn(*a, **k)
            if rec.active:
                rec._event("F1")  # forward + lm_head end here in V2
            return out

        model.compute_logits = logits_w
        sample = runner.sample

        def sample_w(*a, **k):
            out = sample(*a, **k)
            if rec.active:
                rec._event("S1")
            return out

        runner.sample = sample_w
        if self.forced is not None and runner.sampler is not None:
            runner.sampler = _ForcingSamplerV2(runner.sampler, self)

    # ------------------------------------------------------------------ rows
    def _finish(self, end: float) -> None:
        cur, self._cur = self._cur, None
        self._last_end = end
        if cur is None or (not cur.stats and cur.num_emitted == 0):
            return  # idle call: nothing scheduled, nothing delivered
        if not cur.stats:  # async drain: only the previous batch's output was processed
            cur.stats = {k: 0 for k in ("num_reqs", "num_tokens", "num_prefill_tokens",
                                        "num_prefill_reqs", "num_decode_reqs", "num_spec_tokens",
                                        "num_pad_drafts", "num_drafting_reqs", "context_tokens")}
        row: dict[str, Any] = {
            "run_id": self.run_id,
            "step": len(self.rows),
            "t_start_s": cur.t_start - self.t0,
            "t_end_s": end - self.t0,
            "t_schedule_s": cur.t_schedule,
            "t_prepare_s": cur.t_prepare,
            "t_forward_s": float("nan"),
            "t_sample_s": float("nan"),
            "t_draft_s": cur.t_draft,
            "t_update_s": cur.t_update,
            "t_step_s": end - cur.t_start,
            "t_exec_host_s": cur.t_exec_host,
            "t_sample_host_s": cur.t_sample_host,
            "t_force_s": cur.t_force,
            "t_gap_s": cur.t_gap,
            **cur.stats,
            "num_padded_tokens": cur.num_padded_tokens or cur.stats["num_tokens"],
            "num_accepted": cur.num_accepted,
            "num_emitted_tokens": cur.num_emitted,
            "graph_mode": cur.graph_mode,
        }
        self.rows.append(row)
        if cur.ev:
            self._pending.append((row, cur.ev))
        self._resolve(final=False)

    def _resolve(self, final: bool) -> None:
        keep = []
        for row, ev in self._pending:
            last = ev.get("S1") or ev.get("F1")
            if last is None or (not final and not last.query()):
                if not final:
                    keep.append((row, ev))
                continue
            f0, f1 = ev.get("F0"), ev.get("F1")
            if f0 is not None and f1 is not None:
                row["t_forward_s"] = f0.elapsed_time(f1) / 1e3
            s1 = ev.get("S1")
            s0 = ev.get("S0") or f1  # V2: sampling follows the logits on the stream
            if s0 is not None and s1 is not None:
                row["t_sample_s"] = s0.elapsed_time(s1) / 1e3
        self._pending = keep


class _ForcingSamplerV2:
    """Proxy for Model Runner V2's Sampler: forces the trace's token, then samples as usual."""

    def __init__(self, inner: Any, rec: StepRecorder) -> None:
        self._inner, self._rec = inner, rec

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __call__(self, logits, input_batch, *a, **k):
        rec = self._rec
        if rec.active and rec.forced is not None and rec._cur is not None:
            t = _now()
            try:
                n = input_batch.num_reqs
                ids = list(input_batch.req_ids[:n])
                last = (input_batch.num_computed_tokens_np[:n].astype(np.int64)
                        + np.asarray(input_batch.num_scheduled_tokens[:n], np.int64) - 1)
                rows = np.diff(np.asarray(input_batch.cu_num_logits_np[: n + 1], np.int64))
                rec.force(logits, ids, last, rows)
            except Exception as exc:  # noqa: BLE001 - record, stop forcing, keep measuring
                rec.disable_forcing(exc)
            rec._cur.t_force += _now() - t
        return self._inner(logits, input_batch, *a, **k)
