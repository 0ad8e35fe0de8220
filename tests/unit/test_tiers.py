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



def test_long_tests_start_first_and_unit_tests_fill_the_end():
    """conftest's rank: slow-marked tests, then the other integration tests, then unit tests."""
    from types import SimpleNamespace

    from conftest import start_rank

    def item(*marks):                                 # what start_rank reads of a pytest item
        return SimpleNamespace(iter_markers=lambda: iter(SimpleNamespace(name=m) for m in marks))

    assert [start_rank(item("slow")), start_rank(item("integration", "slow")),
            start_rank(item("integration")), start_rank(item("unit"))] == [0, 0, 1, 2]


def test_this_run_takes_its_tests_in_that_order(request):
    """The run's collected order (what the xdist workers are handed) ranks never go back."""
    from conftest import start_rank

    ranks = [start_rank(i) for i in request.session.items]
    assert ranks == sorted(ranks)
