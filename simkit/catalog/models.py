"""Model catalogue: architecture facts of each model (from its public config.json) and the
arithmetic simkit needs from them: parameter counts, weight bytes, KV-cache bytes per token."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from simkit.errors import InputError, UnknownNameError

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5}


@dataclass(frozen=True)
class ModelSpec:
    """One model's architecture, as vLLM would load it (MTP/next-n layers are not loaded)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int               # dense MLP width (dense layers of MoE models too)
    vocab: int
    experts_total: int = 0          # routed experts per MoE layer (0 = dense model)
    experts_active: int = 0         # routed experts per token (top-k)
    experts_shared: int = 0         # shared experts per MoE layer, each moe_intermediate wide
    moe_intermediate: int = 0
    first_k_dense: int = 0          # leading layers with a dense MLP (MoE models)
    attention: str = "gqa"          # "gqa" or "mla"
    kv_lora_rank: int = 0           # MLA latent width (cached)
    q_lora_rank: int = 0            # MLA query low-rank width (0 = plain q projection)
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0       # MLA rotary part (cached beside the latent)
    v_head_dim: int = 0
    qkv_bias: bool = False          # Qwen2 style q/k/v biases
    qk_norm: bool = False           # per-head q/k RMSNorm (EXAONE-MoE)
    sliding_window: int = 0         # window of the local-attention layers (0 = none)
    # the context its config.json states (max_position_embeddings; 0 = not stated): vLLM
    # refuses a longer max_model_len
    max_position_embeddings: int = 0
    full_attention_layers: int = 0  # layers with global attention (= layers when no window)
    weight_dtype: str = "bf16"      # dtype of the linear weights inside transformer blocks
    fp8_scope: str = "all"          # with fp8: "all" linear layers, or "ffn" only (Meta 405B-FP8)
    bf16_ffn_layers: int = 0        # with fp8_scope "ffn": FFN layers left in bf16
    tie_embeddings: bool = False
    tokenizer_family: str = "llama3"
    published_params_b: float | None = None   # total the publisher states, billions
    source: str = ""
    assumptions: str = ""

    # ---- parameter arithmetic -------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """True when the MLP of some layers is a routed mixture of experts."""
        return self.experts_total > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a routed mixture of experts."""
        return self.layers - self.first_k_dense if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        """Layers whose MLP is dense."""
        return self.layers - self.moe_layers

    def attn_params_per_layer(self) -> int:
        """Weights of one attention block (projections, biases, q/k norms, the two RMSNorms)."""
        h = self.hidden
        if self.attention == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk
            else:
                q = h * self.heads * qk
            kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
                  + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim))
            o = self.heads * self.v_head_dim * h
            return q + kv + o + 2 * h
        qd, kvd = self.heads * self.head_dim, self.kv_heads * self.head_dim
        p = h * qd + 2 * h * kvd + qd * h + 2 * h
        if self.qkv_bias:
            p += qd + 2 * kvd
        if self.qk_norm:
            p += 2 * self.head_dim
        return p

    def dense_mlp_params(self) -> int:
        """Weights of one dense gated MLP (gate, up, down)."""
        return 3 * self.hidden * self.intermediate

    def expert_params(self) -> int:
        """Weights of one routed (or shared) expert."""
        return 3 * self.hidden * self.moe_intermediate

    def moe_nonexpert_params(self) -> int:
        """Per MoE layer: router and shared experts (everything but the routed experts)."""
        return self.hidden * self.experts_total + self.experts_total + self.experts_shared * self.expert_params()

    def embedding_params(self) -> int:
        """Input embedding plus lm_head (once if tied)."""
        return self.vocab * self.hidden * (1 if self.tie_embeddings else 2)

    def param_count(self) -> int:
        """All weights vLLM loads (no MTP layers)."""
        body = self.layers * self.attn_params_per_layer() + self.dense_layers * self.dense_mlp_params()
        body += self.moe_layers * (self.moe_nonexpert_params() + self.experts_total * self.expert_params())
        return body + self.embedding_params() + self.hidden

    def active_params(self) -> int:
        """Weights one token touches (top-k routed experts instead of all)."""
        body = self.layers * self.attn_params_per_layer() + self.dense_layers * self.dense_mlp_params()
        body += self.moe_layers * (self.moe_nonexpert_params() + self.experts_active * self.expert_params())
        return body + self.embedding_params() + self.hidden

    # ---- bytes -----------------------------------------------------------------------------
    def linear_bytes(self, part: str) -> float:
        """Bytes per weight of `part` ("attn", "ffn", "expert"): fp8 only where the checkpoint is."""
        if self.weight_dtype == "bf16":
            return 2.0
        if part == "attn" and self.fp8_scope == "ffn":
            return 2.0
        return float(DTYPE_BYTES[self.weight_dtype])

    def weight_bytes_parts(self) -> dict[str, float]:
        """Weight bytes by group: attention, dense FFN, MoE non-expert, routed experts, embeddings."""
        fb = self.linear_bytes("ffn")
        dense_ffn = self.dense_layers * self.dense_mlp_params()
        bf16_ffn = min(self.bf16_ffn_layers, self.dense_layers) * self.dense_mlp_params()
        return {
            "attn": self.layers * self.attn_params_per_layer() * self.linear_bytes("attn"),
            "dense_ffn": (dense_ffn - bf16_ffn) * fb + bf16_ffn * 2.0,
            "moe_shared": self.moe_layers * (self.experts_shared * self.expert_params() * fb
                                             + (self.hidden + 1) * self.experts_total * 2.0),
            "experts": self.moe_layers * self.experts_total * self.expert_params() * fb,
            "embed": self.embedding_params() * 2.0 + self.hidden * 2.0,
        }

    def weight_bytes(self) -> float:
        """Bytes of all weights (block-scale tensors of fp8 checkpoints, < 0.1 %, left out)."""
        return sum(self.weight_bytes_parts().values())

    def kv_heads_per_gpu(self, tp: int) -> float:
        """KV heads each GPU stores: split over TP, replicated when TP exceeds the KV heads."""
        return max(1.0, self.kv_heads / tp)

    def kv_bytes_per_token_layer(self, tp: int = 1, kv_dtype_bytes: int = 2) -> float:
        """KV-cache bytes one token needs in one attention layer, on one GPU."""
        if self.attention == "mla":   # latent + rotary key, replicated on every TP rank
            return float((self.kv_lora_rank + self.qk_rope_head_dim) * kv_dtype_bytes)
        return 2.0 * self.kv_heads_per_gpu(tp) * self.head_dim * kv_dtype_bytes

    def kv_bytes_per_token(self, tp: int = 1, kv_dtype_bytes: int = 2) -> float:
        """KV bytes per context token on one GPU, over the global-attention layers.

        Sliding-window layers hold at most `sliding_window` tokens per sequence: see
        kv_bytes_window_per_seq."""
        return self.full_attention_layers * self.kv_bytes_per_token_layer(tp, kv_dtype_bytes)

    def kv_bytes_window_per_seq(self, context: int, tp: int = 1, kv_dtype_bytes: int = 2) -> float:
        """KV bytes one sequence of `context` tokens needs in the sliding-window layers, one GPU."""
        if not self.sliding_window:
            return 0.0
        local_layers = self.layers - self.full_attention_layers
        return local_layers * min(context, self.sliding_window) * self.kv_bytes_per_token_layer(tp, kv_dtype_bytes)

    def summary(self) -> dict[str, Any]:
        """Facts plus derived figures, for `simkit models show` and JSON output."""
        d = asdict(self)
        d["params_b"] = round(self.param_count() / 1e9, 3)
        d["active_params_b"] = round(self.active_params() / 1e9, 3)
        d["weight_gib"] = round(self.weight_bytes() / 2**30, 2)
        d["kv_bytes_per_token_tp1"] = self.kv_bytes_per_token(1)
        return d


# ---- reading HF config.json ----------------------------------------------------------------

_FAMILIES = {"llama": "llama3", "qwen2": "qwen", "deepseek_v3": "deepseek-v3", "exaone_moe": "exaone"}


def _get(cfg: dict, keys: tuple[str, ...], path: str, default: Any = ..., kind: type = int) -> Any:
    """First of `keys` present in cfg, checked to be of `kind`; else default or a clear error."""
    for key in keys:
        if key in cfg and cfg[key] is not None:
            value = cfg[key]
            if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise InputError(f"expected an integer, got {value!r}", path=path, field=key)
            if kind is int and value < 0:
                raise InputError(f"must not be negative, got {value}", path=path, field=key)
            if kind is bool and not isinstance(value, bool):
                raise InputError(f"expected true/false, got {value!r}", path=path, field=key)
            return value
    if default is ...:
        raise InputError("required key missing", path=path, field=keys[0])
    return default


def spec_from_config(cfg: dict, name: str, path: str, extra: dict | None = None) -> ModelSpec:
    """Build a ModelSpec from a HF config dict; `extra` carries simkit keys (source, assumptions,
    fp8 scope, published total) that config.json does not have."""
    extra = extra or {}
    if not isinstance(cfg, dict):
        raise InputError("expected a JSON object", path=path)
    model_type = str(cfg.get("model_type", ""))
    layers = _get(cfg, ("num_hidden_layers", "num_layers", "n_layer"), path)
    hidden = _get(cfg, ("hidden_size", "d_model", "n_embd"), path)
    heads = _get(cfg, ("num_attention_heads", "n_head"), path)
    if layers == 0 or hidden == 0 or heads == 0:
        raise InputError("layers, hidden size and heads must be positive", path=path, field="num_hidden_layers")
    kv_heads = _get(cfg, ("num_key_value_heads",), path, heads)
    head_dim = _get(cfg, ("head_dim",), path, hidden // heads)
    experts = _get(cfg, ("n_routed_experts", "num_experts", "num_local_experts"), path, 0)
    mla = "kv_lora_rank" in cfg and cfg["kv_lora_rank"] is not None
    qdt = cfg.get("quantization_config") or {}
    quant = str(qdt.get("quant_method", "")).lower() if isinstance(qdt, dict) else ""
    is_fp8 = isinstance(qdt, dict) and ("fp8" in quant or "fp8" in json.dumps(qdt).lower() or qdt.get("fmt") == "e4m3")
    weight_dtype = extra.get("weight_dtype") or ("fp8" if is_fp8 else "bf16")
    skipped = (qdt.get("modules_to_not_convert") or qdt.get("ignore") or []) if isinstance(qdt, dict) else []
    skipped = [str(x) for x in skipped] if isinstance(skipped, list) else []
    if "fp8_scope" not in extra and any("self_attn" in x for x in skipped):
        # e.g. Meta's fbgemm_fp8 checkpoint: attention stays bf16, some layers' FFN too
        extra = {**extra, "fp8_scope": "ffn",
                 "bf16_ffn_layers": len({x.split(".mlp")[0] for x in skipped if ".mlp" in x})}
    if weight_dtype not in DTYPE_BYTES:
        raise InputError(f"unknown dtype {weight_dtype!r}; known {sorted(DTYPE_BYTES)}", path=path, field="weight_dtype")
    window = _get(cfg, ("sliding_window",), path, 0) or 0
    full_layers = layers
    layer_types = cfg.get("layer_types")
    if window and isinstance(layer_types, list) and len(layer_types) == layers:
        full_layers = sum(1 for t in layer_types if t == "full_attention")
    elif window and cfg.get("sliding_window_pattern"):
        pattern = cfg["sliding_window_pattern"]
        if isinstance(pattern, int) and pattern > 0:   # every pattern-th layer global, last always global
            full_layers = sum(1 for i in range(layers) if (i + 1) % pattern == 0 or i == layers - 1)
        elif isinstance(pattern, str) and pattern:
            full_layers = sum(1 for i in range(layers) if pattern[i % len(pattern)] == "G" or i == layers - 1)
    elif window and not cfg.get("use_sliding_window", True):
        window = 0
    if window and full_layers == layers:
        window = 0   # no local layers: plain full attention
    if model_type == "qwen2" and not cfg.get("use_sliding_window", False):
        window, full_layers = 0, layers
    spec = ModelSpec(
        name=name,
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        intermediate=_get(cfg, ("intermediate_size", "ffn_hidden_size"), path),
        vocab=_get(cfg, ("vocab_size",), path),
        experts_total=experts,
        experts_active=_get(cfg, ("num_experts_per_tok", "moe_topk"), path, 0) if experts else 0,
        experts_shared=_get(cfg, ("n_shared_experts", "num_shared_experts"), path, 0) if experts else 0,
        # Mixtral-style configs give the expert width as intermediate_size
        moe_intermediate=_get(cfg, ("moe_intermediate_size",), path, cfg.get("intermediate_size", 0)) if experts else 0,
        first_k_dense=_get(cfg, ("first_k_dense_replace",), path, 0) if experts else 0,
        attention="mla" if mla else "gqa",
        kv_lora_rank=_get(cfg, ("kv_lora_rank",), path, 0) if mla else 0,
        q_lora_rank=(_get(cfg, ("q_lora_rank",), path, 0) or 0) if mla else 0,
        qk_nope_head_dim=_get(cfg, ("qk_nope_head_dim",), path, 0) if mla else 0,
        qk_rope_head_dim=_get(cfg, ("qk_rope_head_dim",), path, 0) if mla else 0,
        v_head_dim=_get(cfg, ("v_head_dim",), path, 0) if mla else 0,
        qkv_bias=bool(cfg.get("attention_bias", model_type == "qwen2")),
        qk_norm=model_type in ("exaone_moe", "exaone4", "qwen3", "qwen3_moe"),
        sliding_window=window,
        max_position_embeddings=_get(cfg, ("max_position_embeddings", "n_positions"), path, 0),
        full_attention_layers=full_layers,
        weight_dtype=weight_dtype,
        fp8_scope=extra.get("fp8_scope", "all"),
        bf16_ffn_layers=int(extra.get("bf16_ffn_layers", 0)),
        tie_embeddings=_get(cfg, ("tie_word_embeddings",), path, False, kind=bool),
        tokenizer_family=extra.get("tokenizer_family") or _FAMILIES.get(model_type, model_type or "unknown"),
        published_params_b=extra.get("published_params_b"),
        source=extra.get("source", f"config.json at {path}"),
        assumptions=extra.get("assumptions", ""),
    )
    if spec.is_moe and not 0 < spec.experts_active <= spec.experts_total:
        raise InputError(f"num_experts_per_tok must be in 1..{spec.experts_total}", path=path,
                         field="num_experts_per_tok")
    if spec.is_moe and (spec.experts_active == 0 or spec.moe_intermediate == 0):
        raise InputError("MoE config needs num_experts_per_tok and moe_intermediate_size", path=path,
                         field="num_experts_per_tok")
    if spec.fp8_scope not in ("all", "ffn"):
        raise InputError("fp8_scope must be 'all' or 'ffn'", path=path, field="fp8_scope")
    return spec


def _load_json(path: Path | str, text: str | None = None) -> Any:
    """Parse a model JSON (a file, or its `text`) through simkit.jsonfile: any reason it cannot be
    read (binary, too deeply nested, a huge number, not JSON) is an InputError naming the file."""
    from simkit.jsonfile import parse_json, read_json_file

    return read_json_file(path) if text is None else parse_json(text, path)


def model_from_config_json(path: str | Path, name: str | None = None) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json (the file users add their own models with)."""
    path = Path(path)
    cfg = _load_json(path)
    if isinstance(cfg, dict) and "hf_config" in cfg:   # simkit catalogue wrapper format
        return spec_from_config(cfg["hf_config"], name or cfg.get("name", path.stem), str(path), cfg)
    return spec_from_config(cfg, name or path.parent.name or path.stem, str(path))


@lru_cache(maxsize=1)
def _catalog() -> dict[str, ModelSpec]:
    """Every embedded model (simkit/data/models/*.json), by id."""
    out: dict[str, ModelSpec] = {}
    for entry in sorted(resources.files("simkit.data").joinpath("models").iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".json"):
            continue
        doc = _load_json(f"simkit/data/models/{entry.name}", entry.read_text())
        name = doc.get("name") or entry.name[:-5]
        out[name] = spec_from_config(doc["hf_config"], name, f"simkit/data/models/{entry.name}", doc)
    return out


def list_models() -> list[str]:
    """Ids of the embedded models, sorted."""
    return sorted(_catalog())


def canonical_model(name: str) -> str:
    """The catalogue id of `name` matched case-insensitively (Llama-3.1-8B -> llama-3.1-8b),
    else `name` as given (a config.json path or an unknown name, which get_model refuses)."""
    if name in _catalog():
        return name
    by_lower = {k.lower(): k for k in _catalog()}
    return by_lower.get(str(name).lower(), name)


def get_model(name: str) -> ModelSpec:
    """An embedded model by id (case-insensitive), or a model read from a config.json path."""
    cat = _catalog()
    name = canonical_model(name)
    if name in cat:
        return cat[name]
    if name.endswith(".json") and Path(name).is_file():
        return model_from_config_json(name)
    raise UnknownNameError("model", name, list(cat))


def param_error(spec: ModelSpec) -> float | None:
    """Relative difference of our parameter count from the published total (None if none)."""
    if not spec.published_params_b:
        return None
    return spec.param_count() / (spec.published_params_b * 1e9) - 1.0


__all__ = ["ModelSpec", "canonical_model", "get_model", "list_models", "model_from_config_json", "param_error",
           "spec_from_config", "DTYPE_BYTES"]

