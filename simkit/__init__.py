"""simkit: a simulator of vLLM serving throughput under model-free speculative decoding."""

__version__ = "0.1.0"
