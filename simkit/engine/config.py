"""Engine settings (vLLM server defaults) and the speculative configurations of the ladder.

A config string such as "vanilla,suffix,kpad:4,6,8,12,dynamic" parses into one SpecConfig per
row: bare integers after "name:" belong to that name's K list. A method keyword ("suffix") means
the drafter, default K and slots of the vLLM version it is parsed for (simkit.catalog.vllm_versions:
arctic's tree at K 24 on 0.26/0.33, the GPU speculator at K 8 on 0.34). "ktable:1-16=8/17-64=4"
is vLLM 0.34's num_speculative_tokens_per_batch_size (a K per batch-size range). "suffix-av"
(or "suffix-av:K") is suffix decoding with vLLM 0.34's enable_adaptive_verification (a per-step
slot budget; simkit.engine.adaptive_run).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simkit.catalog.vllm_versions import DEFAULT_VERSION, get_vllm_version
from simkit.drafters.base import NGRAM_DRAFTER, NO_DRAFTER, SUFFIX_DRAFTER, drafter_names, get_drafter
from simkit.engine.cudagraph import CudagraphMode
from simkit.engine.policies import KPolicyName
from simkit.errors import InputError, UnknownNameError

# the configuration lists the commands start from (one place; the what-ifs run a shorter one)
DEFAULT_CONFIGS = "vanilla,suffix,kpad:4,6,8,12,dynamic"     # predict, sweep, the reference study
WHATIF_CONFIGS = "vanilla,suffix,kpad:4,12"                  # every what-if but history
FIXED_K_CONFIGS = "vanilla,suffix,kpad:4,6,8,12"             # whatif history: the K ladder alone

KPAD_DEFAULT_KS = (4, 6, 8, 12)
DYNAMIC_DEFAULT_KS = (4, 6, 12)
DYNAMIC_DRAFTER = SUFFIX_DRAFTER     # the drafter the dynamic-K policies choose K for


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler and memory limits of one simulated server (OpenAI-server defaults, the same in
    vLLM 0.26 and 0.33) and the vLLM version whose engine rules apply."""

    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    max_model_len: int = 16384
    max_tokens: int = 8192
    block_size: int = 16
    kv_capacity_tokens: int = 1 << 40          # replaced by the cost model's capacity in predict
    cudagraph_mode: CudagraphMode = CudagraphMode.FULL_AND_PIECEWISE
    prefix_caching: bool = True                # vLLM V1 default (--no-enable-prefix-caching)
    vllm_version: str = DEFAULT_VERSION        # whose rules apply (simkit.catalog.vllm_versions)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vllm_version", get_vllm_version(self.vllm_version).key)
        for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "max_tokens",
                     "block_size", "kv_capacity_tokens"):
            if getattr(self, name) < 1:
                raise InputError(f"must be >= 1, got {getattr(self, name)}", field=name)

    @property
    def num_blocks(self) -> int:
        return self.kv_capacity_tokens // self.block_size


@dataclass(frozen=True)
class SpecConfig:
    """One configuration of the ladder: how drafts are made, capped and padded, and how K is chosen."""

    name: str                       # row label, e.g. "kpad-8"
    drafter: str = NO_DRAFTER       # a registered drafter's name (simkit.drafters.base) or "none"
    k: int = 0                      # draft cap (max of ks for dynamic)
    pad: bool = False               # pad every decode request's drafts to exactly K with -1
    ks: tuple[int, ...] = ()        # K set of a dynamic policy (graphs captured for each)
    policy: KPolicyName | None = None  # dynamic policy: table, feedback, goodput
    policy_params: dict = field(default_factory=dict, compare=False, hash=False)
    graphs: str = "per-k"           # dynamic: "per-k" capture list per K, or "kmax" (vLLM 0.26 as is)
    k_table: tuple[tuple[int, int, int], ...] = ()  # ktable: vLLM's (start, end, K) batch-size ranges
    adaptive: bool = False          # enable_adaptive_verification (vLLM 0.34 suffix)

    @property
    def speculative(self) -> bool:
        """True when a drafter proposes tokens (every config but vanilla)."""
        return self.drafter != NO_DRAFTER

    @property
    def async_scheduling(self) -> bool:
        """vLLM runs async scheduling only without spec decode (refused for suffix/ngram)."""
        return not self.speculative

    @property
    def k_values(self) -> tuple[int, ...]:
        """Every K this config may run with (one capture list each)."""
        return self.ks if self.ks else ((self.k,) if self.k else (0,))


def vanilla() -> SpecConfig:
    """No speculation (async scheduling)."""
    return SpecConfig("vanilla")


def drafted(drafter: str, k: int | None = None) -> SpecConfig:
    """`drafter`'s drafts at cap K, unpadded (default: the drafter's own default K)."""
    d = get_drafter(drafter)
    k = d.default_k if k is None else k
    return SpecConfig(d.label(k), d.name, k)


def suffix(k: int | None = None) -> SpecConfig:
    """Suffix decoding at cap K (default 24, vLLM's when num_speculative_tokens is unset)."""
    return drafted(SUFFIX_DRAFTER, k)


def ngram(k: int | None = None) -> SpecConfig:
    """n-gram prompt lookup at cap K (default 4)."""
    return drafted(NGRAM_DRAFTER, k)


def kpad(k: int, drafter: str = SUFFIX_DRAFTER) -> SpecConfig:
    """`drafter`'s drafts padded to exactly K per decode request (uniform FULL-graph batches)."""
    return SpecConfig(get_drafter(drafter).kpad_row_label(k), drafter, k, pad=True)


def dynamic(policy: str, ks: tuple[int, ...] = DYNAMIC_DEFAULT_KS, drafter: str = DYNAMIC_DRAFTER,
            **params) -> SpecConfig:
    """A dynamic-K policy choosing one K of `ks` per step for the whole (padded) batch."""
    policy = KPolicyName(policy)
    ks = tuple(sorted(set(ks)))
    label = f"dynamic-{policy}" if ks == DYNAMIC_DEFAULT_KS else \
        f"dynamic-{policy}-{'.'.join(map(str, ks))}"
    return SpecConfig(label, drafter, max(ks), pad=True, ks=ks, policy=policy,
                      policy_params=dict(params))


KTABLE = "ktable"          # the keyword of a batch-size K table
ADAPTIVE = "suffix-av"     # suffix decoding with adaptive verification (vLLM 0.34)


def ladder_configs(configs: str, version) -> str:
    """The configurations a ladder runs: `configs`, and when it is the default ladder on a vLLM
    that has adaptive verification (0.34), suffix-av too, so the report can say whether to turn
    it on (one more row at the default K)."""
    if configs == DEFAULT_CONFIGS and not version.adaptive_verification:
        return f"{configs},{ADAPTIVE}"
    return configs


def adaptive_suffix(k: int | None, version) -> SpecConfig:
    """Suffix decoding at K with vLLM 0.34's enable_adaptive_verification: row "suffix-av" at
    the default K, else "suffix-av-K"; InputError with vLLM's reason on a version without it."""
    if version.adaptive_verification:
        raise InputError(f"'{ADAPTIVE}' is not available on {version.label}: "
                         f"{version.adaptive_verification}", field="configs")
    base = method_config("suffix", k, version)
    k = base.k
    label = ADAPTIVE if k == version.method("suffix").default_k else f"{ADAPTIVE}-{k}"
    return SpecConfig(label, base.drafter, k, adaptive=True)


def k_table(ranges: tuple[tuple[int, int, int], ...], drafter: str) -> SpecConfig:
    """vLLM 0.34's num_speculative_tokens_per_batch_size: (start, end, K) ranges of the number
    of requests a step schedules; num_speculative_tokens = the largest K (validated by
    simkit.engine.policies.check_k_ranges). Row label ktable-<K of each range>."""
    ks = tuple(sorted({k for _, _, k in ranges}))
    label = f"{KTABLE}-{'.'.join(str(k) for _, _, k in ranges)}"
    return SpecConfig(label, drafter, max(ks), pad=True, ks=ks, k_table=tuple(ranges))


def method_config(method: str, k: int | None, version) -> SpecConfig:
    """A method's config on a vLLM version: its drafter there, its default K when none is given,
    the row labelled by the method ("suffix", "suffix-4") as the user wrote it."""
    parts = version.method(method)
    k = parts.default_k if k is None else k
    return SpecConfig(method if k == parts.default_k else f"{method}-{k}", parts.drafter, k)


def _parse_ranges(text: str) -> tuple[tuple[int, int, int], ...]:
    """'1-16=8/17-64=4' -> ((1, 16, 8), (17, 64, 4)); InputError naming the bad range."""
    out = []
    for part in text.split("/"):
        span, eq, k = part.strip().partition("=")
        lo, dash, hi = span.partition("-")
        if not (eq and dash and lo.strip().isdigit() and hi.strip().isdigit()
                and k.strip().isdigit()):
            raise InputError(f"'{part}' in '{KTABLE}:{text}' is not START-END=K (e.g. "
                             f"'{KTABLE}:1-16=8/17-64=4/65-1024=2')", field="configs")
        out.append((int(lo), int(hi), int(k)))
    return tuple(out)


def _group(text: str) -> list[tuple[str, list[int]]]:
    """Split "a,b:1,2,c" into [("a", []), ("b", [1, 2]), ("c", [])]."""
    groups: list[tuple[str, list[int]]] = []
    for raw in text.split(","):
        token = raw.strip()
        if not token:
            continue
        if token.isdigit():
            if not groups or not groups[-1][0].endswith(":"):
                raise InputError(f"number '{token}' does not follow a 'name:' item", field="configs")
            groups[-1][1].append(int(token))
            continue
        name, sep, rest = token.partition(":")
        if name.strip().lower() == KTABLE and sep:      # its ranges ride in the name
            groups.append((f"{KTABLE}={rest.strip()}", []))
            continue
        groups.append((name.strip().lower() + sep, []))
        if sep:
            if not rest.strip().isdigit():
                raise InputError(f"expected a K after '{name}:', got '{rest}'", field="configs")
            groups[-1][1].append(int(rest))
    return groups


def parse_configs(text: str, vllm_version: str | None = None) -> list[SpecConfig]:
    """Parse a config list for a vLLM version (None: the default one); 'dynamic' expands to its
    three policies. A method keyword takes the version's drafter and default K; on a version
    where every decode request verifies exactly K slots (0.34) kpad:K is suffix:K (K-pad is
    built in). Raises InputError on bad text."""
    from simkit.engine.policies import check_k_ranges

    version = get_vllm_version(vllm_version)
    drafters = [get_drafter(n) for n in drafter_names()]
    padded = {d.kpad_label: d.name for d in drafters}
    policies = [p.value for p in KPolicyName]
    suffix_drafter = version.method("suffix").drafter
    out: list[SpecConfig] = []
    for name, ks in _group(text):
        base = name.rstrip(":")
        if any(k < 1 or k > 64 for k in ks):
            raise InputError(f"K must be in 1..64 in '{name}{ks}'", field="configs")
        if base == "vanilla":
            out.append(vanilla())
        elif base == ADAPTIVE:
            out.extend(adaptive_suffix(k, version) for k in (ks or [None]))
        elif base.startswith(f"{KTABLE}="):
            if version.batch_size_table:
                raise InputError(f"'{KTABLE}' is not available on {version.label}: "
                                 f"{version.batch_size_table}", field="configs")
            out.append(k_table(check_k_ranges(_parse_ranges(base.split("=", 1)[1])),
                               suffix_drafter))
        elif base == KTABLE:
            raise InputError(f"'{KTABLE}' needs its ranges, e.g. '{KTABLE}:1-16=8/17-64=4/65-1024=2'",
                             field="configs")
        elif base in padded:
            method = version.method_of_drafter(padded[base]) or padded[base]
            if version.kpad == "alias" and method in version.methods:
                out.extend(method_config(method, k, version) for k in (ks or KPAD_DEFAULT_KS))
            else:
                out.extend(kpad(k, padded[base]) for k in (ks or KPAD_DEFAULT_KS))
        elif base in version.methods and base != "none":
            out.extend(method_config(base, k, version) for k in ks) if ks else \
                out.append(method_config(base, None, version))
        elif any(base == d.name for d in drafters):
            out.extend(drafted(base, k) for k in ks) if ks else out.append(drafted(base))
        elif base == "dynamic" or base.startswith("dynamic-"):
            for policy in policies if base == "dynamic" else (base.split("-", 1)[1],):
                if policy not in policies:
                    raise UnknownNameError("dynamic policy", policy, policies)
                out.append(dynamic(policy, tuple(ks) or DYNAMIC_DEFAULT_KS, suffix_drafter))
        else:
            raise UnknownNameError("config", base,
                                   ["vanilla", ADAPTIVE,
                                    *(x for d in drafters for x in (d.name, d.kpad_label)),
                                    "dynamic", *(f"dynamic-{p}" for p in policies),
                                    f"{KTABLE}:START-END=K/..."])
    seen: set[str] = set()
    unique = []
    for cfg in out:
        if cfg.name not in seen:
            seen.add(cfg.name)
            unique.append(cfg)
    if not unique:
        raise InputError("no configuration given", field="configs")
    return unique


def recorded_config(config: str, k: int) -> str:
    """The config string of a measured run's (config, K) (calibrate/data runs*.parquet):
    vanilla, suffix (K 0 or unset: vLLM's default cap) or suffix:K, kpad:K; other names as they
    are (dynamic-<policy> runs are built by the caller)."""
    return {"vanilla": "vanilla", "suffix": f"suffix:{k}" if k else "suffix",
            "kpad": f"kpad:{k}"}.get(config, config)
