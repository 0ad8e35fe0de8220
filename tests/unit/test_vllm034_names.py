"""The vLLM 0.34 names the calibration harness uses exist in the 0.34.0 wheel's source.

Read with `ast` from the wheel (no vLLM import: it needs torch), so a rename on either side is
caught on a CPU host: the EngineArgs and SamplingParams keywords calibrate.runner passes, the
speculative-config fields the 0.34 flags set and the run rows record, ModelRunnerOutput's req_ids
(and the absence of req_id_to_index), the suffix speculator's reset_state / propose / num_valid,
the resolved graph-size fields, and the Model Runner V2 module the recorder detects. Skipped
when the wheel is not here: set SIMKIT_VLLM034_WHEEL, or keep it at /tmp/probe/ (as
../shared/gpu/v034/fetch-wheels.sh leaves it).
"""

from __future__ import annotations

import ast
import glob
import os
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _wheel() -> str | None:
    env = os.environ.get("SIMKIT_VLLM034_WHEEL")
    if env:
        return env if Path(env).exists() else None
    found = sorted(glob.glob("/tmp/probe/vllm-0.34.0-*.whl"))
    return found[0] if found else None


WHEEL = _wheel()
pytestmark = pytest.mark.skipif(WHEEL is None, reason="vLLM 0.34.0 wheel not here (set "
                                "SIMKIT_VLLM034_WHEEL or put it in /tmp/probe/)")


@pytest.fixture(scope="module")
def src():
    zf = zipfile.ZipFile(WHEEL)
    names = set(zf.namelist())

    def read(path: str) -> ast.Module | None:
        return ast.parse(zf.read(path).decode()) if path in names else None

    read.names = names
    return read


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"class {name} not in the wheel's source")


def fields(tree: ast.Module, name: str) -> set[str]:
    """Annotated class-level fields (dataclass / config fields) of a class."""
    return {n.target.id for n in _class(tree, name).body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def methods(tree: ast.Module, name: str) -> set[str]:
    return {n.name for n in _class(tree, name).body if isinstance(n, ast.FunctionDef)}


def self_attrs(tree: ast.Module, name: str) -> set[str]:
    """Attributes a class assigns as self.X anywhere in its methods."""
    out = set()
    for node in ast.walk(_class(tree, name)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                out.add(t.attr)
    return out


def call_keywords(func: str) -> set[str]:
    """Keywords calibrate/runner.py passes to a call of `func` (EngineArgs, SamplingParams)."""
    tree = ast.parse((ROOT / "calibrate" / "runner.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == func:
            out |= {k.arg for k in node.keywords if k.arg}
    assert out, f"no {func}(...) call in calibrate/runner.py"
    return out


def test_engine_args_take_every_keyword_the_runner_and_trace_replay_pass(src):
    from calibrate.harness import get_adapter

    have = fields(src("vllm/engine/arg_utils.py"), "EngineArgs")
    want = call_keywords("EngineArgs") | set(get_adapter("trace_replay").engine_kwargs())
    assert want <= have, sorted(want - have)


def test_sampling_params_take_the_trace_and_every_keyword_the_runner_passes(src):
    from calibrate.harness import get_adapter

    have = fields(src("vllm/sampling_params.py"), "SamplingParams")
    want = call_keywords("SamplingParams") | set(get_adapter("trace_replay").sampling_kwargs([1]))
    assert want <= have, sorted(want - have)


def test_speculative_config_has_the_fields_the_flags_set_and_the_rows_record(src):
    from calibrate.harness.flags import RunnerFlags
    from calibrate.runner import DRAFTER_FIELDS

    have = fields(src("vllm/config/speculative.py"), "SpeculativeConfig")
    flags = RunnerFlags(corpus_tokens=0, k_table=((1, 4, 8),), adaptive=True)
    want = {"method", "num_speculative_tokens", *DRAFTER_FIELDS, *flags.speculative_fields()}
    assert want <= have, sorted(want - have)


def test_model_runner_output_is_indexed_by_req_ids_only(src):
    have = fields(src("vllm/v1/outputs.py"), "ModelRunnerOutput")
    assert {"req_ids", "sampled_token_ids"} <= have
    assert "req_id_to_index" not in have       # why calibrate.model_output reads req_ids


def test_compilation_config_has_the_graph_size_fields_recorded_per_run(src):
    have = fields(src("vllm/config/compilation.py"), "CompilationConfig")
    assert {"prefill_cudagraph_capture_token_sizes",
            "decode_cudagraph_capture_request_sizes"} <= have


def test_suffix_speculator_resets_proposes_and_counts_real_drafts(src):
    tree = src("vllm/v1/worker/gpu/spec_decode/suffix/speculator.py")
    assert {"reset_state", "propose"} <= methods(tree, "SuffixSpeculator")
    assert "num_valid" in self_attrs(tree, "SuffixSpeculator")


def test_the_runner_is_model_runner_v2_where_the_recorder_looks_for_it(src):
    assert "vllm/v1/worker/gpu_model_runner.py" not in src.names          # V1 is gone
    tree = src("vllm/v1/worker/gpu/model_runner.py")
    assert "speculator" in self_attrs(tree, "GPUModelRunner")
    assert {"execute_model", "sample_tokens", "sample"} <= methods(tree, "GPUModelRunner")
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    assert {"dispatch_cg_and_sync_dp", "set_forward_context"} <= imported   # patched there
