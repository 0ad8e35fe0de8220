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
    'Software' metadata entry, then close it; a file path is written atomically
    (simkit.outfiles: never a truncated image, an error names the file)."""
    import matplotlib.pyplot as plt

    kw = {"format": fmt} if fmt else {}
    try:
        if isinstance(path, (str, Path)):
            from simkit.outfiles import write_atomic

            write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=dpi, metadata={"Software": None},
                                                       **kw))
        else:
            fig.savefig(path, dpi=dpi, metadata={"Software": None}, **kw)
    finally:
        plt.close(fig)


__all__ = ["plt_agg", "save_png"]
