"""Acceptance replay: exact greedy verification of model-free drafts against real outputs."""
