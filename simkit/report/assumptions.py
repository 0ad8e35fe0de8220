"""The assumptions that decide a prediction, as one ordered dict built in one function.

Each entry is {"value": <machine-readable>, "text": <one readable sentence>}; the table, JSON,
CSV and HTML reports print the same entries. To state a new assumption (e.g. the suffix-tree
history option), add one line to `build_assumptions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simkit.choices import CappedMode
from simkit.drafters.base import SUFFIX_DRAFTER, get_drafter
from simkit.engine.cudagraph import CudagraphMode, capture_sizes

if TYPE_CHECKING:                    # type hints only (no import cycle at run time)
    from simkit.app.predict import Prediction

CAVEAT = ("what the current inputs imply, not a validated forecast: the step-time cost model "
          "has the measured error stated under cost_model")


def _entry(value: Any, text: str) -> dict[str, Any]:
    return {"value": value, "text": text}


def _hardware(pred: Prediction) -> dict[str, Any]:
    from simkit.catalog.hardware import get_hardware

    try:
        hw = get_hardware(pred.hardware)
    except Exception:                      # a hardware JSON path already loaded by predict
        return _entry({"name": pred.hardware}, pred.hardware)
    return _entry({"name": hw.name, "display": getattr(hw, "display", hw.name),
                   "host_cpu": hw.host_cpu, "host_speed": hw.host_speed},
                  f"{getattr(hw, 'display', hw.name)}; host CPU {hw.host_cpu}, speed "
                  f"{hw.host_speed:g} x the reference host (host-time coefficients are divided "
                  "by it)")


def _cost_model(pred: Prediction) -> dict[str, Any]:
    """The calibration, what it was fitted on, and its measured error as the calibration records
    it (printed under the key cost_model; its JSON keys kept as before the rename)."""
    if pred.calibration in ("", "analytic"):
        return _entry({"profile": "analytic", "validation": None},
                      "analytic coefficients (no calibrated profile): error never measured")
    from simkit.costmodel.calibrations import read_calibration

    doc = read_calibration(pred.calibration)
    val = doc.get("validation")
    value = {"profile": doc["name"], "label": pred.cost_label, "hardware": doc["hardware"],
             "fitted_runs": len(doc.get("runs", [])), "fitted_steps": doc.get("n_steps"),
             "fitted_models": doc.get("models", []),
             "cv_step_mape_pct": (doc.get("cv") or {}).get("mean", {}).get("step"),
             "validation": val}
    band = doc.get("interval")
    if band:                  # only where the calibration states one (h200-vllm026 does not)
        value["interval"] = band
    moved = doc.get("transferred_from")
    if isinstance(moved, dict):
        # no runs of its own version: the error and the interval are unmeasured, never the
        # source calibration's figures printed as if they were this version's
        value["transferred_from"] = moved
        return _entry(value, f"{pred.cost_label}: coefficients of {moved['calibration']} (fitted "
                             f"on {value['fitted_runs']} measured vLLM {moved['vllm_version']} "
                             f"runs, {value['fitted_steps']:,} steps; "
                             f"{', '.join(value['fitted_models'])}), {moved['note']}; its "
                             "throughput error and its interval for a rerun on this vLLM are "
                             "unmeasured; unmeasured parts: " + "; ".join(moved.get("unmeasured", [])))
    text = (f"{pred.cost_label}: fitted on {value['fitted_runs']} measured runs "
            f"({value['fitted_steps']:,} steps; {', '.join(value['fitted_models'])})")
    if val:
        text += (f"; measured error on {val['held_out_runs']} held-out runs: MAPE "
                 f"{val['held_out_mape_pct']:.1f} % (worst run {val['worst_held_out_pct']:+.1f} %; "
                 f"repeats of one setting differ by up to {val['repeat_spread_max_pct']:.1f} %); "
                 f"source: {val['source']}")
        if val.get("machines"):
            text += f"; {val['machines']}"
        per = (band or {}).get("by_runner") or {}
        if per.get("synchronous", {}).get("half_width_pct") is not None and \
                per.get("async", {}).get("half_width_pct") is not None:
            text += (f"; 90 % interval for a rerun ±{per['synchronous']['half_width_pct']:.1f} % "
                     f"for the speculative configurations (synchronous runner), "
                     f"±{per['async']['half_width_pct']:.1f} % for vanilla (async runner) "
                     "(run-to-run drift per runner and fit residuals of the fitted runs)")
        elif band and band.get("half_width_pct") is not None:
            text += (f"; 90 % interval for a rerun ±{band['half_width_pct']:.1f} % (run-to-run "
                     "drift and fit residuals of the fitted runs)")
        if band and band.get("half_width_pct") is not None:
            if val.get("interval_runs"):
                text += (f", {val['interval_inside']} of {val['interval_runs']} held-out runs "
                         "measured inside it")
        if doc["hardware"] != pred.hardware:
            text += (f"; that error was measured on {doc['hardware']}, never on "
                     f"{pred.hardware}")
    else:
        text += "; throughput error not recorded in the profile"
    return _entry(value, text)


def _vllm(pred: Prediction) -> dict[str, Any]:
    """The vLLM version whose engine rules and calibration the prediction uses."""
    from simkit.catalog.vllm_versions import get_vllm_version

    v = get_vllm_version(pred.vllm_version or None)
    if v.runner_for(v.method("suffix").drafter).async_scheduling:
        return _entry({"version": v.release, "rules": sorted(v.sources)},
                      f"{v.label}: its engine rules (every configuration on Model Runner V2 "
                      "with async scheduling; every decoding request verifies exactly K slots; "
                      "FULL decode graphs keyed by request count) and its calibration "
                      "(--vllm-version 0.26|0.33|0.34 changes it)")
    return _entry({"version": v.release, "rules": sorted(v.sources)},
                  f"{v.label}: its engine rules (capture sizes under spec decode; vanilla on "
                  "Model Runner V2 with async scheduling, suffix and K-pad on the synchronous "
                  "V1 runner) and its calibration (--vllm-version 0.26|0.33 changes it)")


def _gmu() -> float:
    """The gpu_memory_utilization predict's cost model is loaded with (load_cost_model's default)."""
    import inspect

    from simkit.costmodel.calibrations import load_cost_model

    return float(inspect.signature(load_cost_model).parameters["gmu"].default)


def _tree(pred: Prediction, prov: dict[str, Any]) -> dict[str, Any]:
    """What the drafter's global suffix tree held, as the profile was built (its rule from the
    profile's provenance)."""
    if pred.history is None:
        return _entry(None, "not recorded in the workload profile")
    tree = pred.history.label
    rule = prov.get("tree_rule", "")
    return _entry(tree, f"{tree} (the drafter's global suffix tree, as the profile was built): "
                        f"{rule.split(': ', 1)[-1] if rule else tree}")


def _history(pred: Prediction) -> dict[str, Any]:
    """What the server served before (simkit.history); decides the suffix tree's contents."""
    h = pred.history
    if h is None:
        return _entry(None, "not recorded in the workload profile")
    return _entry(h.as_dict(), h.describe() + " (--history cold|warm|hot|repeat:P changes it)")


def _graphs(pred: Prediction) -> dict[str, Any]:
    """Capture sizes per K of the ladder, as the engine's dispatcher builds them."""
    eng = pred.engine
    mode = eng.cudagraph_mode if isinstance(eng.cudagraph_mode, CudagraphMode) else \
        CudagraphMode.parse(str(eng.cudagraph_mode))
    ks = sorted({0, *(int(k) for r in pred.rows for k in
                      (r.ks.split(",") if r.ks else [r.k]))})
    from simkit.catalog.vllm_versions import get_vllm_version

    version = get_vllm_version(eng.vllm_version)
    if version.graph_rule == "v034-request-keyed":
        return _graphs_by_requests(eng, mode, ks)
    extra = version.uniform_decode_sizes
    sizes = {str(k): capture_sizes(eng.max_num_seqs, k, eng.max_num_batched_tokens, mode, extra)
             for k in ks}
    if mode is CudagraphMode.NONE:
        return _entry({"mode": mode.value, "capture_sizes": sizes},
                      "NONE: no CUDA graph is captured, every step runs eagerly")
    parts = [f"K={k}: {len(v)} sizes {v[0]}..{v[-1]}" if v else f"K={k}: none"
             for k, v in sizes.items()]
    return _entry({"mode": mode.value, "capture_sizes": sizes},
                  f"{mode.value}; captured batch sizes (tokens) {'; '.join(parts)}; larger "
                  "batches run eagerly (NONE)")


def _graphs_by_requests(eng: Any, mode: CudagraphMode, ks: list[int]) -> dict[str, Any]:
    """vLLM 0.34's two families per K: token-keyed graphs (prefill and mixed batches) and FULL
    decode graphs keyed by request count (simkit.engine.cudagraph.RequestKeyedDispatcher)."""
    from simkit.engine.cudagraph import RequestKeyedDispatcher

    disp = {k: RequestKeyedDispatcher.build(mode, eng.max_num_seqs, k, eng.max_num_batched_tokens)
            for k in ks}
    value = {"mode": mode.value,
             "capture_sizes": {str(k): list(d.sizes) for k, d in disp.items()},
             "decode_request_counts": {str(k): list(d.decode_reqs) for k, d in disp.items()}}
    if mode is CudagraphMode.NONE:
        return _entry(value, "NONE: no CUDA graph is captured, every step runs eagerly")
    parts = [f"K={k}: {len(d.sizes)} token sizes {d.sizes[0]}..{d.sizes[-1]}"
             + (f", FULL decode graphs for {d.decode_reqs[0]}..{d.decode_reqs[-1]} requests"
                if d.decode_reqs else "") for k, d in disp.items()]
    return _entry(value, f"{mode.value}; {'; '.join(parts)}; a decode step pads to the next "
                         "captured request count, any other step to the next token size; larger "
                         "batches run eagerly (NONE); vLLM's default sizes off SM100 (H100, "
                         "H200), also used for a B200, whose wider defaults are not modelled")


def _version_entries(pred: Prediction, out: dict[str, dict[str, Any]]) -> bool:
    """The scheduling and drafter entries of a version whose every configuration runs async
    with exactly K slots (0.34); False for the versions the generic entries describe."""
    from simkit.catalog.vllm_versions import get_vllm_version

    v = get_vllm_version(pred.vllm_version or None)
    parts = v.method("suffix")
    if parts.slots != "exact-k":
        return False
    out["drafter"] = _entry(
        {"drafter": parts.drafter, "default_k": parts.default_k},
        f"suffix decoding on {v.label}: its GPU suffix speculator ({parts.drafter} acceptance "
        f"tables); 'suffix' runs K={parts.default_k} (num_speculative_tokens unset = min(8, tree "
        "depth)); every decoding request verifies exactly K slots, the slots without a draft "
        "holding the last sampled token (accepted when the model repeats it), so K-pad is built "
        "in: kpad:K is suffix:K; drafting runs on the GPU, its kernels not priced (unmeasured)")
    out["scheduling"] = _entry("async for every configuration",
                               f"every configuration uses {v.label}'s Model Runner V2 with "
                               "async scheduling (host work overlaps the GPU); a K per "
                               "batch-size range (ktable) takes K from the batch size of the "
                               "step before")
    return True


def build_assumptions(pred: Prediction) -> dict[str, dict[str, Any]]:
    """Every assumption that decides `pred`'s figures, in reading order (see module doc)."""
    eng = pred.engine
    prov = pred.workload_provenance or {}
    drafter = prov.get("drafter") or {}
    closed = pred.request_rate is None
    out: dict[str, dict[str, Any]] = {}
    out["status"] = _entry("not a validated forecast", CAVEAT)
    out["tok_s"] = _entry("output tokens per second per replica",
                          f"tok/s = generated (output) tokens per second of ONE replica (one vLLM "
                          f"server on {pred.tp} GPU{'s' if pred.tp > 1 else ''}), prompt tokens "
                          "not counted, inside the steady window")
    out["hardware"] = _hardware(pred)
    out["tp"] = _entry(pred.tp, f"{pred.tp} ({'smallest that fits, chosen' if pred.tp_chosen else 'given'})")
    out["vllm"] = _vllm(pred)
    out["cost_model"] = _cost_model(pred)
    out["history"] = _history(pred)
    out["suffix_tree"] = _tree(pred, prov)
    suffix_k = get_drafter(SUFFIX_DRAFTER).default_k
    out["drafter"] = _entry(drafter or None,
                            (f"suffix decoding, vLLM defaults: tree depth "
                             f"{drafter.get('max_tree_depth')}, spec factor "
                             f"{drafter.get('max_spec_factor')}, min token prob "
                             f"{drafter.get('min_token_prob')}; 'suffix' runs K={suffix_k}"
                             " (num_speculative_tokens unset = the tree depth)") if drafter else
                            "not recorded in the workload profile")
    if eng is not None:
        out["max_tokens"] = _entry(eng.max_tokens, f"{eng.max_tokens:,} output tokens per request at most")
        out["capped_outputs"] = _entry(pred.capped_outputs, pred.capped_note or (
            f"{pred.capped_outputs}: requests whose trace output stopped at a generation cap "
            + ("end where the trace ends" if pred.capped_outputs == CappedMode.KEEP else
               f"continue to max_tokens {eng.max_tokens:,}") + " (simkit.app.capped)"))
        out["max_model_len"] = _entry(eng.max_model_len, f"{eng.max_model_len:,} tokens")
        out["max_num_seqs"] = _entry(eng.max_num_seqs, f"{eng.max_num_seqs:,} sequences per step at most")
        out["max_num_batched_tokens"] = _entry(eng.max_num_batched_tokens,
                                               f"{eng.max_num_batched_tokens:,} tokens per step "
                                               "at most (chunked prefill)")
        out["kv_cache_tokens"] = _entry(eng.kv_capacity_tokens,
                                        f"{eng.kv_capacity_tokens:,} tokens of KV cache per "
                                        f"replica (gpu_memory_utilization {_gmu():g})")
        out["cudagraph"] = _graphs(pred)
        if getattr(pred, "prefix_caching", False):
            out["prefix_caching"] = _prefix(pred)
    out["scheduling"] = _entry("async without spec decode, synchronous with it",
                               "vanilla uses vLLM's async scheduling (host work overlaps the "
                               "GPU); every speculative config runs the synchronous V1 step "
                               "(the same in vLLM 0.26 and 0.33)")
    _version_entries(pred, out)
    out["load"] = _entry({"kind": "closed" if closed else "open",
                          "concurrency": pred.concurrency if closed else None,
                          "request_rate": pred.request_rate, "requests": pred.num_requests,
                          "seeds": pred.seeds},
                         f"{pred.load}; {pred.num_requests} requests per run, "
                         f"{pred.seeds} request order(s) (seeds), figures are means over them")
    out["steady_window"] = _entry(
        "closed: C-th completion .. last submission" if closed else
        "open: arrival at 10% .. last arrival",
        (f"throughput counted from the moment {pred.concurrency} requests have completed "
         "(every client is past its first request) to the last request submission: start-up "
         "and drain excluded") if closed else
        "throughput counted from the arrival of the first 10 % of requests to the last "
        "arrival: start-up and drain excluded")
    if not pred.steady_window:
        out["steady_window"] = _entry(
            None, f"NO steady window (too few requests): rows marked * are whole-run rates, "
                  f"start-up and drain included; --num-requests {pred.suggested_num_requests} "
                  "gives one")
    out["workload"] = _workload(pred, prov)
    return out


def _prefix(pred: Prediction) -> dict[str, Any]:
    """Automatic prefix caching: modelled, or why not (only stated when it is on)."""
    note = getattr(pred, "prefix_note", "")
    if note:
        return _entry({"enabled": True, "modelled": False},
                      f"on in vLLM but NOT modelled: {note}; the pfx hit column says n/a "
                      "(predict with the raw traces here, or --no-prefix-caching to say off)")
    return _entry({"enabled": True, "modelled": True, "block_size": pred.engine.block_size},
                  f"on (vLLM default): prompt blocks of {pred.engine.block_size} tokens hit when "
                  "the same prefix is cached (whole blocks; the last prompt token is always "
                  "computed); freed blocks stay hittable until evicted least-recently-freed "
                  "first; the server starts with an empty cache; a sampled request run again "
                  "(cycled past the sample, or drawn again by its weight) is a new prompt that "
                  "shares only the prefix its prompt shares with another sampled prompt "
                  "(template header, system prompt); output "
                  "tokens are never hit by another request (--no-prefix-caching: off)")


def _workload(pred: Prediction, prov: dict[str, Any]) -> dict[str, Any]:
    """Corpus, sample and source traces; the proxy note as the profile states it."""
    sources = prov.get("sources") or {}
    producers = {name: (e or {}).get("producer") for name, e in sorted(sources.items())}
    n_sample = len(prov.get("sample_indices") or [])
    value = {"corpus": pred.corpus, "origin": pred.origin, "sample_requests": n_sample or None,
             "corpus_requests": prov.get("corpus_requests"), "producers": producers,
             "proxy_note": pred.proxy_note or None, "command": prov.get("command")}
    text = f"corpus {pred.corpus}, profile {pred.origin or 'of unknown origin'}"
    if n_sample and prov.get("corpus_requests"):
        text += (f"; acceptance measured on {n_sample} of its {prov['corpus_requests']:,} "
                 "requests")
        if prov.get("sample_weights"):
            text += (" (a stratified sample; each request weighted by the corpus requests it "
                     "stands for, and runs draw requests in proportion to the weights)")
    if sources:
        text += f"; {len(sources)} trace sources"
    note = pred.proxy_note or ""
    if note.startswith("proxy outputs: "):
        text += f"; outputs written by another model for: {note[len('proxy outputs: '):]}"
    elif note:
        text += f"; {note}"              # e.g. "own outputs": the model's own texts
    return _entry(value, text)


__all__ = ["CAVEAT", "build_assumptions"]
