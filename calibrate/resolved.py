"""The settings a started vLLM engine actually resolved (not what was asked), for the run rows."""

from __future__ import annotations

import subprocess
from typing import Any

from calibrate.records import dumps


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        return "unknown"


# speculative-config fields recorded in drafter_params when this vLLM has them (0.34 adds the last
# three; spec factor and min prob are no-ops there but still recorded as resolved)
DRAFTER_FIELDS = ("suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
                  "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob",
                  "suffix_decoding_corpus_tokens", "num_speculative_tokens_per_batch_size",
                  "enable_adaptive_verification")
def graph_sizes(cc: Any) -> str:
    """The resolved prefill (token counts) and decode (request counts) CUDA-graph sizes of Model
    Runner V2 on vLLM 0.34 (JSON); '' where the vLLM has no such fields."""
    pre = getattr(cc, "prefill_cudagraph_capture_token_sizes", None)
    dec = getattr(cc, "decode_cudagraph_capture_request_sizes", None)
    if not hasattr(cc, "prefill_cudagraph_capture_token_sizes"):
        return ""
    return dumps({"prefill_tokens": sorted(int(x) for x in pre or []),
                  "decode_requests": sorted(int(x) for x in dec or [])})


def _resolved(engine: Any, config: str, install_info: dict) -> dict[str, Any]:
    """The settings vLLM actually resolved (not what we asked for)."""
    import torch
    import vllm

    vc = engine.vllm_config
    cc, sc = vc.compilation_config, vc.scheduler_config
    spec = vc.speculative_config
    drafter: dict[str, Any] = {}
    k = 0
    if spec is not None:
        k = int(spec.num_speculative_tokens)
        drafter = {"method": spec.method, "num_speculative_tokens": k}
        for f in DRAFTER_FIELDS:
            if hasattr(spec, f):
                v = getattr(spec, f)
                drafter[f] = [list(e) for e in v] if isinstance(v, (list, tuple)) else v
    return {
        "vllm_version": vllm.__version__,
        "runner": install_info["runner"],
        "async_scheduling": bool(sc.async_scheduling),
        "cudagraph_mode": str(getattr(cc.cudagraph_mode, "name", cc.cudagraph_mode)),
        "capture_sizes": dumps(sorted(int(s) for s in (cc.cudagraph_capture_sizes or []))),
        "graph_sizes": graph_sizes(cc),
        "drafter_params": dumps(drafter),
        "k": k if config != "vanilla" else 0,
        "gpu": torch.cuda.get_device_name(0),
        "driver": _driver_version(),
        "tp": int(vc.parallel_config.tensor_parallel_size),
        "max_num_seqs": int(sc.max_num_seqs),
        "max_num_batched_tokens": int(sc.max_num_batched_tokens),
        "max_model_len": int(vc.model_config.max_model_len),
        "gpu_memory_utilization": float(vc.cache_config.gpu_memory_utilization),
        "prefix_caching": bool(vc.cache_config.enable_prefix_caching),
        "scheduler_cls": install_info["scheduler_cls"],
    }

