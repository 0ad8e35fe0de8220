"""`simkit models list/show` and `simkit hardware list/show`: the catalogues, as tables or JSON."""

from __future__ import annotations

import json
from typing import Any

import typer

from simkit.choices import OutputFormat
from simkit.commands.options import format_option

Format = format_option("-f")            # the catalogue commands also take -f
WIDE_OPT = typer.Option(False, "--wide", help="every column at its full width (the table is "
                        "100 columns wide by default)")
DEFAULT_TP_HW = ("h200", "b200")


def _deployment(name: Any, gmu: float = 0.85, max_model_len: int = 16384) -> dict[str, Any]:
    """Default TP (smallest with a useful KV cache at gmu, max_model_len) and the KV capacity it
    leaves, on each hardware of DEFAULT_TP_HW."""
    from simkit.costmodel.memory import choose_tp, kv_capacity_tokens, max_concurrent_seqs
    from simkit.errors import InputError

    out = {}
    for hw in DEFAULT_TP_HW:
        try:
            tp = choose_tp(name, hw, gmu=gmu, max_model_len=max_model_len)
        except InputError as exc:
            out[hw] = {"tp": None, "why": str(exc)}
            continue
        out[hw] = {"tp": tp, "gmu": gmu, "kv_capacity_tokens": kv_capacity_tokens(name, hw, tp, gmu),
                   "max_model_len": max_model_len,
                   "max_seqs_at_max_model_len": max_concurrent_seqs(name, hw, tp, max_model_len, gmu)}
    return out


def _emit_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=True))


def _models_list(fmt: OutputFormat, wide: bool = False) -> None:
    from simkit.catalog.models import get_model, list_models

    rows = []
    for name in list_models():
        m = get_model(name)
        dep = _deployment(name)
        rows.append({"name": name, "params_b": round(m.param_count() / 1e9, 2),
                     "active_params_b": round(m.active_params() / 1e9, 2), "attention": m.attention,
                     "moe": f"{m.experts_active}/{m.experts_total}+{m.experts_shared}" if m.is_moe else "",
                     "weight_dtype": m.weight_dtype, "kv_bytes_per_token": m.kv_bytes_per_token(1),
                     "tp_h200": dep["h200"]["tp"], "tp_b200": dep["b200"]["tp"],
                     "tokenizer_family": m.tokenizer_family})
    if fmt is OutputFormat.JSON:
        _emit_json(rows)
        return
    headers = ["model", "params", "active", "attn", "MoE k/E+shared", "dtype", "KV B/token",
               "TP h200", "TP b200", "tokenizer"]
    cells = [[r["name"], f"{r['params_b']:.2f}B", f"{r['active_params_b']:.2f}B", r["attention"],
              r["moe"], r["weight_dtype"], f"{r['kv_bytes_per_token']:,.0f}", str(r["tp_h200"]),
              str(r["tp_b200"]), r["tokenizer_family"]] for r in rows]
    _echo_table("simkit models (TP: smallest with a useful KV cache at gmu 0.85, max_model_len "
                "16384)", headers, cells, ("model", "attn", "MoE k/E+shared", "dtype", "tokenizer"),
                wide, priority=[0, 1, 2, 4, 5, 6, 7, 8, 3, 9])


def _echo_table(title: str, headers: list[str], cells: list[list[str]], left: tuple[str, ...],
                wide: bool, priority: list[int] | None = None) -> None:
    """A catalogue table as text: 100 columns unless --wide (fit_columns keeps the columns that
    fit, in `priority` order, and the line under the table names the others)."""
    from simkit.report.fit import (WIDE, WIDTH, fit_columns, more_columns_line,
                                   render_text_table, wrap_prose)

    width = WIDE if wide else WIDTH
    kept = fit_columns(headers, cells, width, priority)
    lines = wrap_prose(title, width)
    table = render_text_table([headers[i] for i in kept], [[row[i] for i in kept] for row in cells],
                              left, width)
    lines.append(table.rstrip("\n"))
    lines += more_columns_line([h for i, h in enumerate(headers) if i not in kept], width)
    typer.echo("\n".join(lines))


def _models_show(name: str, fmt: OutputFormat, gmu: float = 0.85, max_model_len: int = 16384) -> None:
    from simkit.catalog.models import get_model, param_error

    m = get_model(name)
    doc = m.summary()
    doc["param_error_vs_published"] = param_error(m)
    doc["default_deployment"] = _deployment(m, gmu, max_model_len)
    if fmt is OutputFormat.JSON:
        _emit_json(doc)
        return
    err = doc["param_error_vs_published"]
    lines = [
        f"model            {m.name}",
        f"architecture     {m.layers} layers, hidden {m.hidden}, {m.heads} heads / {m.kv_heads} KV heads "
        f"(head dim {m.head_dim}), FFN {m.intermediate}, vocab {m.vocab:,}",
        f"attention        {m.attention}" + (f" (kv_lora_rank {m.kv_lora_rank}, rope dim {m.qk_rope_head_dim})"
                                              if m.attention == "mla" else "")
        + (f", sliding window {m.sliding_window} on {m.layers - m.full_attention_layers} layers"
           if m.sliding_window else ""),
    ]
    if m.is_moe:
        lines.append(f"experts          {m.experts_total} routed, {m.experts_active} active, {m.experts_shared} "
                     f"shared, width {m.moe_intermediate}, first {m.first_k_dense} layer(s) dense")
    lines += [
        f"weights          {m.weight_dtype}" + (f" (FFN only, {m.bf16_ffn_layers} FFN layers bf16)"
                                                if m.weight_dtype == "fp8" and m.fp8_scope == "ffn" else "")
        + f", {doc['weight_gib']} GiB",
        f"parameters       {doc['params_b']}B total, {doc['active_params_b']}B active"
        + (f"; published {m.published_params_b}B ({err * 100:+.2f}%)" if err is not None else ""),
        f"KV bytes/token   {m.kv_bytes_per_token(1):,.0f} (TP 1, bf16 cache)",
        f"tokenizer        {m.tokenizer_family}",
    ]
    for hw, d in doc["default_deployment"].items():
        if d["tp"] is None:
            lines.append(f"default TP {hw:5s} none: {d['why']}")
        else:
            lines.append(f"default TP {hw:5s} {d['tp']} (gmu {gmu}: KV capacity {d['kv_capacity_tokens']:,} "
                         f"tokens, {d['max_seqs_at_max_model_len']} sequences of {max_model_len})")
    lines.append(f"source           {m.source}")
    if m.assumptions:
        lines.append(f"assumptions      {m.assumptions}")
    from simkit.report.fit import wrap_field

    label = len("default TP h200  ")       # every label above is padded to this width
    typer.echo("\n".join(out for ln in lines for out in wrap_field(ln[:label], ln[label:], label)))


def _hardware_list(fmt: OutputFormat, wide: bool = False) -> None:
    from simkit.catalog.hardware import get_hardware, list_hardware
    from simkit.costmodel.calibrations import default_calibration

    rows = [get_hardware(n).summary() for n in list_hardware()]
    for r in rows:
        name = default_calibration(r["name"])
        r["cost_model"] = f"calibrated {name}" if name else "analytic"
    if fmt is OutputFormat.JSON:
        _emit_json(rows)
        return
    headers = ["name", "HBM GiB", "HBM TB/s", "bf16 TF", "fp8 TF", "fp4 TF", "NVLink GB/s",
               "host speed", "values", "default cost model"]
    cells = [[r["name"], f"{r['hbm_gib']:.1f}", f"{r['hbm_tbps']:g}", f"{r['bf16_tflops']:g}",
              f"{r['fp8_tflops']:g}", f"{r['fp4_tflops']:g}", f"{r['nvlink_gbps']:g}",
              f"{r['host_speed']:g}", r["label"], r["cost_model"]] for r in rows]
    _echo_table("simkit hardware (per GPU; dense tensor-core peaks)", headers, cells,
                ("name", "values", "default cost model"), wide)


def _hardware_show(name: str, fmt: OutputFormat) -> None:
    from simkit.catalog.hardware import get_hardware
    from simkit.costmodel.calibrations import default_calibration

    doc = get_hardware(name).summary()
    calibration = default_calibration(doc["name"])
    doc["default_cost_model"] = f"calibrated {calibration}" if calibration else "analytic"
    if fmt is OutputFormat.JSON:
        _emit_json(doc)
        return
    from simkit.report.fit import wrap_field

    width = max(len(k) for k in doc) + 2
    typer.echo("\n".join(ln for k, v in doc.items() for ln in wrap_field(k, v, width)))


def register(app: typer.Typer) -> None:
    """Add the `models` and `hardware` command groups to the root app."""
    models = typer.Typer(help="The model catalogue (architecture facts with sources).", no_args_is_help=True)
    hardware = typer.Typer(help="The hardware catalogue (datasheet values unless calibrated).", no_args_is_help=True)

    @models.command("list")
    def models_list(fmt: Format = OutputFormat.TABLE, wide: bool = WIDE_OPT) -> None:
        """Every catalogue model: parameters, attention, MoE, KV bytes per token, default TP."""
        _models_list(fmt, wide)

    @models.command("show")
    def models_show(name: str = typer.Argument(..., help="model id, or a path to a HF config.json"),
                    fmt: Format = OutputFormat.TABLE,
                    gmu: float = typer.Option(0.85, "--gmu", help="gpu_memory_utilization for "
                                              "the default TP, in (0, 1]"),
                    max_model_len: int = typer.Option(16384, "--max-model-len",
                                                      help="max_model_len for the default TP "
                                                           "(KV cache must hold one such request)")) -> None:
        """One model: architecture, parameters, KV bytes/token, default TP on h200/b200, source, assumptions."""
        from simkit.checks import positive_int
        from simkit.errors import InputError

        if not 0 < gmu <= 1:                     # checked here, not by a range type: --help stays narrow
            raise InputError(f"gpu_memory_utilization must be in (0, 1], got {gmu}", field="gmu")
        positive_int(max_model_len, "max-model-len")
        from simkit.serving_checks import check_context

        check_context(name, max_model_len)       # vLLM refuses a context the model has not
        _models_show(name, fmt, gmu, max_model_len)

    @hardware.command("list")
    def hardware_list(fmt: Format = OutputFormat.TABLE, wide: bool = WIDE_OPT) -> None:
        """Every catalogue GPU with its datasheet (or calibrated) values."""
        _hardware_list(fmt, wide)

    @hardware.command("show")
    def hardware_show(name: str = typer.Argument(..., help="hardware id: b200, h200, h100"),
                      fmt: Format = OutputFormat.TABLE) -> None:
        """One GPU: memory, bandwidth, peaks, NVLink, host speed factor, source, calibration."""
        _hardware_show(name, fmt)

    app.add_typer(models, name="models")
    app.add_typer(hardware, name="hardware")
