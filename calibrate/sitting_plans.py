"""GPU sittings as data: one TOML run plan per sitting, its checker, and the script of one part.

A plan (calibrate/plans/*.toml; format in calibrate/plans/README.md) lists the sitting's vLLM
release and chunk set, its device budget, and its parts (one device call each) with their engines
and runs. `check` validates a plan on the CPU host before any device time is spent (known models,
configurations and corpora, run specs with an explicit purpose, the request files and their
length, each part's and the whole sitting's estimated minutes within their budgets);
`script` writes the bash of one part, which calibrate/gpu/sitting.sh runs on the GPU machine
(one `calibrate/gpu/session.sh` call per group of engines). The `script` path imports only the
standard library: it runs before vLLM and simkit's dependencies are installed there.

    python -m calibrate.sitting_plans check calibrate/plans/v034-first.toml [--requests-dir .gpu/requests]
    python -m calibrate.sitting_plans script calibrate/plans/v034-first.toml A [BUDGET_S]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

SITTING_KEYS = {"name", "vllm", "chunks", "num_chunks", "budget_min", "tag", "cap", "status",
                "purpose", "machine"}
PART_KEYS = {"name", "budget_s", "note", "engine"}
ENGINE_KEYS = {"model", "config", "k", "runs", "tag", "args", "tp", "via", "reserve_s",
               "k_table", "adaptive", "corpus_tokens"}
# device seconds outside the runs, from the sittings so far (../shared/gpu/v03x/README.md and
# calibrate/data/README.md): a chunk transfer ~4 s, the machine's first start ~60 s, the install
# 36-53 s on 0.33 (1-2 min expected on 0.34), ~10 s per call around the runs
CHUNK_S, START_S, INSTALL_S, CALL_S = 4.0, 60.0, 120.0, 10.0
DEFAULT_MEAN_OUTPUT = 400.0       # mean output tokens when the request file is not here


class PlanError(ValueError):
    """A plan that cannot be run as written; the message names the file, part and field."""


@dataclass(frozen=True)
class Engine:
    """One engine of a part: the runner's --model/--config/--k/--runs and the flags."""

    model: str
    config: str
    k: int
    runs: tuple[str, ...]
    tag: str = ""                 # run-id tag (default: the sitting's)
    args: tuple[str, ...] = ()    # more runner flags, e.g. ("--policies", "feedback,goodput")
    tp: int = 1
    via: str = "session"          # "session" (calibrate/gpu/session.sh) or "cli" (simkit calibrate run)
    reserve_s: int = 0            # seconds of the part kept for the engines after this one
    k_table: str = ""             # vLLM 0.34 num_speculative_tokens_per_batch_size
    adaptive: bool = False        # vLLM 0.34 enable_adaptive_verification
    corpus_tokens: int | None = None   # vLLM 0.34 suffix_decoding_corpus_tokens

    def runner_flags(self) -> tuple[str, ...]:
        """The runner flags of the 0.34 options, then `args`."""
        out: list[str] = []
        if self.k_table:
            out += ["--k-table", self.k_table]
        if self.adaptive:
            out.append("--adaptive")
        if self.corpus_tokens is not None:
            out += ["--corpus-tokens", str(self.corpus_tokens)]
        return (*out, *self.args)

    @property
    def label(self) -> str:
        extra = " ".join(self.runner_flags())
        return f"{self.model} {self.config}{self.k or ''}" + (f" [{extra}]" if extra else "")


@dataclass(frozen=True)
class Part:
    """One device call: its engines in order and its budget in seconds."""

    name: str
    budget_s: int
    engines: tuple[Engine, ...]
    note: str = ""


@dataclass(frozen=True)
class Sitting:
    """A whole sitting: what it installs, its device budget, its parts."""

    name: str
    vllm: str
    chunks: str
    num_chunks: int
    budget_min: float
    tag: str
    cap: int
    status: str
    purpose: str
    parts: tuple[Part, ...]
    machine: str = "nvidia-h200"
    path: str = ""

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise PlanError(f"{self.path}: no part {name!r}; parts: "
                        f"{', '.join(p.name for p in self.parts)}")


def _need(table: dict, key: str, kind: type | tuple, where: str):
    if key not in table:
        raise PlanError(f"{where}: field '{key}' missing")
    v = table[key]
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        raise PlanError(f"{where}: field '{key}' must be {getattr(kind, '__name__', kind)}")
    return v


def _unknown(table: dict, known: set[str], where: str) -> None:
    extra = sorted(set(table) - known)
    if extra:
        raise PlanError(f"{where}: unknown field '{extra[0]}' (known: {', '.join(sorted(known))})")


def _engine(t: dict, where: str) -> Engine:
    _unknown(t, ENGINE_KEYS, where)
    runs = _need(t, "runs", list, where)
    if not runs or not all(isinstance(r, str) and r for r in runs):
        raise PlanError(f"{where}: field 'runs' must be a non-empty list of run specs")
    args = t.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise PlanError(f"{where}: field 'args' must be a list of strings")
    via = t.get("via", "session")
    if via not in ("session", "cli"):
        raise PlanError(f"{where}: field 'via' must be session or cli")
    ints = {}
    for key, default in (("k", 0), ("tp", 1), ("reserve_s", 0)):
        v = t.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise PlanError(f"{where}: field '{key}' must be an integer >= 0")
        ints[key] = v
    ct = t.get("corpus_tokens")
    if ct is not None and (not isinstance(ct, int) or isinstance(ct, bool)):
        raise PlanError(f"{where}: field 'corpus_tokens' must be an integer")
    return Engine(_need(t, "model", str, where), _need(t, "config", str, where), ints["k"],
                  tuple(runs), str(t.get("tag", "")), tuple(args), max(1, ints["tp"]), via,
                  ints["reserve_s"], str(t.get("k_table", "")), bool(t.get("adaptive", False)),
                  ct)


def load(path: str | Path) -> Sitting:
    """Read a plan file; a PlanError names the file, the part and the field that are wrong."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file") from None
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: not valid TOML: {exc}") from None
    _unknown(doc, {"sitting", "part"}, str(path))
    s = doc.get("sitting")
    if not isinstance(s, dict):
        raise PlanError(f"{path}: a [sitting] table is needed")
    where = f"{path} [sitting]"
    _unknown(s, SITTING_KEYS, where)
    parts = doc.get("part")
    if not isinstance(parts, list) or not parts:
        raise PlanError(f"{path}: at least one [[part]] is needed")
    out_parts = []
    for i, p in enumerate(parts, 1):
        pw = f"{path} part {p.get('name', i)}"
        _unknown(p, PART_KEYS, pw)
        engines = p.get("engine")
        if not isinstance(engines, list) or not engines:
            raise PlanError(f"{pw}: at least one [[part.engine]] is needed")
        budget = _need(p, "budget_s", int, pw)
        if not 0 < budget <= 600:
            raise PlanError(f"{pw}: field 'budget_s' must be in 1..600 (one device call)")
        out_parts.append(Part(_need(p, "name", str, pw), budget,
                              tuple(_engine(e, f"{pw} engine {j}")
                                    for j, e in enumerate(engines, 1)), str(p.get("note", ""))))
    names = [p.name for p in out_parts]
    if len(set(names)) != len(names):
        raise PlanError(f"{path}: part names repeat: {names}")
    budget_min = _need(s, "budget_min", (int, float), where)
    cap = s.get("cap", 1024)
    if not isinstance(cap, int) or cap < 1:
        raise PlanError(f"{where}: field 'cap' must be an integer >= 1")
    return Sitting(_need(s, "name", str, where), _need(s, "vllm", str, where),
                   _need(s, "chunks", str, where), _need(s, "num_chunks", int, where),
                   float(budget_min), _need(s, "tag", str, where), cap,
                   _need(s, "status", str, where), _need(s, "purpose", str, where),
                   tuple(out_parts), str(s.get("machine", "nvidia-h200")), str(path))


# ---------------------------------------------------------------------------------- script
def _groups(part: Part) -> list[list[Engine]]:
    """Consecutive engines that one session.sh call can make (same model, tag, flags, TP, no
    reserve before the last, not the user's command)."""
    out: list[list[Engine]] = []
    for e in part.engines:
        last = out[-1][-1] if out else None
        if (last is not None and e.via == last.via == "session" and last.reserve_s == 0
                and (e.model, e.tag, e.runner_flags(), e.tp) ==
                (last.model, last.tag, last.runner_flags(), last.tp)):
            out[-1].append(e)
        else:
            out.append([e])
    return out


def script(s: Sitting, part_name: str, budget_s: int | None = None) -> str:
    """The bash of one part (run by calibrate/gpu/sitting.sh from the repository root)."""
    part = s.part(part_name)
    budget = budget_s or part.budget_s
    q = shlex.quote
    lines = ["set -uo pipefail", f"# sitting {s.name}, part {part.name}: {part.note}".rstrip(": "),
             f"T_END=$(( $(date +%s) + {int(budget)} ))", 'OUT=${OUT:-/tmp/out}']
    for group in _groups(part):
        e = group[-1]
        tag = e.tag or s.tag
        args = " ".join(["--tag", tag, *e.runner_flags()])
        lines.append(f"left=$(( T_END - $(date +%s) - {e.reserve_s} ))")
        if e.via == "cli":
            corpus = e.runs[0].split(":", 1)[0]
            lines += [
                f'echo "ENGINE {e.config} via simkit calibrate run (${{left}}s left)"',
                ". /root/site/vllm_offline_env.sh",
                'export PYTHONPATH="$PWD:$PYTHONPATH" VLLM_ENABLE_V1_MULTIPROCESSING=0 '
                "PYTHONUNBUFFERED=1",
                f"W=/root/work/cli-{part.name}; mkdir -p \"$W\"",
                f"timeout $(( left - 10 )) python3 -m simkit calibrate run --model {q(e.model)} "
                f"--corpus {q(corpus)} --config {q(e.config)} --k {e.k} "
                f"--runs {q(','.join(e.runs))} --requests-dir .gpu/requests --out \"$W\" "
                f"--max-tokens-cap {s.cap} {args} >> \"$OUT/log.txt\" 2>&1",
                f'echo "ENGINE {e.config} rc=$?"',
                'python3 -m calibrate.merge "$W" $(cat "$OUT/work_dir.txt" 2>/dev/null) '
                '--into "$OUT" 2>&1 | tail -1']
            continue
        groups = " ".join(q(f"{g.config}:{g.k}@{','.join(g.runs)}") for g in group)
        lines.append(f"ARGS={q(args)} CAP={s.cap} TP={e.tp} bash calibrate/gpu/session.sh "
                     f"\"$left\" {q(e.model)} {groups}")
    lines.append('ls -la "$OUT"')
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- check
@dataclass
class Report:
    """What `check` found: problems (the plan cannot run as written), notes, estimates."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    part_s: dict[str, float] = field(default_factory=dict)
    total_s: float = 0.0


def _request_stats(path: Path) -> tuple[int, float]:
    """(requests, mean output tokens) of a token-id request file."""
    import json

    n, out = 0, 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                n += 1
                out += len(json.loads(line).get("output_ids", []))
    return n, (out / n if n else 0.0)


def _policies(e: Engine, adapter) -> int:
    """Times each run spec is made on the engine: once per K policy of the dynamic-K plugin
    (runner --policies, default all three), else once."""
    if e.config != "dynamic" or adapter.scheduler_cls("dynamic") is None:
        return 1
    args = list(e.args)
    if "--policies" in args and args.index("--policies") + 1 < len(args):
        return len([p for p in args[args.index("--policies") + 1].split(",") if p])
    from calibrate.runner import POLICIES

    return len(POLICIES)


def check(s: Sitting, requests_dir: Path | None = None) -> Report:
    """Validate a plan on the CPU host; requests_dir None skips the request files (a past
    sitting whose files are not kept), which the report says."""
    from calibrate.harness import get_adapter
    from calibrate.harness.flags import RunnerFlags, parse_k_table
    from calibrate.harness.versions import choose
    from calibrate.plan import ENGINE_OVERHEAD_S, _nearest, run_seconds
    from calibrate.runner import DEFAULT_CAP, RunSpec, check_config
    from simkit.catalog.models import get_model
    from simkit.errors import SimkitError
    from traces.corpora import list_corpora

    rep = Report()
    try:
        choice = choose(s.vllm)
    except SimkitError as exc:
        rep.problems.append(f"[sitting] vllm: {exc}")
        return rep
    if choice.warning:
        rep.notes.append(f"vllm {s.vllm}: {choice.warning}")
    adapter = get_adapter(choice.adapter)
    overhead = _nearest(ENGINE_OVERHEAD_S, choice.key, ENGINE_OVERHEAD_S["0.33"])
    corpora = set(list_corpora())
    stats: dict[Path, tuple[int, float]] = {}
    if requests_dir is None:
        rep.notes.append("request files not checked (no --requests-dir)")
    for i, part in enumerate(s.parts):
        secs = CALL_S + (INSTALL_S if i == 0 else 0.0)     # the first part installs vLLM
        for j, e in enumerate(part.engines, 1):
            where = f"part {part.name} engine {j} ({e.model} {e.config})"
            try:
                spec = get_model(e.model)
                table = parse_k_table(e.k_table) if e.k_table else None
                check_config(e.config, e.k, adapter,
                             RunnerFlags(e.corpus_tokens, table, e.adaptive))
            except SimkitError as exc:
                rep.problems.append(f"{where}: {exc}")
                continue
            secs += overhead
            for text in e.runs:
                try:
                    r = RunSpec.parse(text)
                except SimkitError as exc:
                    rep.problems.append(f"{where}: {exc}")
                    continue
                if text.split("*")[0].split(":")[3:4] not in (["calibration"], ["validation"]):
                    rep.problems.append(f"{where}: run {text!r} must name its purpose "
                                        "(calibration or validation) after the request count")
                if r.corpus not in corpora and not r.corpus.startswith("fleet-"):
                    rep.problems.append(f"{where}: run {text!r}: unknown corpus {r.corpus!r}")
                mean = DEFAULT_MEAN_OUTPUT
                if requests_dir is not None:
                    f = Path(requests_dir) / f"{spec.name}__{r.corpus}.jsonl"
                    if not f.exists():
                        rep.problems.append(f"{where}: request file {f} missing (make it with "
                                            "python -m calibrate.make_requests)")
                    else:
                        if f not in stats:
                            stats[f] = _request_stats(f)
                        have, mean = stats[f]
                        if have < r.num_requests:
                            rep.problems.append(f"{where}: run {text!r} needs {r.num_requests} "
                                                f"requests, {f} has {have}")
                    mean = min(mean, r.cap or s.cap or DEFAULT_CAP)
                hist = "hot" if r.history in ("hot", "repeat:1") else "cold"
                ran = adapter.ran_config(e.config)          # 0.34: kpad runs as suffix
                cfg = ran if ran in ("vanilla", "kpad") else "suffix"
                one = run_seconds(cfg, r.concurrency, r.num_requests, hist, mean,
                                  spec.active_params() / 1e9)
                if r.history.startswith("repeat:") and hist == "cold":
                    one *= 1.0 + float(r.history.split(":")[1])     # the prelude pass
                secs += one * r.repeats * _policies(e, adapter)
        rep.part_s[part.name] = secs
        if secs > part.budget_s:
            (rep.problems if s.status.startswith("planned") else rep.notes).append(f"part {part.name}: estimated {secs:.0f} s exceeds its budget "
                                f"of {part.budget_s} s")
    setup = START_S + s.num_chunks * CHUNK_S
    rep.total_s = setup + sum(min(v, p.budget_s) for v, p in zip(rep.part_s.values(), s.parts))
    if rep.total_s > s.budget_min * 60:
        # a past sitting's plan keeps what was planned; what ran is in its status
        (rep.problems if s.status.startswith("planned") else rep.notes).append(f"sitting: estimated {rep.total_s / 60:.1f} min (start, "
                            f"{s.num_chunks} chunk transfers, parts with the install) exceeds its "
                            f"budget of {s.budget_min:g} min")
    return rep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="calibrate.sitting_plans", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="validate a plan on the CPU host")
    c.add_argument("plan", type=Path)
    c.add_argument("--requests-dir", type=Path, help="check the request files there too")
    sc = sub.add_parser("script", help="the bash of one part")
    sc.add_argument("plan", type=Path)
    sc.add_argument("part")
    sc.add_argument("budget_s", nargs="?", type=int)
    a = ap.parse_args(argv)
    try:
        s = load(a.plan)
        if a.cmd == "script":
            sys.stdout.write(script(s, a.part, a.budget_s))
            return 0
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rep = check(s, a.requests_dir)
    for p in s.parts:
        if p.name in rep.part_s:
            print(f"part {p.name}: ~{rep.part_s[p.name]:.0f} of {p.budget_s} s, "
                  f"{len(p.engines)} engines ({'; '.join(e.label for e in p.engines)})")
    print(f"sitting {s.name}: ~{rep.total_s / 60:.1f} of {s.budget_min:g} device-minutes "
          f"(estimates, start and {s.num_chunks} transfers and install included)")
    for n in rep.notes:
        print(f"note: {n}")
    for p in rep.problems:
        print(f"error: {a.plan}: {p}", file=sys.stderr)
    return 2 if rep.problems else 0


if __name__ == "__main__":
    sys.exit(main())
