"""The compiled engine loop: simkit.engine.scheduler's schedule/update rules over arrays.

One numba function runs a whole run. A closed loop runs in step counts, never seconds: what it
schedules does not depend on how long a step takes (simkit.engine.trajectory says why), so the
kernel returns each step's counts and, for every recorded time, the step whose end it is, and
simkit.engine.fast.loop prices the steps afterwards. An open loop's arrivals read the clock, so
it prices each step as it runs (`price`, the cost model's closure mirrored). Every rule mirrors
scheduler.py line for line (the reference implementation; tests/unit/test_fast_engine.py
compares both float for float). Kept in one file so that numba's on-disk cache, keyed on this
file, is never stale.

Requests are numbered by their position j in the run's order. Prefix-cache keys are ints:
[0, H) the workload's prompt block hashes (dense ids), B[j] + i the request-unique key of
request j's block i (an output block, or a prompt block of a cycled copy past its shared prefix);
B[j] >= H leaves room for every block request j can fill.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# per-step output columns
S_REQS, S_TOKENS, S_PADDED, S_PRE_TOK, S_PRE_REQS, S_DEC_REQS, S_SPEC, S_PAD_DRAFTS, \
    S_DRAFTING, S_CTX, S_SCHED_ACC, S_MODE, S_EMITTED, S_ACCEPTED, S_DECODES, S_DEC_TOKENS, \
    S_K, S_FREE, S_ITL = range(19)
N_STEP_COLS = 19
# per finished request: the request (position j), first token, done (step indices, -1 = time
# 0), output, preemptions
N_FIN_COLS = 5
# per inter-token gap: the emitting step, the request's previous emission, the request
N_ITL_COLS = 3
# scalars: error, steps, finished, gaps, preemptions, hit tokens, query tokens, evicted,
# warm-up end step, last arrival step
N_SCALARS = 10
ERR_NONE, ERR_STUCK, ERR_EVICT, ERR_TIE = 0, 1, 2, 3
# engine's control array: requests delivered (joint driver), requests finished (the engine),
# joint mode on, the step and gap rows its buffers hold; what it yields when a joint engine
# has no work, when its buffers are full; the buffers' rows
C_DELIVERED, C_DONE, C_JOINT, C_STEPS, C_GAPS = range(5)
N_CTL = 5
JOINT_IDLE, FLUSH = -1.0, -2.0
STEP_ROWS, GAP_ROWS = 4096, 16384
# dispatcher modes (cudagraph.CudagraphMode) and step graph modes (trajectory._MODES order)
D_NONE, D_FULL, D_FAP, D_PIECEWISE = 0, 1, 2, 3
G_FULL, G_PIECEWISE, G_NONE = 0, 1, 2
CHUNK, LAST, DECODE = 0, 1, 2


@njit(cache=True)
def _key(j, i, idx, modified, nkeys, ch_off, ch_ids, shared, H, B):
    if i < nkeys[idx] and not (modified[j] and i >= shared[idx]):
        return ch_ids[ch_off[idx] + i]
    return B[j] + i


@njit(cache=True)
def _dispatch(dsizes, dcount, dq, dmode, max_num_seqs, k, num_tokens, num_reqs, max_q):
    """(graph mode, padded tokens) of a batch under K's capture list
    (cudagraph.Dispatcher.dispatch)."""
    nsz = dcount[k]
    if dmode == D_NONE or nsz == 0 or num_tokens > dsizes[k, nsz - 1] or num_tokens <= 0:
        return G_NONE, num_tokens
    lo, hi = 0, nsz
    while lo < hi:
        mid = (lo + hi) // 2
        if dsizes[k, mid] < num_tokens:
            lo = mid + 1
        else:
            hi = mid
    padded = dsizes[k, lo]
    if dmode == D_FULL:
        return G_FULL, padded
    if dmode == D_FAP:
        q = dq[k]
        if max_q == q and num_tokens == q * num_reqs and q <= padded and padded <= q * max_num_seqs:
            return G_FULL, padded
    return G_PIECEWISE, padded


@njit(cache=True)
def _enqueue(j, order, seen, modified, exact, modify_ok, use_pc, wq, at):
    """sim.submit's bookkeeping for request j: its copy number (prefix caching), the queue."""
    if use_pc:
        idx = order[j]
        c = seen[idx]
        seen[idx] = c + 1
        modified[j] = c > 0 and modify_ok and not exact[idx]
    wq[at] = j


def run_loop(open_loop, arr_t, consts, asy, order, plen, olen, row0, concurrency, warm_count, marks,
             use_pc, ch_off, ch_ids, nkeys, shared, exact, modify_ok, H, B,
             refs, lru_prev, lru_next, lru_init, anon0, evicted0,
             acc2d, dr2d, kcol, pol_mode, ks, ktab, k_init, alpha, threshold,
             speculative, pad, dsizes, dcount, dq, dmode, block_size, budget0,
             max_model_len, max_num_seqs, num_blocks):
    """Run a closed loop (`concurrency` clients) or, with `open_loop`, arrivals at `arr_t`
    (priced as they run with `consts`: arrivals read the clock): `engine` driven to its end
    (it yields only to hand over full output buffers). Returns (scalars, steps, finishes, gaps,
    mark steps, arrival step per request, arrival time per request, per-step (step s,
    host-bound s, end) when priced here)."""
    out = Outputs(order.shape[0], marks.shape[0], max_num_seqs)
    ctl = np.zeros(N_CTL, np.int64)
    gen = engine(open_loop, ctl, np.zeros(1), arr_t, consts, asy, order, plen, olen, row0,
                 concurrency, warm_count, marks, use_pc, ch_off, ch_ids, nkeys, shared, exact,
                 modify_ok, H, B, refs, lru_prev, lru_next, lru_init, anon0, evicted0,
                 acc2d, dr2d, kcol, pol_mode, ks, ktab, k_init, alpha, threshold,
                 speculative, pad, dsizes, dcount, dq, dmode, block_size, budget0,
                 max_model_len, max_num_seqs, num_blocks, *out.arrays())
    for _ in gen:                        # FLUSH only: no joint mode here
        out.flush(ctl)
    steps, gaps, priced = out.collect(ctl)
    return (out.scalars, steps, out.fins[:out.scalars[2]], gaps, out.mark_at, out.arrival,
            out.arrival_f, priced if open_loop else priced[:0])


class Outputs:
    """An engine run's output arrays: the ones it fills in place, and the step, gap and price
    buffers it hands over (FLUSH) whenever one is full, collected here in order."""

    def __init__(self, n: int, n_marks: int, max_num_seqs: int):
        self.scalars = np.zeros(N_SCALARS, np.int64)
        self.mark_at = np.full(n_marks, -2, np.int64)
        self.arrival = np.zeros(n, np.int64)
        self.arrival_f = np.zeros(n)
        self.fins = np.zeros((max(n, 1), N_FIN_COLS), np.int64)
        self.steps = np.zeros((STEP_ROWS, N_STEP_COLS), np.int64)
        # a step adds at most one gap per running request (max_num_seqs)
        self.gaps = np.zeros((max(GAP_ROWS, 4 * (max_num_seqs + 1)), N_ITL_COLS), np.int64)
        self.priced = np.zeros((STEP_ROWS, 3))
        self.parts: tuple[list, list, list] = ([], [], [])

    def arrays(self) -> tuple:
        """engine's output arguments, in order."""
        return (self.scalars, self.mark_at, self.arrival, self.arrival_f, self.fins,
                self.steps, self.gaps, self.priced)

    def flush(self, ctl) -> None:
        """Keep the buffers' rows the engine wrote since its last flush (ctl's counts)."""
        s, g = int(ctl[C_STEPS]), int(ctl[C_GAPS])
        self.parts[0].append(self.steps[:s].copy())
        self.parts[1].append(self.gaps[:g].copy())
        self.parts[2].append(self.priced[:s].copy())

    def collect(self, ctl) -> tuple:
        """(steps, gaps, prices) of the whole run, once the engine has ended."""
        self.flush(ctl)
        return tuple(p[0] if len(p) == 1 else np.concatenate(p) for p in self.parts)


@njit(cache=True)
def engine(open_loop, ctl, horizon, arr_t, consts, asy, order, plen, olen, row0, concurrency,
           warm_count, marks, use_pc, ch_off, ch_ids, nkeys, shared, exact, modify_ok, H, B,
           refs, lru_prev, lru_next, lru_init, anon0, evicted0,
           acc2d, dr2d, kcol, pol_mode, ks, ktab, k_init, alpha, threshold,
           speculative, pad, dsizes, dcount, dq, dmode, block_size, budget0,
           max_model_len, max_num_seqs, num_blocks,
           scalars, mark_at, arrival, arrival_f, fins, steps, gaps, priced):
    """The engine loop of every run, as a generator. Closed and open loops never yield. In
    joint mode (open loop, ctl[C_JOINT] != 0) the run's requests are not known in advance: a
    driver (simkit.engine.fast.joint) routes each arrival here, writing order[j] (its request),
    arr_t[j] (the clock at its arrival), B[j] and ctl[C_DELIVERED] = j + 1; the generator yields
    the end of a step, once scheduled and priced, that is not before horizon[0] (the next
    arrival's time: earlier ones it runs through, nothing can arrive in them; resumed at the
    end, it takes what was delivered during the step, then updates) and JOINT_IDLE when it has
    no work (resumed with arrivals, it wakes at their time; with none, it ends). Before each yield
    ctl[C_DONE] holds its finished count (the router reads outstanding = delivered - finished).
    In every mode it yields FLUSH when the `steps` (and `priced`) or `gaps` buffer is full:
    their first ctl[C_STEPS] and ctl[C_GAPS] rows are taken (Outputs.flush) and refilled from
    the top (a generator cannot return arrays, nor grow its caller's); at its end those counts
    are the rows since the last flush. `scalars`, `mark_at`, `arrival`, `arrival_f` and `fins`
    (one row per request) are filled in place."""
    n = order.shape[0]
    joint = open_loop and ctl[C_JOINT] != 0
    bs = block_size
    max_len_1 = max_model_len - 1
    # request state, by position j in the order
    computed = np.zeros(n, np.int64)
    tt = np.zeros(n, np.int64)
    blocks = np.zeros(n, np.int64)
    draft = np.zeros(n, np.int64)
    spec = np.zeros(n, np.int64)
    first = np.full(n, -2, np.int64)      # step of the first token (-2: none yet)
    last = np.full(n, -2, np.int64)
    # arrival[j]: closed loop, the step whose end it is (-1: 0); arrival_f[j]: open loop, the time
    now = 0.0
    a_now = 0.0                             # the arrivals process's clock
    preempts = np.zeros(n, np.int64)
    reg_at = np.full(n, 16, np.int64)
    modified = np.zeros(n, np.bool_)
    chain_len = np.zeros(n, np.int64)
    chain_ok = np.zeros(refs.shape[0] - H if use_pc else 1, np.bool_)  # chain[i] not None
    seen = np.zeros(plen.shape[0], np.int64)
    running = np.empty(n + 1, np.int64)
    nrun = 0
    wq = np.empty(n + 1, np.int64)       # ring buffer: every request waits at most once
    wcap = n + 1
    whead = 0
    wcount = 0
    # prefix cache: refs[key] (-1 = not cached), the free cached blocks' LRU list
    anon = anon0
    evicted = evicted0
    lru_head = -1
    lru_tail = -1
    lru_len = 0
    for x in lru_init:
        lru_prev[x] = lru_tail
        lru_next[x] = -1
        if lru_tail >= 0:
            lru_next[lru_tail] = x
        else:
            lru_head = x
        lru_tail = x
        lru_len += 1
    free_blocks = num_blocks if not use_pc else anon + lru_len
    total_blocks = num_blocks
    # K policy state (FEEDBACK's EWMA)
    kmax = ks[ks.shape[0] - 1] if ks.shape[0] else 0
    cond = np.ones(kmax + 1)
    uncond = np.ones(kmax + 1)
    k_cur = k_init
    # outputs
    s_base = 0                              # the step and gap held in the buffers' first rows
    g_base = 0
    s_rows = steps.shape[0]
    g_room = gaps.shape[0] - max_num_seqs - 1
    nfin = 0
    ngap = 0
    hit_tokens = 0
    query_tokens = 0
    preemptions = 0
    warm_step = -2
    last_arrival = -1
    nxt = 0
    pending = 0
    done = 0
    err = ERR_NONE
    # per-step scratch
    e_j = np.empty(n + 1, np.int64)
    e_new = np.empty(n + 1, np.int64)
    e_spec = np.empty(n + 1, np.int64)
    e_real = np.empty(n + 1, np.int64)
    e_kind = np.empty(n + 1, np.int64)
    p_a = np.empty(n + 1, np.int64)
    p_d = np.empty(n + 1, np.int64)
    cand = np.empty(n + 1, np.int64)
    reach = np.zeros(kmax + 2, np.int64)
    cumv = np.zeros(kmax + 1)
    accn = np.zeros(kmax + 2, np.int64)

    # the first clients (or arrivals at time 0) submit before the engine's first step
    first_n = min(concurrency, n)
    if joint:
        first_n = ctl[C_DELIVERED]            # the driver routed the arrivals at time 0
    elif open_loop:
        first_n = 0
        while first_n < n and not arr_t[first_n] > 0.0:
            first_n += 1
    for _ in range(first_n):
        j = nxt
        nxt += 1
        arrival[j] = -1
        if joint:
            arrival_f[j] = arr_t[j]
        last_arrival = -1
        _enqueue(j, order, seen, modified, exact, modify_ok, use_pc, wq, (whead + wcount) % wcap)
        wcount += 1
    step = 0
    while True:
        if step - s_base == s_rows or ngap - g_base > g_room:
            ctl[C_STEPS] = step - s_base
            ctl[C_GAPS] = ngap - g_base
            yield FLUSH                                # the caller takes the full buffers
            s_base = step
            g_base = ngap
        if nrun == 0 and wcount == 0 and joint:
            ctl[C_DONE] = done
            yield JOINT_IDLE                           # idle until the router delivers
            if nxt >= ctl[C_DELIVERED]:
                break                                  # none: the arrivals are over
            now = arr_t[nxt]                           # the arrival wakes the engine
            while nxt < ctl[C_DELIVERED]:
                arrival_f[nxt] = arr_t[nxt]
                _enqueue(nxt, order, seen, modified, exact, modify_ok, use_pc, wq,
                         (whead + wcount) % wcap)
                wcount += 1
                nxt += 1
            continue
        if nrun == 0 and wcount == 0 and open_loop:
            if nxt >= n:
                break
            a_now = a_now + (arr_t[nxt] - a_now)       # the next arrival wakes the engine
            now = a_now
            while True:
                arrival_f[nxt] = a_now
                _enqueue(nxt, order, seen, modified, exact, modify_ok, use_pc, wq,
                         (whead + wcount) % wcap)
                wcount += 1
                nxt += 1
                if nxt >= n or arr_t[nxt] > a_now:
                    break
            continue
        if nrun == 0 and wcount == 0:
            if nxt >= n or pending == 0:
                break
            for _ in range(pending):          # idle: the clients wake the engine
                if nxt >= n:
                    break
                j = nxt
                nxt += 1
                arrival[j] = step - 1
                last_arrival = step - 1
                _enqueue(j, order, seen, modified, exact, modify_ok, use_pc, wq,
                         (whead + wcount) % wcap)
                wcount += 1
            pending = 0
            continue
        # ---- schedule (Scheduler.schedule) ----
        k = k_cur
        kc = kcol[k]
        budget = budget0
        free = free_blocks
        ne = 0
        num_tokens = prefill_tokens = prefill_reqs = spec_tokens = real_total = drafting = 0
        ctx = max_q = sched_acc = 0
        preempted = 0
        room_max = -1                      # most drafts a decode request had room for (k_ran)
        i = 0
        while i < nrun and budget > 0:
            j = running[i]
            idx = order[j]
            comp = computed[j]
            n_tokens = plen[idx] + tt[j]
            n_new = n_tokens + spec[j] - comp
            room = budget if budget < max_len_1 - comp else max_len_1 - comp
            if n_new > budget:
                n_new = budget
            if n_new > max_len_1 - comp:
                n_new = max_len_1 - comp
            if n_new <= 0:
                i += 1
                continue
            need = -(-(comp + n_new) // bs) - blocks[j]
            if need > free:
                stopped = False
                free_blocks = free
                while need > free_blocks:
                    nrun -= 1
                    v = running[nrun]
                    # Scheduler._preempt
                    free_blocks += blocks[v]
                    if use_pc:
                        vi = order[v]
                        anon += blocks[v] - chain_len[v]
                        for ci in range(chain_len[v] - 1, -1, -1):
                            if not chain_ok[B[v] - H + ci]:
                                anon += 1
                                continue
                            key = _key(v, ci, vi, modified, nkeys, ch_off, ch_ids, shared, H, B)
                            r = refs[key] - 1
                            refs[key] = r
                            if r == 0:
                                lru_prev[key] = lru_tail
                                lru_next[key] = -1
                                if lru_tail >= 0:
                                    lru_next[lru_tail] = key
                                else:
                                    lru_head = key
                                lru_tail = key
                                lru_len += 1
                        free_blocks = anon + lru_len
                        chain_len[v] = 0
                    blocks[v] = 0
                    computed[v] = 0
                    draft[v] = 0
                    spec[v] = 0
                    preempts[v] += 1
                    preemptions += 1
                    whead = (whead - 1) % wcap
                    wq[whead] = v
                    wcount += 1
                    preempted += 1
                    if v == j:
                        stopped = True
                        break
                free = free_blocks
                if stopped:
                    break
            if need > 0:
                free -= need
                blocks[j] += need
                if use_pc:                                   # PrefixCache.take
                    if need <= anon:
                        anon -= need
                    else:
                        for _ in range(need - anon):
                            if lru_head < 0:
                                err = ERR_EVICT
                                break
                            x = lru_head
                            lru_head = lru_next[x]
                            if lru_head >= 0:
                                lru_prev[lru_head] = -1
                            else:
                                lru_tail = -1
                            lru_len -= 1
                            refs[x] = -1
                            evicted += 1
                        anon = 0
            if use_pc and comp + n_new >= reg_at[j] and n_tokens >= reg_at[j]:
                upto = comp + n_new
                full = (upto if upto < n_tokens else n_tokens) // bs
                for ci in range(chain_len[j], full):
                    key = _key(j, ci, idx, modified, nkeys, ch_off, ch_ids, shared, H, B)
                    if refs[key] >= 0:
                        chain_ok[B[j] - H + ci] = False
                    else:
                        refs[key] = 1
                        chain_ok[B[j] - H + ci] = True
                if full > chain_len[j]:
                    chain_len[j] = full
                reg_at[j] = (chain_len[j] + 1) * bs
            gap = n_tokens - comp
            e_j[ne] = j
            e_new[ne] = n_new
            if gap == 1:
                sp = n_new - 1
                if room - 1 > room_max:
                    room_max = room - 1
                real = draft[j] if draft[j] < sp else sp
                e_spec[ne] = sp
                e_real[ne] = real
                e_kind[ne] = DECODE
                spec_tokens += sp
                real_total += real
                if real > 0:
                    a = np.int64(acc2d[kc, row0[idx] + tt[j]])
                    sched_acc += a if a < real else real
                drafting += 1
            else:
                prefill_tokens += n_new
                prefill_reqs += 1
                e_spec[ne] = 0
                e_real[ne] = 0
                if comp + n_new >= n_tokens:
                    drafting += 1
                    e_kind[ne] = LAST
                else:
                    e_kind[ne] = CHUNK
            ne += 1
            num_tokens += n_new
            if n_new > max_q:
                max_q = n_new
            ctx += comp + n_new
            budget -= n_new
            i += 1
        if preempted == 0:
            while wcount > 0 and budget > 0 and nrun < max_num_seqs:
                j = wq[whead]
                idx = order[j]
                n_tokens = plen[idx] + tt[j]
                hit = hit_free = 0
                if use_pc:
                    if tt[j] == 0:
                        nk = nkeys[idx]
                    else:
                        nk = n_tokens // bs
                        if nk < nkeys[idx]:
                            nk = nkeys[idx]
                    mb = (n_tokens - 1) // bs
                    lim = mb if mb < nk else nk
                    while hit < lim:
                        r = refs[_key(j, hit, idx, modified, nkeys, ch_off, ch_ids, shared, H, B)]
                        if r < 0:
                            break
                        if r == 0:
                            hit_free += 1
                        hit += 1
                n_new = n_tokens - computed[j] - hit * bs
                if n_new > budget:
                    n_new = budget
                need = -(-(computed[j] + hit * bs + n_new) // bs) - blocks[j] - hit
                if need + hit_free > free:
                    break
                whead = (whead + 1) % wcap
                wcount -= 1
                running[nrun] = j
                nrun += 1
                if use_pc:
                    if preempts[j] == 0:
                        hit_tokens += hit * bs
                        query_tokens += plen[idx]
                    if hit:
                        for ci in range(hit):                # PrefixCache.acquire
                            key = _key(j, ci, idx, modified, nkeys, ch_off, ch_ids, shared, H, B)
                            r = refs[key]
                            if r == 0:
                                p, q = lru_prev[key], lru_next[key]
                                if p >= 0:
                                    lru_next[p] = q
                                else:
                                    lru_head = q
                                if q >= 0:
                                    lru_prev[q] = p
                                else:
                                    lru_tail = p
                                lru_len -= 1
                            refs[key] = r + 1
                            chain_ok[B[j] - H + ci] = True
                        chain_len[j] = hit
                        blocks[j] += hit
                        computed[j] += hit * bs
                        free -= hit_free
                    if need > 0:                             # PrefixCache.take
                        if need <= anon:
                            anon -= need
                        else:
                            for _ in range(need - anon):
                                if lru_head < 0:
                                    err = ERR_EVICT
                                    break
                                x = lru_head
                                lru_head = lru_next[x]
                                if lru_head >= 0:
                                    lru_prev[lru_head] = -1
                                else:
                                    lru_tail = -1
                                lru_len -= 1
                                refs[x] = -1
                                evicted += 1
                            anon = 0
                    reg_at[j] = (chain_len[j] + 1) * bs
                    if computed[j] + n_new >= reg_at[j]:
                        upto = computed[j] + n_new
                        full = (upto if upto < n_tokens else n_tokens) // bs
                        for ci in range(chain_len[j], full):
                            key = _key(j, ci, idx, modified, nkeys, ch_off, ch_ids, shared, H, B)
                            if refs[key] >= 0:
                                chain_ok[B[j] - H + ci] = False
                            else:
                                refs[key] = 1
                                chain_ok[B[j] - H + ci] = True
                        if full > chain_len[j]:
                            chain_len[j] = full
                        reg_at[j] = (chain_len[j] + 1) * bs
                free -= need
                blocks[j] += need
                e_j[ne] = j
                e_new[ne] = n_new
                e_spec[ne] = 0
                e_real[ne] = 0
                if computed[j] + n_new >= n_tokens:
                    drafting += 1
                    e_kind[ne] = LAST
                else:
                    e_kind[ne] = CHUNK
                ne += 1
                prefill_tokens += n_new
                prefill_reqs += 1
                num_tokens += n_new
                if n_new > max_q:
                    max_q = n_new
                ctx += computed[j] + n_new
                budget -= n_new
        free_blocks = free
        if err != ERR_NONE:
            break
        if ne == 0 and (nrun > 0 or wcount > 0):
            err = ERR_STUCK
            break
        mode, padded = _dispatch(dsizes, dcount, dq, dmode, max_num_seqs, k, num_tokens, ne,
                                 max_q)
        row = steps[step - s_base]
        row[S_REQS] = ne
        row[S_TOKENS] = num_tokens
        row[S_PADDED] = padded
        row[S_PRE_TOK] = prefill_tokens
        row[S_PRE_REQS] = prefill_reqs
        row[S_DEC_REQS] = ne - prefill_reqs
        row[S_SPEC] = spec_tokens
        row[S_PAD_DRAFTS] = spec_tokens - real_total
        row[S_DRAFTING] = drafting if speculative else 0
        row[S_CTX] = ctx
        row[S_SCHED_ACC] = sched_acc
        row[S_MODE] = mode
        if room_max < 0:                   # no decode: the budget's own bound (Plan.k_ran)
            room_max = budget0 - 1
        row[S_K] = k if room_max >= k else room_max
        # clients whose request finished in the last step submit now (after this schedule)
        for _ in range(pending):
            if nxt >= n:
                break
            j = nxt
            nxt += 1
            arrival[j] = step - 1
            last_arrival = step - 1
            _enqueue(j, order, seen, modified, exact, modify_ok, use_pc, wq,
                     (whead + wcount) % wcap)
            wcount += 1
        pending = 0
        if open_loop:
            # the step runs; arrivals before its end join the queue (a tie: the reference's
            # event order decides, so the reference runs it)
            dev, s_step = price(consts, padded, ne, spec_tokens, num_tokens, ctx,
                                prefill_tokens, prefill_reqs, mode, sched_acc,
                                drafting if speculative else 0, asy)
            end = now + s_step
            x = s_step - dev
            priced[step - s_base, 0] = s_step
            priced[step - s_base, 1] = ((x if x > 0.0 else 0.0) / s_step if s_step > 0 else 0.0) \
                * s_step
            priced[step - s_base, 2] = end
            if joint and not end < horizon[0]:
                ctl[C_DONE] = done
                yield end                              # resumed at the step's end
            if joint:
                while nxt < ctl[C_DELIVERED]:          # arrivals during the step join the queue
                    arrival_f[nxt] = arr_t[nxt]
                    _enqueue(nxt, order, seen, modified, exact, modify_ok, use_pc, wq,
                             (whead + wcount) % wcap)
                    wcount += 1
                    nxt += 1
            while nxt < n and not joint:
                t_next = a_now + (arr_t[nxt] - a_now)
                if t_next == end:
                    err = ERR_TIE
                    break
                if t_next > end:
                    break
                a_now = t_next
                while True:
                    arrival_f[nxt] = a_now
                    _enqueue(nxt, order, seen, modified, exact, modify_ok, use_pc, wq,
                             (whead + wcount) % wcap)
                    wcount += 1
                    nxt += 1
                    if nxt >= n or arr_t[nxt] > a_now:
                        break
            if err != ERR_NONE:
                break
            now = end
        # ---- update (Scheduler.update) ----
        emitted = accepted = decodes = decode_tokens = longest = 0
        npairs = 0
        ncand = 0
        finished = False
        gap0 = ngap
        for x in range(ne):
            j = e_j[x]
            kind = e_kind[x]
            if kind == CHUNK:
                computed[j] += e_new[x]
                continue
            idx = order[j]
            t = tt[j]
            a = 0
            real = e_real[x]
            if real > 0:
                a = np.int64(acc2d[kc, row0[idx] + t])
                if a > real:
                    a = real
            e = a + 1
            rem = olen[idx] - t
            if e > rem:
                e = rem
            if kind == DECODE:
                decodes += 1
                accepted += a
                decode_tokens += e
                if pol_mode >= 2 and e_spec[x] > 0:
                    p_a[npairs] = a
                    p_d[npairs] = real
                    npairs += 1
            computed[j] = plen[idx] + t + a
            t += e
            tt[j] = t
            emitted += e
            if first[j] == -2:
                first[j] = step
            else:
                gaps[ngap - g_base, 0] = step
                gaps[ngap - g_base, 1] = last[j]
                gaps[ngap - g_base, 2] = j
                ngap += 1
            last[j] = step
            if t >= olen[idx]:
                free_blocks += blocks[j]
                if use_pc:                                   # PrefixCache.release
                    anon += blocks[j] - chain_len[j]
                    for ci in range(chain_len[j] - 1, -1, -1):
                        if not chain_ok[B[j] - H + ci]:
                            anon += 1
                            continue
                        key = _key(j, ci, idx, modified, nkeys, ch_off, ch_ids, shared, H, B)
                        r = refs[key] - 1
                        refs[key] = r
                        if r == 0:
                            lru_prev[key] = lru_tail
                            lru_next[key] = -1
                            if lru_tail >= 0:
                                lru_next[lru_tail] = key
                            else:
                                lru_head = key
                            lru_tail = key
                            lru_len += 1
                    free_blocks = anon + lru_len
                    chain_len[j] = 0
                blocks[j] = 0
                finished = True
                fins[nfin, 0] = j
                fins[nfin, 1] = first[j]
                fins[nfin, 2] = step
                fins[nfin, 3] = olen[idx]
                fins[nfin, 4] = preempts[j]
                nfin += 1
                done += 1
                if done == warm_count:
                    warm_step = step
                for m in range(marks.shape[0]):
                    if marks[m] == done:
                        mark_at[m] = step
                if not open_loop:
                    pending += 1
                spec[j] = -1                                 # finished marker for the filter
            else:
                cand[ncand] = j
                ncand += 1
                if plen[idx] + t > longest:
                    longest = plen[idx] + t
        if finished:
            w = 0
            for x in range(nrun):
                j = running[x]
                if spec[j] != -1:
                    running[w] = j
                    w += 1
            nrun = w
        # Scheduler._propose
        if speculative:
            if pol_mode >= 2 and npairs > 0:                 # K policy's observe (AcceptanceEWMA)
                kk = k if k < kmax else kmax
                for y in range(kk + 2):
                    reach[y] = 0
                    accn[y] = 0
                for y in range(npairs):
                    a = p_a[y]
                    d = p_d[y]
                    top = a + 1 if a + 1 < d else d
                    reach[top if top < kk else kk] += 1
                    accn[a if a < kk else kk] += 1
                for y in range(kk - 1, -1, -1):
                    reach[y] += reach[y + 1]
                    accn[y] += accn[y + 1]
                for y in range(1, kk + 1):
                    if reach[y]:
                        cond[y] += alpha * (accn[y] / reach[y] - cond[y])
                    uncond[y] += alpha * (accn[y] / npairs - uncond[y])
            if pol_mode == 0:
                knew = k_init
            elif pol_mode == 1:                              # BatchSizeTable
                knew = ktab[ne]
            elif pol_mode == 2:                              # FeedbackK.choose
                knew = ks[0]
                for y in range(ks.shape[0]):
                    if uncond[ks[y]] >= threshold:
                        knew = ks[y]
            elif ncand == 0:                                 # GoodputK.choose
                knew = ks[ks.shape[0] - 1]
            else:
                cumv[0] = 0.0                                # AcceptanceEWMA.cumulative
                prod = 1.0
                total = 0.0
                for y in range(1, kmax + 1):
                    prod *= cond[y]
                    total += prod
                    cumv[y] = total
                context = 0
                for x in range(nrun):
                    context += computed[running[x]]
                knew = ks[0]
                best_rate = -1.0
                for y in range(ks.shape[0]):
                    kk = ks[y]
                    kc2 = kcol[kk]
                    got = 0.0
                    real = 0
                    for x in range(ncand):
                        j = cand[x]
                        d = np.int64(dr2d[kc2, row0[order[j]] + tt[j]])
                        got += cumv[d]
                        real += d
                    expected = ncand + got
                    ntu = ncand * (1 + kk)                   # pricing.uniform_decode_price
                    gm2, pad2 = _dispatch(dsizes, dcount, dq, dmode, max_num_seqs, kk, ntu, ncand,
                                          1 + kk)
                    _, s_u = price(consts, pad2, ncand, ncand * kk, ntu, context + ntu, 0, 0, gm2,
                                   0, ncand, False)
                    rate = expected / s_u
                    if rate > best_rate:
                        knew = kk
                        best_rate = rate
            k_cur = knew
            no_draft = longest > max_model_len - knew
            kn = kcol[knew]
            for x in range(ncand):
                j = cand[x]
                d = 0 if no_draft else np.int64(dr2d[kn, row0[order[j]] + tt[j]])
                draft[j] = d
                if pad:
                    spec[j] = 0 if no_draft else knew
                else:
                    spec[j] = d
        row = steps[step - s_base]
        row[S_EMITTED] = emitted
        row[S_ACCEPTED] = accepted
        row[S_DECODES] = decodes
        row[S_DEC_TOKENS] = decode_tokens
        row[S_FREE] = free_blocks
        row[S_ITL] = ngap - gap0
        step += 1
    ctl[C_DONE] = done
    scalars[0] = err
    scalars[1] = step
    scalars[2] = nfin
    scalars[3] = ngap
    scalars[4] = preemptions
    scalars[5] = hit_tokens
    scalars[6] = query_tokens
    scalars[7] = evicted
    scalars[8] = warm_step
    scalars[9] = last_arrival
    ctl[C_STEPS] = step - s_base
    ctl[C_GAPS] = ngap - g_base


# kernel.price's constants (simkit.engine.fast.pricing.NAMES, then the drafter's three)
(C_G_DENSE, C_G_ACT, C_G_TOK, C_G_LM, C_G_LM_ROW, C_MOE_E, C_MOE_LOG, C_M_BYTES, C_M_TOK, C_A_BW,
 C_A_FULL, C_A_LOCAL, C_KV_FULL, C_KV_LOCAL, C_WINDOW, C_C_TOK, C_ROW_S, C_REJ, C_F_FULL, C_F_PW,
 C_F_NONE, C_PF_TOK, C_A_STEP, C_A_REQ, C_A_PT, C_A_RT, C_A_ACC, C_H_STEP, C_H_REQ, C_H_PT,
 C_H_RT, C_H_ACC, C_DISPATCH_ON, C_DA_PW, C_DA_NONE, C_DA_TOK, C_D_PW, C_D_NONE, C_D_TOK,
 C_OVERLAP_OK, C_A_AS, C_H_FR, C_H_FACC, C_F_PRE, C_DS, C_DR, C_DA) = range(47)


@njit(cache=True)
def price(c, n, reqs, spec, ntok, ctx, pre_tok, pre_reqs, gm, acc, nd, asy):
    """(device s, step s) of one step: CostModel.step_cost's closure (simkit.costmodel.model,
    `fast`), operation for operation, on constants `c` (pricing.constants)."""
    rows = reqs + spec
    x = c[C_G_DENSE] + n * c[C_G_ACT]
    y = n * c[C_G_TOK]
    dev = x if x > y else y
    y = rows * c[C_G_LM_ROW]
    g_lm = c[C_G_LM]
    dev += g_lm if g_lm > y else y
    if c[C_M_TOK]:
        x = c[C_MOE_E] * (1.0 - math.exp(n * c[C_MOE_LOG])) * c[C_M_BYTES]
        y = n * c[C_M_TOK]
        dev += x if x > y else y
    if reqs:
        mean = ctx / reqs
        pairs = (ntok - 0.5 * pre_tok) * mean
        window = c[C_WINDOW]
        if window:
            win = mean if mean < window else window
            x = (ctx * c[C_KV_FULL] + reqs * win * c[C_KV_LOCAL]) * c[C_A_BW]
            y = pairs * c[C_A_FULL] + ntok * win * c[C_A_LOCAL]
        else:
            x = ctx * c[C_KV_FULL] * c[C_A_BW]
            y = pairs * c[C_A_FULL]
        dev += x if x > y else y
    if gm == G_FULL:
        dev += c[C_F_FULL]
    elif gm == G_PIECEWISE:
        dev += c[C_F_PW]
    else:
        dev += c[C_F_NONE]
    dev += n * c[C_C_TOK] + rows * c[C_ROW_S]
    if spec:
        dev += c[C_REJ]
    if c[C_PF_TOK]:
        dev += c[C_PF_TOK] * pre_tok
    if asy:
        overlap = c[C_A_STEP] + c[C_A_REQ] * reqs + c[C_A_PT] * ntok + c[C_A_RT] * spec + \
            c[C_A_ACC] * acc
    else:
        overlap = c[C_H_STEP] + c[C_H_REQ] * reqs + c[C_H_PT] * ntok + c[C_H_RT] * spec + \
            c[C_H_ACC] * acc
    if nd:
        draft = c[C_DS] + c[C_DR] * nd + c[C_DA] * acc
    else:
        draft = 0.0
    overlap_ok = c[C_OVERLAP_OK] != 0.0
    if c[C_DISPATCH_ON] != 0.0 and gm != G_FULL:
        if asy:
            issue = (c[C_DA_PW] if gm == G_PIECEWISE else c[C_DA_NONE]) + c[C_DA_TOK] * ntok
        else:
            issue = (c[C_D_PW] if gm == G_PIECEWISE else c[C_D_NONE]) + c[C_D_TOK] * ntok
        if asy and overlap_ok:
            step = (dev if dev > overlap + issue else overlap + issue) + draft + c[C_A_AS]
        else:
            step = (dev if dev > issue else issue) + overlap + draft
    elif asy and overlap_ok:
        step = (dev if dev > overlap else overlap) + draft + c[C_A_AS]
    else:
        step = dev + overlap + draft
    front = c[C_H_FR] * reqs + c[C_H_FACC] * acc
    if c[C_F_PRE]:
        front += c[C_F_PRE] * pre_reqs
    return dev, (step if step > front else front)


@njit(cache=True)
def price_steps(steps, c, asy):
    """(step s, host-bound s) per step of a kernel run, and the step ends (SimPy's running sum)."""
    m = steps.shape[0]
    step_s = np.empty(m)
    host_s = np.empty(m)
    ends = np.empty(m)
    now = 0.0
    for i in range(m):
        r = steps[i]
        dev, s = price(c, r[S_PADDED], r[S_REQS], r[S_SPEC], r[S_TOKENS], r[S_CTX], r[S_PRE_TOK],
                       r[S_PRE_REQS], r[S_MODE], r[S_SCHED_ACC], r[S_DRAFTING], asy)
        step_s[i] = s
        x = s - dev
        host_s[i] = ((x if x > 0.0 else 0.0) / s if s > 0 else 0.0) * s
        now = now + s
        ends[i] = now
    return step_s, host_s, ends
