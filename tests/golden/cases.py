"""The golden commands: a fixed set of `simkit` command lines whose stdout (and, for `sweep`, the
CSV it writes) is compared byte for byte with the files beside this module.

They pin the user-visible output of predict, sweep, the what-ifs, the reference reproduction and
validate, so that a refactor can show it changed nothing. Regenerate after a legitimate change
with `python3 tests/golden/regen.py [NAME ...]` (see regen.py) and commit the diff with the
change that caused it.

Every case runs `python3 -m simkit` in a fresh process with PYTHONPATH = this checkout, from a
temporary folder (so relative output paths such as sweep's --out never differ); the README's
prediction in three formats runs its three command lines in one fresh process that predicts
once (shared_prediction.py), and regen.py still runs each alone, so the golden test also checks
that sharing changes no byte. Nothing printed
depends on the clock or on absolute paths; the cases that read the raw traces (every what-if
and validate: their profile source is `auto`, or a request history needs the traces) are
skipped where ../shared/traces-src (SIMKIT_TRACES_SRC) is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

SMALL = ["--num-requests", "64"]
# sweep and the what-ifs simulate 3 seeds by default, as predict does; their cases predate that
# shared default and pin the one seed they were recorded with
ONE_SEED = ["--seeds", "1"]
VALIDATE_RUNS = ("llama-3.1-8b_vanilla-s3_chat_c32_n128", "llama-3.1-8b_kpad4-s3_chat_c32_n128",
                 "llama-3.1-8b_kpad8-s3_chat_c32_n128", "llama-3.1-8b_kpad12-s3_chat_c32_n128",
                 "llama-3.1-8b_dynamic-table12-s3_chat_c32_n128",
                 "llama-3.1-8b_dynamic-goodput12-s3_chat_c32_n128",
                 "llama-3.1-8b_suffix24_math_c32_n128", "qwen2.5-7b_kpad8-s3_code_c32_n128_rep0.5",
                 "qwen2.5-7b_vanilla-s3_code_c32_n128_hot", "llama-3.1-70b_kpad4-tp2_chat_c32_n64")


# every golden case pins vLLM 0.26 (its rules and calibration): these outputs predate the
# version dimension and stay byte-identical; the 0.33 cases below name their version too
V026 = ("--vllm-version", "0.26")


def pinned(argv: tuple[str, ...], version: tuple[str, ...] = V026) -> tuple[str, ...]:
    """argv with the version option after the (sub)command: `whatif NAME` takes two words."""
    head = 2 if argv[0] == "whatif" else 1
    return (*argv[:head], *version, *argv[head:])


@dataclass(frozen=True)
class Case:
    """One golden command: its name (= golden file stem), argv after `simkit`, whether it needs
    the raw traces, and files it writes (relative to its folder) that are compared too."""

    name: str
    argv: tuple[str, ...]
    needs_traces: bool = True
    files: tuple[str, ...] = field(default=())
    version: tuple[str, ...] = V026

    @property
    def command(self) -> tuple[str, ...]:
        """The argv actually run: argv with the case's --vllm-version."""
        return pinned(self.argv, self.version)


def _validate_args() -> tuple[str, ...]:
    out: list[str] = ["validate", "--compare-orderings"]      # both orderings' acceptance lines
    for run in VALIDATE_RUNS:
        out += ["--run-id", run]
    return tuple(out)


PREDICT = ("predict", "--model", "llama-3.1-8b", "--corpus", "mix", "--source", "shipped")

CASES: tuple[Case, ...] = (
    # the README's first command, in every format (the default ladder, 3 seeds)
    Case("predict", PREDICT, needs_traces=False),
    Case("predict-json", (*PREDICT, "--format", "json"), needs_traces=False),
    Case("predict-csv", (*PREDICT, "--format", "csv"), needs_traces=False),
    # ngram drafters, a non-default suffix K, a dynamic K set, prefix caching off and too few
    # requests for a steady window (rows marked *)
    Case("predict-ngram-short", ("predict", "--model", "llama-3.1-8b", "--corpus", "code",
                                 "--source", "shipped", "--configs",
                                 "vanilla,suffix:8,ngram,ngram-kpad:4,dynamic-goodput:4,8",
                                 "--seeds", "2", "--num-requests", "40", "--no-prefix-caching",
                                 "--no-legend"), needs_traces=False),
    # open loop, capped outputs extended, every dynamic policy, CSV
    Case("predict-open-loop-csv", ("predict", "--model", "qwen2.5-7b", "--corpus", "chat",
                                   "--source", "shipped", "--configs", "vanilla,kpad:4,dynamic",
                                   "--seeds", "2", "--num-requests", "96", "--request-rate", "6",
                                   "--capped-outputs", "extend", "--format", "csv"),
         needs_traces=False),
    Case("sweep", ("sweep", "--out", "sweep-out", "--model", "llama-3.1-8b,qwen2.5-7b",
                   "--corpus", "chat,code", "--source", "shipped", "--configs",
                   "vanilla,suffix,kpad:4,dynamic-goodput", *SMALL, *ONE_SEED),
         needs_traces=False, files=("sweep-out/sweep.csv",)),
    Case("whatif-capacity", ("whatif", "capacity", "--configs", "vanilla,kpad:4",
                             "--max-requests", "400", *ONE_SEED)),
    Case("whatif-history", ("whatif", "history", "--shares", "0,1", "--configs",
                            "vanilla,kpad:4,8", *SMALL, *ONE_SEED)),
    Case("whatif-concurrency-json", ("whatif", "concurrency", "--levels", "4,16,64",
                                     "--format", "json", *ONE_SEED)),
    Case("whatif-hardware", ("whatif", "hardware", "--model", "llama-3.1-8b", "--targets",
                             "h100,b200", "--configs", "vanilla,kpad:4", *SMALL,
                             *ONE_SEED)),
    Case("whatif-host", ("whatif", "host", "--factors", "1,2", "--configs", "vanilla,kpad:4",
                         *SMALL, *ONE_SEED)),
    Case("whatif-quantization", ("whatif", "quantization", "--model", "llama-3.1-8b",
                                 "--configs", "vanilla,kpad:4", *SMALL, *ONE_SEED)),
    Case("whatif-prefix", ("whatif", "prefix", "--preamble", "0,1000", "--configs",
                           "vanilla,kpad:4", *SMALL, *ONE_SEED)),
    Case("whatif-reference", ("whatif", "reference", "--model", "llama-3.1-8b,qwen2.5-7b",
                              "--best-k", "--assumptions", *SMALL, *ONE_SEED)),
    Case("whatif-reference-history", ("whatif", "reference", "--model", "llama-3.1-8b",
                                      "--history", "cold,warm", "--format", "json", *SMALL,
                                      *ONE_SEED)),
    Case("validate", _validate_args()),
    # vLLM 0.34's batch-size K table derived from the traffic (two levels, three K, small runs)
    Case("whatif-ktable", ("whatif", "ktable", "--levels", "8,64", "--ks", "0,4,8",
                           "--min-requests", "64", *ONE_SEED), version=()),
    # the upgrade what-if names both versions itself (--from 0.33 --to 0.34 by default)
    Case("whatif-vllm-version", ("whatif", "vllm-version", "--num-requests", "160", *ONE_SEED),
         version=()),
)


def traces_present() -> bool:
    """The raw traces the what-ifs and validate read are here (SIMKIT_TRACES_SRC or beside)."""
    sys.path.insert(0, str(ROOT))
    from simkit.paths import traces_src_dir

    return traces_src_dir() is not None


# the README's first prediction in its three formats: one prediction shared (shared_prediction.py)
SHARED_PREDICTION = ("predict", "predict-json", "predict-csv")


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    env.pop("SIMKIT_DEBUG", None)
    return env


def run_shared_prediction(cases: tuple[Case, ...], workdir: Path) -> dict[str, bytes]:
    """Run cases that differ only in --format (no written files) in one fresh process that
    predicts once (golden/shared_prediction.py); {golden file name: stdout bytes}, the same bytes
    run_case gives each. Raises RuntimeError (with stderr) when one exits non-zero."""
    import json

    assert all(not c.files for c in cases)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join((str(ROOT), str(HERE.parent)))   # simkit, golden
    proc = subprocess.run([sys.executable, "-m", "golden.shared_prediction", str(workdir),
                           *(json.dumps(list(c.command)) for c in cases)], cwd=workdir,
                          env=env, capture_output=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' / '.join(c.name for c in cases)} exited {proc.returncode}:\n"
                           f"{proc.stderr.decode(errors='replace')}")
    return {f"{c.name}.out": (workdir / f"{i}.out").read_bytes() for i, c in enumerate(cases)}


def run_case(case: Case, workdir: Path) -> dict[str, bytes]:
    """Run one case in `workdir`; {golden file name: bytes}: stdout, then each written file.
    Raises RuntimeError (with stderr) when the command exits non-zero."""
    proc = subprocess.run([sys.executable, "-m", "simkit", *case.command], cwd=workdir, env=_env(),
                          capture_output=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"simkit {' '.join(case.command)} exited {proc.returncode}:\n"
                           f"{proc.stderr.decode(errors='replace')}")
    out = {f"{case.name}.out": proc.stdout}
    for rel in case.files:
        out[f"{case.name}.{Path(rel).name}"] = (workdir / rel).read_bytes()
    return out
