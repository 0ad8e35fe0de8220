"""Errors shown to users: each names the file, line and field that was wrong."""

from __future__ import annotations


class SimkitError(Exception):
    """Base class for errors that the CLI prints without a traceback."""

    def __reduce__(self):
        """Pickle as (class, message, attributes): an error raised in a worker process comes
        back whole to the parent. The default rebuilt it by calling __init__ with the message
        alone, which UnknownNameError refuses, and the pool broke (BrokenProcessPool)."""
        return _rebuilt, (type(self), str(self), dict(self.__dict__))


def _rebuilt(cls: type, message: str, state: dict) -> SimkitError:
    """An error of class `cls` with `message` and attributes `state`, without its __init__."""
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(state)
    return exc


class InputError(SimkitError):
    """Bad user input; carries where it was found so the message can name it."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.path, self.line, self.field = path, line, field
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ": ".join([", ".join(where)]) + ": " if where else ""
        super().__init__(prefix + message)


class UnknownNameError(SimkitError):
    """An unknown model, corpus, hardware or config name; lists what is known."""

    def __init__(self, kind: str, name: str, known: list[str], hint: str = "") -> None:
        super().__init__(f"unknown {kind} '{name}'; known: {', '.join(sorted(known))}"
                         + (f"; {hint}" if hint else ""))
