"""Rewrite the golden files after a legitimate output change.

    python3 tests/golden/regen.py            # every case
    python3 tests/golden/regen.py predict    # only the named cases
    python3 tests/golden/regen.py --check    # compare only, write nothing (exit 1 on a diff)

Run from anywhere; it runs this checkout's simkit (PYTHONPATH = the repository root), with the
raw traces where SIMKIT_TRACES_SRC (or ../shared/traces-src) points. Commit the rewritten files
with the change that caused them, saying why the output changed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golden.cases import CASES, HERE, run_case, traces_present  # noqa: E402


def main(argv: list[str]) -> int:
    """Regenerate (or with --check, compare) the named cases, all when none is named."""
    check = "--check" in argv
    names = [a for a in argv if not a.startswith("--")]
    unknown = set(names) - {c.name for c in CASES}
    if unknown:
        print(f"unknown case(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    have_traces = traces_present()
    status = 0
    for case in CASES:
        if names and case.name not in names:
            continue
        if case.needs_traces and not have_traces:
            print(f"skipped {case.name}: needs the raw traces (SIMKIT_TRACES_SRC)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            outputs = run_case(case, Path(tmp))
        for fname, data in outputs.items():
            path = HERE / fname
            same = path.is_file() and path.read_bytes() == data
            if check:
                print(f"{'same' if same else 'DIFFERS'} {fname}")
                status |= 0 if same else 1
            elif not same:
                path.write_bytes(data)
                print(f"wrote {fname}")
            else:
                print(f"unchanged {fname}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
