"""Shared by the bad-input suites (test_robust_cli, test_trust): run `simkit` through its console
entry point and check that an error is one `error:` line."""

from __future__ import annotations

import pytest

from simkit.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `simkit ARGV` through the console entry point."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out = capsys.readouterr()
    code = exc.value.code if isinstance(exc.value.code, int) else (0 if exc.value.code is None
                                                                    else 1)
    return code, out.out, out.err


def one_line_error(err: str, *needles: str) -> str:
    """The one `error:` line of `err` (no traceback), which holds every needle."""
    from simkit.progress import is_phase_line

    # a phase's progress line (a command past 2 s before it failed) is not an error line
    lines = [x for x in err.splitlines() if x.strip() and not is_phase_line(x)]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test its own cache folder, and no --debug from the environment."""
    monkeypatch.setenv("SIMKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SIMKIT_DEBUG", raising=False)
