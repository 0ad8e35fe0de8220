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


FORCE_COPY = "pinned-ring-fill"  # how this code hands indices to the GPU (runs.force_copy)


class ForceApplier:
    """Writes FORCE_VALUE at flat (row * vocab + token) positions with no host-device sync.

    Indices go through a ring of preallocated pinned host slots into matching device slots, then
    one `index_fill_` on the flattened logits. Nothing here waits for the GPU: a slot is reused
    only after its previous copy's event completed (four steps earlier; the engine runs at most
    one step ahead). Earlier records (force_copy pageable-sync / pinned-assign-sync) assigned
    through advanced indexing, `logits[i, j] = v`, which waits for the forward pass
    (calibrate/data/force_probe.txt, calibrate/data/README.md).
    """

    def __init__(self, slots: int = 4, capacity: int = 1 << 16) -> None:
        self.slots, self.capacity = slots, capacity
        self._host = self._dev = None
        self._events: list = [None] * slots
        self._next = 0

    def _alloc(self, device, capacity: int) -> None:
        import torch

        pin = device.type == "cuda"
        self._host = torch.empty((self.slots, capacity), dtype=torch.int64, pin_memory=pin)
        self._dev = torch.empty((self.slots, capacity), dtype=torch.int64, device=device)
        self._events = [None] * self.slots
        self.capacity = capacity

    def __call__(self, logits, rows: np.ndarray, toks: np.ndarray) -> None:
        if rows.size == 0:
            return
        import torch

        n = int(rows.size)
        if self._dev is None or self._dev.device != logits.device or n > self.capacity:
            self._alloc(logits.device, max(self.capacity, 1 << int(n - 1).bit_length()))
        s = self._next
        self._next = (s + 1) % self.slots
        if self._events[s] is not None:
            self._events[s].synchronize()  # completed long ago in practice; never skipped
        flat = self._host[s, :n]
        np.add(np.asarray(rows, np.int64) * logits.shape[-1], toks, out=flat.numpy())
        dev = self._dev[s, :n]
        dev.copy_(flat, non_blocking=True)
        if logits.device.type == "cuda":
            ev = torch.cuda.Event()
            ev.record()
            self._events[s] = ev
        target = logits if logits.is_contiguous() else logits.contiguous()
        target.view(-1).index_fill_(0, dev, FORCE_VALUE)
        if target is not logits:
            logits.copy_(target)
