"""The prefix table shipped beside a profile (<corpus>.prefix.npz): per sampled request, the
earliest earlier sampled request it shares its longest prefix of whole 16-token prompt blocks
with, and that length. Enough to rebuild canonical block keys for prefix caching without storing
token ids or hashes (simkit.block_hash)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simkit.errors import InputError

# "simkit.engine.block_hash" is the scheme's module as the shipped profiles record it (where it
# lived when they were built, now simkit.block_hash); the text stays byte-identical to theirs
PREFIX_RULE = ("prompt prefix sharing for prefix caching: per sampled request, ref = the earliest "
               "earlier sampled request with its longest common prefix of whole 16-token blocks "
               "(-1: none) and shared = that prefix in blocks, from chained 64-bit block hashes "
               "of the token ids (simkit.engine.block_hash); no token ids or hashes stored")


def save_prefix_table(block_hashes: tuple, path: Path) -> None:
    """The prefix table (ref, shared) as a byte-stable npz (fixed zip time, deflate)."""
    import io
    import os
    import zipfile

    from simkit.block_hash import share_table, unpack

    ref, shared = share_table(unpack(*block_hashes))
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with zipfile.ZipFile(tmp, "w") as zf:
        for name, arr in (("ref", ref), ("shared", shared)):
            buf = io.BytesIO()
            np.save(buf, arr, allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue(), compresslevel=9)
    os.replace(tmp, path)


def load_prefix_table(path: Path, prompt_len: np.ndarray) -> tuple:
    """Canonical block keys from a shipped prefix table; InputError naming the file if broken."""
    from simkit.block_hash import chains_from_share

    try:
        with np.load(path, allow_pickle=False) as z:
            ref, shared = z["ref"], z["shared"]
        if ref.shape != shared.shape or ref.shape[0] != len(prompt_len):
            raise ValueError(f"{ref.shape[0]} rows for {len(prompt_len)} requests")
        return chains_from_share(ref, shared, np.asarray(prompt_len, np.int64) // 16)
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(f"unreadable prefix table ({exc})", path=str(path),
                         field="ref/shared") from exc


__all__ = ["PREFIX_RULE", "load_prefix_table", "save_prefix_table"]
