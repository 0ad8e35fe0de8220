"""`simkit traces list|show|import`: the real-trace corpora and user-imported traces."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from simkit.choices import OutputFormat, TraceFormat
from simkit.commands.options import Format
from simkit.errors import InputError

DEFAULT_MODEL = "llama-3.1-8b"


def _table_lines(headers: list[str], rows: list[list[str]], left: tuple[str, ...],
                 wide: bool = False) -> list[str]:
    """A table at most 100 columns wide (every column at --wide), cells never wrapped: the
    columns that do not fit are named under it."""
    from simkit.report.fit import WIDE, WIDTH, fit_columns, more_columns_line, render_text_table

    width = WIDE if wide else WIDTH
    kept = fit_columns(headers, rows, width)
    text = render_text_table([headers[i] for i in kept], [[r[i] for i in kept] for r in rows],
                             left, width)
    return [*text.rstrip("\n").split("\n"),
            *more_columns_line([h for i, h in enumerate(headers) if i not in kept], width)]


def _list(model: str, fmt: OutputFormat) -> None:
    from simkit.paths import require_traces_src
    from traces.corpora import CORPORA, MIX, MIX_PARTS, load_corpus
    from traces.stats import summary
    from traces.user import list_user_corpora

    require_traces_src("simkit traces list")       # counts come from the raw traces
    rows = [summary(load_corpus(c, model, progress=fmt is OutputFormat.TABLE)) for c in CORPORA]
    mix = load_corpus(MIX, model)
    rows.append(summary(mix) | {"proportions": {k: round(v, 4)
                                                for k, v in mix.proportions.items()}})
    for name in list_user_corpora():
        try:
            rows.append(summary(load_corpus(name, model)) | {"user": True})
        except InputError as exc:  # tokenized for another vocabulary: listed, not loadable
            rows.append({"corpus": name, "model": model, "user": True, "error": str(exc)})
    if fmt is OutputFormat.JSON:
        typer.echo(json.dumps({"model": model, "corpora": rows}, indent=2, ensure_ascii=False))
        return
    from simkit.report.fit import wrap_prose

    lines = [f"corpora for {model}"]
    lines += _table_lines(["corpus", "requests", "prompt tok", "output tok", "capped"],
                          [[r["corpus"], "-", "-", "-", "-"] if "error" in r else
                           [r["corpus"], str(r["requests"]), f"{r['prompt_tokens']:,}",
                            f"{r['output_tokens']:,}", _capped_cell(r)] for r in rows],
                          ("corpus", "capped"))
    lines.append("producing models (whose outputs each corpus replays):")
    for r in rows:
        lines += wrap_prose(f"{r['corpus']}: " + (", ".join(r["producers"]) if "producers" in r
                                                  else "-"), indent="  ", hang="    ")
    lines.append("proxy notes (where outputs are not the model's own):")
    for r in rows:
        lines += wrap_prose(f"{r['corpus']}: {r.get('proxy_note') or r.get('error')}",
                            indent="  ", hang="    ")
    shares = ", ".join(f"{k} {v:.1%}" for k, v in mix.proportions.items())
    left_out = [c for c in CORPORA if c not in MIX_PARTS]
    lines += wrap_prose(f"mix = {', '.join(MIX_PARTS)} shuffled together (seed fixed"
                        + (f"; {', '.join(left_out)} not included" if left_out else "")
                        + f"); proportions: {shares}")
    lines += wrap_prose(CAPPED_NOTE)
    typer.echo("\n".join(lines))


CAPPED_NOTE = ("capped = requests whose output stopped at its source run's generation cap "
               "(within 1 % of it; traces/caps.py), so its real length is unknown; "
               "'?' counts requests whose source states no cap. `traces show` gives each cap and "
               "its provenance; predict --capped-outputs keep|extend decides how they are replayed")


def _capped_cell(row: dict) -> str:
    """'n (share)' plus '+k?' when k requests come from a source without a known cap."""
    cell = f"{row['capped']} ({row['capped_share']:.1%})"
    return cell + (f" +{row['no_known_cap']}?" if row.get("no_known_cap") else "")


def _show(name: str, model: str, fmt: OutputFormat, wide: bool = False) -> None:
    from simkit.paths import require_traces_src
    from traces.corpora import CORPORA, MIX, load_corpus
    from traces.stats import detail

    if name in CORPORA or name == MIX:               # an imported one is in the cache
        require_traces_src("simkit traces show")
    d = detail(load_corpus(name, model, progress=fmt is OutputFormat.TABLE))
    if fmt is OutputFormat.JSON:
        typer.echo(json.dumps(d, indent=2, ensure_ascii=False))
        return
    from simkit.report.fit import wrap_prose

    lines = wrap_prose(f"{d['corpus']} for {d['model']} (tokenizer {d['tokenizer']}): "
                       f"{d['requests']} requests, {d['prompt_tokens']:,} prompt / "
                       f"{d['output_tokens']:,} output tokens")
    lines += wrap_prose(f"proxy note: {d['proxy_note']}")
    lines.append("length (tokens, every request as recorded: a run's max_tokens cuts outputs)")
    lines += _table_lines(["", "mean", "p50", "p90", "p99", "max"],
                          [[key.split("_")[0], *(f"{d[key][k]:g}" for k in ("mean", "p50", "p90",
                                                                             "p99", "max"))]
                           for key in ("prompt_len", "output_len")], ("",))
    lines.append("sources")
    lines += _table_lines(["source", "producer", "requests", "prompt tok", "output tok", "greedy",
                           "capped"],
                          [[b["source"], b["producer"], str(b["requests"]),
                            f"{b['prompt_tokens']:,}", f"{b['output_tokens']:,}",
                            f"{b['greedy_share']:.0%}", str(b["capped"]) if b["cap"] else "-"]
                           for b in d["breakdown"]], ("source", "producer"), wide)
    lines.append("cap of each source (its generation cap, and where that comes from):")
    for b in d["breakdown"]:
        cap = b["cap"]
        lines += wrap_prose(f"{b['source']} ({b['producer']}): " + (
            f"{cap['tokens']:,} {cap['scope']} ({cap['basis']}); {cap['provenance']}; capped = "
            f"length >= {b['capped_threshold']:,}" if cap else "unknown"), indent="  ",
            hang="    ")
    notes = [b for b in d["breakdown"] if b["note"]]
    if notes:
        lines.append("how each source's outputs were generated:")
        for b in notes:
            lines += wrap_prose(f"{b['source']}: {b['note']}", indent="  ", hang="    ")
    if d["proportions"]:
        lines += wrap_prose("proportions: " + ", ".join(f"{k} {v:.1%}" for k, v in
                                                        d["proportions"].items()))
    if len(d["turns"]) > 1:
        lines += wrap_prose("turns: " + ", ".join(f"{k}: {v}" for k, v in d["turns"].items()))
    if d["skipped"]:
        lines += wrap_prose("skipped: " + "; ".join(f"{k}: {v}" for k, v in
                                                    d["skipped"].items()))
    typer.echo("\n".join(lines))


def _nothing_read(path: Path, fmt: TraceFormat) -> str:
    """Why a file gave no record at all: it is empty, or its lines are not of this format (it
    used to be called empty either way)."""
    with path.open("rb") as fh:
        lines = sum(1 for line in fh if line.strip())
    if not lines:
        return f"no records: the file holds no {fmt} record (empty, or blank lines only)"
    return (f"no records: none of its {lines:,} non-blank line(s) holds a {fmt} record; is "
            "--format right?")


def _tokenizer(tokenizer: str | None, model: str | None, fmt: TraceFormat):
    """What --tokenizer/--model choose, checked before any work: (the family name, an own
    tokenizer loaded from its file, or None for token ids as given; the chat template's family)."""
    from traces.model_outputs import tokenizer_family
    from traces.own_tokenizer import is_tokenizer_path, load_own_tokenizer

    if tokenizer is None and model is None:
        if fmt == TraceFormat.TOKENS:           # an Enum, or its text
            return None, None
        raise InputError("give --tokenizer or --model to choose the tokenizer (--tokenizer: "
                         "your model's tokenizer file or folder, or a family: llama3, qwen, "
                         "r1-qwen, r1-llama)", field="tokenizer")
    template = tokenizer_family(model) if model is not None else None
    if tokenizer is None:
        return template, template
    if not is_tokenizer_path(tokenizer):
        if model is not None and tokenizer != template:
            raise InputError(f"--tokenizer {tokenizer} contradicts --model {model} (whose "
                             f"tokenizer is {template}); give one of them", field="tokenizer")
        return tokenizer, tokenizer
    if tokenizer == "":
        raise InputError("empty path", field="tokenizer")
    own = load_own_tokenizer(tokenizer, template)
    if model is not None:
        from simkit.catalog.models import get_model

        vocab = get_model(model).vocab
        if own.n_vocab > vocab:
            raise InputError(f"{own.path} has {own.n_vocab:,} tokens, more than {model}'s "
                             f"vocabulary ({vocab:,}): is it that model's tokenizer?",
                             field="tokenizer")
    return own, template


def _import(path: Path, fmt: TraceFormat, name: str, tokenizer: str | None, model: str | None,
            replace: bool = False) -> None:
    from traces.cache import file_digest
    from traces.model_outputs import model_outputs
    from traces.corpora import CORPORA, MIX
    from traces.importers import import_file, tokenizer_label
    from traces.user import (list_user_corpora, read_import_record, save_user_corpus,
                             user_corpus_path)

    if name in CORPORA or name == MIX:
        raise InputError(f"'{name}' is a built-in corpus; choose another name", field="name")
    user_corpus_path(name)  # validates the name before any work
    if model is not None:
        model_outputs(model)                         # an unknown model: before the tokenizer
    family, template = _tokenizer(tokenizer, model, fmt)
    if name in list_user_corpora() and not replace:
        old = read_import_record(name).get("path", "an earlier import")
        raise InputError(f"corpus '{name}' already exists (imported from {old}); pass --replace "
                         "to overwrite it, or choose another --name", field="name")
    producer = model_outputs(model).own if model else "unknown"
    block = import_file(path, fmt, family, producer, template)
    if len(block) == 0:
        if not block.skipped:                        # nothing was even read: say that
            raise InputError(_nothing_read(path, fmt), path=str(path))
        raise InputError("no usable records (skipped: "
                         + "; ".join(f"{k}: {v}" for k, v in block.skipped.items()) + ")",
                         path=str(path))
    from traces.context_limit import check_request_lengths

    check_request_lengths(block, str(path))
    record = {"path": str(path.resolve()), "sha256": file_digest(path), "format": str(fmt),
              "tokenizer": tokenizer_label(family), "model": model, "producer": producer}
    if family is not None and not isinstance(family, str):     # an own tokenizer file
        record |= {"tokenizer_file": str(family.path), "tokenizer_sha256": family.fingerprint,
                   "template": template or "plain"}
    replaced = save_user_corpus(name, block, record, replace=replace)   # under a name lock
    from simkit.report.fit import wrap_prose

    label = tokenizer_label(family)
    typer.echo("\n".join(wrap_prose(
        f"imported {len(block)} requests into corpus '{name}' (tokenizer {label}): "
        f"{len(block.prompt_tokens):,} prompt / {len(block.output_tokens):,} output tokens"
        + (" (replaced the earlier import)" if replaced else ""))))
    if family is not None and not isinstance(family, str):
        typer.echo("\n".join(wrap_prose(f"tokenizer: {family.describe()}")))
        typer.echo("\n".join(wrap_prose(
            "chat template: " + (f"{model}'s" if template else "plain ('role: content' lines; "
                                 "give --model for that model's template)"))))
    elif family is None:
        typer.echo("\n".join(wrap_prose("tokenizer: none (token ids as given; checked against "
                                         "the model's vocabulary when the corpus is used)")))
    typer.echo(f"stored in {user_corpus_path(name)}")       # a path: never wrapped
    from simkit.outfiles import wrote

    wrote(user_corpus_path(name))
    if block.skipped:
        typer.echo("\n".join(wrap_prose("skipped: " + "; ".join(f"{k}: {v}" for k, v in
                                                               block.skipped.items()))))
    else:
        typer.echo("skipped: none")


def register(app: typer.Typer) -> None:
    """Add the `traces` command group to the root app."""
    traces = typer.Typer(help="Real-trace corpora: list, show, import.", no_args_is_help=True)

    @traces.command("list")
    def list_cmd(
        model: str = typer.Option(DEFAULT_MODEL, "--model", help="simulated model id"),
        fmt: Format = OutputFormat.TABLE,
    ) -> None:
        """Corpora with request counts, token totals, producing models and proxy notes."""
        _list(model, fmt)

    @traces.command("show")
    def show_cmd(
        name: str = typer.Argument(..., help="corpus name (built-in or imported)"),
        model: str = typer.Option(DEFAULT_MODEL, "--model", help="simulated model id"),
        fmt: Format = OutputFormat.TABLE,
        wide: bool = typer.Option(False, "--wide", help="every column of the sources table (the "
                                  "text is 100 columns wide by default)"),
    ) -> None:
        """Prompt/output length percentiles and the source/producer breakdown of a corpus."""
        _show(name, model, fmt, wide)

    @traces.command("import")
    def import_cmd(
        path: Path = typer.Argument(..., help="trace file"),
        fmt: TraceFormat = typer.Option(..., "--format", metavar="FORMAT",
                                        help="openai, sharegpt, vllm-custom, tokens or vllm-log"),
        name: str = typer.Option(..., "--name", help="corpus name to store it under"),
        tokenizer: str = typer.Option(None, "--tokenizer", help="your model's tokenizer: a "
                                       "Hugging Face tokenizer folder or tokenizer.json, a "
                                       "tiktoken file, or a family: llama3, qwen, r1-qwen, "
                                       "r1-llama (default: the --model's; none needed for "
                                       "--format tokens)"),
        model: str = typer.Option(None, "--model", help="model id whose tokenizer (unless "
                                   "--tokenizer) and chat template to use (default: none)"),
        replace: bool = typer.Option(False, "--replace",
                                     help="overwrite an imported corpus of the same name"),
    ) -> None:
        """Tokenize a user trace file into a corpus stored in the user cache."""
        _import(path, fmt, name, tokenizer, model, replace)

    app.add_typer(traces, name="traces")
