"""Engine settings (vLLM server defaults) and the speculative configurations of the ladder.

A config string such as "vanilla,suffix,kpad:4,6,8,12,dynamic" parses into one SpecConfig per
row: bare integers after "name:" belong to that name's K list.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simkit.engine.cudagraph import CudagraphMode
from simkit.errors import InputError

# the configuration lists the commands start from (one place; the what-ifs run a shorter one)
DEFAULT_CONFIGS = "vanilla,suffix,kpad:4,6,8,12,dynamic"     # predict, sweep, the reference study
WHATIF_CONFIGS = "vanilla,suffix,kpad:4,12"                  # every what-if but history
FIXED_K_CONFIGS = "vanilla,suffix,kpad:4,6,8,12"             # whatif history: the K ladder alone

SUFFIX_DEFAULT_K = 24          # vLLM: num_speculative_tokens defaults to the tree depth when unset
KPAD_DEFAULT_KS = (4, 6, 8, 12)
DYNAMIC_DEFAULT_KS = (4, 6, 12)
NGRAM_DEFAULT_K = 4
DYNAMIC_POLICIES = ("table", "feedback", "goodput")


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler and memory limits of one simulated server (OpenAI-server defaults of vLLM 0.26)."""

    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    max_model_len: int = 16384
    max_tokens: int = 8192
    block_size: int = 16
    kv_capacity_tokens: int = 1 << 40          # replaced by the cost model's capacity in predict
    cudagraph_mode: CudagraphMode = CudagraphMode.FULL_AND_PIECEWISE
    prefix_caching: bool = True                # vLLM V1 default (--no-enable-prefix-caching)

    def __post_init__(self) -> None:
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
    drafter: str = "none"           # "none", "suffix", "ngram"
    k: int = 0                      # draft cap (max of ks for dynamic)
    pad: bool = False               # pad every decode request's drafts to exactly K with -1
    ks: tuple[int, ...] = ()        # K set of a dynamic policy (graphs captured for each)
    policy: str | None = None       # dynamic policy: "table", "feedback", "goodput"
    policy_params: dict = field(default_factory=dict, compare=False, hash=False)
    graphs: str = "per-k"           # dynamic: "per-k" capture list per K, or "kmax" (vLLM 0.26 as is)

    @property
    def speculative(self) -> bool:
        """True when a drafter proposes tokens (every config but vanilla)."""
        return self.drafter != "none"

    @property
    def async_scheduling(self) -> bool:
        """vLLM runs async scheduling only without spec decode (refused for suffix/ngram)."""
        return not self.speculative

    @property
    def k_values(self) -> tuple[int, ...]:
        """Every K this config may run with (one capture list each)."""
        return self.ks if self.ks else ((self.k,) if self.k else (0,))


def vanilla() -> SpecConfig:
    return SpecConfig("vanilla")


def suffix(k: int = SUFFIX_DEFAULT_K) -> SpecConfig:
    return SpecConfig("suffix" if k == SUFFIX_DEFAULT_K else f"suffix-{k}", "suffix", k)


def kpad(k: int, drafter: str = "suffix") -> SpecConfig:
    prefix = "kpad" if drafter == "suffix" else f"{drafter}-kpad"
    return SpecConfig(f"{prefix}-{k}", drafter, k, pad=True)


def ngram(k: int = NGRAM_DEFAULT_K) -> SpecConfig:
    return SpecConfig("ngram" if k == NGRAM_DEFAULT_K else f"ngram-{k}", "ngram", k)


def dynamic(policy: str, ks: tuple[int, ...] = DYNAMIC_DEFAULT_KS, **params) -> SpecConfig:
    ks = tuple(sorted(set(ks)))
    label = f"dynamic-{policy}" if ks == DYNAMIC_DEFAULT_KS else \
        f"dynamic-{policy}-{'.'.join(map(str, ks))}"
    return SpecConfig(label, "suffix", max(ks), pad=True, ks=ks, policy=policy,
                      policy_params=dict(params))


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
        groups.append((name.strip().lower() + sep, []))
        if sep:
            if not rest.strip().isdigit():
                raise InputError(f"expected a K after '{name}:', got '{rest}'", field="configs")
            groups[-1][1].append(int(rest))
    return groups


def parse_configs(text: str) -> list[SpecConfig]:
    """Parse a config list; 'dynamic' expands to its three policies. Raises InputError on bad text."""
    out: list[SpecConfig] = []
    for name, ks in _group(text):
        base = name.rstrip(":")
        if any(k < 1 or k > 64 for k in ks):
            raise InputError(f"K must be in 1..64 in '{name}{ks}'", field="configs")
        if base == "vanilla":
            out.append(vanilla())
        elif base == "suffix":
            out.extend(suffix(k) for k in ks) if ks else out.append(suffix())
        elif base in ("kpad", "ngram-kpad"):
            drafter = "suffix" if base == "kpad" else "ngram"
            out.extend(kpad(k, drafter) for k in (ks or KPAD_DEFAULT_KS))
        elif base == "ngram":
            out.extend(ngram(k) for k in ks) if ks else out.append(ngram())
        elif base == "dynamic" or base.startswith("dynamic-"):
            policies = DYNAMIC_POLICIES if base == "dynamic" else (base.split("-", 1)[1],)
            for policy in policies:
                if policy not in DYNAMIC_POLICIES:
                    from simkit.errors import UnknownNameError

                    raise UnknownNameError("dynamic policy", policy, list(DYNAMIC_POLICIES))
                out.append(dynamic(policy, tuple(ks) or DYNAMIC_DEFAULT_KS))
        else:
            from simkit.errors import UnknownNameError

            raise UnknownNameError("config", base,
                                   ["vanilla", "suffix", "kpad", "ngram", "ngram-kpad", "dynamic",
                                    *(f"dynamic-{p}" for p in DYNAMIC_POLICIES)])
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
