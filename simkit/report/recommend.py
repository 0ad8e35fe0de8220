"""The one-line recommendation that ends every report, with its reason in numbers.

"run X: +N % over vanilla (A vs B tok/s); best fixed K = k (...); dynamic-K: ...". X is the
highest tok/s, except that among configs within its seed spread the simplest to deploy wins
(vanilla, then a fixed K, then a dynamic policy), and the report says so. A lead smaller than the
cost model's measured error is flagged; where the calibration states the interval a rerun
measures (its "interval" block), a lead inside that interval is called a tie within the error; and
a dynamic policy that ran one K throughout is named as such (its figures then equal that kpad
row's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simkit.app.verdict import DRIFT, best_kpad, dynamic_verdict, fastest, is_dynamic

if TYPE_CHECKING:                    # type hints only (no import cycle at run time)
    from simkit.app.predict import Prediction

_SAME_K_TOL = 1e-9


def _pct(a: float, b: float) -> str:
    return f"{a / b - 1:+.1%}".replace("%", " %") if b > 0 else "n/a"


def recommendation(pred: Prediction, model_error_pct: float | None = None,
                   interval_pct: float | None = None,
                   unmeasured: str | None = None) -> dict[str, Any]:
    """{'config', 'line', 'reasons'}: what to run and why, from `pred.rows` alone.

    `model_error_pct` (the cost model's held-out MAPE, when recorded) turns a margin smaller
    than it into an explicit warning instead of a confident call; `interval_pct` (the relative
    half-width of the calibration's 90 % rerun interval, when it states one) makes a lead inside
    it a tie within the error, said in the line itself. `unmeasured` (why the cost model's
    error is not measured on this vLLM: a calibration transferred from another version) says in
    the line that the configurations cannot be ranked within that unmeasured error.
    """
    rows = [r for r in pred.rows if r.output_tok_s == r.output_tok_s]
    if not rows:
        return {"config": None, "line": "no configuration ran", "reasons": []}
    over = [r.config for r in rows if getattr(r, "overloaded_windows", 0)]
    if over:                 # a growing queue has no steady tok/s to rank configs on
        rate = getattr(pred, "request_rate", None)
        at = f"{rate:g} req/s" if rate else "this rate"
        return {"config": None,
                "line": f"none: {', '.join(over)} {'is' if len(over) == 1 else 'are'} "
                        f"overloaded at {at} (the queue grew through the window), so no config "
                        "is ranked; lower --request-rate, or find the rate each sustains with "
                        "simkit whatif capacity",
                "reasons": [f"{', '.join(over)}: the requests in the server grew through the "
                            "window's second half by a quarter or more of the requests that "
                            "arrived there, so the tok/s shown is not a rate the server keeps"]}
    ranked = sorted(rows, key=lambda r: -r.output_tok_s)
    top = ranked[0]
    # among configs inside the top one's seed spread, the simplest to deploy is recommended
    tied = [r for r in ranked if top.output_tok_s - r.output_tok_s <=
            max(top.output_tok_s_std, r.output_tok_s_std)]
    best = min(tied, key=lambda r: (_simplicity(r.config), -r.output_tok_s))
    van = next((r for r in rows if r.config == "vanilla"), None)
    parts = [f"run {best.config}"]
    if van is not None and best is not van:
        parts[0] += f": {_pct(best.output_tok_s, van.output_tok_s)} over vanilla " \
                    f"({best.output_tok_s:,.0f} vs {van.output_tok_s:,.0f} tok/s)"
    elif van is not None and len(ranked) > 1:
        nxt = next(r for r in ranked if r is not van)
        parts[0] += (f" (no speculation): the best speculative config, {nxt.config}, is "
                     f"{_pct(nxt.output_tok_s, van.output_tok_s)} ({nxt.output_tok_s:,.0f} vs "
                     f"{van.output_tok_s:,.0f} tok/s)")
    reasons = []
    other = top if best is not top else (ranked[1] if len(ranked) > 1 else None)
    if best is not top:
        spread = max(top.output_tok_s_std, best.output_tok_s_std)
        reasons.append(f"near-tie: {top.config} is {_pct(top.output_tok_s, best.output_tok_s)} "
                       f"higher ({top.output_tok_s - best.output_tok_s:,.0f} tok/s), within the "
                       f"seed spread (±{spread:,.0f}), and {best.config} is simpler to deploy")
    lead = None                       # the top config's margin over the runner-up, beyond seeds
    if best is top and other is not None:
        margin = best.output_tok_s / other.output_tok_s - 1 if other.output_tok_s > 0 else 0.0
        spread = max(best.output_tok_s_std, other.output_tok_s_std)
        if best.output_tok_s - other.output_tok_s <= spread:
            reasons.append(f"near-tie: {best.config} leads {other.config} by {margin:.1%} "
                           f"({best.output_tok_s - other.output_tok_s:,.0f} tok/s), within the "
                           f"seed spread (±{spread:,.0f})")
        else:
            lead = margin
    # the rerun interval, whatever the seed spread said: it is the wider of the two
    tie = _interval_tie(best, other, ranked, van, interval_pct)
    if tie is not None:
        parts.append(tie[0])
        reasons.append(tie[1])
    elif lead is not None and model_error_pct is not None and lead * 100 < model_error_pct:
        reasons.append(f"{best.config} leads {other.config} by {lead:.1%}, less than the "
                       f"cost model's held-out error ({model_error_pct:.1f} %)")
    if unmeasured and other is not None:
        parts.append(f"caution: the cost model is {unmeasured}, so its error here is unmeasured "
                     "and this ranking cannot tell apart configurations within it; measure the "
                     "leading ones on your GPU before choosing")
        reasons.append(f"no vLLM {pred.vllm_version} run has measured the cost model's error or a "
                       "rerun interval, and the interval measured on another vLLM is not stated "
                       "as this one's")
    reasons.append(_why(best, van, ranked, exact_k_slots(pred)))
    reasons += [pred.adaptive_verdict] if getattr(pred, "adaptive_verdict", "") else []
    bk = best_kpad(rows, exact_k=exact_k_slots(pred))
    if bk is not None:
        text = f"best fixed K = {bk.k} ({bk.config}, {bk.output_tok_s:,.0f} tok/s"
        text += f", {_pct(bk.output_tok_s, van.output_tok_s)} vs vanilla)" if van else ")"
        parts.append(text)
        dyn = _dynamic(rows, bk)
        if dyn:
            parts.append(dyn)
    unsteady = [r.config for r in rows if not r.steady_window]
    if unsteady:             # figures from start-up and drain: the call is not to be trusted
        more = getattr(pred, "suggested_num_requests", None)
        parts.append(f"caution: {', '.join(unsteady)} had no steady window (start-up and "
                     "drain included), so this call may not hold"
                     + (f"; --num-requests {more} gives one" if more else ""))
    return {"config": best.config, "line": "; ".join(parts), "reasons": reasons}


def _interval_tie(best, other, ranked: list, van, interval_pct: float | None
                  ) -> tuple[str, str] | None:
    """(the line's part, the reason) when `other` (the runner-up, or the faster config a
    simpler `best` was preferred to) lies inside the calibration's rerun interval of `best`."""
    if interval_pct is None or other is None or other.output_tok_s <= 0:
        return None
    lo, hi = sorted((best.output_tok_s, other.output_tok_s))
    margin = hi / lo - 1 if lo > 0 else float("inf")
    if margin * 100 >= interval_pct:
        return None
    inside = [r for r in ranked if r is not best and r.output_tok_s > 0
              and 100 * abs(best.output_tok_s / r.output_tok_s - 1) < interval_pct]
    more = ""
    if len(inside) > 1:
        van_in = ", vanilla among them" if van is not None and van in inside else ""
        more = f"; {len(inside)} of the {len(ranked) - 1} other configs are inside it{van_in}"
    return (f"tie within the error with {other.config} ({100 * margin:.1f} % apart, inside the "
            f"±{interval_pct:.1f} % interval{more})",
            f"the calibration's 90 % interval for a rerun is ±{interval_pct:.1f} % of the "
            "prediction (run-to-run drift and the fit's residuals on the calibration runs), so "
            f"{best.config} and {other.config} are not told apart; measure both on your GPU "
            "before choosing")


def exact_k_slots(pred: Prediction) -> bool:
    """True on a vLLM whose suffix rows verify exactly K slots (0.34): they are the fixed-K rows."""
    from simkit.catalog.vllm_versions import get_vllm_version

    try:
        return get_vllm_version(getattr(pred, "vllm_version", None) or None) \
            .method("suffix").slots == "exact-k"
    except Exception:                     # a version the report does not know: the old rows
        return False


def _simplicity(config: str) -> int:
    """0 vanilla, 1 a fixed K (suffix, kpad, ngram), 2 a dynamic-K policy."""
    return 0 if config == "vanilla" else (2 if is_dynamic(config) else 1)


def _step_ms(r) -> float:
    return float(r.mean_step_ms)


def _why(best, van, ranked, exact_k: bool = False) -> str:
    """The figures that explain the call: tokens per request-step against step time.

    Throughput is (requests in the batch) x (tokens per request-step) / (step time), so these
    two ratios against vanilla say why speculation wins or loses here.
    """
    spec = best if best is not van else next((r for r in ranked if r is not van), None)
    if van is None or spec is None:
        return (f"{best.config}: {best.tokens_per_step:.2f} tokens per request-step, "
                f"host {best.host_frac:.0%} of step time")
    tps = spec.tokens_per_step
    tv = van.tokens_per_step or 1.0
    text = (f"{spec.config} accepts {spec.mean_accepted:.2f} drafts per step, so a request "
            f"gains {tps:.2f} tokens per step against vanilla's {tv:.2f} (x{tps / tv:.2f}), "
            f"but its step takes {_step_ms(spec):.2f} ms against {_step_ms(van):.2f} ms "
            f"(x{_step_ms(spec) / _step_ms(van):.2f}): the GPU waits on the host "
            f"{spec.host_frac:.0%} of the step (vanilla {van.host_frac:.0%}, async scheduling)")
    if spec.padded_token_waste >= 0.005:
        text += (f" and {spec.padded_token_waste:.0%} of the tokens run are graph padding or "
                 "filler slots without a draft" if exact_k else
                 f" and {spec.padded_token_waste:.0%} of the tokens run are padding")
    return text


def _dynamic(rows, bk) -> str:
    """How the best dynamic policy compares with the best fixed K, and why it may equal one."""
    dyn = [r for r in rows if is_dynamic(r.config)]
    if not dyn:
        return ""
    top = fastest(dyn)
    verdict = dynamic_verdict(top, bk)
    how = {"loses": "trails"}.get(verdict, verdict)
    text = (f"dynamic-K: {top.config} {how} K={bk.k} ({top.output_tok_s:,.0f} tok/s, "
            f"{_pct(top.output_tok_s, bk.output_tok_s)}; ties = within the seed spread or "
            f"{DRIFT:.0%})")
    settled: dict[int, list[str]] = {}
    twins = []
    for r in dyn:
        mk = r.mean_k
        if mk is None or mk != mk or abs(mk - round(mk)) > _SAME_K_TOL:
            continue
        settled.setdefault(round(mk), []).append(r.config)
        twin = next((f for f in rows if f.config == f"kpad-{round(mk)}"
                     and f.output_tok_s == r.output_tok_s), None)
        if twin:
            twins.append(f"{r.config}'s figures are {twin.config}'s")
    for k, names in sorted(settled.items()):
        who = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        text += (f"; {who} chose K={k} on every step at this batch size"
                 + (f" ({'; '.join(twins)})" if twins else ""))
    return text


__all__ = ["exact_k_slots", "recommendation"]
