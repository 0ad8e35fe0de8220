"""A step-cost model seen through a measured run's conditions (the calibration harness's forcing
and in-thread front-end): what `simkit validate` predicts a recorded run with and what the GPU
harness's dynamic-K scheduler prices K with (simkit.engine.pricing.price_fn_for)."""

from __future__ import annotations

import dataclasses
from typing import Any

from simkit.costmodel import load_cost_model
from simkit.costmodel.batch import BatchDescriptor, StepCost
from simkit.costmodel.step_records import forcing_synchronised, hardware_of, version_of


class RunConditionsCost:
    """A step-cost model seen through the measured harness's conditions.

    sync: the step runs without async overlap (forcing through pageable memory synchronised
    the stream, calibrate/data/README.md "Known perturbation"). serial_frontend: the front-end
    (output processing, driver) ran in the engine's thread between steps (`t_gap_s`), so its
    time adds to the step instead of running beside it in another process."""

    def __init__(self, base: Any, *, sync: bool, serial_frontend: bool) -> None:
        self.base, self.sync, self.serial_frontend = base, sync, serial_frontend
        self._front = 0.0
        # calibrations with the host terms (frontend_prefill_s is one) price the in-thread
        # front-end with every front-end term and place it on the engine thread's path (below);
        # older ones add the per-request term to the step, as they were validated
        self._step_terms = serial_frontend and base.coefs.frontend_prefill_s is not None
        if serial_frontend:
            self._front = float(base.coefs.frontend_req_s) / float(base.host_speed)
        self._serial = float(base.coefs.for_async_runner().async_serial_s) / float(base.host_speed)
        self._build_fast()

    def __getattr__(self, name: str) -> Any:          # label, kv_capacity_tokens, ...
        if name.startswith("__") or name == "base":    # unpickling: no base yet
            raise AttributeError(name)
        return getattr(self.base, name)

    def __getstate__(self) -> dict:
        """Picklable (spawned worker processes): the closure is rebuilt on load."""
        state = dict(self.__dict__)
        state.pop("step_cost", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._build_fast()

    def _build_fast(self) -> None:
        """step_cost as a closure over the wrapped model's step price and thread parts: the same
        expressions as _step_cost and _one_thread, in one call per step instead of three with
        their attribute look-ups (validate prices ~500 k steps through it: the simulated ones,
        the recorded ones and the refits' repricing)."""
        if not (self.serial_frontend and self._step_terms and not self.sync):
            self.step_cost = self._step_cost
            return
        base_cost, parts = self.base.step_cost, self.base.thread_parts
        overlap, serial = self.base.async_overlap, self._serial

        def step_cost(batch: BatchDescriptor) -> StepCost:
            c = base_cost(batch)
            front, draft, dispatch = parts(batch)
            dev, host = c.device_s, c.host_s
            if batch.async_scheduling and overlap:
                thread = host - draft + dispatch + front
                step = max(dev, thread) + draft + serial
            else:
                step = max(dev, dispatch) + host + front
            return StepCost(dev, host + front, step)

        self.step_cost = step_cost

    def _step_cost(self, batch: BatchDescriptor) -> StepCost:
        if self.sync and batch.async_scheduling:
            batch = dataclasses.replace(batch, async_scheduling=False)
        c = self.base.step_cost(batch)
        if not self.serial_frontend:
            return c
        if self._step_terms:
            return self._one_thread(batch, c)
        front = self._front * batch.num_reqs
        # The base model bounds the step below by the front-end; in one thread they add up.
        # Synchronous: the step before that bound is device + host. Async: step_s is used (the
        # front-end bound does not bind at the batch sizes of these runs).
        inner = c.step_s if batch.async_scheduling else c.device_s + c.host_s
        step = inner + front
        return StepCost(c.device_s, c.host_s + front, step)

    def _one_thread(self, batch: BatchDescriptor, c: StepCost) -> StepCost:
        """The step with the front-end's work in the engine thread: synchronous, it follows the
        step's device and host work; under async scheduling it is host work like the schedule,
        preparation, dispatch and update of the step, all of which overlap the GPU's forward
        (the measured async steps with a long in-thread gap are no longer than the forward)."""
        front, draft, dispatch = self.base.thread_parts(batch)
        issued = max(c.device_s, dispatch)
        if batch.async_scheduling and self.base.async_overlap:
            thread = c.host_s - draft + dispatch + front
            step = max(c.device_s, thread) + draft + self._serial
        else:
            step = issued + c.host_s + front
        return StepCost(c.device_s, c.host_s + front, step)


def run_cost(run: dict[str, Any], *, sync: bool | None = None, serial_frontend: bool = True,
             calibration: str | None = None) -> RunConditionsCost:
    """The default (or named) cost model of the run's model/GPU/TP under the run's conditions.
    sync=None: synchronous exactly when the run's forcing hook synchronised the stream."""
    if sync is None:
        sync = forcing_synchronised(run.get("force_copy", ""))
    hw = hardware_of(str(run.get("gpu", ""))) or "h200"
    base = load_cost_model(str(run["model"]), hw, tp=int(run["tp"]), calibration=calibration,
                           max_model_len=int(run["max_model_len"]),
                           max_num_batched_tokens=int(run["max_num_batched_tokens"]),
                           vllm_version=version_of(run.get("vllm_version")) or "0.26")
    return RunConditionsCost(base, sync=sync, serial_frontend=serial_frontend)
