"""Calibration from short real vLLM runs: drivers, plugins, step records and fitting."""
