"""The settings line of predict's recommendation (simkit.report.settings): the exact
--speculative-config for each kind of configuration on each vLLM, what is no vLLM setting, and
the load the recommendation holds for."""

from __future__ import annotations

import json
import shlex
import textwrap
from types import SimpleNamespace

from simkit.engine.config import parse_configs
from simkit.report.settings import NO_SPEC, deploy_settings, settings_lines


def _pred(configs: str, version: str, tok_s: dict[str, float], *, concurrency: int = 32,
          rate: float | None = None):
    specs = tuple(parse_configs(configs, version))
    rows = [SimpleNamespace(config=s.name, output_tok_s=tok_s.get(s.name, 1.0)) for s in specs]
    return SimpleNamespace(specs=specs, rows=rows, vllm_version=version,
                           concurrency=concurrency, request_rate=rate)


def _json_of(args: str) -> dict:
    words = shlex.split(args)
    assert words[0] == "--speculative-config" and len(words) == 2
    return json.loads(words[1])


def test_034_fixed_k_is_the_method_and_k():
    s = deploy_settings(_pred("vanilla,suffix:4", "0.34", {}), "suffix-4")
    assert s["not_a_setting"] is None
    assert _json_of(s["serve_args"]) == {"method": "suffix", "num_speculative_tokens": 4}
    assert s["line"] == "add to vllm serve: " + s["serve_args"]


def test_vanilla_runs_without_speculative_config():
    s = deploy_settings(_pred("vanilla,suffix:4", "0.34", {}), "vanilla")
    assert s["line"] == NO_SPEC and s["serve_args"] is None and s["speculative_config"] is None


def test_034_ktable_carries_its_ranges_and_largest_k():
    p = _pred("vanilla,ktable:1-16=8/17-64=4/65-1024=0", "0.34", {})
    name = p.specs[1].name
    cfg = _json_of(deploy_settings(p, name)["serve_args"])
    assert cfg == {"method": "suffix", "num_speculative_tokens": 8,
                   "num_speculative_tokens_per_batch_size": [[1, 16, 8], [17, 64, 4],
                                                             [65, 1024, 0]]}


def test_033_kpad_needs_the_plugin_and_says_so():
    s = deploy_settings(_pred("vanilla,kpad:8", "0.33", {}), "kpad-8")
    assert "not a vLLM 0.33 setting" in s["line"] and "scheduler plugin" in s["line"]
    assert _json_of(s["serve_args"]) == {"method": "suffix", "num_speculative_tokens": 8}
    plain = deploy_settings(_pred("vanilla,suffix", "0.33", {}), "suffix")
    assert plain["not_a_setting"] is None
    assert _json_of(plain["serve_args"]) == {"method": "suffix", "num_speculative_tokens": 24}


def test_dynamic_policy_is_no_setting_and_names_the_fastest_one_that_is():
    p = _pred("vanilla,suffix:4,6,dynamic-table", "0.34",
              {"vanilla": 1.0, "suffix-4": 3.0, "suffix-6": 2.0, "dynamic-table": 4.0})
    s = deploy_settings(p, "dynamic-table")
    assert s["speculative_config"] is None and s["serve_args"] is None
    assert "not a setting of vLLM 0.34" in s["line"]
    assert s["alternative"]["config"] == "suffix-4"
    lines = settings_lines(s)
    assert any("suffix-4" in ln and "--speculative-config" in ln for ln in lines)


def test_wrapped_text_pastes_to_the_same_json():
    p = _pred("vanilla,ktable:1-8=12/9-32=8/33-96=4/97-1024=2", "0.34", {})
    s = deploy_settings(p, p.specs[1].name)
    text = settings_lines(s, breakable=True)[0]
    wrapped = textwrap.wrap(text, 100, subsequent_indent="  ", break_long_words=False)
    assert len(wrapped) > 1 and all(len(ln) <= 100 for ln in wrapped)
    pasted = "\n".join(wrapped)
    quoted = pasted[pasted.index("'"):pasted.rindex("'") + 1]
    assert json.loads(shlex.split(quoted)[0]) == s["speculative_config"]


def test_holds_for_names_the_load_and_the_whatifs_of_that_version():
    s34 = deploy_settings(_pred("vanilla,suffix:4", "0.34", {}, concurrency=64), "suffix-4")
    assert "concurrency 64" in s34["holds_for"] and "whatif ktable" in s34["holds_for"]
    s33 = deploy_settings(_pred("vanilla,suffix", "0.33", {}, rate=6.0), "suffix")
    assert "6 req/s" in s33["holds_for"] and "whatif concurrency" in s33["holds_for"]
    assert "ktable" not in s33["holds_for"]


def test_unknown_config_gives_no_settings():
    assert deploy_settings(_pred("vanilla", "0.34", {}), None) is None
    assert deploy_settings(_pred("vanilla", "0.34", {}), "nosuch") is None


def test_adaptive_verification_is_written_for_a_config_that_runs_it():
    """A configuration with adaptive verification on (SpecConfig.adaptive, suffix-av) gets
    enable_adaptive_verification in its JSON; one without the flag does not."""
    from simkit.report.settings import settings_of
    from simkit.report.deploy import speculative_config

    base = parse_configs("suffix", "0.34")[0]
    av = SimpleNamespace(name="suffix-av", drafter=base.drafter, k=base.k, k_table=(),
                         policy=None, pad=False, speculative=True, adaptive=True)
    assert speculative_config(settings_of(av)) == {
        "method": "suffix", "num_speculative_tokens": 8, "enable_adaptive_verification": True}
    assert "enable_adaptive_verification" not in speculative_config(settings_of(base))


def test_026_ngram_is_its_method_and_its_kpad_needs_the_plugin():
    p = _pred("vanilla,ngram:4,ngram-kpad:4", "0.26", {})
    plain = deploy_settings(p, p.specs[1].name)
    assert plain["not_a_setting"] is None
    assert _json_of(plain["serve_args"]) == {"method": "ngram", "num_speculative_tokens": 4}
    padded = deploy_settings(p, p.specs[2].name)
    assert "scheduler plugin" in padded["not_a_setting"]
    assert _json_of(padded["serve_args"]) == {"method": "ngram", "num_speculative_tokens": 4}
