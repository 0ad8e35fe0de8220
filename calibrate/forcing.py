"""Trace-forced outputs: which logits row must pick which token so that vLLM reproduces a trace.

With dummy weights the target's greedy choice is meaningless; forcing the recorded token at every
sampled position (including every verification position under speculative decoding) makes the
accepted-draft counts of a real run equal those of the real trace, while all GPU and host work
still runs as deployed. This module holds the pure index arithmetic (tested without a GPU) and a
small torch helper that applies it to a logits tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Written into the forced column of each logits row. Dummy weights give logits of order 1e-2, so
# this is the argmax by a wide margin, and it is exactly representable in bf16, fp16 and fp32.
FORCE_VALUE = 8192.0


_NONE = (0, 0, 0)


@dataclass
class ForcedOutputs:
    """Registry: request id -> (prompt length, the trace's output ids). Shared with the hooks.

    Outputs live in one growing int64 buffer so a step's lookup is one fancy-index, not a
    concatenation of every request's outputs.
    """

    prompt_len: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    _meta: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # plen, offset, len
    _alias: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    _buf: np.ndarray = field(default_factory=lambda: np.empty(1 << 16, np.int64))
    _used: int = 0

    def register(self, request_id: str, prompt_len: int, output_ids: np.ndarray) -> None:
        """Add one request; ids must not contain '-' (vLLM appends '-<random>' internally)."""
        if "-" in request_id:
            raise ValueError(f"request id {request_id!r} must not contain '-'")
        out = np.asarray(output_ids, dtype=np.int64)
        need = self._used + len(out)
        if need > len(self._buf):
            grown = np.empty(max(need, 2 * len(self._buf)), np.int64)
            grown[: self._used] = self._buf[: self._used]
            self._buf = grown
        self._buf[self._used:need] = out
        self.prompt_len[request_id] = int(prompt_len)
        self.outputs[request_id] = out
        self._meta[request_id] = (int(prompt_len), self._used, len(out))
        self._used = need
        self._alias.clear()

    def resolve(self, internal_id: str) -> str | None:
        """Map vLLM's internal id ('<external>-<8 hex>') back to the registered id, or None."""
        if internal_id in self.outputs:
            return internal_id
        base = internal_id.rsplit("-", 1)[0]
        return base if base in self.outputs else None

    def meta(self, internal_id: str) -> tuple[int, int, int]:
        """(prompt length, buffer offset, output length) for an internal id; zeros if unknown."""
        m = self._alias.get(internal_id)
        if m is None:
            key = self.resolve(internal_id)
            m = self._meta[key] if key is not None else _NONE
            self._alias[internal_id] = m
        return m

    def forget(self, request_id: str) -> None:
        """Drop a finished request (its buffer space is not reused within a run)."""
        self.prompt_len.pop(request_id, None)
        self.outputs.pop(request_id, None)
        self._meta.pop(request_id, None)
        self._alias.clear()


def forced_rows(
    forced: ForcedOutputs,
    req_ids: list[str],
    last_pos: np.ndarray,
    rows_per_req: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the logits tensor and the token each must choose.

    Request i owns rows_per_req[i] consecutive rows (1 without drafts, 1 + drafts under spec
    decode); they are the logits of the inputs at positions last_pos[i]-rows+1 .. last_pos[i]
    (absolute, prompt included), and the input at position p predicts output index p+1-prompt_len.
    Rows whose output index falls outside the trace (partial prefills, drafts past max_tokens)
    and requests not in the registry are left alone.
    """
    n = len(req_ids)
    rows_per_req = np.asarray(rows_per_req, dtype=np.int64)[:n]
    last_pos = np.asarray(last_pos, dtype=np.int64)[:n]
    total = int(rows_per_req.sum())
    if n == 0 or total == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    meta = np.array([forced.meta(r) for r in req_ids], dtype=np.int64).reshape(n, 3)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(rows_per_req, out=starts[1:])
    owner = np.repeat(np.arange(n), rows_per_req)
    k = np.arange(total, dtype=np.int64) - starts[owner]
    j = last_pos[owner] - (rows_per_req[owner] - 1) + k + 1 - meta[owner, 0]
    ok = (j >= 0) & (j < meta[owner, 2])
    rows = np.nonzero(ok)[0]
    if rows.size == 0:
        return rows, rows
    toks = forced._buf[meta[owner[rows], 1] + j[rows]]
    return rows, toks


def apply_forcing(logits, rows: np.ndarray, toks: np.ndarray, pinned: bool = True) -> None:
    """Write FORCE_VALUE at (row, token) so greedy sampling picks the trace's token.

    The indices go through pinned host memory so the copy is truly asynchronous. A copy from
    pageable memory makes CUDA synchronise the stream first (the host then waits for the whole
    forward pass): that is what the 2026-11-30 records did (pinned=False); see
    calibrate/data/README.md for its effect on those measurements.
    """
    if rows.size == 0:
        return
    import torch

    idx = torch.from_numpy(np.stack([rows, toks]).astype(np.int64))
    if pinned:
        idx = idx.pin_memory()
    idx = idx.to(logits.device, non_blocking=True)
    logits[idx[0], idx[1]] = FORCE_VALUE
