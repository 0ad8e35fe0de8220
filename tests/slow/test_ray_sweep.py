"""The Ray executor on a local Ray instance gives the same table and files as the local sweep."""

from __future__ import annotations

import pytest

ONE_RAY = pytest.mark.usefixtures("one_ray_instance")   # one local Ray instance at a time
RAY_WORKER = pytest.mark.xdist_group("ray")   # the Ray tests on one worker: none waits for the lock


@pytest.mark.slow
@ONE_RAY
@RAY_WORKER
def test_ray_sweep_equals_local_sweep(tmp_path):
    import ray  # noqa: F401  (in the [test] extra: its absence fails, never skips)
    import pandas as pd

    from simkit.app.sweep import sweep
    from simkit.executors.ray_sweep import sweep_ray

    from simkit.app.options import RunOptions

    grid = dict(configs="vanilla,kpad:4,8", run=RunOptions(seeds=1, num_requests=48))
    models, corpora = ["llama-3.1-8b", "qwen2.5-7b"], ["chat", "code"]
    local = sweep(models, corpora, tmp_path / "local", workers=2, **grid)
    remote = sweep_ray(models, corpora, tmp_path / "ray", num_cpus=2, **grid)
    assert remote["executor"] == "ray" and remote["cluster_cpus"] == 2
    assert not local["failed"] and not remote["failed"]
    assert len(local["frame"]) == 2 * 2 * 3
    pd.testing.assert_frame_equal(local["frame"], remote["frame"])
    assert (tmp_path / "local" / "sweep.csv").read_bytes() == \
        (tmp_path / "ray" / "sweep.csv").read_bytes()
    assert pd.read_parquet(tmp_path / "ray" / "sweep.parquet").equals(local["frame"])


@pytest.mark.slow
@ONE_RAY
@RAY_WORKER
def test_sweep_command_with_ray_executor(tmp_path):
    import ray  # noqa: F401  (in the [test] extra: its absence fails, never skips)
    from typer.testing import CliRunner

    from simkit.cli import app

    args = ["--model", "llama-3.1-8b", "--corpus", "chat", "--configs", "vanilla,kpad:4",
            "--num-requests", "48", "--workers", "2"]
    for name, extra in (("local", []), ("ray", ["--executor", "ray"])):
        out = CliRunner().invoke(app, ["sweep", *args, *extra, "--out", str(tmp_path / name)])
        assert out.exit_code == 0, out.output
    assert (tmp_path / "local" / "sweep.csv").read_bytes() == \
        (tmp_path / "ray" / "sweep.csv").read_bytes()
    bad = CliRunner().invoke(app, ["sweep", *args, "--executor", "dask", "--out", str(tmp_path)])
    assert bad.exit_code != 0


def test_missing_ray_is_a_clear_user_error(monkeypatch, tmp_path):
    import builtins

    from simkit.errors import InputError
    from simkit.executors import ray_sweep

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(InputError, match="pip install 'simkit\\[ray\\]'"):
        ray_sweep.sweep_ray(["llama-3.1-8b"], ["chat"], tmp_path)
