"""Where sweeps run: local processes (simkit.app.sweep, the default) or a Ray cluster
(`ray_sweep.sweep_ray`, optional extra `simkit[ray]`)."""

from simkit.choices import Executor


def check_executor(executor: str) -> Executor:
    """`executor` as an Executor, else an InputError naming the option and the choices."""
    from simkit.errors import InputError

    try:
        return Executor(executor)
    except ValueError:
        raise InputError(f"unknown executor {executor!r}; use local or ray",
                         field="executor") from None


__all__ = ["Executor", "check_executor"]
