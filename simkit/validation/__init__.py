"""`simkit validate`: simkit's prediction of every measured vLLM run under that run's own
conditions (requests, order, cap, concurrency, K, perturbations), set beside the measurement.

Modules: records (find and load the measured records under calibrate/data, GPU names, the
notebook's step/run comparisons), requests (rebuild a run's requests and acceptance table),
predict (one run's prediction), report (cells, MAPE, best-K agreement, JSON/plot), spread
(run-to-run drift interval), table (the plain-text table), prefix (predicted vs recorded
prefill tokens)."""
