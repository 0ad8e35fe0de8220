"""The suffix drafter (arctic-inference 0.3.0 semantics): the pure-Python reference tree (tree) and
cache (cache), the numba copy (core, kernels, compiled; same tables byte for byte), the replay
orderings that register the drafter (replay) and the cache driven by the engine step by step
(in_loop). Import the submodules; this face holds no names.
"""
