"""Where sweeps run: local processes (simkit.app.sweep, the default) or a Ray cluster
(`ray_sweep.sweep_ray`, optional extra `simkit[ray]`)."""

from simkit.choices import Executor, member


def check_executor(executor: str) -> Executor:
    """`executor` as an Executor, else an InputError naming the option and the choices."""
    return member(Executor, executor, "executor", "executor")


__all__ = ["Executor", "check_executor"]
