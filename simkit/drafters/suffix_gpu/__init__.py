"""vLLM 0.34's GPU suffix speculator (v1/worker/gpu/spec_decode/suffix/speculator.py), replayed
on the CPU: `params.py` its settings and constants, `reference.py` the pure-NumPy state and propose
(one K at a time, the kernels' own formulation), `kernels.py` / `compiled.py` the numba copy that
drafts every K of a position in one pass, `replay.py` the registered drafter "suffix_gpu"."""
