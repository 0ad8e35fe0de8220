"""Per-replica request files for a fleet run on the GPU (CPU host; token ids: never commit them).

`python -m calibrate.fleet_streams --model llama-3.1-8b --corpus code-reasoning --unique 64
--reuse-distance 21 --replicas 4` reads .gpu/requests/<model>__<corpus>.jsonl (made by
calibrate.make_requests), builds simkit.fleet.streams.repeat_stream over its first `unique`
requests, routes it with each policy of simkit.fleet.router, and writes
<model>__fleet-<rr|pa>-r<i>.jsonl, one per replica, in arrival order: each is one closed-loop run
on a fresh engine state (the runner resets the prefix cache and suffix tree before every run).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from traces.calibration_requests import read_requests, write_requests
from simkit.fleet.router import POLICIES, route
from simkit.fleet.streams import repeat_stream

SHORT = {"round-robin": "rr", "prefix-affinity": "pa"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="calibrate.fleet_streams", description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--unique", type=int, default=64)
    ap.add_argument("--reuse-distance", type=int, default=21)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=Path(".gpu/requests"))
    a = ap.parse_args(argv)
    src = read_requests(a.dir / f"{a.model}__{a.corpus}.jsonl")[: a.unique]
    stream = repeat_stream(len(src), a.reuse_distance)
    arrivals = [replace(src[u], id=f"s{pos}u{u}") for pos, u in enumerate(stream.tolist())]
    meta = {"model": a.model, "corpus": a.corpus, "unique": len(src),
            "reuse_distance": a.reuse_distance, "replicas": a.replicas, "files": {}}
    for policy in POLICIES:
        rep = route(policy, [r.prompt_ids for r in arrivals], a.replicas)
        for i in range(a.replicas):
            name = f"fleet-{SHORT[policy]}-r{i}"
            mine = [r for r, k in zip(arrivals, rep.tolist()) if k == i]
            write_requests(a.dir / f"{a.model}__{name}.jsonl", mine)
            meta["files"][name] = len(mine)
    (a.dir / f"{a.model}__fleet.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
