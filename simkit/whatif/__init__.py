"""Capacity-planning what-ifs built on the engine: each module answers one question with a table
(`WhatIfResult`) and a plot.

- `capacity.capacity`: replicas and GPUs for a request-rate or output tok/s target under p99 goals;
- `hardware.hardware`: the same model and traffic on other GPUs or TP degrees;
- `host.host`: host-CPU speed factor sweep, which configurations are host-bound;
- `concurrency.concurrency`: throughput and latency against concurrency, where speculation stops paying;
- `quantization.quantization`: W4A4 arithmetic and changed acceptance, with the output caution;
- `prefix.prefix`: a shared preamble of N tokens in front of every prompt, prefix caching on/off;
- `batch_size_table.batch_size_table`: vLLM 0.34's K per batch-size range derived from the traffic;
- `vllm_version.vllm_version`: an upgrade (0.33 -> 0.34) per configuration, the settings to change.
"""

from simkit.whatif.common import WhatIfResult

__all__ = ["WhatIfResult"]
