"""Every test file sits in a tier folder (tests/unit, tests/integration, tests/slow), so that
`-m unit` and its siblings select every test of their tier and no test is outside all three."""

from __future__ import annotations

from pathlib import Path

from conftest import TIERS

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_is_in_a_tier():
    stray = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                   if p.relative_to(TESTS).parts[0] not in TIERS)
    assert stray == [], f"move these into tests/unit, tests/integration or tests/slow: {stray}"


def test_no_two_test_files_share_a_name():
    # pytest imports test files by their name (no __init__.py), so two of one name would clash
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert len(names) == len(set(names))
