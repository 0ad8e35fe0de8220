"""User JSON read in one place, so that any bad file is one InputError naming file and line.

json.loads alone lets through, as internal errors, a binary file (UnicodeDecodeError), a
deeply nested document (RecursionError: 100k `[` on one line) and an integer too long for
Python to convert (ValueError past 4,300 digits); each used to end a command with a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from simkit.errors import InputError


def not_utf8(path: str | Path, data: bytes, exc: UnicodeDecodeError, line: int | None = None,
             offset: int = 0) -> InputError:
    """The error for bytes that are not UTF-8: file, line (counted in `data` when not given)
    and the bad byte."""
    if line is None:
        line = data[:offset + exc.start].count(b"\n") + 1
    bad = exc.object[exc.start:exc.start + 1].hex() if exc.object else "?"
    return InputError(f"not UTF-8 text (byte 0x{bad}: {exc.reason})", path=str(path), line=line)


def parse_json(data: bytes | str, path: str | Path, line: int | None = None,
               field: str | None = None) -> object:
    """One JSON document from `data` (a whole file, or line `line` of a JSONL file); any
    reason it cannot be read raises InputError naming `path`, the line and `field`."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        at = exc.lineno if line is None else line
        raise InputError(f"invalid JSON: {exc.msg}", path=str(path), line=at,
                         field=field) from None
    except UnicodeDecodeError as exc:
        raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")
        raise not_utf8(path, raw, exc, line=line) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read (arrays or objects inside one "
                         "another thousands of levels deep)", path=str(path), line=line,
                         field=field) from None
    except ValueError as exc:    # an integer of more digits than Python converts (4,300)
        most = sys.get_int_max_str_digits()
        why = (f"a JSON number of more than {most:,} digits, too long to read"
               if "digits" in str(exc) else f"unreadable JSON ({exc})")
        raise InputError(why, path=str(path), line=line, field=field) from None


def read_json_file(path: str | Path, field: str | None = None) -> object:
    """The JSON document in file `path`: a missing file, a folder, unreadable or non-JSON
    bytes each raise InputError naming the file (and `field`, the option that named it)."""
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder; expected a JSON file", path=str(p), field=field)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(p),
                         field=field) from None
    return parse_json(data, p, field=field)


__all__ = ["not_utf8", "parse_json", "read_json_file"]
