"""Synthetic GPU step records in a folder, as `calibrate fit` reads them (the bad-input suites
of issue 41: tests/integration/test_trust_wrong*.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path


def record_folder(root: Path, copies: int, seed: int = 0, repeats: bool = False) -> int:
    """Synthetic step records of three H200 runs (five with `repeats`: c0 and c1 run twice),
    written `copies` times (the same runs twice when 2: a folder someone copied a record set
    into again); returns the distinct steps."""
    import pandas as pd

    from simkit.costmodel.coefficients import Coefficients
    from simkit.costmodel.synthetic import generate_step_records

    true = dataclasses.replace(Coefficients(), gemm_scale=1.15, attn_scale=0.8,
                               device_fixed_s=80e-6, sched_req_s=6e-6, suffix_req_s=40e-6,
                               async_serial_s=50e-6, frontend_req_s=15e-6)
    spec = [("c0", "suffix", 8), ("c1", "none", 0), ("c2", "suffix", 4)]
    if repeats:
        spec += [("c0r2", "suffix", 8), ("c1r2", "none", 0)]
    steps = pd.concat([generate_step_records("llama-3.1-8b", "h200", 1, true, 60,
                                             seed=seed + i, run_id=rid, drafter=d, k=k)
                       for i, (rid, d, k) in enumerate(spec)], ignore_index=True)
    steps = steps.drop(columns=["model", "tp", "async_scheduling", "drafter"])
    runs = pd.DataFrame([{"run_id": rid, "model": "llama-3.1-8b", "tp": 1,
                          "async_scheduling": d == "none",
                          "config": "vanilla" if d == "none" else "suffix", "k": k,
                          "purpose": "calibration", "gpu": "NVIDIA H200", "corpus": "chat",
                          "concurrency": 32, "num_requests": 64,
                          "output_tok_s": (5000.0 if d == "none" else 6000.0)
                          * (1.05 if rid.endswith("r2") else 1.0)} for rid, d, k in spec])
    for c in range(copies):
        (root / f"set{c}").mkdir(parents=True)
        steps.to_parquet(root / f"set{c}" / "steps.parquet")
        runs.to_parquet(root / f"set{c}" / "runs.parquet")
    return len(steps)
