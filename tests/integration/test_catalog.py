"""Model and hardware catalogues: sources, parameter arithmetic against published totals, KV bytes
per token, KV capacity at gmu 0.85, default TP, config.json import and the CLI commands."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from simkit.catalog.hardware import get_hardware, list_hardware
from simkit.catalog.models import get_model, list_models, model_from_config_json
from simkit.cli import app
from simkit.costmodel import choose_tp, kv_capacity_tokens, max_concurrent_seqs
from simkit.errors import InputError, UnknownNameError

MODEL_IDS = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b-fp8", "qwen2.5-7b", "qwen2.5-32b", "qwen2.5-72b",
             "ds-r1-distill-qwen-7b", "ds-r1-distill-qwen-32b", "ds-r1-distill-llama-70b", "deepseek-r1",
             "k-exaone-236b"]
# published totals the issue names (billions)
PUBLISHED = {"llama-3.1-8b": 8.03, "llama-3.1-70b": 70.6, "llama-3.1-405b-fp8": 405.0, "qwen2.5-7b": 7.62,
             "qwen2.5-32b": 32.8, "qwen2.5-72b": 72.7, "deepseek-r1": 671.0, "k-exaone-236b": 236.0,
             "ds-r1-distill-qwen-7b": 7.62, "ds-r1-distill-qwen-32b": 32.8, "ds-r1-distill-llama-70b": 70.6}


def test_catalogue_holds_every_model_of_the_study():
    assert sorted(list_models()) == sorted(MODEL_IDS)


@pytest.mark.parametrize("name", MODEL_IDS)
def test_parameter_count_within_2_percent_of_published(name):
    m = get_model(name)
    assert abs(m.param_count() / (PUBLISHED[name] * 1e9) - 1) < 0.02, m.param_count()


@pytest.mark.parametrize("name", MODEL_IDS)
def test_every_entry_cites_a_public_source(name):
    m = get_model(name)
    assert m.source.startswith("https://"), m.source
    assert m.tokenizer_family


def test_facts_that_are_not_public_are_stated_as_assumptions():
    assert "assumed bf16" in get_model("k-exaone-236b").assumptions.lower()
    assert "assumed" in get_model("llama-3.1-405b-fp8").assumptions.lower()


def test_moe_active_parameters_match_published_active_counts():
    # DeepSeek-V3/R1: 37B activated; K-EXAONE: 23B activated (model cards)
    assert abs(get_model("deepseek-r1").active_params() / 37e9 - 1) < 0.03
    assert abs(get_model("k-exaone-236b").active_params() / 23e9 - 1) < 0.03


def test_kv_bytes_per_token_by_hand():
    # GQA: 2 (K and V) x layers x kv_heads x head_dim x 2 bytes
    assert get_model("llama-3.1-8b").kv_bytes_per_token(1) == 2 * 32 * 8 * 128 * 2 == 131072
    assert get_model("qwen2.5-7b").kv_bytes_per_token(1) == 2 * 28 * 4 * 128 * 2
    assert get_model("llama-3.1-70b").kv_bytes_per_token(2) == 2 * 80 * 4 * 128 * 2
    # more GPUs than KV heads: each GPU keeps one (replicated) head
    assert get_model("qwen2.5-7b").kv_bytes_per_token(8) == 2 * 28 * 1 * 128 * 2
    # MLA: (kv_lora_rank + rope dim) x layers x 2 bytes, the same on every TP rank
    assert get_model("deepseek-r1").kv_bytes_per_token(1) == (512 + 64) * 61 * 2
    assert get_model("deepseek-r1").kv_bytes_per_token(8) == (512 + 64) * 61 * 2
    # K-EXAONE: only the 12 global layers grow with context; 36 local layers hold 128 tokens
    ex = get_model("k-exaone-236b")
    assert ex.kv_bytes_per_token(1) == 12 * 2 * 8 * 128 * 2
    assert ex.kv_bytes_window_per_seq(10_000, 1) == 36 * 128 * 2 * 8 * 128 * 2
    assert ex.kv_bytes_window_per_seq(100, 1) == 36 * 100 * 2 * 8 * 128 * 2


def test_kv_capacity_llama8b_h200_at_gmu_085_by_hand():
    # budget = 0.85 x 143,771 MiB - bf16 weights - reserve (2 GiB fixed + activations of an
    # 8192-token profiling batch + fp32 logits/probs of 1024 sampler rows); 128 KiB per token
    weights = 8_030_261_248 * 2
    act = 8192 * 2 * (4 * 4096 + 2 * 14336 + (32 + 2 * 8) * 128)
    logits = 1024 * 128256 * 4 * 2
    budget = 0.85 * 143771 * 2**20 - weights - 2 * 2**30 - act - logits
    expect = int(budget // 131072) // 16 * 16
    assert get_model("llama-3.1-8b").param_count() == 8_030_261_248
    assert kv_capacity_tokens("llama-3.1-8b", "h200", 1, 0.85) == expect
    assert 800_000 < expect < 850_000


def test_capacity_grows_with_gmu_and_tp_and_bounds_concurrency():
    a = kv_capacity_tokens("qwen2.5-32b", "h200", 1, 0.80)
    b = kv_capacity_tokens("qwen2.5-32b", "h200", 1, 0.90)
    c = kv_capacity_tokens("qwen2.5-32b", "h200", 2, 0.90)
    assert a < b < c
    seqs = max_concurrent_seqs("qwen2.5-32b", "h200", 1, 16384)
    assert seqs * 16384 <= kv_capacity_tokens("qwen2.5-32b", "h200", 1) < (seqs + 1) * 16384
    assert kv_capacity_tokens("llama-3.1-70b", "h200", 1) == 0   # 131 GiB of weights do not fit 0.85 x 141 GB


@pytest.mark.parametrize("name,hw,tp", [
    ("llama-3.1-8b", "h200", 1), ("qwen2.5-32b", "h200", 1), ("llama-3.1-70b", "h200", 2),
    ("qwen2.5-72b", "b200", 2), ("llama-3.1-70b", "h100", 4), ("llama-3.1-405b-fp8", "b200", 4),
    ("llama-3.1-405b-fp8", "h200", 8), ("deepseek-r1", "b200", 8), ("k-exaone-236b", "b200", 4)])
def test_default_tp_is_the_smallest_with_a_useful_kv_cache(name, hw, tp):
    assert choose_tp(name, hw) == tp
    need = max(16384, 32 * 16384 // 4)
    assert kv_capacity_tokens(name, hw, tp) >= need
    smaller = [t for t in (1, 2, 4, 8) if t < tp]
    assert all(kv_capacity_tokens(name, hw, t) < need for t in smaller)


def test_models_that_cannot_fit_say_so():
    with pytest.raises(InputError, match="does not fit"):
        choose_tp("deepseek-r1", "h100")


LLAMA8B_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                  "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
                  "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
                  "rope_theta": 500000.0, "torch_dtype": "bfloat16"}


def test_config_json_import_matches_the_catalogue(tmp_path):
    path = tmp_path / "my-llama" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(LLAMA8B_CONFIG, indent=2))
    m = model_from_config_json(path)
    ref = get_model("llama-3.1-8b")
    assert m.name == "my-llama"
    assert m.param_count() == ref.param_count()
    assert m.kv_bytes_per_token(1) == ref.kv_bytes_per_token(1)
    assert (m.head_dim, m.tokenizer_family, m.attention) == (128, "llama3", "gqa")
    assert get_model(str(path)).param_count() == ref.param_count()


def test_config_json_errors_name_file_line_and_field(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{\n  "hidden_size": 4096,\n  "num_hidden_layers": 32,\n  oops\n}')
    with pytest.raises(InputError) as exc:
        model_from_config_json(bad)
    assert str(bad) in str(exc.value) and "line 4" in str(exc.value)
    cfg = dict(LLAMA8B_CONFIG)
    del cfg["vocab_size"]
    bad.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="field 'vocab_size'"):
        model_from_config_json(bad)
    cfg["vocab_size"] = "lots"
    bad.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="expected an integer"):
        model_from_config_json(bad)


def test_hardware_catalogue():
    assert list_hardware() == ["b200", "h100", "h200"]
    h200 = get_hardware("H200")
    assert h200.label == "datasheet" and h200.source
    assert get_hardware("b200").hbm_tbps > h200.hbm_tbps > get_hardware("h100").hbm_tbps
    assert get_hardware("b200").peak_flops("fp4") == 9e15
    with pytest.raises(InputError, match="no fp4"):
        h200.peak_flops("fp4")
    with pytest.raises(UnknownNameError, match="known: b200, h100, h200"):
        get_hardware("a100")


def test_cli_models_and_hardware_json():
    runner = CliRunner()
    res = runner.invoke(app, ["models", "list", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert sorted(r["name"] for r in rows) == sorted(MODEL_IDS)
    assert {r["name"]: r["tp_h200"] for r in rows}["llama-3.1-70b"] == 2
    res = runner.invoke(app, ["models", "show", "deepseek-r1", "--format", "json"])
    doc = json.loads(res.stdout)
    assert doc["attention"] == "mla" and doc["default_deployment"]["b200"]["tp"] == 8
    assert abs(doc["param_error_vs_published"]) < 0.02
    res = runner.invoke(app, ["models", "show", "k-exaone-236b"])
    assert "assumptions" in res.stdout and "default TP b200  4" in res.stdout
    res = runner.invoke(app, ["hardware", "show", "h200", "--format", "json"])
    assert json.loads(res.stdout)["label"] == "datasheet"
    res = runner.invoke(app, ["hardware", "list"])
    assert res.exit_code == 0 and "b200" in res.stdout


def test_cli_unknown_name_is_one_line_exit_2():
    res = subprocess.run([sys.executable, "-m", "simkit", "models", "show", "gpt-9"], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error: unknown model 'gpt-9'")
    assert len(res.stderr.strip().splitlines()) == 1


def test_mixtral_style_config_uses_intermediate_size_as_expert_width(tmp_path):
    # Mixtral-8x7B public config facts; published total 46.7B
    cfg = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
           "vocab_size": 32000, "tie_word_embeddings": False}
    path = tmp_path / "mixtral" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    m = model_from_config_json(path)
    assert (m.experts_total, m.experts_active, m.moe_intermediate, m.moe_layers) == (8, 2, 14336, 32)
    assert abs(m.param_count() / 46.7e9 - 1) < 0.01
    assert abs(m.active_params() / 12.9e9 - 1) < 0.02
    cfg["num_experts_per_tok"] = 9
    path.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="num_experts_per_tok"):
        model_from_config_json(path)


def test_user_hardware_from_json(tmp_path):
    doc = get_hardware("h200").summary()
    doc = {k: v for k, v in doc.items() if k not in ("label", "name")}
    doc["hbm_tbps"] = 5.5
    path = tmp_path / "h200-oc.json"
    path.write_text(json.dumps(doc))
    hw = get_hardware(str(path))
    assert hw.name == "h200-oc" and hw.hbm_tbps == 5.5
    del doc["nvlink_gbps"]
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="field 'nvlink_gbps'"):
        get_hardware(str(path))


def test_higher_gmu_never_needs_more_gpus():
    for name in MODEL_IDS:
        for hw in ("h200", "b200"):
            try:
                low = choose_tp(name, hw, gmu=0.80)
            except InputError:
                continue
            assert choose_tp(name, hw, gmu=0.95) <= low


def test_fp8_scope_read_from_modules_left_unquantized(tmp_path):
    # the shape of Meta's fbgemm_fp8 405B config: attention of every layer and the FFN of the first
    # and last layer are listed as not converted
    skip = [f"model.layers.{i}.self_attn.{p}_proj" for i in range(126) for p in "qkvo"]
    skip += [f"model.layers.{i}.mlp.{p}_proj" for i in (0, 125) for p in ("gate", "up", "down")] + ["lm_head"]
    cfg = dict(LLAMA8B_CONFIG, hidden_size=16384, intermediate_size=53248, num_hidden_layers=126,
               num_attention_heads=128, quantization_config={"quant_method": "fbgemm_fp8",
                                                            "modules_to_not_convert": skip})
    path = tmp_path / "405b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    m = model_from_config_json(path)
    ref = get_model("llama-3.1-405b-fp8")
    assert (m.weight_dtype, m.fp8_scope, m.bf16_ffn_layers) == ("fp8", "ffn", 2)
    assert m.weight_bytes() == ref.weight_bytes()
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "type": "float", "num_bits": 8}}}, "format": "float-quantized", "ignore": ["lm_head"],
        "quant_algo": "FP8"}
    path.write_text(json.dumps(cfg))
    full = model_from_config_json(path)
    assert (full.weight_dtype, full.fp8_scope) == ("fp8", "all")
    assert ref.weight_bytes() - full.weight_bytes() > 60e9     # attention in fp8 too
