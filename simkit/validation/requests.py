"""Rebuild the exact requests of a measured run from the raw traces, the way
calibrate/make_requests.py and the runner chose them, and check them against the records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SEED = 0                   # calibrate.make_requests default seed (the README's runs used it)


@dataclass(frozen=True)
class RunRequest:
    """One replayed request: prompt ids and the (capped) output ids that were forced."""

    prompt_ids: np.ndarray
    output_ids: np.ndarray


def request_pool(model: str, corpus: str, n: int | None = None,
                 seed: int = SEED) -> list[RunRequest]:
    """The request file calibrate.make_requests writes, in memory: the model's own non-empty
    outputs of the corpus, permuted with `seed`, the first n (same arithmetic, not a copy).
    n None: the whole permutation, whose head is every file's whatever its -n (400 by default,
    600 for the 512-request runs), so a run of any length is rebuilt from one pool."""
    from traces.model_outputs import model_outputs
    from traces.corpora import load_corpus

    own = model_outputs(model).own
    reqs = [r for r in load_corpus(corpus, model).requests
            if r.model == own and len(r.prompt_ids) and len(r.output_ids)]
    perm = np.random.default_rng(seed).permutation(len(reqs))
    return [RunRequest(np.asarray(reqs[i].prompt_ids, np.int32),
                       np.asarray(reqs[i].output_ids, np.int32)) for i in perm[:n]]


def run_requests(pool: list[RunRequest], run: dict[str, Any]) -> tuple[list[RunRequest],
                                                                        dict[str, int]]:
    """The run's requests in admission order: traces.calibration_requests.select_requests over the
    pool (first num_requests that fit max_model_len with the cap and K lookahead), outputs
    truncated to max_tokens_cap. Returns (requests, skip counts by reason)."""
    from traces.calibration_requests import CalRequest, select_requests

    # made as select_requests takes them (it stops at the num_requests-th that fits): the pool
    # holds the whole corpus, and a list of it per run cost ~7 ms a run, 196 runs per validate
    cal = (CalRequest(f"r{i}", r.prompt_ids, r.output_ids) for i, r in enumerate(pool))
    kept, skipped = select_requests(cal, int(run["num_requests"]), int(run["max_model_len"]),
                                    int(run["k"] or 0), int(run["max_tokens_cap"] or 0))
    return [RunRequest(r.prompt_ids, r.output_ids) for r in kept], skipped


def check_against_run(reqs: list[RunRequest], run: dict[str, Any], steps=None) -> dict[str, Any]:
    """Counts the records imply vs the rebuilt requests: number of requests, total output
    tokens (runs.total_output_tokens, and the sum of steps' num_emitted_tokens when given),
    and the prefill tokens scheduled (steps' num_prefill_tokens, an upper bound on prompt
    tokens minus prefix-cache hits). `ok` is False when a count that must match does not."""
    out_total = int(sum(len(r.output_ids) for r in reqs))
    prompt_total = int(sum(len(r.prompt_ids) for r in reqs))
    res: dict[str, Any] = {"num_requests": len(reqs), "expected_requests": int(run["num_requests"]),
                           "output_tokens": out_total,
                           "expected_output_tokens": int(run["total_output_tokens"]),
                           "prompt_tokens": prompt_total}
    ok = len(reqs) == int(run["num_requests"]) and out_total == int(run["total_output_tokens"])
    if steps is not None and len(steps):
        emitted = int(steps["num_emitted_tokens"].sum())
        res["steps_emitted_tokens"] = emitted
        res["steps_prefill_tokens"] = int(steps["num_prefill_tokens"].sum())
        ok = ok and emitted == out_total
    res["ok"] = bool(ok)
    return res
