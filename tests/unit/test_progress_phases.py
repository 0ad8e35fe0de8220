"""Progress that tells the truth (simkit.progress): stated phases with their own totals, one
line per phase on stderr off a terminal once the command has run a while, simulations counted
towards the phase they run in, and the capacity search's rounds each a phase of known size."""

from __future__ import annotations

import io
import re

import pytest

from simkit import progress
from simkit.progress import Tracker, phase


@pytest.fixture
def said(monkeypatch):
    """A tracker writing its phase lines to a buffer, installed as the command's, with lines
    due at once (LINE_AFTER_S = 0)."""
    out = io.StringIO()
    monkeypatch.setattr(progress, "LINE_AFTER_S", 0.0)
    tracker = Tracker(None, out)
    progress._CURRENT.append(tracker)
    yield tracker, out
    progress._CURRENT.remove(tracker)


def test_one_line_per_phase_with_its_total_and_time_left(said):
    tracker, out = said
    with phase("replaying the table", 1000, "output tokens") as told:
        told(250)
        told(250)
    with phase("closed-loop pilot", 4):
        tracker.started(4)
        tracker.finished(2)
        tracker.finished(2)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("replaying the table: 0 of 1,000 output tokens done after")
    assert lines[1].startswith("closed-loop pilot: 0 of 4 simulations done")
    assert (tracker.done, tracker.total) == (4, 4)


def test_the_line_waits_for_progress_and_gives_the_time_left(said, monkeypatch):
    tracker, out = said
    monkeypatch.setattr(progress, "LINE_AFTER_S", 3600.0)
    with phase("building", 10, "output tokens") as told:
        told(4)
        assert out.getvalue() == ""                 # a short command prints nothing
        monkeypatch.setattr(progress, "LINE_AFTER_S", 0.0)
        told(1)
        told(1)
    (line,) = out.getvalue().splitlines()
    assert re.match(r"building: 5 of 10 output tokens done after \d+ s, about \d+ s left at "
                    r"this pace$", line), line


def test_no_time_left_from_the_first_units_of_a_phase(said, monkeypatch):
    """A pace read off the first units (which carry a compile or a table load) is no estimate:
    under a tenth done, the line gives how far, not a time left."""
    tracker, out = said
    monkeypatch.setattr(progress, "LINE_AFTER_S", 3600.0)
    with phase("whole-corpus acceptance", 4_270_008, "output tokens") as told:
        told(481)
        monkeypatch.setattr(progress, "LINE_AFTER_S", 0.0)
        told(1)
    (line,) = out.getvalue().splitlines()
    assert re.match(r"whole-corpus acceptance: 482 of 4,270,008 output tokens done after \d+ s$",
                    line), line


def test_simulations_outside_a_phase_form_one_and_inside_count_towards_it(said):
    tracker, out = said
    tracker.started(3)
    tracker.finished(3)
    tracker.started(2)                             # the same "simulations" phase: no new line
    with phase("round 1", 2):
        tracker.started(1)
        tracker.started(1)                         # as stated, in two calls
        tracker.finished(2)
    with phase("round 2", 1):
        tracker.started(3)                         # more than stated: the total says so
        tracker.finished(3)
    lines = out.getvalue().splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["simulations", "round 1", "round 2"]
    assert tracker.summary() == "8 of 10 simulation(s) had finished"


def test_no_tracker_no_lines(capsys):
    with phase("anything", 3) as told:
        told(3)
    assert capsys.readouterr().err == ""


def test_capacity_search_rounds_are_phases_of_known_size(said):
    from simkit.app.cells import load_cell
    from simkit.app.options import Goals, RunOptions
    from simkit.choices import ProfileSource
    from simkit.engine.config import parse_configs
    from simkit.whatif.capacity import max_sustainable_rates

    tracker, out = said
    workload, cost = load_cell(RunOptions("llama-3.1-8b", "chat", source=ProfileSource.SHIPPED))
    rows = max_sustainable_rates(workload, cost, parse_configs("vanilla,kpad:4"),
                                 Goals(ttft_ms_p99=1000), seeds=2, min_requests=64,
                                 max_requests=300, workers=1, rel_tol=0.3)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("capacity search: closed-loop pilot (C=32) of 2 configuration(s)"
                               ": 0 of 2 simulations")
    # after the rounds, where a lowest failed rate stopped on a TPOT-only miss: its seeds left
    settle = [ln for ln in lines[1:] if "binding goal" in ln]
    rounds = [ln for ln in lines[1:] if ln not in settle]
    assert all(re.match(r"capacity search: the binding goal at the lowest failed rate of \d "
                        r"configuration\(s\), up to \d+ more seed run\(s\): 0 of \d+ "
                        r"simulations", ln) for ln in settle) and len(settle) <= 1, settle
    assert len(rounds) == max(r["iterations"] for r in rows)
    for i, ln in enumerate(rounds, 1):
        m = re.match(r"capacity search: round (\d+) \(at most 40\) of (\d) configuration\(s\) "
                     r"still searching x up to 2 seed\(s\): 0 of (\d+) simulations", ln)
        assert m and int(m[1]) == i and int(m[3]) == 2 * int(m[2]), ln
    assert tracker.done == tracker.total


def _watched(monkeypatch):
    """Every (phase name, total) the tracker's simulations counted towards, in order, and
    every (phase name, total, done) as it closed."""
    seen, closed = [], []
    sim_phase, close_phase = Tracker._sim_phase, Tracker.close_phase

    def watch(self, n, draw):
        ph = sim_phase(self, n, draw)
        seen.append((ph.name, ph.total))
        return ph

    def watch_close(self, ph):
        closed.append((ph.name, ph.total, ph.done))
        close_phase(self, ph)

    monkeypatch.setattr(Tracker, "_sim_phase", watch)
    monkeypatch.setattr(Tracker, "close_phase", watch_close)
    return seen, closed


def _host(run):
    from simkit.whatif.host import host

    return host(run, factors="1,2", configs="vanilla,kpad:4")


def _hardware(run):
    from simkit.whatif.hardware import hardware

    return hardware(run, targets="h100,h200", configs="vanilla,kpad:4")


def _quantization(run):
    from simkit.whatif.quantization import quantization

    return quantization(run, configs="vanilla,kpad:4")


@pytest.mark.parametrize("what_if,phases", [(_host, 2), (_hardware, 2), (_quantization, 3)],
                         ids=["host", "hardware", "quantization"])
def test_a_phased_what_if_states_each_step_with_a_total_that_never_grows(said, monkeypatch,
                                                                         what_if, phases):
    """The what-ifs used to show one "simulations" count that grew with every step; each
    step is now a phase whose total (its configurations x seeds) is known when it opens."""
    from simkit.app.options import RunOptions
    from simkit.choices import ProfileSource

    tracker, out = said
    seen, closed = _watched(monkeypatch)
    what_if(RunOptions("llama-3.1-8b", "chat", source=ProfileSource.SHIPPED, seeds=2,
                       num_requests=48, concurrency=8, workers=1))
    lines = out.getvalue().splitlines()
    assert len(lines) == phases, lines                   # one line per step, said as it opens
    for ln in lines:
        assert re.match(r"^.+ \((\w+ )?\d of \d\): 2 configuration\(s\) x 2 seed\(s\) of 48 "
                        r"requests: 0 of 4 simulations", ln), ln
    names = list(dict.fromkeys(name for name, _ in seen))
    assert len(names) == phases and "simulations" not in names
    for name in names:
        totals = {total for n, total in seen if n == name}
        assert totals == {4}, (name, totals)             # stated at the start, never grown
    assert closed == [(name, 4, 4) for name in names]    # each ends with all it stated done
    assert tracker.done == tracker.total == 4 * phases


def test_a_sweep_cell_counts_as_one_cell_not_as_its_simulations(said):
    """sweep states one phase of cells (the command's); a cell's own simulations, which used
    to grow one "simulations" count cell after cell, are not counted again under it."""
    from simkit.app.options import RunOptions
    from simkit.app.sweep import _cell
    from simkit.choices import ProfileSource

    tracker, out = said
    res = _cell("llama-3.1-8b", "chat", RunOptions(source=ProfileSource.SHIPPED, seeds=1,
                                                     num_requests=32, concurrency=8),
                "vanilla,kpad:4")
    assert res["error"] is None and len(res["rows"]) == 2
    assert (tracker.total, out.getvalue()) == (0, "")


def test_a_one_off_wait_beside_the_runs_is_left_out_of_their_time_left(said, monkeypatch):
    """The first run of a fresh install waits for the engine's compile (an `aside` phase): the
    runs' time left is their own pace, not the compile's (predict said 'about 774 s left' of
    2 s of runs; a tenth done after the compile, 9 * 102 s here)."""
    import time

    tracker, out = said
    clock = [time.monotonic()]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(progress, "LINE_AFTER_S", 3600.0)    # no line until the run is done
    tracker.started(10)
    with phase("compiling", 1, "compile", aside=True) as told:
        clock[0] += 100.0                  # the first run waits 100 s for the compile
        told(1)
    clock[0] += 2.0                        # and then runs in 2 s
    monkeypatch.setattr(progress, "LINE_AFTER_S", 0.0)
    tracker.finished(1)
    (line,) = [x for x in out.getvalue().splitlines() if x.startswith("simulations")]
    assert line.endswith("1 of 10 simulations done after 102 s, about 18 s left at this pace")
