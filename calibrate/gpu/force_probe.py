"""Which forcing step waits for the GPU? Host time of each variant while the stream is busy.

Run on the GPU host (`python3 calibrate/gpu/force_probe.py`): queues ~20 ms of matrix products,
then times one call of each variant on the host. A variant that returns in microseconds does not
synchronise; one that takes about the queued time waits for the GPU.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from calibrate.forcing import FORCE_VALUE, ForceApplier


def _busy(a: torch.Tensor) -> None:
    for _ in range(25):
        a @ a


def main() -> None:
    dev = torch.device("cuda")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    logits = torch.zeros(64, 128256, device=dev)
    rows = np.arange(64, dtype=np.int64)
    toks = (rows * 7919) % 128256
    ring = ForceApplier()

    def old_full():  # the code of the 2026-11-30 11:xx and 13:47 runs
        idx = torch.from_numpy(np.stack([rows, toks])).pin_memory().to(dev, non_blocking=True)
        logits[idx[0], idx[1]] = FORCE_VALUE

    dev_idx = torch.from_numpy(np.stack([rows, toks])).to(dev)
    variants = {
        "pin_memory+copy": lambda: torch.from_numpy(np.stack([rows, toks])).pin_memory().to(
            dev, non_blocking=True),
        "advanced-assign (device idx)": lambda: logits.__setitem__((dev_idx[0], dev_idx[1]),
                                                                   FORCE_VALUE),
        "old (pin+assign)": old_full,
        "ring + index_fill_": lambda: ring(logits, rows, toks),
    }
    for name, fn in variants.items():
        times = []
        for _ in range(6):
            torch.cuda.synchronize()
            _busy(a)
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
            g = time.perf_counter()
            torch.cuda.synchronize()
            wait = time.perf_counter() - g
        print(f"PROBE {name:30s} host {np.median(times[1:]) * 1e3:8.3f} ms "
              f"(GPU still busy {wait * 1e3:.1f} ms after the last)", flush=True)


if __name__ == "__main__":
    main()
