"""vLLM 0.34.0's own suffix-speculator Triton kernels, run on the CPU by Triton's interpreter: the
oracle of tests/slow/test_suffix_gpu_parity.py.

tests/install_vllm034_oracle.sh puts Triton 3.8.0 (vLLM 0.34's pin) under ORACLE_DIR/site and the
wheel's v1/worker/gpu/spec_decode/suffix/speculator.py under ORACLE_DIR (nothing of it is in this
repository). This module loads only the kernel functions and module constants of that file (not
vLLM, which would need its whole dependency set) and launches them as SuffixSpeculator.propose
and on_requests_finished do, on CPU torch tensors (torch comes with tests/install_arctic.sh).

Run as a child process (the interpreter must be switched on before triton is imported):
    python tests/vllm034_oracle.py CASES.json OUT.json
CASES: {"scenarios": [{"depth", "corpus_tokens", "k", "max_model_len", "events": [...]}]}, an
event being {"ingest": [[prompt, output], ...]} (one on_requests_finished call, in that order)
or {"propose": [history, ...]} (one propose call; num_sampled 1, last token = history[-1]).
OUT: per scenario, per propose event {"drafts", "num_valid", "bucket"} (bucket: the adaptive-
verification counters' row the finalize kernel records, source * 9 + match-length bucket, -1 for
a draft with no valid slot), and the ring and index table
after the last event (as int64 sha256s; in full too for rings of <= 4096 tokens).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

SPECULATOR_SHA256 = "c03e1d8bf054e141e12dce6089d33dc5811520582c59604e5dbff6249a4b72e7"
REPO = Path(__file__).resolve().parents[1]


def oracle_dir() -> Path:
    """Where install_vllm034_oracle.sh puts the oracle (SIMKIT_ORACLE_DIR, else <repo>/.oracles)."""
    return Path(os.environ.get("SIMKIT_ORACLE_DIR") or REPO / ".oracles") / "vllm-0.34.0"


def missing() -> str | None:
    """Why the oracle cannot run here, or None."""
    d = oracle_dir()
    spec = d / "speculator.py"
    if not spec.is_file():
        return f"{spec} absent (run tests/install_vllm034_oracle.sh)"
    if hashlib.sha256(spec.read_bytes()).hexdigest() != SPECULATOR_SHA256:
        return f"{spec} is not vLLM 0.34.0's speculator.py (sha256 differs)"
    if not (d / "site" / "triton").is_dir():
        return f"{d / 'site' / 'triton'} absent (run tests/install_vllm034_oracle.sh)"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch absent (tests/install_arctic.sh installs it)"
    return None


def _load_kernels(work: Path):
    """The speculator file's module constants and @triton.jit functions, written to a module file
    of their own (Triton reads kernel source from files) and imported."""
    src = (oracle_dir() / "speculator.py").read_text()
    lines = src.splitlines()
    parts = []
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef):
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.startswith("_")
                                                  for t in node.targets):
            first = node.lineno
        else:
            continue
        parts.append("\n".join(lines[first - 1:node.end_lineno]))
    path = work / "vllm034_suffix_kernels.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n" + "\n\n\n".join(parts) + "\n")
    spec = importlib.util.spec_from_file_location("vllm034_suffix_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Speculator:
    """SuffixSpeculator's state and its two launches, with vLLM's sizes (suffix/speculator.py)."""

    def __init__(self, kern, depth: int, corpus_tokens: int, k: int, max_model_len: int, rows: int):
        import torch
        import triton

        self.t, self.kern, self.triton = torch, kern, triton
        self.depth, self.k, self.L = depth, k, max_model_len
        L = max_model_len
        self.block_l = 256 if L >= 1024 else 128 if L >= 256 else max(16, triton.next_power_of_2(max(L, 1)))
        self.n_blocks = triton.cdiv(L, self.block_l)
        self.rows = rows
        self.scratch = torch.zeros((rows, self.n_blocks), dtype=torch.int64)
        self.corpus_len = corpus_tokens if depth >= 2 else 0
        self.has_corpus = self.corpus_len > 0
        self.nb = triton.next_power_of_2(max(16, self.corpus_len // 4))
        self.corpus = torch.full((max(self.corpus_len, 1),), -1, dtype=torch.int32)
        self.table = torch.full((2, self.nb if self.has_corpus else 1, kern._BUCKET_SLOTS), -1,
                                dtype=torch.int64)
        self.head = torch.zeros(1, dtype=torch.int64)
        self.doc_seq = torch.zeros(1, dtype=torch.int64)
        self.ingest_out = torch.zeros(2, dtype=torch.int64)

    def _rows(self, seqs):
        torch = self.t
        tok = torch.zeros((len(seqs), self.L), dtype=torch.int32)
        total = torch.zeros(len(seqs), dtype=torch.int32)
        for i, s in enumerate(seqs):
            tok[i, :len(s)] = torch.tensor(s, dtype=torch.int32)
            total[i] = len(s)
        return tok, total

    def ingest(self, docs) -> None:
        if not self.has_corpus:
            return
        torch, kern = self.t, self.kern
        tok, total = self._rows([p + o for p, o in docs])
        meta = []
        for i, (p, _) in enumerate(docs):
            meta += [i, max(len(p) - kern._PROMPT_CONTEXT, 0)]
        kern._suffix_ingest_kernel[(len(docs), self.triton.cdiv(self.L, kern._INGEST_BLOCK))](
            tok, tok.stride(0), torch.tensor(meta, dtype=torch.int32), len(docs), total,
            self.corpus, self.corpus_len, self.head, self.doc_seq, self.ingest_out[0:1],
            self.ingest_out[1:2], self.table, HASH_MUL=kern._HASH_MUL, NUM_BUCKETS=self.nb,
            SLOTS=kern._BUCKET_SLOTS, BLOCK=kern._INGEST_BLOCK, num_warps=4)
        self.head.copy_(self.ingest_out[0:1])
        self.doc_seq.copy_(self.ingest_out[1:2])

    def propose(self, histories):
        torch, kern, triton = self.t, self.kern, self.triton
        B = len(histories)
        tok, total = self._rows(histories)
        idx = torch.arange(B, dtype=torch.int32)
        num_sampled = torch.ones(B, dtype=torch.int32)
        last = torch.tensor([h[-1] for h in histories], dtype=torch.int64)
        scratch = torch.zeros((B, self.n_blocks), dtype=torch.int64)
        drafts = torch.zeros((B, self.k), dtype=torch.int64)
        num_valid = torch.zeros(B, dtype=torch.int32)
        k_po2 = max(1, triton.next_power_of_2(self.k))
        stats = torch.zeros((2 * 9, self.k, 2), dtype=torch.int64)
        last_bucket = torch.full((B,), -1, dtype=torch.int32)
        last_valid = torch.zeros(B, dtype=torch.int32)
        conf = torch.zeros((B, self.k), dtype=torch.float32)
        kern._suffix_local_scan_kernel[(B, self.n_blocks)](
            tok, tok.stride(0), idx, total, num_sampled, scratch, scratch.stride(0), self.L + 1,
            MAX_DEPTH=self.depth, BLOCK=self.block_l, num_warps=4)
        kern._suffix_finalize_kernel[(B,)](
            tok, tok.stride(0), idx, total, num_sampled, last, scratch, scratch.stride(0),
            self.n_blocks, self.L + 1, self.corpus, self.corpus.shape[0], self.table, drafts,
            num_valid, stats, last_bucket, last_valid, conf, HAS_CORPUS=self.has_corpus,
            ADAPTIVE=True, HASH_MUL=kern._HASH_MUL, NUM_BUCKETS=self.nb,
            SLOTS=kern._BUCKET_SLOTS, MAX_DEPTH=self.depth,
            DEPTH_PO2=triton.next_power_of_2(self.depth), K=self.k, K_PO2=k_po2,
            NB_PO2=max(1, triton.next_power_of_2(self.n_blocks)), num_warps=4)
        return drafts.tolist(), num_valid.tolist(), last_bucket.tolist()


def _patch_lang_once_per_launch() -> None:
    """Triton 3.8's interpreter patches triton.language for the interpreter at each kernel launch
    (undone when the launch ends) and again at every call of an inner @triton.jit function (the
    kernels' helpers, triton.language's zeros, max, sum: patches never undone). Within a launch,
    a second patch for the same module's functions changes nothing (its members are patched
    already, the rest are the same lambdas anew), yet each is a scan of the language modules:
    ~23,000 of them per run, a third of the oracle's time. Here the first call per module and
    launch patches as before and the repeats are skipped. The kernels and what they compute
    are untouched (the oracle's output is byte-identical)."""
    from triton.runtime import interpreter

    patch, launches = getattr(interpreter, "_patch_lang", None), []
    if patch is None:                           # another Triton: its interpreter as it is
        return

    class _Launch:
        def __init__(self, fn):
            self.scope, self.patched = patch(fn), {id(fn.__globals__)}

        def restore(self) -> None:
            launches.remove(self)
            self.scope.restore()

    def patch_once(fn):
        if not launches:                        # a kernel launch (kernels launch no kernels)
            launches.append(_Launch(fn))
            return launches[-1]
        if id(fn.__globals__) not in launches[-1].patched:   # an inner call: its module's first
            launches[-1].patched.add(id(fn.__globals__))
            return patch(fn)
        return None                             # the callers of inner calls ignore the result

    interpreter._patch_lang = patch_once


def main(cases_path: str, out_path: str) -> None:
    why = missing()
    if why:
        sys.exit(f"oracle unavailable: {why}")
    sys.path.insert(0, str(oracle_dir() / "site"))
    _patch_lang_once_per_launch()
    kern = _load_kernels(Path(os.path.dirname(os.path.abspath(out_path))))
    cases = json.loads(Path(cases_path).read_text())
    results = []
    for sc in cases["scenarios"]:
        rows = max([len(e["propose"]) for e in sc["events"] if "propose" in e] + [1])
        spec = Speculator(kern, sc["depth"], sc["corpus_tokens"], sc["k"], sc["max_model_len"], rows)
        props = []
        for ev in sc["events"]:
            if "ingest" in ev:
                spec.ingest(ev["ingest"])
            else:
                drafts, nv, bucket = spec.propose(ev["propose"])
                props.append({"drafts": drafts, "num_valid": nv, "bucket": bucket})
        import torch

        ring = spec.corpus.to(torch.int64).numpy()
        table = spec.table.numpy()
        small = spec.corpus_len <= 4096         # arrays in full; big ones by their sha256
        results.append({"proposals": props, "head": int(spec.head.item()),
                        "docs": int(spec.doc_seq.item()),
                        "ring_sha256": hashlib.sha256(ring.tobytes()).hexdigest(),
                        "table_sha256": hashlib.sha256(table.tobytes()).hexdigest(),
                        **({"ring": ring.tolist(), "table": table.tolist()} if small else {})})
    Path(out_path).write_text(json.dumps({"results": results}))


if __name__ == "__main__":
    os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported: Triton's CPU interpreter
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    main(sys.argv[1], sys.argv[2])
