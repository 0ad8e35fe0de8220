"""GPU memory arithmetic: KV-cache capacity after weights and reserves, the largest number of
concurrent sequences, and the default tensor-parallel degree."""

from __future__ import annotations

import math

from simkit.catalog.hardware import HardwareSpec, get_hardware
from simkit.catalog.models import ModelSpec, get_model
from simkit.errors import InputError

GIB = 2**30
TP_CHOICES = (1, 2, 4, 8)
BLOCK_SIZE = 16                 # vLLM's default KV block: sequences occupy whole blocks

# Reserve outside weights and KV cache, per GPU (documented in docs/costmodel.md):
FIXED_RESERVE_GIB = 2.0         # CUDA context, NCCL / custom all-reduce buffers, cuBLAS workspace,
                                # CUDA-graph memory pool (vLLM counts all of it against gmu)
DEFAULT_BATCHED_TOKENS = 8192   # OpenAI-server default max_num_batched_tokens (what the study ran)
DEFAULT_MAX_NUM_SEQS = 1024     # vLLM default on >= 70 GiB GPUs: rows of the profiling sampler run
USEFUL_CONCURRENCY = 32         # the study's closed-loop concurrency
USEFUL_CONTEXT_FRACTION = 0.25  # "useful" = that many sequences at a quarter of max_model_len


def _resolve(model: ModelSpec | str, hw: HardwareSpec | str) -> tuple[ModelSpec, HardwareSpec]:
    """Accept specs or catalogue names."""
    return (get_model(model) if isinstance(model, str) else model,
            get_hardware(hw) if isinstance(hw, str) else hw)


def activation_reserve_bytes(model: ModelSpec, tp: int, max_num_batched_tokens: int = DEFAULT_BATCHED_TOKENS,
                             max_num_seqs: int = DEFAULT_MAX_NUM_SEQS) -> float:
    """Peak of vLLM's profiling forward pass per GPU: the widest activations of a
    max_num_batched_tokens batch plus fp32 logits/probs of the sampler's dummy rows."""
    t = max_num_batched_tokens
    ffn = (2 * model.experts_active * model.moe_intermediate if model.is_moe else 2 * model.intermediate) / tp
    qkv = (model.heads + 2 * model.kv_heads) * model.head_dim / tp
    act = t * 2.0 * (4 * model.hidden + ffn + qkv)
    logits = min(max_num_seqs, t) * model.vocab * 4.0 * 2
    return act + logits


def reserve_bytes(model: ModelSpec, tp: int, **kw: int) -> float:
    """Everything besides weights and KV cache that counts against gpu_memory_utilization."""
    return FIXED_RESERVE_GIB * GIB + activation_reserve_bytes(model, tp, **kw)


def kv_budget_bytes(model: ModelSpec | str, hw: HardwareSpec | str, tp: int, gmu: float = 0.85,
                    **kw: int) -> float:
    """Bytes per GPU left for the KV cache: gmu x HBM - weights/TP - reserve (may be negative)."""
    model, hw = _resolve(model, hw)
    if not 0 < gmu <= 1:
        raise InputError(f"gpu_memory_utilization must be in (0, 1], got {gmu}", field="gmu")
    if tp not in TP_CHOICES:
        raise InputError(f"tensor-parallel degree must be one of {TP_CHOICES}, got {tp}", field="tp")
    return gmu * hw.hbm_bytes - model.weight_bytes() / tp - reserve_bytes(model, tp, **kw)


def kv_capacity_tokens(model: ModelSpec | str, hw: HardwareSpec | str, tp: int, gmu: float = 0.85,
                       **kw: int) -> int:
    """KV-cache tokens (global-attention layers) that fit after weights and reserve; 0 if none.

    Sliding-window layers need only their window per sequence; max_concurrent_seqs charges it."""
    model, hw = _resolve(model, hw)
    budget = kv_budget_bytes(model, hw, tp, gmu, **kw)
    per_token = model.kv_bytes_per_token(tp)
    if budget <= 0 or per_token <= 0:
        return 0
    return int(budget // per_token) // BLOCK_SIZE * BLOCK_SIZE


def max_concurrent_seqs(model: ModelSpec | str, hw: HardwareSpec | str, tp: int, context_len: int,
                        gmu: float = 0.85, **kw: int) -> int:
    """Largest number of sequences of `context_len` tokens whose KV cache fits at once."""
    model, hw = _resolve(model, hw)
    if context_len <= 0:
        raise InputError(f"context length must be positive, got {context_len}", field="context_len")
    budget = kv_budget_bytes(model, hw, tp, gmu, **kw)
    blocks = math.ceil(context_len / BLOCK_SIZE) * BLOCK_SIZE
    per_seq = blocks * model.kv_bytes_per_token(tp) + model.kv_bytes_window_per_seq(context_len, tp)
    return max(0, int(budget // per_seq))


def useful_kv_tokens(max_model_len: int, concurrency: int = USEFUL_CONCURRENCY) -> int:
    """KV tokens a deployment needs to be useful: `concurrency` sequences at a quarter of
    max_model_len each, and never less than one full max_model_len sequence."""
    return max(max_model_len, int(concurrency * max_model_len * USEFUL_CONTEXT_FRACTION))


def choose_tp(model: ModelSpec | str, hw: HardwareSpec | str, gmu: float = 0.85, max_model_len: int = 16384,
              concurrency: int = USEFUL_CONCURRENCY, **kw: int) -> int:
    """Smallest TP in {1,2,4,8} (dividing the attention heads) whose KV capacity reaches
    useful_kv_tokens(max_model_len, concurrency); callers must print the choice."""
    model, hw = _resolve(model, hw)
    need = useful_kv_tokens(max_model_len, concurrency)
    for tp in TP_CHOICES:
        if model.heads % tp:
            continue
        if kv_capacity_tokens(model, hw, tp, gmu, **kw) >= need:
            return tp
    raise InputError(f"{model.name} does not fit on 8 x {hw.name} with a useful KV cache "
                     f"({need} tokens at gmu {gmu})", field="tp")


__all__ = ["kv_capacity_tokens", "max_concurrent_seqs", "choose_tp", "kv_budget_bytes", "reserve_bytes",
           "activation_reserve_bytes", "useful_kv_tokens", "TP_CHOICES", "BLOCK_SIZE"]
