"""Drive a real in-process vLLM engine (0.26, 0.33 or 0.34; the version is recorded) with trace requests at a fixed concurrency (GPU host).

One engine per (model, config, K); several runs (corpus, concurrency, requests) reuse it, with the
prefix cache and the drafter's cross-request memory (0.26/0.33: arctic's suffix tree; 0.34: the
GPU corpus) reset between runs so every run starts cold. How the trace is reproduced is the
version's harness adapter (calibrate.harness: logits forcing, or 0.34's trace replay). Each run
writes steps_<run>.parquet and appends its row to runs.jsonl as soon as it ends, so a call that is
cut off still returns what finished. `python -m calibrate.runner --help` and `simkit calibrate run`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from calibrate.forcing import ForcedOutputs
from calibrate.harness import ADAPTERS, get_adapter
from calibrate.harness.flags import RunnerFlags, parse_k_table
from calibrate.harness.versions import choose_installed
from calibrate.model_configs import canonical, write_model_dir
from calibrate.dynk import ENV, make_policy
from calibrate.passes import plan_passes
from calibrate.records import dumps, steady_window, step_summary, window_throughput, write_steps
from calibrate.resolved import DRAFTER_FIELDS, _resolved, graph_sizes  # noqa: F401 - re-exported
from calibrate.run_specs import (RunSpec, repeat_tag, repeated, run_tag,  # noqa: F401
                                 table_file_name, unique_id)
from traces.calibration_requests import CalRequest, read_requests, select_requests
from simkit.errors import InputError, SimkitError

CONFIGS = ("vanilla", "suffix", "kpad", "dynamic")
POLICIES = ("table", "feedback", "goodput")
MAX_MODEL_LEN = 16384
MAX_NUM_BATCHED_TOKENS = 8192  # the OpenAI server's default on a >= 70 GiB GPU
MAX_NUM_SEQS = 1024            # likewise
GPU_MEMORY_UTILIZATION = 0.85


DEFAULT_CAP = 1024      # max_tokens cap of every run before session D; others are named in run ids


def check_config(config: str, k: int, adapter: Any = None, flags: RunnerFlags | None = None
                 ) -> None:
    """Refuse a configuration the harness adapter (default: forcing) cannot run, before vLLM
    is imported."""
    if config not in CONFIGS:
        raise InputError(f"unknown config {config!r}; known: {', '.join(CONFIGS)}", field="config")
    if k < 0:
        raise InputError("must be >= 0", field="k")
    (adapter or get_adapter("forcing")).check(config, k, flags or RunnerFlags())


def speculative_config(config: str, k: int, adapter: Any = None,
                       flags: RunnerFlags | None = None) -> dict | None:
    """vLLM speculative_config for a simkit config name (k=0 keeps vLLM's default K for suffix)."""
    adapter = adapter or get_adapter("forcing")
    flags = flags or RunnerFlags()
    check_config(config, k, adapter, flags)
    return adapter.speculative_config(config, k, flags)


NO_REAL_DRAFTS = ("real drafts per step (the speculator's num_valid) not recorded: they live on "
                  "the GPU; reading them each step would wait for the step (a blocking copy) or "
                  "need a ring of pinned host buffers read back later, which the harness does "
                  "not have yet")
ADAPTIVE_SLOTS = ("adaptive verification on: num_spec_tokens counts the slots scheduled; the "
                  "slots it trimmed on the GPU are not recorded")


class Engine:
    """One in-process vLLM engine with the recorder (and the forcing) installed."""

    def __init__(self, model: str, config: str, k: int, model_dir: Path, tp: int = 1,
                 force: bool = True, load_format: str = "dummy", adapter: Any = None,
                 flags: RunnerFlags | None = None) -> None:
        # TP > 1 runs one engine per rank under torchrun (vLLM's "external_launcher" backend):
        # each rank schedules the same batches deterministically, so the hooks below (forcing,
        # recorder) run in-process on every rank, as with TP=1.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
        from vllm import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        from calibrate.recorder import StepRecorder

        self.model, self.config = canonical(model), config
        self.adapter = adapter = adapter or get_adapter("forcing")
        flags = flags or RunnerFlags()
        t = time.perf_counter()
        args = EngineArgs(
            model=str(model_dir), load_format=load_format, skip_tokenizer_init=True,
            dtype="bfloat16", seed=0, tensor_parallel_size=tp,
            gpu_memory_utilization=GPU_MEMORY_UTILIZATION, max_model_len=MAX_MODEL_LEN,
            max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS, max_num_seqs=MAX_NUM_SEQS,
            disable_log_stats=False, speculative_config=speculative_config(config, k, adapter, flags),
            scheduler_cls=adapter.scheduler_cls(config),
            distributed_executor_backend="external_launcher" if tp > 1 else None,
            **(adapter.engine_kwargs() if force else {}),
        )
        self.engine = LLMEngine.from_engine_args(args)
        self.start_s = time.perf_counter() - t
        self.forced = ForcedOutputs() if force and adapter.forces_logits else None
        self.replay = force and not adapter.forces_logits      # vLLM replays the trace itself
        self.rec = StepRecorder(self.forced)
        info = self.rec.install(self.engine)
        self.settings = _resolved(self.engine, config, info)
        self.settings["engine_start_s"] = self.start_s
        self.settings["harness"] = adapter.name
        self.settings["draft_count"] = adapter.draft_count
        want = {"kpad": "KPad", "dynamic": "DynamicK"}.get(config) if adapter.scheduler_cls(config) \
            else None
        if want and want not in info["scheduler_cls"]:
            raise RuntimeError(f"{config} scheduler not in use: {info['scheduler_cls']}")

    def scheduler(self) -> Any:
        return self.engine.engine_core.engine_core.scheduler

    def set_policy(self, spec: dict[str, Any]) -> None:
        """Replace the dynamic-K scheduler's policy (fresh state) before a run."""
        sched = self.scheduler()
        sched.k_policy = make_policy(spec)
        sched.k_counts.clear()

    def take_k_counts(self) -> dict[str, int]:
        """Steps per chosen K since the last call (dynamic-K engines), then reset."""
        counts = getattr(self.scheduler(), "k_counts", None)
        if not counts:
            return {}
        out = {str(k): int(v) for k, v in sorted(counts.items())}
        counts.clear()
        return out

    def _runner(self) -> Any:
        return self.engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner

    def reset_caches(self) -> list[str]:
        """Cold start for the next run: prefix cache and the drafter's cross-request memory
        (the adapter's reset: arctic's tree, or 0.34's GPU corpus via speculator.reset_state)."""
        notes = []
        if not self.engine.reset_prefix_cache():
            notes.append("prefix cache reset refused")
        notes += self.adapter.reset_drafter(self._runner(), self.engine.vllm_config)
        return notes

    def run(self, run_id: str, reqs: list[CalRequest], concurrency: int,
            record: bool = True) -> dict[str, Any]:
        """Closed loop: keep `concurrency` requests in flight until all finished."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        eng, rec = self.engine, self.rec
        pending = list(reversed(reqs))
        want = {r.id: r for r in reqs}
        got: dict[str, list[int]] = {}
        completions: list[float] = []
        last_admission: float | None = None

        def admit() -> None:
            nonlocal last_admission
            r = pending.pop()
            if self.forced is not None:
                self.forced.register(r.id, len(r.prompt_ids), r.output_ids)
            extra = self.adapter.sampling_kwargs(r.output_ids) if self.replay else {}
            sp = SamplingParams(max_tokens=int(len(r.output_ids)), temperature=0.0,
                                ignore_eos=True, detokenize=False,
                                output_kind=RequestOutputKind.FINAL_ONLY, **extra)
            eng.add_request(r.id, TokensPrompt(prompt_token_ids=r.prompt_ids.tolist()), sp)
            last_admission = time.perf_counter() - rec.t0

        if record:
            rec.start_run(run_id)
        else:
            rec.t0 = time.perf_counter()
        for _ in range(min(concurrency, len(pending))):
            admit()
        admitted_initial = last_admission
        while eng.has_unfinished_requests():
            for out in eng.step():
                if not out.finished:
                    continue
                rid = out.request_id if out.request_id in want else out.request_id.rsplit("-", 1)[0]
                got[rid] = list(out.outputs[0].token_ids)
                completions.append(time.perf_counter() - rec.t0)
                if self.forced is not None:
                    self.forced.forget(rid)
                if pending:
                    admit()
        end = time.perf_counter() - rec.t0
        rows = rec.stop_run() if record else []
        if last_admission == admitted_initial:
            last_admission = None
        mism = [rid for rid, r in want.items() if got.get(rid) != r.output_ids.tolist()]
        return {"rows": rows, "completions": completions, "last_admission": last_admission,
                "end": end, "mismatched": mism, "forced_rows": rec.forced_rows_total,
                "output_tokens": int(sum(len(v) for v in got.values())),
                "force_error": rec.force_error}


def run_row(run_id: str, spec: RunSpec, settings: dict, res: dict, model: str, config: str,
            cap: int, skipped: dict, forced: bool, started: str,
            force_copy: str | None = None) -> dict[str, Any]:
    """One runs.parquet row from a finished run (force_copy: how the trace was reproduced;
    default the forcing adapter's)."""
    if force_copy is None:
        force_copy = get_adapter("forcing").force_copy
    rows = res["rows"]
    w = steady_window(res["completions"], res["last_admission"], res["end"])
    t_end = np.array([r["t_end_s"] for r in rows], dtype=np.float64)
    emitted = np.array([r["num_emitted_tokens"] for r in rows], dtype=np.int64)
    tokens, rate = window_throughput(t_end, emitted, w)
    notes = []
    if res.get("force_error"):
        forced = False
        notes.append(f"forcing disabled: {res['force_error']}")
    if res["mismatched"]:
        notes.append(f"{len(res['mismatched'])} requests differ from the trace")
    if settings.get("draft_count") == "slots" and config != "vanilla":
        notes.append(NO_REAL_DRAFTS)
        if json.loads(settings.get("drafter_params") or "{}").get("enable_adaptive_verification"):
            notes.append(ADAPTIVE_SLOTS)
    return {
        "run_id": run_id, "purpose": spec.purpose, "model": model, "corpus": spec.corpus,
        "config": config, "concurrency": spec.concurrency, "num_requests": spec.num_requests,
        **{k: settings[k] for k in ("k", "tp", "vllm_version", "runner", "async_scheduling",
                                     "cudagraph_mode", "capture_sizes", "drafter_params", "gpu",
                                     "driver", "max_num_seqs", "max_num_batched_tokens",
                                     "max_model_len", "gpu_memory_utilization", "prefix_caching",
                                     "scheduler_cls", "engine_start_s")},
        "output_tokens": tokens, "duration_s": w.t1 - w.t0, "output_tok_s": rate,
        "outputs_match_trace": forced and not res["mismatched"],
        "forced": forced, "force_copy": force_copy if forced else "none",
        **{k: settings[k] for k in ("harness", "graph_sizes", "draft_count") if k in settings},
        "max_tokens_cap": cap, "steady_state": w.steady,
        "window": dumps({"rule": w.rule, "t0": round(w.t0, 6), "t1": round(w.t1, 6)}),
        "total_duration_s": res["end"], "total_output_tokens": res["output_tokens"],
        **step_summary(rows),
        "requests_skipped": dumps(skipped), "started_utc": started, "notes": "; ".join(notes),
    }


def dynk_policy(policy: str, spec: RunSpec, model: str, settings: dict[str, Any],
                ks: tuple[int, ...], dynk_dir: Path | None) -> dict[str, Any]:
    """The SIMKIT_DYNK document of one dynamic-K run: the table policy reads the table tuned on
    the CPU host (calibrate.dynk_tables) for exactly this run's requests; goodput prices steps
    with simkit's cost model under the run's settings (graphs captured at Kmax only)."""
    doc: dict[str, Any] = {"policy": policy, "ks": list(ks)}
    if policy == "table":
        if dynk_dir is None:
            raise InputError("the table policy needs --dynk-dir (calibrate.dynk_tables)",
                             field="dynk_dir")
        path = Path(dynk_dir) / table_file_name(model, spec.corpus, spec.concurrency,
                                                spec.num_requests)
        if not path.exists():
            raise InputError("tuned K table not found (make it with calibrate.dynk_tables)",
                             path=str(path))
        doc["table"] = json.loads(path.read_text())["table"]
    elif policy == "goodput":
        run = {k: settings[k] for k in ("tp", "max_model_len", "max_num_batched_tokens",
                                         "max_num_seqs", "cudagraph_mode", "gpu")}
        run.update(model=model, force_copy=get_adapter("forcing").force_copy)
        doc["price"] = {"run": run, "ks": list(ks), "graphs": "kmax"}
    return doc


def run_engine(model: str, config: str, k: int, runs: list[RunSpec], out_dir: Path,
               requests: dict[str, Path], model_dir: Path | None = None, cap: int = DEFAULT_CAP,
               deadline: float | None = None, tp: int = 1, force: bool = True,
               est_tok_s: float = 0.0, tag: str = "", policies: list[str] | None = None,
               ks: tuple[int, ...] = (4, 6, 12), dynk_dir: Path | None = None,
               load_format: str = "dummy", harness: str = "forcing",
               flags: RunnerFlags | None = None) -> list[dict[str, Any]]:
    """Start one engine and make the runs; returns the run rows written so far.

    A spec with repeats R is made R times on this engine (caches reset before each run as
    always); repeat r >= 2 gets the run-id suffix -rep<r> (repeat_tag).

    harness: the adapter that reproduces the trace (calibrate.harness: forcing on 0.26/0.33,
    trace_replay on 0.34); flags: 0.34's suffix options (calibrate.harness.flags), named in the
    run ids (-kt, -av, -ct<N>) and recorded in drafter_params.

    tag: extra run-id suffix (a re-measurement of an existing run id). Under torchrun only rank 0
    writes to out_dir (the others to out_dir/rank<r>), and no run is skipped by the deadline
    estimate, because every rank must make the same runs.
    """
    rank = int(os.environ.get("RANK", "0"))
    out_dir = Path(out_dir) if rank == 0 else Path(out_dir) / f"rank{rank}"
    if tp > 1:
        est_tok_s = 0.0
    out_dir.mkdir(parents=True, exist_ok=True)
    key = canonical(model)
    model_dir = Path(model_dir) if model_dir else write_model_dir(key, out_dir / f"model-{key}")
    if not (model_dir / "config.json").exists():
        write_model_dir(key, model_dir)
    loaded = {c: read_requests(p) for c, p in requests.items()}
    adapter = get_adapter(harness)
    flags = flags or RunnerFlags()
    check_config(config, k, adapter, flags)
    plugin_dynamic = config == "dynamic" and adapter.scheduler_cls(config) is not None
    if plugin_dynamic:     # the scheduler builds its policy at start; runs replace it
        k = max(ks)
        os.environ[ENV] = json.dumps({"policy": "feedback", "ks": list(ks)})
    eng = Engine(key, config, k, model_dir, tp=tp, force=force, load_format=load_format,
                 adapter=adapter, flags=flags)
    kk = eng.settings["k"]
    ran = adapter.ran_config(config)            # 0.34: kpad runs as suffix at K
    extra_tag = "-".join(t for t in (flags.tag(), tag) if t)
    tag = run_tag(key, ran, kk, tp, force, extra_tag)
    policies = list(policies or POLICIES) if plugin_dynamic else [""]
    log = out_dir / "runs.jsonl"
    # Warm-up: first use of sampler/rejection kernels and allocator growth stay out of the runs.
    first = next(iter(loaded.values()))
    warm, _ = select_requests(first, 4, MAX_MODEL_LEN, kk, 32)
    eng.run("warmup", warm, 4, record=False)
    done: list[dict[str, Any]] = []
    used: set[str] = set()
    for rep, spec in repeated(runs):
        tag = run_tag(key, ran, kk, tp, force, repeat_tag(extra_tag, rep))
        run_cap = spec.cap or cap
        reqs, skipped = select_requests(loaded[spec.corpus], spec.num_requests, MAX_MODEL_LEN,
                                        kk, run_cap)
        if len(reqs) < spec.num_requests:
            skipped["not_enough_requests_in_file"] = spec.num_requests - len(reqs)
        passes = plan_passes(reqs, spec.history)
        base_id = (f"{tag}_{spec.corpus}_c{spec.concurrency}_n{spec.num_requests}"
                   + (f"_cap{run_cap}" if run_cap != DEFAULT_CAP else ""))
        if deadline is not None and est_tok_s > 0:
            toks = sum(len(r.output_ids) for p in passes for r in p.requests)
            need = toks / (est_tok_s * min(1.0, spec.concurrency / 32))
            if time.time() + need > deadline:
                print(f"SKIP {base_id} ({spec.history}): estimated {need:.0f}s exceeds the deadline",
                      flush=True)
                continue
        for policy in policies:
            run_cfg, run_tag_ = ran, tag
            if policy:
                run_cfg = f"dynamic-{policy}"
                run_tag_ = run_tag(key, run_cfg, kk, tp, force, repeat_tag(extra_tag, rep))
                eng.set_policy(dynk_policy(policy, spec, key, eng.settings, ks, dynk_dir))
            notes = eng.reset_caches()
            for p in passes:
                run_id = unique_id(base_id.replace(tag, run_tag_, 1)
                                   + (f"_{p.suffix}" if p.suffix else ""), used)
                started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
                t = time.time()
                # always through the recorder: it is what forces the trace's tokens (an
                # unrecorded prelude would put the dummy model's own tokens into the tree)
                res = eng.run(run_id, p.requests, spec.concurrency, record=True)
                if not p.record:
                    if res["mismatched"]:
                        print(f"PRELUDE {run_id}: {len(res['mismatched'])} outputs differ from "
                              "the trace", flush=True)
                    eng.take_k_counts()
                    print(f"PRELUDE {run_id}: {len(p.requests)} requests served first "
                          f"({time.time() - t:.1f}s)", flush=True)
                    continue
                row = run_row(run_id, spec, eng.settings, res, key, run_cfg, run_cap, skipped, force,
                              started, adapter.force_copy)
                row["history"] = p.history
                k_counts = eng.take_k_counts()
                row["k_counts"] = dumps(k_counts)
                if notes:
                    row["notes"] = "; ".join([row["notes"], *notes]).strip("; ")
                write_steps(out_dir / f"steps_{run_id}.parquet", res["rows"])
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row, sort_keys=True) + "\n")
                done.append(row)
                print(f"RUN {run_id}: {row['output_tok_s']:.1f} tok/s steady={row['steady_state']} "
                      f"match={row['outputs_match_trace']} steps={row['num_steps']} "
                      f"acc={row['num_accepted_tokens']}/{row['num_draft_tokens']} "
                      f"k={k_counts or '-'} wall={time.time() - t:.1f}s", flush=True)
    return done


def requests_for(model: str, corpora: list[str], requests_dir: Path | None,
                 requests_file: Path | None) -> dict[str, Path]:
    """Request file per corpus: --requests for a single corpus, else DIR/<model>__<corpus>.jsonl."""
    if requests_file is not None:
        if len(set(corpora)) != 1:
            raise InputError("--requests serves one corpus; use --requests-dir for several",
                             field="requests")
        return {corpora[0]: Path(requests_file)}
    if requests_dir is None:
        raise InputError("give --requests FILE or --requests-dir DIR", field="requests")
    out = {}
    for c in corpora:
        p = Path(requests_dir) / f"{canonical(model)}__{c}.jsonl"
        if not p.exists():
            raise InputError("request file not found (make it with calibrate.make_requests)",
                             path=str(p))
        out[c] = p
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m calibrate.runner`: one engine, one or more runs."""
    ap = argparse.ArgumentParser(prog="calibrate.runner", description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--config", required=True, choices=CONFIGS)
    ap.add_argument("--k", type=int, default=0)
    ap.add_argument("--runs", required=True, help="comma list of corpus:conc:n[:purpose[:history]][*repeats]")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--requests-dir", type=Path)
    ap.add_argument("--requests", type=Path)
    ap.add_argument("--model-dir", type=Path)
    ap.add_argument("--max-tokens-cap", type=int, default=DEFAULT_CAP)
    ap.add_argument("--deadline", type=float, help="epoch seconds; later runs are skipped")
    ap.add_argument("--est-tok-s", type=float, default=0.0)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--no-force", action="store_true")
    ap.add_argument("--tag", default="", help="run-id suffix, e.g. r2 for a re-measurement")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="dynamic config: the K policies to run, each over every run spec")
    ap.add_argument("--ks", default="4,6,12", help="dynamic config: the K set KS")
    ap.add_argument("--dynk-dir", type=Path, default=Path(".gpu/dynk"),
                    help="dynamic config: tuned tables from calibrate.dynk_tables")
    ap.add_argument("--harness", choices=sorted(ADAPTERS),
                    help="how the trace is reproduced (default: the installed vLLM's adapter)")
    ap.add_argument("--corpus-tokens", type=int, help="vLLM 0.34 suffix_decoding_corpus_tokens")
    ap.add_argument("--k-table", help="vLLM 0.34 num_speculative_tokens_per_batch_size, "
                    "START-END:K,... (e.g. 1-8:16,9-64:8,65-1024:4)")
    ap.add_argument("--adaptive", action="store_true",
                    help="vLLM 0.34 enable_adaptive_verification")
    a = ap.parse_args(argv)
    try:
        runs = [RunSpec.parse(s) for s in a.runs.split(",") if s]
        flags = RunnerFlags(a.corpus_tokens, parse_k_table(a.k_table) if a.k_table else None,
                            a.adaptive)
        harness = a.harness
        choice = choose_installed()
        if harness is None:
            harness = choice.adapter
            if choice.warning:
                print(f"warning: {choice.warning}", file=sys.stderr, flush=True)
        elif harness != choice.adapter:
            print(f"warning: --harness {harness} on vLLM {choice.release}, whose harness is "
                  f"{choice.adapter}: forced logits do not reach vLLM 0.34's verification steps, "
                  "and trace replay is refused with speculative decoding before 0.34",
                  file=sys.stderr, flush=True)
        check_config(a.config, a.k, get_adapter(harness), flags)
        reqs = requests_for(a.model, [r.corpus for r in runs], a.requests_dir, a.requests)
    except SimkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run_engine(a.model, a.config, a.k, runs, a.out, reqs, a.model_dir, a.max_tokens_cap,
               a.deadline, a.tp, not a.no_force, a.est_tok_s, a.tag,
               [p for p in a.policies.split(",") if p], tuple(int(k) for k in a.ks.split(",")),
               a.dynk_dir, harness=harness, flags=flags)
    return 0


if __name__ == "__main__":
    sys.exit(main())
