"""Plot of the reproduction: predicted vs published van(OFF) and final throughput per model."""

from __future__ import annotations

from pathlib import Path

from simkit.plotting import plt_agg, save_png
from simkit.whatif.common import WhatIfResult


def plot(result: WhatIfResult, path: str | Path) -> None:
    """Left: tok/s, predicted bars with published markers; right: final/van ratio."""
    plt = plt_agg()
    rows = result.rows
    names = [r["model"] for r in rows]
    xs = list(range(len(rows)))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.2))
    a1.bar([x - 0.2 for x in xs], [r["van_pred"] or 0 for r in rows], 0.4, label="van(OFF) simkit")
    a1.bar([x + 0.2 for x in xs], [r["final_pred"] or 0 for r in rows], 0.4, label="final simkit")
    pub = [(x, r) for x, r in zip(xs, rows) if r.get("published")]
    if pub:
        a1.scatter([x - 0.2 for x, _ in pub], [r["van_pub"] for _, r in pub], marker="_", s=300,
                   color="k", label="published", zorder=3)
        a1.scatter([x + 0.2 for x, _ in pub], [r["final_pub"] for _, r in pub], marker="_",
                   s=300, color="k", zorder=3)
    a1.set_yscale("log")
    a1.set_ylabel("output tok/s (mix, C=32)")
    a2.bar(xs, [r["ratio_pred"] or 0 for r in rows], 0.5, label="simkit final / van(OFF)")
    if pub:
        a2.scatter([x for x, _ in pub], [r["ratio_pub"] for _, r in pub], marker="_", s=300,
                   color="k", label="published", zorder=3)
    a2.set_ylabel("final / van(OFF)")
    for ax in (a1, a2):
        ax.set_xticks(xs, names, rotation=40, ha="right", fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(result.question + " (black: published; models without a mark are held out)",
                 fontsize=9)
    fig.tight_layout()
    save_png(fig, path)
