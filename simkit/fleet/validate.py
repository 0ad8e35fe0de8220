"""The fleet against the real vLLM fleet records (calibrate/data/vllm-0.33, corpora fleet-*).

The GPU fleet (calibrate.fleet_streams): the first UNIQUE llama-3.1-8b code-reasoning
requests of calibrate.make_requests (seed 0), each served twice with a reuse distance of
REUSE_DISTANCE arrivals (simkit.fleet.streams.repeat_stream), routed over REPLICAS replicas by
round-robin and prefix-affinity (simkit.fleet.router.route); each replica's stream ran as one
closed-loop run at concurrency 8 on a freshly reset engine (its own suffix tree and prefix cache).

Here each recorded run's stream is rebuilt from the raw traces with the same functions (same
requests, same order) and the closed loop is simulated under the run's conditions
(simkit.validation.run_prediction.predict_run) with the suffix drafter drafting inside the
simulated engine (simkit.drafters.suffix.in_loop: after each simulated step, every request of the
batch adds its sampled tokens to the trees and drafts, as vLLM's proposer does), from an empty
tree. Compared: accepted draft tokens per decode request-step inside the run's steady window
(vLLM's own counts; independent of the cost model) and output tok/s (which depends on the cost
model: the calibration of the run's vLLM version, h200-vllm033 for these runs, unless
`calibration` names another).

Each speculative run is also predicted from simkit validate's acceptance table (replayed ahead of
time, "concurrent": C requests advance one token per tick), the `table_*` columns: the
interleaving that table assumes is what the in-loop drafting corrects (docs/fleet.md
"Validation").
"""

from __future__ import annotations

from typing import Any

from simkit.choices import Ordering

MODEL = "llama-3.1-8b"
CORPUS = "code-reasoning"
UNIQUE = 64
REUSE_DISTANCE = 21
REPLICAS = 4
SHORT = {"rr": "round-robin", "pa": "prefix-affinity"}
ACCEPT_GOAL = 0.02            # the goal: accepted tokens per step within 2 %


def fleet_streams(model: str = MODEL, corpus: str = CORPUS, unique: int = UNIQUE,
                  reuse_distance: int = REUSE_DISTANCE, replicas: int = REPLICAS) -> dict[str, list]:
    """Per recorded corpus name (fleet-rr-r0 ...), the replica's requests in arrival order, as
    calibrate.fleet_streams wrote them (uncapped; run_requests applies the run's cap)."""
    from simkit.fleet.router import route
    from simkit.fleet.streams import repeat_stream
    from simkit.validation.requests import request_pool

    pool = request_pool(model, corpus, n=unique)
    stream = repeat_stream(len(pool), reuse_distance)
    arrivals = [pool[u] for u in stream.tolist()]
    out: dict[str, list] = {}
    for short, policy in SHORT.items():
        rep = route(policy, [r.prompt_ids for r in arrivals], replicas)
        for i in range(replicas):
            out[f"fleet-{short}-r{i}"] = [r for r, k in zip(arrivals, rep.tolist()) if k == i]
    return out


def fleet_records(root=None, loaded=None):
    """(steps, runs) of the recorded fleet runs only, or (None, None) when there are none.
    `loaded`: the (steps, runs) of load_records(root), where the caller has read them already."""
    from simkit.validation.measured import load_records

    steps, runs = loaded if loaded is not None else load_records(root)
    if runs is None:
        return None, None
    runs = runs[runs["corpus"].astype(str).str.startswith("fleet-")]
    runs = runs.sort_values("run_id", kind="stable").reset_index(drop=True)
    return steps[steps["run_id"].isin(set(runs["run_id"]))], runs


def validate_fleet(root=None, calibration: str | None = None,
                   run_ids: list[str] | None = None, loaded=None,
                   workers: int | None = None) -> list[dict[str, Any]]:
    """One row per recorded fleet run (run_id order): measured vs predicted accepted/step and tok/s,
    and whether the rebuilt stream matches the records (request count, output tokens). The
    streams are rebuilt here; the runs are predicted on every core
    (simkit.validation.parallel.map_runs: the rows come back in run order). `loaded`: the
    records of `root` already read (fleet_records); `workers`: map_runs' (None: every core)."""
    import functools

    from simkit.validation.parallel import map_runs

    steps, runs = fleet_records(root, loaded)
    if runs is None or not len(runs):
        return []
    selected = [run for run in runs.to_dict("records")
                if not run_ids or run["run_id"] in run_ids]
    streams: dict[str, dict] = {}
    for run in selected:            # in this process, before any worker forks (they inherit)
        model = str(run["model"])
        if model not in streams:
            streams[model] = fleet_streams(model=model)
    one = functools.partial(_fleet_row, steps=steps, streams=streams, calibration=calibration)
    return map_runs(one, selected, workers=workers)


def _fleet_row(run: dict[str, Any], *, steps, streams: dict[str, dict],
               calibration: str | None) -> dict[str, Any]:
    """The row of one recorded fleet run (validate_fleet)."""
    from simkit.validation.requests import check_against_run, run_requests
    from simkit.validation.run_prediction import measured_figures, predict_run

    name = str(run["corpus"])
    reqs, skipped = run_requests(streams[str(run["model"])][name], run)
    s = steps[steps["run_id"] == run["run_id"]].sort_values("step")
    check = check_against_run(reqs, run, s)
    spec = str(run["config"]) != "vanilla"
    pred = predict_run(reqs, run, calibration=calibration, in_loop=True)
    table = predict_run(reqs, run, ordering=Ordering.CONCURRENT, calibration=calibration) \
        if spec else None
    meas = measured_figures(run, s)
    measured = meas["accepted_per_step"] if spec else None
    acc_err = _rel(pred.accepted_per_step, measured)
    return {
        "run_id": run["run_id"], "policy": SHORT[name.split("-")[1]],
        "replica": int(name.rsplit("r", 1)[1]), "config": str(run["config"]),
        "k": int(run["k"] or 0), "vllm_version": str(run.get("vllm_version", "")),
        "requests": len(reqs), "requests_match_records": check["ok"],
        "measured_accepted_per_step": measured,
        "predicted_accepted_per_step": pred.accepted_per_step if spec else None,
        "accepted_error": acc_err,
        "within_goal": None if acc_err is None else abs(acc_err) <= ACCEPT_GOAL,
        "table_accepted_per_step": table.accepted_per_step if table else None,
        "table_accepted_error": _rel(table.accepted_per_step, measured) if table else None,
        "measured_tok_s": float(run["output_tok_s"]),
        "predicted_tok_s": pred.output_tok_s,
        "tok_s_error": pred.output_tok_s / float(run["output_tok_s"]) - 1,
        "predicted_prefix_hit_rate": (pred.prefix or {}).get("hit_rate"),
        "measured_prefill_tokens": check.get("steps_prefill_tokens"),
        "predicted_prefill_tokens": (pred.prefix or {}).get("prefill_tokens"),
    }


def _rel(predicted: float, measured: float | None) -> float | None:
    """predicted / measured - 1, or None without a (non-zero) measurement."""
    return predicted / measured - 1 if measured else None


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean absolute errors (accepted/step over spec runs, in-loop and from the table; tok/s over
    all) and the policy ranking (mean accepted/step per policy, measured and predicted)."""
    import numpy as np

    acc = [abs(r["accepted_error"]) for r in rows if r["accepted_error"] is not None]
    table = [abs(r["table_accepted_error"]) for r in rows
             if r.get("table_accepted_error") is not None]
    tok = [abs(r["tok_s_error"]) for r in rows]
    rank: dict[str, dict[str, float]] = {}
    for pol in sorted({r["policy"] for r in rows}):
        mine = [r for r in rows if r["policy"] == pol and r["accepted_error"] is not None]
        if mine:
            rank[pol] = {"measured": float(np.mean([r["measured_accepted_per_step"] for r in mine])),
                         "predicted": float(np.mean([r["predicted_accepted_per_step"]
                                                     for r in mine]))}
    order = lambda side: sorted(rank, key=lambda p: -rank[p][side])  # noqa: E731
    return {"runs": len(rows), "accepted_mean_abs_error": float(np.mean(acc)) if acc else None,
            "accepted_max_abs_error": float(np.max(acc)) if acc else None,
            "accepted_within_goal": sum(1 for r in rows if r["within_goal"]),
            "spec_runs": len(acc),
            "table_accepted_mean_abs_error": float(np.mean(table)) if table else None,
            "table_accepted_within_goal": sum(1 for x in table if x <= ACCEPT_GOAL),
            "tok_s_mean_abs_error": float(np.mean(tok)) if tok else None,
            "accepted_by_policy": rank,
            "ranking_agrees": order("measured") == order("predicted") if rank else None,
            "requests_match_records": all(r["requests_match_records"] for r in rows)}
