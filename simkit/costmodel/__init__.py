"""Step-time cost model: device time of the forward pass and host time of the engine step."""
