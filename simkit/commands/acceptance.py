"""`simkit acceptance` (per-K acceptance statistics from exact replay) and `simkit profiles build|list`."""

from __future__ import annotations

import json
from typing import Any, List, Optional

import typer

from simkit.choices import Ordering, OutputFormat, ProfileSource
from simkit.commands.options import Format
from simkit.errors import InputError
from simkit.history import COLD, WARM, History


def tree_alias() -> Any:
    """The hidden `--tree` option: the request history's old flag name, kept for one release
    (commands.options.pick_alias warns and maps it to --history)."""
    return typer.Option(None, "--tree", hidden=True,
                        help="deprecated alias of --history (removed in the next release)")


def _parse_ks(text: str) -> list[int]:
    try:
        ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--k must be comma-separated integers, got {text!r}", field="k") from None
    if not ks or any(k < 1 or k > 16 for k in ks):
        raise InputError(f"--k values must be in 1..16, got {text!r}", field="k")
    return ks


def _weighted_note(weights) -> str:
    return "" if weights is None else ", stratified sample weighted to the corpus"


def _load(model: str, corpus: str, drafter: str, max_requests: int, source: str,
          history: History | None):
    """(table, origin line, proxy note, history label, weights or None) for the request sample,
    from raw traces or the shipped profile: the profile's own sample (weighted) at
    --max-requests SAMPLE_SIZE, else an evenly spaced unweighted one (0 = all). `history` None:
    the shipped profile's own."""
    from simkit.profiles import corpus_profile as profiles, sampling
    from simkit.drafters.base import NGRAM_DRAFTER
    from simkit.paths import traces_src_dir

    source = profiles.check_source(source)
    Source = profiles.ProfileSource
    raw = source is Source.RAW or (source is Source.AUTO and traces_src_dir() is not None)
    if not raw:
        if max_requests != sampling.SAMPLE_SIZE:
            raise InputError("without raw traces only the shipped profile is available: "
                             f"--max-requests {sampling.SAMPLE_SIZE}", field="source")
        prof = profiles.load_profile(model, corpus, source=Source.SHIPPED, history=history)
        if drafter not in prof.tables:
            raise InputError(f"the shipped profile has no {drafter} table", field="drafter")
        n = prof.table.num_requests
        suffix = ".ngram" if drafter == NGRAM_DRAFTER else ""
        return prof.tables[drafter], (f"shipped profile traces/profiles/{model}/{corpus}{suffix}.npz "
                            f"({n} of {prof.provenance.get('corpus_requests', '?')} requests"
                            f"{_weighted_note(prof.weights)})"), \
            prof.proxy_note, (prof.history or COLD).label, prof.weights
    if traces_src_dir() is None:
        raise InputError("raw traces not found (set SIMKIT_TRACES_SRC)", field="source")
    from simkit.acceptance.cache import cached_table, cached_warm_table
    from simkit.drafters.base import get_drafter
    from traces.corpora import load_corpus

    history = history or profiles.shipped_history(model, corpus) or WARM
    if max_requests == sampling.SAMPLE_SIZE:           # the profiles' own (stratified) sample
        prof = profiles.profile_from_raw(model, corpus, progress=True, history=history)
        n = prof.table.num_requests
        table = prof.tables.get(drafter)
        if table is None:            # a drafter profiles do not carry (suffix_gpu): same sample
            from simkit.acceptance.history_tables import cached_sample_table

            table = cached_sample_table(load_corpus(corpus, model).requests,
                                        prof.provenance["sample_indices"], history,
                                        drafter=drafter, kmax=16, model=model, corpus=corpus,
                                        progress=True)
        return table, (f"raw traces ({n} of {prof.provenance['corpus_requests']} "
                       f"requests{_weighted_note(prof.weights)})"), \
            prof.proxy_note, history.label, prof.weights
    corp = load_corpus(corpus, model, progress=True)
    idx = sampling.sample_indices(len(corp.requests), max_requests)
    reqs = [corp.requests[i] for i in idx]
    history_aware = get_drafter(drafter).remembers_history     # suffix: its global tree
    if history_aware and history.kind == "warm" and len(reqs) < len(corp.requests):
        table = cached_warm_table(corp.requests, idx, kmax=16, model=model, corpus=corpus,
                                  progress=True, drafter=drafter)
    elif history_aware and history.kind not in ("warm", "cold"):
        from simkit.acceptance.history_tables import cached_history_table

        table = cached_history_table(reqs, history, kmax=16, model=model, corpus=corpus,
                                     progress=True, drafter=drafter)
    else:                     # n-gram drafts and whole-corpus replays do not depend on the tree mode
        table = cached_table(reqs, drafter=drafter, kmax=16, ordering=Ordering.SEQUENTIAL, model=model,
                             corpus=corpus, progress=True)
    return (table, f"raw traces ({len(reqs)} of {len(corp.requests)} requests, evenly spaced)",
            corp.proxy_note, history.label, None)


def acceptance(
    model: str = typer.Option(..., "--model", help="simulated model id (simkit models list)"),
    corpus: str = typer.Option(..., "--corpus", help="corpus name (simkit traces list)"),
    k: str = typer.Option("4,6,8,12", "--k", help="comma-separated K values (1..16)"),
    drafter: str = typer.Option("suffix", "--drafter",
                                help="suffix | ngram | suffix_gpu (vLLM 0.34's suffix drafter)"),
    fmt: Format = OutputFormat.TABLE,
    max_requests: int = typer.Option(128, "--max-requests",
                                     help="128 = the shipped profiles' sample (stratified, "
                                          "figures weighted to the corpus); other values: an "
                                          "evenly spaced unweighted sample (0 = all)"),
    source: ProfileSource = typer.Option(ProfileSource.AUTO, "--source", metavar="SOURCE",
                                         help="auto | raw | shipped"),
    history: Optional[str] = typer.Option(None, "--history", help="warm (whole corpus before), "
                                          "cold (sample alone), hot, repeat:P[,diverge:M] "
                                          "(default: the shipped profile's own)"),
    tree: Optional[str] = tree_alias(),
) -> None:
    """Replay greedy verification exactly (sequential order) and print per-K acceptance statistics."""
    from simkit.acceptance.stats import summarize

    from simkit.commands.options import pick_alias, pick_history
    from simkit.drafters.base import drafter_names

    if drafter not in drafter_names():
        raise InputError(f"--drafter must be {' or '.join(drafter_names())}, got {drafter!r}",
                         field="drafter")
    if max_requests < 0:
        raise InputError("--max-requests must be >= 0", field="max-requests")
    ks = _parse_ks(k)
    history = pick_alias(history, tree, "--history", "--tree")
    table, origin, note, label, weights = _load(model, corpus, drafter, max_requests, source,
                                                pick_history(history))
    results = [summarize(table, kk, weights=weights) for kk in ks]
    if fmt is OutputFormat.JSON:
        typer.echo(json.dumps({"model": model, "corpus": corpus, "origin": origin, "proxy_note": note,
                               "drafter": drafter, "params": table.params, "ordering": table.ordering, "tree": label, "history": label,
                               "requests": table.num_requests, "weighted": weights is not None,
                               "results": results}, indent=1))
        return
    typer.echo("\n".join(_text(model, corpus, note, origin, drafter, table, label, results)))


def _text(model: str, corpus: str, note: str, origin: str, drafter: str, table, label: str,
          results: list[dict]) -> list[str]:
    """The text report, 100 columns wide: the per-K figures as a table, then each K's
    accepted-length histogram and per-position accept rate as one wrapped line each (K + 1 and
    K numbers: as table cells they would not fit 100 columns beside the rest)."""
    from simkit.report.fit import render_text_table, wrap_field, wrap_prose

    lines = wrap_prose(f"model {model}  corpus {corpus}  ({note})")
    memory = "corpus" if drafter == "suffix_gpu" else "global tree"    # vLLM 0.34: a token ring
    lines += wrap_prose(f"workload: {origin}; drafter {drafter} {table.params}; order "
                        f"{table.ordering}; {memory} {label}")
    rows = [[str(r["k"]), str(r["steps"]), f"{r['mean_accepted']:.3f}",
             f"{r['tokens_per_step']:.3f}", f"{r['mean_draft']:.3f}", f"{r['zero_draft_frac']:.3f}"]
            for r in results]
    lines += render_text_table(["K", "steps", "mean acc", "tok/step", "mean draft", "zero-draft"],
                               rows).rstrip("\n").split("\n")
    lead = max(len(f"K={r['k']}") for r in results) + 4
    lines.append("accepted-length histogram (steps that accepted 0, 1, ..., K drafts):")
    for r in results:
        lines += wrap_field(f"  K={r['k']}", " ".join(str(x) for x in r["accept_hist"]), lead)
    lines.append("per-position accept rate (draft positions 1..K):")
    for r in results:
        lines += wrap_field(f"  K={r['k']}", " ".join(f"{x:.2f}" for x in
                                                     r["per_position_accept_rate"]), lead)
    return lines


def profiles_build(
    model: Optional[List[str]] = typer.Option(None, "--model", help="model ids, a comma list or the option "
                                        "repeated; default all"),
    corpus: Optional[List[str]] = typer.Option(None, "--corpus", help="corpus names, a comma list or the "
                                         "option repeated; default all built-in + mix"),
    out: Optional[str] = typer.Option(None, "--out", help="output folder (default: the shipped traces/profiles)"),
    history: Optional[str] = typer.Option(None, "--history", help="warm (whole-corpus global tree, "
                                          "the default) | cold (sample alone) | any request history "
                                          "(hot, repeat:P; simkit.history)"),
    tree: Optional[str] = tree_alias(),
    workers: int = typer.Option(1, "--workers", help="processes over (model, corpus); output does not depend on it"),
    histories: str = typer.Option("auto", "--histories", help="history tables written beside each profile (same "
                                  "sample, another request history, for machines without the raw traces): auto "
                                  "(cold,hot for mix, none elsewhere), none, or a comma list of histories"),
) -> None:
    """Derive compact profiles (lengths + suffix acceptance tables of a request sample) from raw traces."""
    from pathlib import Path

    from simkit.commands.options import join_list, pick_alias
    from simkit.history import parse_history
    from simkit.profiles import corpus_profile as profiles
    from simkit.paths import traces_src_dir
    from traces.corpora import CORPORA, MIX, list_models

    if traces_src_dir() is None:
        raise InputError("raw traces not found (set SIMKIT_TRACES_SRC)")
    history = parse_history(pick_alias(history, tree, "--history", "--tree") or "warm")
    if workers < 1:
        raise InputError("--workers must be >= 1", field="workers")
    models = join_list(model).split(",") if model else list_models()     # repeated or a,b
    corpora = join_list(corpus).split(",") if corpus else (list(CORPORA) + [MIX])
    if out:
        from simkit.checks import output_dir

        output_dir(out, "out")
    else:
        mine = [c for c in corpora if profiles.is_user_corpus(c)]
        if mine:                         # the shipped folder is the repo's: no user data there
            raise InputError(f"{', '.join(mine)}: imported corpora are not shipped; give --out "
                             "FOLDER for their profiles", field="out")
    for npz, js in profiles.build_profiles(models, corpora, Path(out) if out else None,
                                           progress=workers == 1, history=history, workers=workers,
                                           histories=histories):
        extra = sorted(json.loads(js.read_text()).get("history_tables") or {})
        typer.echo(f"{npz} ({npz.stat().st_size} bytes, {history.label} tree"
                   + (f"; history tables {', '.join(extra)}" if extra else "") + ")")
        from simkit.outfiles import wrote

        wrote(npz)
        wrote(js)


def profiles_list() -> None:
    """List the shipped profiles with their sample sizes and proxy notes."""
    from simkit.profiles import corpus_profile as profiles
    from simkit.report.fit import wrap_prose

    for npz in profiles.shipped_tables():
        js = npz.with_suffix(".json")
        prov = json.loads(js.read_text()) if js.is_file() else {}
        extra = sorted(prov.get("history_tables") or {})
        head = (f"{npz.parent.name}/{npz.stem}: {len(prov.get('sample_indices', []))} of "
                f"{prov.get('corpus_requests', '?')} requests, {prov.get('tree', 'cold')} tree"
                + (f" (+ history tables {', '.join(extra)})" if extra else "")
                + f", {npz.stat().st_size} bytes")
        lines = wrap_prose(head, hang="    ")
        if prov.get("proxy_note"):
            lines += wrap_prose(prov["proxy_note"], indent="  ", hang="  ")
        typer.echo("\n".join(lines))


def register(app: typer.Typer) -> None:
    """Add `acceptance` and the `profiles` group to the root app."""
    app.command("acceptance")(acceptance)
    group = typer.Typer(help="Shipped corpus profiles (lengths + acceptance tables, no token ids).",
                        no_args_is_help=True)
    group.command("build")(profiles_build)
    group.command("list")(profiles_list)
    app.add_typer(group, name="profiles")
