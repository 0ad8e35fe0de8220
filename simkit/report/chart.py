"""The predict report's chart: predicted tok/s per configuration with the seed spread (written
by `simkit predict --plot` and embedded in the HTML report)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING

from simkit.plotting import plt_agg, save_png

if TYPE_CHECKING:                    # type hints only
    from simkit.app.predict import Prediction


def plot_prediction(pred: Prediction, path: str | Path | IO[bytes]) -> None:
    """Bar chart of predicted tok/s per config with the seed spread (`path`: a file name or a
    binary file object; PNG without a timestamp, so identical inputs give identical bytes)."""
    plt = plt_agg()
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(pred.rows) + 2), 3.6))
    names = [r.config for r in pred.rows]
    ax.bar(names, [r.output_tok_s for r in pred.rows],
           yerr=[r.output_tok_s_std for r in pred.rows], color="#4c72b0", capsize=3)
    for i, r in enumerate(pred.rows):
        if r.speedup_vs_vanilla:
            ax.annotate(f"{r.speedup_vs_vanilla:.2f}x", (i, r.output_tok_s + r.output_tok_s_std),
                        xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                        fontsize=7)
    ax.set_ylabel("output tok/s (steady state)")
    ax.margins(y=0.12)
    ax.set_title(f"{pred.model} / {pred.corpus} on {pred.hardware} TP{pred.tp} "
                 f"({pred.cost_label})", fontsize=9)
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.tight_layout()
    save_png(fig, path, fmt="png")


__all__ = ["plot_prediction"]
