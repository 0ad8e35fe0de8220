"""`simkit validate`: simkit's prediction of every measured vLLM run under that run's own
conditions (requests, order, cap, concurrency, K, perturbations), set beside the measurement.

Modules: requests (rebuild a run's requests and acceptance table), predict (one run's
prediction), report (cells, MAPE, best-K agreement, table/JSON/plot)."""
