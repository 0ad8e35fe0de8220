"""What a ladder runs on, loaded once per process: a (model, corpus) workload and its cost model.

`load_cell` loads a (model, corpus) workload profile and its cost model once per process (the
same arguments give the same objects); `clear_loaded` frees them (a sweep does after each cell).
`run_workload` builds the workload of a measured run's own requests (validate, the fleet
validation and the dynamic-K tables of calibrate/ use it). This is the application side of the
engine: it reads profiles, calibrations and tables from disk, which the simulator never does.
"""

from __future__ import annotations

from typing import Any

from simkit.app.capped import apply_capped_outputs, check_mode
from simkit.app.options import RunOptions
from simkit.drafters.base import SUFFIX_DRAFTER
from simkit.engine.workload import Workload
from simkit.history import History, parse_history
from simkit.choices import CappedMode, Ordering, ProfileSource

_LOADED: dict[tuple, tuple[Workload, Any]] = {}


def load_workload(model: str, corpus: str, source: ProfileSource = ProfileSource.AUTO,
                  history: History | None = None, capped_outputs: CappedMode = CappedMode.KEEP,
                  max_tokens: int = 8192, vllm_version: str | None = None) -> Workload:
    """The acceptance-replay workload of one (model, corpus) under a request history
    (simkit.history; None = the profile's own): simkit.profiles.corpus_profile.load_profile; capped outputs
    kept or extended to max_tokens (simkit.app.capped). `vllm_version`: also the table of that
    version's suffix drafter where it is not arctic's (shipped, or built from the raw traces
    unless the source is 'shipped')."""
    from simkit.catalog.models import canonical_model
    from simkit.profiles.corpus_profile import load_profile

    check_mode(capped_outputs)
    model = canonical_model(model)
    prof = load_profile(model, corpus, source=source, history=history)
    if vllm_version is not None:     # the version's own suffix drafter, where it is not arctic's
        from simkit.catalog.vllm_versions import get_vllm_version
        from simkit.profiles.corpus_profile import KMAX
        from simkit.profiles.version_tables import with_drafter_table

        drafter = get_vllm_version(vllm_version).method("suffix").drafter
        if drafter != SUFFIX_DRAFTER and ProfileSource(source) is not ProfileSource.SHIPPED:
            prof = with_drafter_table(prof, drafter, KMAX)    # --source shipped: never built
    workload = Workload.from_profile(prof)
    if not workload.name:
        workload.name = f"{model}/{corpus}"
    return apply_capped_outputs(workload, capped_outputs, max_tokens)


def load_cell(run: RunOptions) -> tuple[Workload, Any]:
    """(workload, cost model) of the cell `run` names (model, corpus, hardware, TP,
    calibration, vLLM version, profile source, history, capped outputs, the server limits the
    cost model depends on), loaded once per process: load_workload and
    simkit.costmodel.load_cost_model (TP None = the smallest that fits)."""
    from simkit.catalog.hardware import canonical_hardware
    from simkit.catalog.models import canonical_model
    from simkit.catalog.vllm_versions import get_vllm_version

    version = get_vllm_version(run.vllm_version).key
    model, hardware = canonical_model(run.model), canonical_hardware(run.hardware)
    key = (model, run.corpus, hardware, run.tp, run.calibration, run.source, run.max_model_len,
           run.max_num_batched_tokens, version)
    if run.history is not None:
        key = key + (run.history.label,)
    if check_mode(run.capped_outputs) is not CappedMode.KEEP:
        key = key + (run.capped_outputs, run.max_tokens)
    if key not in _LOADED:
        from simkit.costmodel import load_cost_model

        workload = load_workload(model, run.corpus, run.source, run.history,
                                 run.capped_outputs, run.max_tokens, version)
        cost = load_cost_model(model, hardware, tp=run.tp, calibration=run.calibration,
                               max_model_len=run.max_model_len,
                               max_num_batched_tokens=run.max_num_batched_tokens,
                               vllm_version=version)
        _LOADED[key] = (workload, cost)
    return _LOADED[key]


def clear_loaded() -> None:
    """Forget every workload and cost model load_cell kept (frees their memory)."""
    _LOADED.clear()


def run_history(run: dict[str, Any]) -> History:
    """The history the run was measured under, from its record's column (older records: cold,
    every run reset the tree)."""
    h = run.get("history")
    return parse_history("cold" if h is None or h != h or h == "" else str(h))


_CHAINS: dict[bytes, Any] = {}      # a prompt's token ids (int32 LE bytes) -> its block hashes
_CHAINS_MAX = 100_000


def _prompt_chain(prompt_ids: Any) -> Any:
    """prompt_block_hashes of a prompt, kept in this process: validate builds the workload of
    every measured run, and the runs of one corpus replay the same prompts (hashing them again
    took ~7 ms a run). Keyed by the ids' bytes, which are all the hashes depend on."""
    import numpy as np

    from simkit.block_hash import prompt_block_hashes

    key = np.ascontiguousarray(np.asarray(prompt_ids), dtype="<i4").tobytes()
    chain = _CHAINS.get(key)
    if chain is None:
        if len(_CHAINS) >= _CHAINS_MAX:
            _CHAINS.clear()
        chain = _CHAINS[key] = prompt_block_hashes(prompt_ids)
        chain.flags.writeable = False            # shared by every workload that packs it
    return chain


def run_workload(reqs: list, run: dict[str, Any], ordering: Ordering,
                 history: History | None = None, in_loop: bool = False) -> Workload:
    """Workload of exactly these requests; suffix table built over them in this order after the
    run's history (cold: an empty global tree, the run reset it; hot / repeat:P: the repeated
    responses first, as calibrate.passes served them), in `ordering`: concurrent at the run's
    concurrency, or sequential. `history` overrides the run's own. Prompt block hashes ride
    along for prefix caching, and the history for the prompts it left in the prefix cache.
    `in_loop`: no table; the engine drafts on its own trajectory (simkit.drafters.suffix.in_loop,
    the run's drafter settings), from the empty tree of a cold run (the only history it takes)."""
    import numpy as np

    from simkit.acceptance.history_tables import cached_history_table
    from simkit.block_hash import pack

    plen = np.array([len(r.prompt_ids) for r in reqs], np.int32)
    olen = np.array([len(r.output_ids) for r in reqs], np.int32)
    history = history or run_history(run)
    tables = {}
    hashes = pack(_prompt_chain(r.prompt_ids) for r in reqs)
    if in_loop:
        if history.kind != "cold":
            raise ValueError("in-loop drafting starts from an empty tree: cold runs only, not "
                             f"{history.label}")
        wl = Workload(plen, olen, tables, name=f"{run['model']}/{run['corpus']}/{run['run_id']}",
                      block_hashes=hashes, history=history)
        if str(run["config"]) != "vanilla":
            wl.in_loop[SUFFIX_DRAFTER] = _in_loop_factory(list(reqs), run)
        return wl
    if str(run["config"]) != "vanilla":
        tables[SUFFIX_DRAFTER] = cached_history_table(reqs, history, kmax=16,
                                                ordering=ordering,
                                                concurrency=int(run["concurrency"]),
                                                model=str(run["model"]),
                                                corpus=str(run["corpus"]))
    return Workload(plen, olen, tables, name=f"{run['model']}/{run['corpus']}/{run['run_id']}",
                    block_hashes=hashes, history=history)


IN_LOOP_KMAX = 16        # as the tables' columns (a suffix draft never exceeds 12 at depth 24)


def _in_loop_factory(reqs: list, run: dict[str, Any]):
    """A factory of fresh in-loop suffix drafters over `reqs`, at the run's recorded drafter
    settings (runs.drafter_params: tree depth, cached responses, spec factor, min token prob)."""
    from functools import partial

    from simkit.drafters.suffix.in_loop import in_loop_suffix

    return partial(in_loop_suffix, reqs, IN_LOOP_KMAX, suffix_params_of(run))


def suffix_params_of(run: dict[str, Any]):
    """The suffix settings a run recorded (runs.drafter_params, vLLM's speculative_config keys);
    vLLM's defaults for keys it does not hold."""
    import json

    from simkit.drafters.suffix.cache import SuffixParams

    raw = run.get("drafter_params")
    got = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    base = SuffixParams()
    keys = {"max_tree_depth": int, "max_cached_requests": int, "max_spec_factor": float,
            "min_token_prob": float}
    vals = {k: cast(got.get(f"suffix_decoding_{k}", getattr(base, k))) for k, cast in keys.items()}
    return SuffixParams(**vals)


__all__ = ["clear_loaded", "load_cell", "load_workload", "run_history", "run_workload",
           "suffix_params_of"]
