"""config.json of the catalogue architectures, so vLLM can build them with dummy weights.

Values are the public Hugging Face config.json of each Instruct model (architecture fields only;
no weights exist here, and timing does not depend on weight values).
"""

from __future__ import annotations

import json
from pathlib import Path

from simkit.errors import UnknownNameError

_LLAMA31_ROPE = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192, "rope_type": "llama3"}


def _llama31(hidden: int, inter: int, heads: int, layers: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False,
        "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
        "hidden_act": "silu", "hidden_size": hidden, "intermediate_size": inter,
        "num_attention_heads": heads, "num_key_value_heads": 8, "num_hidden_layers": layers,
        "head_dim": hidden // heads, "initializer_range": 0.02,
        "max_position_embeddings": 131072, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": dict(_LLAMA31_ROPE), "rope_theta": 500000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 128256,
    }


def _qwen25(hidden: int, inter: int, heads: int, kv: int, layers: int, window_layers: int) -> dict:
    return {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
        "hidden_act": "silu", "hidden_size": hidden, "intermediate_size": inter,
        "num_attention_heads": heads, "num_key_value_heads": kv, "num_hidden_layers": layers,
        "initializer_range": 0.02, "max_position_embeddings": 32768,
        "max_window_layers": window_layers, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 131072, "use_sliding_window": False, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 152064,
    }


CONFIGS: dict[str, dict] = {
    "llama-3.1-8b": _llama31(4096, 14336, 32, 32),
    "llama-3.1-70b": _llama31(8192, 28672, 64, 80),
    "qwen2.5-7b": _qwen25(3584, 18944, 28, 4, 28, 28),
    "qwen2.5-32b": _qwen25(5120, 27648, 40, 8, 64, 64),
}


def canonical(name: str) -> str:
    """Catalogue key for a model name ('Llama-3.1-8B' -> 'llama-3.1-8b')."""
    key = name.strip().lower().replace("meta-llama-", "").replace("-instruct", "")
    if key not in CONFIGS:
        raise UnknownNameError("model", name, list(CONFIGS))
    return key


def write_model_dir(name: str, out_dir: Path) -> Path:
    """Write <out_dir>/config.json for the named architecture; returns the directory."""
    cfg = CONFIGS[canonical(name)]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True) + "\n")
    return out_dir
