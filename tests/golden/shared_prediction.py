"""Run several `simkit predict` command lines that differ only in --format in one process, with
one prediction between them: the golden tests print the README's prediction as a table, JSON and
CSV, and simulating it three times would only repeat the same deterministic work.

    python3 -m golden.shared_prediction OUTDIR ARGV_JSON ...

Each ARGV_JSON is one command line (a JSON list of words after `simkit`); its stdout goes to
OUTDIR/<index>.out. Every command line runs through simkit's console entry point (option parsing,
checks, the format's renderer, exit code), exactly as `python3 -m simkit` would; only the call
into simkit.app.predict.predict is remembered by its arguments, so that the second and third
command lines render the prediction the first one computed. Any keyword that is not the same
across the command lines (other than the progress display) makes a new prediction.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path


def _remembering(predict):
    """predict, remembered by its arguments (the progress display left out of the key)."""
    seen: dict[str, object] = {}

    def wrapper(*args, **kwargs):
        key = repr((args, sorted((k, v) for k, v in kwargs.items() if k != "progress")))
        if key not in seen:
            seen[key] = predict(*args, **kwargs)
        return seen[key]

    return wrapper


def main(argv: list[str]) -> int:
    """Run each command line; 0 when every one exited 0, else the first non-zero code."""
    from simkit.cli import main as simkit_main
    from simkit.app import predict as predict_module

    outdir, lines = Path(argv[0]), [json.loads(a) for a in argv[1:]]
    predict_module.predict = _remembering(predict_module.predict)
    real_stdout = sys.stdout
    for i, words in enumerate(lines):
        buf = io.BytesIO()
        sys.stdout = io.TextIOWrapper(buf, encoding=real_stdout.encoding,
                                      errors=real_stdout.errors, write_through=True)
        try:
            simkit_main(list(words))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.stdout.flush()
            sys.stdout = real_stdout
        if code != 0:
            print(f"simkit {' '.join(words)} exited {code}", file=sys.stderr)
            return code
        (outdir / f"{i}.out").write_bytes(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
