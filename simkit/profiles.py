"""Corpus profiles: the workload the engine replays (length distributions + suffix acceptance tables).

A profile holds, for a documented sample of a corpus's requests, their prompt/output lengths and the
acceptance table under vLLM's default suffix parameters (K = 1..16, sequential order over the sample),
plus the n-gram (prompt lookup 5/5) table of the same requests in `.tables["ngram"]`.
No token ids or text. Built from the raw traces when they are here (cached), else read from the
profiles shipped in traces/profiles/<model>/<corpus>.npz with <corpus>.json (provenance) beside it.
Sample rule: SAMPLE_SIZE requests at indices floor(i * n / SAMPLE_SIZE), i = 0..SAMPLE_SIZE-1, of the
corpus order of traces.corpora.load_corpus (all requests when n <= SAMPLE_SIZE); the table is built
over the sample alone, so the global suffix tree holds only sampled responses (docs/acceptance.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simkit.acceptance.table import AcceptanceTable, load_table, save_table
from simkit.errors import InputError, UnknownNameError

SAMPLE_SIZE = 128
KMAX = 16
SOURCES = ("auto", "raw", "shipped")


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
    origin: str = "raw-traces"        # "raw-traces" or "shipped"
    tables: dict = field(default_factory=dict)   # drafter -> AcceptanceTable ("suffix" is .table)


def shipped_dir() -> Path:
    """Folder of the shipped profiles (inside the installed `traces` package)."""
    import traces

    return Path(traces.__file__).resolve().parent / "profiles"


def sample_indices(n: int, size: int = SAMPLE_SIZE) -> np.ndarray:
    """Evenly spread request indices: floor(i * n / size) for i < size, or all when n <= size."""
    if size <= 0 or n <= size:
        return np.arange(n, dtype=np.int64)
    return (np.arange(size, dtype=np.int64) * n) // size


def _file_entries(corpus_obj) -> dict:
    from simkit.paths import traces_src_dir
    from traces.cache import file_digest
    from traces.sources import SOURCES as TRACE_SOURCES

    src = traces_src_dir()
    out = {}
    for source, producer in sorted(corpus_obj.sources.items()):
        files = []
        for rel in TRACE_SOURCES[source].paths(producer):
            files.append({"path": str(rel), "sha256": file_digest(src / rel)})
        out[source] = {"producer": producer, "files": files}
    return out


def profile_from_raw(model: str, corpus: str, *, sample_size: int = SAMPLE_SIZE,
                     progress: bool = False) -> CorpusProfile:
    """Build (or fetch from the cache) the profile from the raw traces."""
    from simkit import __version__
    from simkit.acceptance.cache import BUILD_VERSION, cached_table
    from simkit.drafters.suffix import SuffixParams
    from traces.corpora import load_corpus

    corp = load_corpus(corpus, model, progress=progress)
    idx = sample_indices(len(corp.requests), sample_size)
    reqs = [corp.requests[i] for i in idx]
    params = SuffixParams()
    table = cached_table(reqs, drafter="suffix", params=params, kmax=KMAX, ordering="sequential",
                         model=model, corpus=corpus, progress=progress)
    ngram = cached_table(reqs, drafter="ngram", kmax=KMAX, model=model, corpus=corpus)
    prov = {
        "model": model,
        "corpus": corpus,
        "proxy_note": corp.proxy_note,
        "sources": _file_entries(corp),
        "drafter": params.as_dict(),
        "ngram_drafter": ngram.params,
        "kmax": KMAX,
        "ordering": "sequential over the sample, in corpus order",
        "sample_rule": (f"indices floor(i*n/{sample_size}) for i < {sample_size} of the "
                        f"load_corpus order (all when n <= {sample_size})"),
        "corpus_requests": len(corp.requests),
        "sample_indices": [int(i) for i in idx],
        "command": f"simkit profiles build --model {model} --corpus {corpus}",
        "simkit_version": __version__,
        "table_build_version": BUILD_VERSION,
        "content": "prompt/output lengths and uint8 a(t,K), d(t,K) per output position; "
                   "no token ids or text",
    }
    table.provenance = prov
    ngram.provenance = prov
    return CorpusProfile(model, corpus, table.prompt_len, table.output_len, table, prov,
                         corp.proxy_note, "raw-traces", {"suffix": table, "ngram": ngram})


def _paths(model: str, corpus: str, root: Path | None = None) -> tuple[Path, Path, Path]:
    base = (root or shipped_dir()) / model
    return base / f"{corpus}.npz", base / f"{corpus}.json", base / f"{corpus}.ngram.npz"


def write_profile(profile: CorpusProfile, root: Path | None = None) -> tuple[Path, Path]:
    """Write the suffix and n-gram npz files (bzip2, byte-stable) and the provenance JSON;
    returns (suffix npz, json)."""
    npz, js, ngram_npz = _paths(profile.model, profile.corpus, root)
    save_table(profile.table, npz, compression="bzip2")
    prov = dict(profile.provenance)
    prov["npz_sha256"] = hashlib.sha256(npz.read_bytes()).hexdigest()
    if "ngram" in profile.tables:
        save_table(profile.tables["ngram"], ngram_npz, compression="bzip2")
        prov["ngram_npz_sha256"] = hashlib.sha256(ngram_npz.read_bytes()).hexdigest()
    js.write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    return npz, js


def load_shipped(model: str, corpus: str) -> CorpusProfile:
    """The shipped profile; UnknownNameError lists what is shipped when it is absent."""
    npz, js, ngram_npz = _paths(model, corpus)
    if not npz.is_file():
        have = sorted(f"{p.parent.name}/{p.stem}" for p in shipped_dir().glob("*/*.npz")
                      if ".ngram" not in p.name)
        raise UnknownNameError("shipped profile", f"{model}/{corpus}", have)
    table = load_table(npz)
    try:
        prov = json.loads(js.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable provenance ({exc})", path=str(js)) from exc
    tables = {"suffix": table}
    if ngram_npz.is_file():
        tables["ngram"] = load_table(ngram_npz)
    return CorpusProfile(model, corpus, table.prompt_len, table.output_len, table, prov,
                         prov.get("proxy_note", ""), "shipped", tables)


def load_profile(model: str, corpus: str, *, source: str = "auto") -> CorpusProfile:
    """Workload profile for (model, corpus): "raw" builds from ../shared traces (cached),
    "shipped" reads traces/profiles, "auto" = raw when the traces are here, else shipped."""
    from simkit.paths import traces_src_dir

    if source not in SOURCES:
        raise UnknownNameError("profile source", source, list(SOURCES))
    if source == "shipped" or (source == "auto" and traces_src_dir() is None):
        return load_shipped(model, corpus)
    if traces_src_dir() is None:
        raise InputError("raw traces not found (set SIMKIT_TRACES_SRC); use source='shipped'")
    return profile_from_raw(model, corpus)


def build_profiles(models: list[str], corpora: list[str], root: Path | None = None,
                   progress: bool = False) -> list[tuple[Path, Path]]:
    """Build and write profiles for every (model, corpus) pair; returns the written paths."""
    written = []
    for model in models:
        for corpus in corpora:
            written.append(write_profile(profile_from_raw(model, corpus, progress=progress), root))
    return written
