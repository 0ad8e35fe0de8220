"""matplotlib, set up once for every plot simkit writes: the Agg backend (no display needed) and
figures saved without a timestamp in their metadata, so identical inputs give identical bytes."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any


def plt_agg() -> Any:
    """matplotlib.pyplot on the Agg backend, imported on demand (keeps `simkit --help` fast)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: str | Path | IO[bytes], *, dpi: int = 110,
             fmt: str | None = None) -> None:
    """Write `fig` to `path` (format from its extension, or `fmt`) without the
    'Software' metadata entry, then close it."""
    import matplotlib.pyplot as plt

    kw = {"format": fmt} if fmt else {}
    fig.savefig(path, dpi=dpi, metadata={"Software": None}, **kw)
    plt.close(fig)


__all__ = ["plt_agg", "save_png"]
