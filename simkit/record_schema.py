"""Column contract of the measured records under calibrate/data/ (producer: the recorder;
consumers: the cost-model fit and `simkit validate`)."""

# One row per engine step of a real vLLM run (steps.parquet).
STEP_COLUMNS = {
    "run_id": "string",
    "step": "int64",
    "t_start_s": "float64",          # wall clock since the run started
    "t_schedule_s": "float64",       # scheduler.schedule
    "t_prepare_s": "float64",        # input preparation in the model runner
    "t_forward_s": "float64",        # forward pass incl. graph replay / eager kernels, logits
    "t_sample_s": "float64",         # sampler and rejection sampler incl. the GPU->CPU sync
    "t_draft_s": "float64",          # CPU drafting (suffix / ngram proposer)
    "t_update_s": "float64",         # scheduler.update_from_output and output processing
    "t_step_s": "float64",           # wall time of the whole step
    "num_reqs": "int64",
    "num_tokens": "int64",
    "num_padded_tokens": "int64",
    "num_prefill_tokens": "int64",
    "num_prefill_reqs": "int64",
    "num_decode_reqs": "int64",
    "num_spec_tokens": "int64",
    "num_pad_drafts": "int64",
    "num_accepted": "int64",
    "num_drafting_reqs": "int64",
    "context_tokens": "int64",
    "graph_mode": "string",          # FULL / PIECEWISE / NONE
    # --- added by the recorder (issue 6); meanings in docs/calibration.md ---
    "t_end_s": "float64",            # wall clock since the run started, at the end of the step
    "t_exec_host_s": "float64",      # host time inside model-runner execute_model
    "t_sample_host_s": "float64",    # host time inside sample_tokens (incl. GPU wait, drafting)
    "t_force_s": "float64",          # host time spent forcing the trace's tokens (ours, not vLLM's)
    "t_gap_s": "float64",            # host time between steps (front-end output processing, driver)
    "num_emitted_tokens": "int64",   # output tokens that reached requests in this step
}

# One row per run (runs.parquet): the resolved settings and the measured outcome.
RUN_COLUMNS = {
    "run_id": "string",
    "purpose": "string",             # "calibration" or "validation"
    "model": "string",
    "corpus": "string",
    "config": "string",              # vanilla / suffix / kpad
    "k": "int64",                    # 0 for vanilla
    "concurrency": "int64",
    "num_requests": "int64",
    "tp": "int64",
    "vllm_version": "string",
    "runner": "string",              # v1 / v2
    "async_scheduling": "bool",
    "cudagraph_mode": "string",
    "capture_sizes": "string",       # JSON list
    "drafter_params": "string",      # JSON object
    "gpu": "string",
    "driver": "string",
    "output_tokens": "int64",
    "duration_s": "float64",         # steady-state window (warm-up excluded)
    "output_tok_s": "float64",       # steady-state output tokens per second
    "outputs_match_trace": "bool",   # every generated token equals the trace's output
    # --- added by the runner (issue 6); meanings in docs/calibration.md ---
    "forced": "bool",                # trace tokens forced at every sampled position
    "force_copy": "string",          # how forcing reached the logits: "pinned-ring-fill" (no
                                     # sync), "pageable-sync" / "pinned-assign-sync" (waited for
                                     # the forward; simkit.costmodel.step_records lists them), "none"
    "max_tokens_cap": "int64",       # outputs truncated to this many tokens (0: no cap)
    "max_num_seqs": "int64",
    "max_num_batched_tokens": "int64",
    "max_model_len": "int64",
    "gpu_memory_utilization": "float64",
    "prefix_caching": "bool",
    "scheduler_cls": "string",
    "steady_state": "bool",          # False: the run was too short for the steady-state window
    "window": "string",              # how the steady-state window was chosen (JSON)
    "total_duration_s": "float64",   # first step start to last completion
    "total_output_tokens": "int64",
    "num_steps": "int64",
    "num_drafts": "int64",           # requests-steps with >= 1 real draft token
    "num_draft_tokens": "int64",     # scheduled draft tokens incl. -1 placeholders
    "num_pad_tokens": "int64",       # -1 placeholders among them
    "num_accepted_tokens": "int64",
    "requests_skipped": "string",    # JSON {reason: count}
    "engine_start_s": "float64",
    "started_utc": "string",
    "notes": "string",
    # --- added for request history and dynamic-K (issues 12, 16) ---
    "history": "string",             # cold / hot / repeat:P: what the engine served before (the
                                     # suffix tree and prefix cache were not reset in between)
    "k_counts": "string",            # JSON {K: steps} chosen by a dynamic-K policy ("{}" else)
}

# Run columns of the vLLM 0.34 harness (issue 39): written when any merged run has them; runs
# recorded before them read "" (merge fills it, never a guess). Meanings in docs/calibration.md.
OPTIONAL_RUN_COLUMNS = {
    "harness": "string",             # how the trace was reproduced: forcing / trace_replay
    "graph_sizes": "string",         # JSON {"prefill_tokens": [...], "decode_requests": [...]}:
                                     # 0.34's resolved prefill / decode CUDA-graph sizes
    "draft_count": "string",         # what num_spec_tokens and num_draft_tokens count: "drafts"
                                     # (0.26/0.33: real drafts plus -1 pads) or "slots" (0.34: K
                                     # verified slots per decoding request, fillers included)
}
