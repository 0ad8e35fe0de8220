"""Run specs and run ids of the calibration runner (pure): what one measured run is, and the id
each of its passes and repeats gets."""

from __future__ import annotations

from dataclasses import dataclass

from calibrate.passes import plan_passes
from simkit.errors import InputError


@dataclass(frozen=True)
class RunSpec:
    """One measured run on an engine."""

    corpus: str
    concurrency: int
    num_requests: int
    purpose: str = "calibration"
    history: str = "cold"
    repeats: int = 1
    cap: int | None = None      # max_tokens cap of this run; None: the engine call's cap

    @classmethod
    def parse(cls, text: str) -> "RunSpec":
        """'corpus:concurrency:num_requests[:purpose[:history]][:cap=N][*R]'; history cold, hot
        or repeat:P (calibrate.passes says what each serves); cap=N sets this run's max_tokens
        cap; *R makes the run R times (repeated)."""
        text, star, rep = text.partition("*")
        repeats = 1
        if star:
            try:
                repeats = int(rep)
            except ValueError:
                raise InputError(f"run spec {text}*{rep}: repeats after '*' must be an integer",
                                 field="runs") from None
            if repeats < 1:
                raise InputError(f"run spec {text}*{rep}: repeats must be >= 1", field="runs")
        parts = text.split(":")
        cap = None
        for part in [x for x in parts if x.startswith("cap=")]:
            try:
                cap = int(part[4:])
            except ValueError:
                raise InputError(f"run spec {text!r}: {part} must be cap=<integer>",
                                 field="runs") from None
            if cap < 1:
                raise InputError(f"run spec {text!r}: cap must be >= 1", field="runs")
            parts.remove(part)
        if len(parts) < 3:
            raise InputError(f"run spec {text!r} is not "
                             "corpus:concurrency:num_requests[:purpose[:history]]", field="runs")
        history = ":".join(parts[4:]) or "cold"
        try:
            plan_passes([], history)
        except (ValueError, InputError) as e:
            raise InputError(f"run spec {text!r}: {e}", field="runs") from None
        parts = parts[:4]
        try:
            c, n = int(parts[1]), int(parts[2])
        except ValueError:
            raise InputError(f"run spec {text!r}: concurrency and num_requests must be integers",
                             field="runs") from None
        if c < 1 or n < 1:
            raise InputError(f"run spec {text!r}: values must be >= 1", field="runs")
        return cls(parts[0], c, n, parts[3] if len(parts) == 4 else "calibration", history,
                   repeats, cap)



def table_file_name(model: str, corpus: str, concurrency: int, n: int) -> str:
    """File of the tuned batch-size -> K table of one run's requests."""
    return f"{model}__{corpus}__c{concurrency}_n{n}.json"


def run_tag(model: str, config: str, k: int, tp: int = 1, force: bool = True,
            extra: str = "") -> str:
    """Run-id prefix: model_config[K][-tpN][-unforced][-extra], unique per measured setting."""
    tag = f"{model}_{config}{k if config != 'vanilla' else ''}"
    if tp > 1:
        tag += f"-tp{tp}"
    if not force:
        tag += "-unforced"
    if extra:
        tag += f"-{extra}"
    return tag


def unique_id(run_id: str, used: set[str]) -> str:
    """run_id, or run_id-again<N> when this engine already made a run of that id (a hot spec's
    recorded first pass repeats the cold spec of the same list); records it in `used`."""
    out, n = run_id, 1
    while out in used:
        n += 1
        out = f"{run_id}-again{n}"
    used.add(out)
    return out


def repeat_tag(tag: str, rep: int) -> str:
    """Run-id extra for repeat `rep` (1-based) of a run list: the first keeps `tag`, later ones
    add rep<r>, so every repeat of one setting has its own id and the same setting otherwise."""
    if rep <= 1:
        return tag
    return f"{tag}-rep{rep}" if tag else f"rep{rep}"


def repeated(runs: list[RunSpec]) -> list[tuple[int, RunSpec]]:
    """(repeat number, spec) pairs: round r makes every spec with at least r repeats, in list
    order, so that slow drift of the host spreads over every repeated setting instead of one."""
    rounds = max((s.repeats for s in runs), default=0)
    return [(r, s) for r in range(1, rounds + 1) for s in runs if s.repeats >= r]

