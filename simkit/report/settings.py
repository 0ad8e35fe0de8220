"""The settings to deploy for a recommended configuration: what to add to `vllm serve` on the
user's vLLM (simkit.report.deploy writes the --speculative-config JSON), and the load the
recommendation holds for.

A configuration that vLLM cannot run from its own options (K-pad on 0.26/0.33, simkit's
dynamic-K policies) is named as such, never given a line that would run something else; the
best configuration that vLLM does run is then given as well.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from simkit.report.deploy import DeploySettings, serve_args, speculative_config, table_settings

if TYPE_CHECKING:                    # type hints only (no import cycle at run time)
    from simkit.app.predict import Prediction
    from simkit.engine.config import SpecConfig

NO_SPEC = "run without --speculative-config"


def adaptive_verification(spec: SpecConfig) -> bool:
    """Whether `spec` runs vLLM 0.34's enable_adaptive_verification: its `adaptive` flag (the
    suffix-av configurations of simkit.engine.config, where the engine models it; a config
    without the flag has it off)."""
    return bool(getattr(spec, "adaptive", False))


def not_a_setting(spec: SpecConfig, version_key: str) -> str | None:
    """Why `spec` is not a vLLM option on this version (None when it is one)."""
    if spec.policy is not None:
        return (f"{spec.name} is simkit's dynamic-K policy (one K per step for the whole batch), "
                f"not a setting of vLLM {version_key}")
    from simkit.catalog.vllm_versions import get_vllm_version

    if spec.pad and not spec.k_table and get_vllm_version(version_key).kpad == "padded":
        return (f"K-pad is not a vLLM {version_key} setting: it needs simkit's scheduler plugin "
                "(drafts padded to K in the scheduler); with the plugin, the method and K are")
    return None


def settings_of(spec: SpecConfig) -> DeploySettings:
    """The vLLM settings of a config (K-pad: the method and K the plugin pads to)."""
    if not spec.speculative:
        return DeploySettings(None)
    from simkit.drafters.base import NGRAM_DRAFTER

    method = "ngram" if spec.drafter == NGRAM_DRAFTER else "suffix"   # suffix: arctic's or GPU
    if spec.k_table:
        return table_settings(spec.k_table, method=method, adaptive=adaptive_verification(spec))
    return DeploySettings(method, spec.k, adaptive=adaptive_verification(spec))


def settings_text(s: DeploySettings, breakable: bool = False) -> str:
    """'add to vllm serve: --speculative-config '{...}'' or 'run without --speculative-config'
    (`breakable`: a space after each comma of the JSON, where a text wraps it; pasted, a line
    break inside the single quotes is JSON whitespace)."""
    args = serve_args(s)
    if breakable:
        args = args.replace(",", ", ")
    return f"add to vllm serve: {args}" if args else NO_SPEC


def holds_for(pred: Prediction) -> str:
    """The load the recommendation was simulated at, and where to look for other loads (the
    batch-size K table only where the version has one)."""
    from simkit.catalog.vllm_versions import get_vllm_version

    load = (f"{pred.request_rate:g} req/s (open loop)" if pred.request_rate else
            f"concurrency {pred.concurrency} (closed loop)")
    text = (f"this recommendation holds for {load}; the best K may differ at other loads: "
            "simkit whatif concurrency gives it per level")
    if not get_vllm_version(pred.vllm_version or None).batch_size_table:
        text += ", simkit whatif ktable a K per batch-size range across them"
    return text


def deploy_settings(pred: Prediction, config: str | None) -> dict[str, Any] | None:
    """{'config', 'vllm_version', 'speculative_config', 'serve_args', 'line', 'holds_for',
    'not_a_setting'} for the recommended `config` (None when nothing ran or its spec is
    unknown). 'serve_args' is the --speculative-config argument (None for no speculation or a
    dynamic-K policy); with 'not_a_setting' (K-pad) it runs only with simkit's scheduler plugin.
    For a dynamic-K policy, 'alternative' is the fastest row that vLLM runs from its options."""
    specs = {s.name: s for s in getattr(pred, "specs", ())}
    if config is None or config not in specs:
        return None
    from simkit.catalog.vllm_versions import get_vllm_version

    version = get_vllm_version(pred.vllm_version or None).key
    spec = specs[config]
    out = _entry(spec, version)
    out["holds_for"] = holds_for(pred)
    if out["not_a_setting"] and spec.policy is not None:
        alt = _best_setting(pred.rows, specs, version)
        if alt is not None:
            out["alternative"] = _entry(alt, version)
    return out


def _entry(spec: SpecConfig, version: str) -> dict[str, Any]:
    s = settings_of(spec)
    why = not_a_setting(spec, version)
    text = settings_text(s)
    if why and spec.policy is not None:
        line = why
    elif why:
        line = f"{why}: {serve_args(s)}"
    else:
        line = text
    cfg = None if spec.policy is not None else speculative_config(s)
    return {"config": spec.name, "vllm_version": version, "speculative_config": cfg,
            "serve_args": serve_args(s) if cfg else None, "line": line, "not_a_setting": why}


def _best_setting(rows: Sequence, specs: dict, version: str):
    """The spec of the fastest row that vLLM runs from its own options."""
    ok = [r for r in rows if r.config in specs and r.output_tok_s == r.output_tok_s
          and not_a_setting(specs[r.config], version) is None]
    if not ok:
        return None
    return specs[max(ok, key=lambda r: r.output_tok_s).config]


def settings_lines(settings: dict[str, Any] | None, breakable: bool = False) -> list[str]:
    """The report's lines (unwrapped): the settings, the alternative, the load it holds for.
    `breakable`: a space after each comma of the JSON, so that a text report can wrap it at
    100 columns (a line break inside the shell's single quotes is JSON whitespace: pasted, it
    parses to the same object)."""
    if not settings:
        return []
    v = settings["vllm_version"]

    def line(entry: dict[str, Any]) -> str:
        args = entry["serve_args"]
        if not (breakable and args):
            return entry["line"]
        return entry["line"].replace(args, args.replace(",", ", "))

    out = [f"settings on vLLM {v} for {settings['config']}: {line(settings)}"]
    alt = settings.get("alternative")
    if alt:
        out.append(f"the fastest configuration vLLM {v} runs from its own options here is "
                   f"{alt['config']}: {line(alt)}")
    out.append(settings["holds_for"])
    return out


__all__ = ["NO_SPEC", "adaptive_verification", "deploy_settings", "holds_for", "not_a_setting",
           "settings_lines", "settings_of", "settings_text"]
