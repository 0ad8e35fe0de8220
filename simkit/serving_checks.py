"""Settings vLLM itself refuses, refused here first with vLLM's reason, before any work.

A prediction for a server vLLM would not start (or whose every request it would reject) is a
silently wrong number, so predict, sweep and every what-if call `check_serving` on their
options before loading anything. The rules, as vLLM 0.26 and 0.33 state them:

- tensor parallelism (ModelConfig.verify_with_parallel_config): "Total number of attention
  heads (H) must be divisible by tensor parallel size (TP)"; and QKVParallelLinear splits the
  KV heads over the GPUs (KV % TP == 0) or replicates them (TP % KV == 0), any other pair fails.
  MLA models cache one latent per token, with no KV heads to split.
- scheduler (SchedulerConfig._verify_args): "max_num_batched_tokens (B) must be greater than
  or equal to max_num_seqs (S)" (every running sequence needs a token of the step's budget).
- a request's max_tokens (the OpenAI server's input validation): more than max_model_len minus
  the prompt is refused, so a max_tokens of max_model_len or more refuses every request (a
  prompt holds at least one token).
- gpu_memory_utilization (CacheConfig): a fraction in (0, 1].
- max_model_len (ModelConfig, _get_and_verify_max_len): "User-specified max_model_len (L) is
  greater than the derived max_model_len (max_position_embeddings=P ... in model's
  config.json)" is refused unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set.

Imports only the model catalogue and errors (a leaf above catalog/)."""

from __future__ import annotations

import math

from simkit.errors import InputError


def check_tp(model, tp: int | None, field: str = "tp") -> None:
    """Refuse a TP degree vLLM would refuse for `model` (a catalogue id, a config.json path or
    a ModelSpec); None (simkit chooses the TP) passes."""
    if tp is None:
        return
    if tp < 1:
        raise InputError(f"must be >= 1, got {tp}", field=field)
    from simkit.catalog.models import get_model

    spec = get_model(model) if isinstance(model, str) else model
    if spec.heads % tp:
        raise InputError(f"vLLM refuses TP {tp} for {spec.name}: total number of attention "
                         f"heads ({spec.heads}) must be divisible by tensor parallel size "
                         f"({tp})", field=field)
    kv = spec.kv_heads
    if spec.attention != "mla" and kv and kv % tp and tp % kv:
        raise InputError(f"vLLM refuses TP {tp} for {spec.name}: its {kv} KV heads can be "
                         f"neither split over {tp} GPUs nor replicated on them ({kv} and {tp} "
                         "must divide one another)", field=field)


def check_context(model, max_model_len: int, field: str = "max-model-len") -> None:
    """Refuse a max_model_len longer than the context the model's config.json states (vLLM's
    _get_and_verify_max_len: 'User-specified max_model_len ... is greater than the derived
    max_model_len'); a model whose config states none passes."""
    from simkit.catalog.models import get_model

    spec = get_model(model) if isinstance(model, str) else model
    top = int(getattr(spec, "max_position_embeddings", 0) or 0)
    if top and max_model_len > top:
        raise InputError(f"vLLM refuses max_model_len {max_model_len:,} for {spec.name}: it is "
                         f"greater than the derived max_model_len (max_position_embeddings="
                         f"{top:,} in the model's config.json)", field=field)


def check_serving(model=None, tp: int | None = None, *,
                  max_tokens: int | None = None, max_model_len: int = 16384,
                  max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
                  gmu: float | None = None) -> None:
    """Refuse, naming the option and giving vLLM's reason, any setting among these that vLLM
    would refuse (module docstring); None means not given (the default, which vLLM accepts)."""
    if model is not None:
        check_tp(model, tp)
        check_context(model, max_model_len)
    if max_tokens is not None and max_tokens >= max_model_len:    # a prompt has >= 1 token
        raise InputError(f"vLLM refuses every request whose max_tokens ({max_tokens:,}) is "
                         f"more than max_model_len ({max_model_len:,}) minus its prompt (at "
                         "least one token)", field="max-tokens")
    if (max_num_seqs is not None and max_num_batched_tokens is not None
            and max_num_batched_tokens < max_num_seqs):
        raise InputError(f"vLLM refuses max_num_batched_tokens ({max_num_batched_tokens:,}): it "
                         f"must be greater than or equal to max_num_seqs ({max_num_seqs:,})",
                         field="max-num-batched-tokens")
    if gmu is not None and not (math.isfinite(gmu) and 0 < gmu <= 1):
        raise InputError(f"vLLM refuses gpu_memory_utilization {gmu}: it is a fraction of the "
                         "GPU's memory in (0, 1]", field="gpu-memory-utilization")


__all__ = ["check_context", "check_serving", "check_tp"]
