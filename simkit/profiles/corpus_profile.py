"""Corpus profiles: the workload the engine replays (length distributions + suffix acceptance tables).

A profile holds, for a documented sample of a corpus's requests, their prompt/output lengths and the
acceptance table under vLLM's default suffix parameters (K = 1..16, sequential order over the sample),
plus the n-gram (prompt lookup 5/5) table of the same requests in `.tables["ngram"]`.
No token ids or text. Built from the raw traces when they are here (cached), else read from the
profiles shipped in traces/profiles/<model>/<corpus>.npz with <corpus>.json (provenance) beside it.
Sample rule ("stratified", simkit.profiles.sampling): the whole corpus (unweighted) when its outputs total
at most sampling.POSITION_BUDGET positions or n <= sampling.SAMPLE_SIZE; else as many requests as
fit that budget (at least SAMPLE_SIZE) of the corpus order of traces.corpora.load_corpus,
stratified on the capped outputs and the output length and weighted (each sampled request stands
for `weights[i]` corpus requests, calibrated to the corpus totals of the throughput drivers of a
warm whole-corpus replay). The older "even" rule (sampling.sample_indices: indices floor(i * n /
size), unweighted) stays for comparison (tests/benchmarks/bench_sample_error.py). The table is
built over the sample with the global suffix tree of a sequential replay of the WHOLE corpus
("warm", the default: exactly the sampled rows of a whole-corpus replay) or of the sample alone
("cold", the old rule); docs/acceptance.md says what each approximates.
Prefix caching: each profile also holds its sampled prompts' prefix table (<corpus>.prefix.npz:
per request the earliest earlier sampled request with its longest common prefix of whole 16-token
blocks, and that length), derived from chained block hashes of the token ids; loaded as canonical
block keys (`CorpusProfile.block_hashes`, simkit.block_hash). A profile without the file
(written before it existed) leaves caching unmodelled, and predictions say so.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from simkit.acceptance.table import AcceptanceTable, load_table, save_table
from simkit.choices import Ordering, ProfileSource
from simkit.drafters.base import NGRAM_DRAFTER, SUFFIX_DRAFTER
from simkit.profiles.version_tables import (build_table_for, history_key,
                                            load_history_table_for, load_shipped_table,
                                            version_drafters, with_drafter_table,
                                            write_history_tables_for, write_table)
from simkit.errors import InputError, UnknownNameError
from simkit.history import COLD, WARM, History, parse_history
from simkit.profiles.shipped_histories import load_history_table, parse_histories, write_history_tables
from simkit.profiles.prefix_table import PREFIX_RULE, load_prefix_table, save_prefix_table
from simkit.profiles.sampling import (SAMPLE_SIZE, choose_sample, rule_is_current,
                             sample_indices)

KMAX = 16


def check_source(source: str) -> ProfileSource:
    """`source` as a ProfileSource, else an UnknownNameError naming the choices."""
    try:
        return ProfileSource(source)
    except ValueError:
        raise UnknownNameError("profile source", str(source), list(ProfileSource)) from None


@dataclass
class CorpusProfile:
    """Workload of one (model, corpus): lengths and acceptance table of the sampled requests."""

    model: str
    corpus: str
    prompt_len: np.ndarray            # (n,) int32, aligned with table requests
    output_len: np.ndarray            # (n,) int32
    table: AcceptanceTable
    provenance: dict = field(default_factory=dict)
    proxy_note: str = ""
    origin: str = "raw-traces"        # "raw-traces", "shipped" or "shipped (... verified ...)"
    tables: dict = field(default_factory=dict)   # drafter -> AcceptanceTable (SUFFIX_DRAFTER's is .table)
    # prompt block hashes of the sampled requests (simkit.block_hash: flat uint64, offsets),
    # for prefix caching; derived from the raw traces' token ids, never stored as ids. None when
    # only an old shipped profile is at hand (caching then reported as not modelled).
    block_hashes: tuple | None = None
    # corpus requests each sampled request stands for (simkit.profiles.sampling); None = unweighted
    weights: np.ndarray | None = None
    # the request history its suffix table assumes (simkit.history); None when the provenance
    # of an old shipped profile does not record one
    history: History | None = None


def recorded_history(provenance: dict) -> History | None:
    """The history a profile's provenance file records (its "history", or the older "tree"
    key); None when it records neither."""
    label = provenance.get("history") or provenance.get("tree")
    return None if label is None else parse_history(label)


def shipped_dir() -> Path:
    """Folder of the shipped profiles (inside the installed `traces` package)."""
    import traces

    return Path(traces.__file__).resolve().parent / "profiles"


def _file_entries(corpus_obj) -> dict:
    from simkit.paths import traces_src_dir
    from traces.cache import file_digest
    from traces.sources import SOURCES as TRACE_SOURCES

    src = traces_src_dir()
    out = {}
    for source, producer in sorted(corpus_obj.sources.items()):
        if source not in TRACE_SOURCES:      # an imported corpus: its key is the import format
            out[source] = _user_entry(corpus_obj.name, producer)
            continue
        files = []
        for rel in TRACE_SOURCES[source].paths(producer):
            files.append({"path": str(rel), "sha256": file_digest(src / rel)})
        out[source] = {"producer": producer, "files": files}
    return out


def _cap_entries(corp, reqs) -> dict:
    """The generation cap of every source's producing run (traces/caps.py, with provenance)
    and the sample positions whose outputs hit it (what --capped-outputs extend continues)."""
    from traces.request_caps import capped_flags, request_cap

    caps = {}
    for source, producer in sorted(corp.sources.items()):
        cap = request_cap(source, producer)
        caps[source] = cap.as_dict() if cap else None
    flags = capped_flags(reqs)
    return {"output_caps": caps, "capped_sample": [i for i, f in enumerate(flags) if f],
            "capped_corpus": int(sum(capped_flags(corp.requests)))}


def _user_entry(name: str, producer: str) -> dict:
    """Provenance of an imported corpus: the file it was imported from and the digest of the
    cached tokenized corpus the table was built from (the import is its only source)."""
    from traces.cache import file_digest
    from traces.user import load_user_block, user_corpus_path

    block = load_user_block(name)
    cached = user_corpus_path(name)
    return {"producer": producer, "imported_from": str(block.meta.get("path", "?")),
            "files": [{"path": str(cached), "sha256": file_digest(cached)}]}


def is_user_corpus(corpus: str) -> bool:
    """True for a corpus imported with `simkit traces import` (not a built-in, not mix)."""
    from traces.corpora import CORPORA, MIX
    from traces.user import list_user_corpora

    return corpus not in CORPORA and corpus != MIX and corpus in list_user_corpora()


def _tree_text(h: History) -> str:
    """The provenance's `tree_rule`: how the suffix table was replayed under history `h`."""
    if h.kind == "warm":
        return ("warm: sequential replay of the whole corpus in load_corpus order; requests outside "
                "the sample only enter the global tree (FIFO at max_cached_requests), so the sampled "
                "rows equal those of a whole-corpus replay")
    if h.kind == "cold":
        return "cold: sequential replay of the sample alone; the global tree holds only earlier sampled responses"
    return (f"{h.label}: sequential replay of the sample after the responses of "
            f"{h.share:.0%} of the sampled requests (simkit.history.repeat_indices) entered the "
            "global tree" + (f", each cut to its first {h.diverge} tokens (assumed divergence)"
                             if h.diverge is not None else ""))


def _sample_text(info: dict) -> str:
    from simkit.profiles.sampling import rule_text

    if info["rule"] == "even":
        size = info["size"]
        return (f"even: indices floor(i*n/{size}) for i < {size} of the load_corpus order, "
                "unweighted")
    return rule_text(info)


def profile_from_raw(model: str, corpus: str, *, sample_size: int = SAMPLE_SIZE,
                     progress: bool = False, history: History = WARM,
                     rule: str = "stratified") -> CorpusProfile:
    """Build (or fetch from the cache) the profile from the raw traces under a request
    `history` (warm: the whole corpus replayed before; cold: the sample alone; a repeat);
    `rule`: SAMPLE_RULES."""
    from simkit import __version__
    from simkit.acceptance.cache import BUILD_VERSION, cached_table, cached_warm_table
    from simkit.drafters.suffix.cache import SuffixParams
    from traces.corpora import load_corpus

    from simkit.acceptance.history_tables import cached_history_table

    label = history.label
    corp = load_corpus(corpus, model, progress=progress)
    params = SuffixParams()
    sample, whole = choose_sample(corp.requests, sample_size, rule, params=params, model=model,
                                  corpus=corpus, progress=progress, kmax=KMAX)
    idx = sample.indices
    reqs = [corp.requests[i] for i in idx]
    if history.kind == "warm":
        table = cached_warm_table(corp.requests, idx, params=params, kmax=KMAX, model=model,
                                  corpus=corpus, progress=progress, whole=whole)
    elif history.kind == "cold":
        table = cached_table(reqs, drafter=SUFFIX_DRAFTER, params=params, kmax=KMAX, ordering=Ordering.SEQUENTIAL,
                             model=model, corpus=corpus, progress=progress)
    else:
        table = cached_history_table(reqs, history, params=params, kmax=KMAX, ordering=Ordering.SEQUENTIAL,
                                     model=model, corpus=corpus, progress=progress)
    ngram = cached_table(reqs, drafter=NGRAM_DRAFTER, kmax=KMAX, model=model, corpus=corpus)
    hashes = _canonical_hashes(reqs)
    prov = {
        "model": model,
        "corpus": corpus,
        "proxy_note": corp.proxy_note,
        "sources": _file_entries(corp),
        "drafter": params.as_dict(),
        "ngram_drafter": ngram.params,
        "kmax": KMAX,
        "ordering": "sequential, in corpus order",
        "tree": label,                    # the older key of "history" (kept: files record both)
        "history": label,
        "tree_rule": _tree_text(history),
        "sample_rule": _sample_text(sample.info),
        "sample": sample.info,
        "corpus_requests": len(corp.requests),
        "sample_indices": [int(i) for i in idx],
        **({"sample_weights": [float(w) for w in sample.weights]}
           if sample.weights is not None else {}),
        **_cap_entries(corp, reqs),
        "command": _build_command(model, corpus, label),
        "simkit_version": __version__,
        "table_build_version": BUILD_VERSION,
        "content": "prompt/output lengths and uint8 a(t,K), d(t,K) per output position; "
                   "no token ids or text",
    }
    table.provenance = prov
    ngram.provenance = prov
    origin = "raw-traces"
    if any(e.get("imported_from") for e in prov["sources"].values()):
        origin = "imported (simkit traces import)"
    return CorpusProfile(model, corpus, table.prompt_len, table.output_len, table, prov,
                         corp.proxy_note, origin, {SUFFIX_DRAFTER: table, NGRAM_DRAFTER: ngram}, hashes,
                         sample.weights, history)


def _build_command(model: str, corpus: str, label: str) -> str:
    """The command that builds this profile (its provenance `command`). It still spells the
    history `--tree` (the flag's deprecated alias, accepted until the next release) so a rebuild
    reproduces the shipped profiles byte for byte; rewrite with the shipped files."""
    return f"simkit profiles build --model {model} --corpus {corpus} --tree {label}"


def _canonical_hashes(reqs: list) -> tuple:
    """Canonical block keys of these requests' prompts (simkit.block_hash.canonical):
    what a shipped profile rebuilds from its prefix table, so raw and shipped agree."""
    from simkit.block_hash import canonical, pack, prompt_block_hashes

    return canonical(*pack(prompt_block_hashes(r.prompt_ids) for r in reqs))


def sampled_prompts(prof: CorpusProfile) -> list[np.ndarray]:
    """Token ids of the profile's sampled prompts, from the raw traces (cached tokenized corpus),
    in the profile's request order; in memory only, never written. InputError when the raw
    traces are absent or the sample's prompt lengths disagree with the profile's."""
    from simkit.paths import traces_src_dir
    from traces.corpora import load_corpus

    if traces_src_dir() is None:
        raise InputError(f"the prompts of {prof.model}/{prof.corpus} need the raw traces (set "
                         "SIMKIT_TRACES_SRC)", field="traces")
    corp = load_corpus(prof.corpus, prof.model)
    idx = prof.provenance.get("sample_indices") or sample_indices(len(corp.requests)).tolist()
    ids = [np.asarray(corp.requests[int(i)].prompt_ids) for i in idx]
    lens = np.array([len(x) for x in ids])
    if lens.shape != np.shape(prof.prompt_len) or not np.array_equal(lens, prof.prompt_len):
        raise InputError(f"the sampled prompts of {prof.model}/{prof.corpus} differ from the "
                         "profile's prompt lengths", field="sample_indices")
    return ids


def attach_block_hashes(prof: CorpusProfile) -> CorpusProfile:
    """Give a shipped profile verified against the raw traces the block hashes of its sampled
    prompts (from the cached tokenized corpus: no table is rebuilt)."""
    from simkit.block_hash import canonical, pack, prompt_block_hashes

    prof.block_hashes = canonical(*pack(prompt_block_hashes(p) for p in sampled_prompts(prof)))
    return prof


def _paths(model: str, corpus: str, root: Path | None = None) -> tuple[Path, Path, Path]:
    base = (root or shipped_dir()) / model
    return base / f"{corpus}.npz", base / f"{corpus}.json", base / f"{corpus}.ngram.npz"


def _prefix_path(model: str, corpus: str, root: Path | None = None) -> Path:
    return (root or shipped_dir()) / model / f"{corpus}.prefix.npz"


WRITTEN_KEYS = ("npz_sha256", "ngram_npz_sha256", "prefix_npz_sha256", "prefix_rule",
                "history_tables")


def _as_built(provenance: dict) -> dict:
    """A profile's provenance as profile_from_raw gives it, without the keys write_profile
    adds about the files it wrote (WRITTEN_KEYS, and a version drafter's <drafter>_npz_sha256
    and <drafter>_history_tables), so a rewrite starts from the build's own."""
    return {k: v for k, v in provenance.items() if k not in WRITTEN_KEYS
            and not k.endswith("_npz_sha256") and not k.endswith("_history_tables")}


def write_profile(profile: CorpusProfile, root: Path | None = None,
                  histories: dict[str, AcceptanceTable] | None = None,
                  drafter_histories: dict[str, dict] | None = None) -> tuple[Path, Path]:
    """Write the suffix and n-gram npz files (bzip2, byte-stable), the history tables
    (tree label -> table of the same requests; simkit.profiles.shipped_histories) and the provenance
    JSON; returns (suffix npz, json)."""
    npz, js, ngram_npz = _paths(profile.model, profile.corpus, root)
    save_table(profile.table, npz, compression="bzip2")
    prov = _as_built(profile.provenance)
    prov["npz_sha256"] = hashlib.sha256(npz.read_bytes()).hexdigest()
    entries = write_history_tables(npz, histories or {})
    if entries:
        prov["history_tables"] = entries
    if NGRAM_DRAFTER in profile.tables:
        save_table(profile.tables[NGRAM_DRAFTER], ngram_npz, compression="bzip2")
        prov["ngram_npz_sha256"] = hashlib.sha256(ngram_npz.read_bytes()).hexdigest()
    for name in version_drafters():
        if name in profile.tables:
            prov[f"{name}_npz_sha256"] = write_table(npz, name, profile.tables[name])
            entries = write_history_tables_for(npz, name, (drafter_histories or {}).get(name, {}))
            if entries:
                prov[history_key(name)] = entries
    if profile.block_hashes is not None:
        prefix = _prefix_path(profile.model, profile.corpus, root)
        save_prefix_table(profile.block_hashes, prefix)
        prov["prefix_npz_sha256"] = hashlib.sha256(prefix.read_bytes()).hexdigest()
        prov["prefix_rule"] = PREFIX_RULE
    js.write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    return npz, js


def load_shipped(model: str, corpus: str) -> CorpusProfile:
    """The shipped profile; UnknownNameError lists what is shipped when it is absent."""
    npz, js, ngram_npz = _paths(model, corpus)
    if not npz.is_file():
        have = sorted(f"{p.parent.name}/{p.stem}" for p in shipped_tables())
        mine = [name.split("/", 1)[1] for name in have if name.startswith(f"{model}/")]
        if mine:     # the model is shipped, the corpus is not: name the model's, not every pair
            raise UnknownNameError("corpus", corpus, mine,
                                   "your own traffic is imported first (simkit traces import "
                                   f"FILE --name {corpus}), which needs the raw traces' tokenizer "
                                   "files (SIMKIT_TRACES_SRC)")
        raise UnknownNameError("shipped profile", f"{model}/{corpus}", have)
    table = load_table(npz)
    try:
        prov = json.loads(js.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable provenance ({exc})", path=str(js)) from exc
    tables = {SUFFIX_DRAFTER: table}
    if ngram_npz.is_file():
        tables[NGRAM_DRAFTER] = load_table(ngram_npz)
    for name in version_drafters():             # e.g. vLLM 0.34's suffix_gpu, where shipped
        other = load_shipped_table(npz, name)
        if other is not None:
            tables[name] = other
    prefix = _prefix_path(model, corpus)
    hashes = load_prefix_table(prefix, table.prompt_len) if prefix.is_file() else None
    weights = prov.get("sample_weights")
    if weights is not None and len(weights) != table.num_requests:
        raise InputError(f"{len(weights)} sample weights for {table.num_requests} requests",
                         path=str(js), field="sample_weights")
    return CorpusProfile(model, corpus, table.prompt_len, table.output_len, table, prov,
                         prov.get("proxy_note", ""), "shipped", tables, hashes,
                         None if weights is None else np.asarray(weights, np.float64),
                         recorded_history(prov))


def shipped_tables() -> list[Path]:
    """The shipped profiles' own suffix tables (<model>/<corpus>.npz), in path order."""
    return sorted(p for p in shipped_dir().glob("*/*.npz") if p.name.count(".") == 1)


def with_history(prof: CorpusProfile, history: History) -> CorpusProfile | None:
    """A shipped profile under another request history, from the history table it ships
    (simkit.profiles.shipped_histories), labelled as profile_from_raw labels that history; None when it
    ships none for it."""
    npz = _paths(prof.model, prof.corpus)[0]
    table = load_history_table(npz, prof.provenance, history)
    if table is None:
        return None
    label = history.label
    prov = _as_built(prof.provenance)
    prov.update(tree=label, history=label, tree_rule=_tree_text(history),
                command=_build_command(prof.model, prof.corpus, label))
    table.provenance = prov
    # a version drafter's table (0.34's suffix_gpu) depends on the history too: its own table of
    # that history where the profile ships one, else none
    kept = {k: v for k, v in prof.tables.items() if k not in version_drafters()}
    for name in version_drafters():
        other = load_history_table_for(npz, name, prof.provenance, history)
        if other is not None:
            kept[name] = other
    return replace(prof, table=table, provenance=prov,
                   tables={**kept, SUFFIX_DRAFTER: table}, history=history)


def shipped_history(model: str, corpus: str) -> History | None:
    """The history of the shipped profile (its provenance; cold when it records none), or None
    when none is shipped."""
    _, js, _ = _paths(model, corpus)
    try:
        return recorded_history(json.loads(js.read_text())) or COLD
    except (OSError, ValueError):
        return None


def load_profile(model: str, corpus: str, *, source: ProfileSource = ProfileSource.AUTO,
                 history: History | None = None) -> CorpusProfile:
    """Workload profile for (model, corpus): "raw" builds from ../shared traces (cached),
    "shipped" reads traces/profiles, "auto" = the shipped profile when its provenance matches the
    raw files here (same bytes as a rebuild), else raw when the traces are here, else shipped.
    `history` defaults to the shipped profile's (warm when none is shipped), so that raw and
    shipped give the same table; another history is read from the history tables the shipped
    profile holds, and without one (and without the raw traces) it is an error."""
    from simkit.paths import traces_src_dir

    source = check_source(source)
    if is_user_corpus(corpus):               # imported: always built from its cached tokens
        if source is ProfileSource.SHIPPED:
            raise InputError(f"'{corpus}' is an imported corpus: nothing is shipped for it; use "
                             "--source auto or raw", field="source")
        return profile_from_raw(model, corpus, history=history or WARM)
    if source is ProfileSource.SHIPPED or (source is ProfileSource.AUTO
                                           and traces_src_dir() is None):
        prof = load_shipped(model, corpus)
        have = (prof.history or COLD).label
        if history is None or history.label == have:
            return prof
        other = with_history(prof, history)
        if other is None:
            ships = ", ".join([have, *sorted(prof.provenance.get("history_tables") or {})])
            raise InputError(f"the shipped profile {model}/{corpus} holds the histories {ships}; "
                             f"{history.label} needs the raw traces (SIMKIT_TRACES_SRC)",
                             field="history")
        return other
    if traces_src_dir() is None:
        raise InputError("raw traces not found (set SIMKIT_TRACES_SRC); use source='shipped'")
    if source is ProfileSource.AUTO:
        verified = _shipped_if_current(model, corpus, history)
        if verified is not None:
            return verified
    return profile_from_raw(model, corpus,
                            history=history or shipped_history(model, corpus) or WARM)


def _shipped_if_current(model: str, corpus: str,
                        history: History | None) -> CorpusProfile | None:
    """The shipped profile when it was built from exactly the raw files present (every source
    file's sha256 as in its provenance) by the current table builder and in the asked tree mode;
    else None. Rebuilding it from raw would give the same bytes (tests/integration/test_profiles.py), so this
    spares a first run the whole-corpus tokenization and replay (minutes) without changing a
    figure."""
    from simkit.acceptance.cache import BUILD_VERSION
    from simkit.paths import traces_src_dir
    from traces.cache import file_digest

    try:
        prof = load_shipped(model, corpus)
    except UnknownNameError:
        return None
    prov = prof.provenance
    if history is not None and history.label != (prof.history or COLD).label:
        prof = with_history(prof, history)
        if prof is None:
            return None
    if prov.get("table_build_version") != BUILD_VERSION or not prov.get("sources"):
        return None
    if not rule_is_current(prov.get("sample") or {}, SAMPLE_SIZE):
        return None
    src = traces_src_dir()
    for entry in prov["sources"].values():
        for f in entry.get("files", []):
            path = src / f["path"]
            if not path.is_file() or file_digest(path) != f["sha256"]:
                return None
    prof.origin = "shipped (source files verified against the raw traces)"
    return prof if prof.block_hashes is not None else attach_block_hashes(prof)


def _built(model: str, corpus: str, history: History, progress: bool = False) -> CorpusProfile:
    """The profile a build writes: the shipped one when it is verified current for this history
    (its tables are the bytes a recomputation gives: same source digests, builder version and
    tree; tests/integration/test_profiles.py recomputes one to hold that), with the prompt prefix table
    derived from the raw traces; else built from the raw traces."""
    prof = _shipped_if_current(model, corpus, history)
    if prof is not None:
        return attach_block_hashes(prof)          # the prefix table always from the raw traces
    return profile_from_raw(model, corpus, progress=progress, history=history)


def _write_built(model: str, corpus: str, root: Path | None, history: History, histories: str,
                 progress: bool = False) -> tuple[Path, Path]:
    """Build one profile and the history tables `histories` asks for (parse_histories), and
    write them."""
    tables = {h.label: (_shipped_if_current(model, corpus, h)
                        or profile_from_raw(model, corpus, progress=progress, history=h)).table
              for h in parse_histories(histories, corpus, history)}   # tables only: no prefix
    prof = _built(model, corpus, history, progress)
    drafter_tables: dict[str, dict] = {}
    for name in version_drafters():        # vLLM 0.34's suffix_gpu table rides beside it
        prof = with_drafter_table(prof, name, KMAX, progress)
        if name in prof.tables:            # and its tables of the same other histories
            built = {label: build_table_for(replace(prof, history=parse_history(label)), name,
                                            KMAX, progress) for label in tables}
            drafter_tables[name] = {k: v for k, v in built.items() if v is not None}
    return write_profile(prof, root, tables, drafter_tables)


def _build_one(job: tuple) -> tuple[str, str]:
    npz, js = _write_built(*job)
    return str(npz), str(js)


def build_profiles(models: list[str], corpora: list[str], root: Path | None = None,
                   progress: bool = False, history: History = WARM, workers: int = 1,
                   histories: str = "auto") -> list[tuple[Path, Path]]:
    """Build and write profiles for every (model, corpus) pair (`workers` processes; the files do
    not depend on it), each with the history tables `histories` names ('auto': the shipped rule
    of simkit.profiles.shipped_histories; 'none'; or a comma list); returns the written paths in
    (model, corpus) order. `history`: the profiles' own (their main suffix table's)."""
    for c in corpora:                             # bad labels fail before any build
        parse_histories(histories, c, history)
    jobs = [(m, c, root, history, histories) for m in models for c in corpora]
    if workers <= 1:
        return [_write_built(*job, progress) for job in jobs]
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(workers) as pool:
        done = pool.map(_build_one, jobs, chunksize=1)
    return [(Path(a), Path(b)) for a, b in done]
