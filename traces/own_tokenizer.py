"""A user's own tokenizer file: a Hugging Face tokenizer (its folder or its tokenizer.json, read
with the `tokenizers` library) or a tiktoken BPE file, so that one's own traffic is imported
with one's model's tokenizer instead of the benchmark trace folder's.

`load_own_tokenizer(path, model_family)` checks the file before any work and returns an
`OwnTokenizer` whose `encode_prompts`/`encode_outputs` turn text into token ids the way
traces/tokenize.py does for the built-in families. A tiktoken file carries neither its
pre-tokenizer pattern nor its special tokens: it gets those of the --model's family when its
rank count is that family's (the Llama-3 or Qwen2 file itself), else the Llama-3 pattern and no
special tokens (chat markers are then encoded as plain text, which `describe()` says).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from simkit.errors import InputError

HF_FILE = "tokenizer.json"
TIKTOKEN_NAMES = ("tokenizer.model",)          # besides any *.tiktoken file


@dataclass
class OwnTokenizer:
    """A loaded tokenizer file: what it is, its vocabulary size and a digest of what defines it."""

    path: Path                  # the file read (a folder's tokenizer.json, or the file given)
    kind: str                   # "huggingface" or "tiktoken"
    n_vocab: int
    fingerprint: str            # sha256 (16 hex) of the file bytes and, for tiktoken, pattern + specials
    specials_from: str | None   # tiktoken: the family whose special tokens apply, else None
    _enc: object = field(repr=False, default=None)

    @property
    def label(self) -> str:
        """The tokenizer as the output names it: file name and digest."""
        return f"{self.path.name} ({self.kind}, {self.fingerprint[:8]})"

    def describe(self) -> str:
        """One line for the import's output: the file, its vocabulary and how markers encode."""
        if self.kind == "huggingface":
            markers = "its added tokens as special ids"
        elif self.specials_from:
            markers = f"the {self.specials_from} special tokens (the file is that family's)"
        else:
            markers = ("no special tokens (a tiktoken file names none): chat markers are "
                       "encoded as plain text")
        return f"{self.path} ({self.kind}, {self.n_vocab:,} tokens; {markers})"

    def encode_prompts(self, texts: list[str]) -> list[list[int]]:
        """Chat-templated prompts: marker strings become their special ids where known."""
        if self.kind == "huggingface":
            return [e.ids for e in self._enc.encode_batch(texts, add_special_tokens=False)]
        return self._enc.encode_batch(texts, allowed_special="all")

    def encode_outputs(self, texts: list[str]) -> list[list[int]]:
        """Generated text, encoded as plain text (a Hugging Face tokenizer's added tokens, such as
        <think>, still match: that is how the model emitted them)."""
        if self.kind == "huggingface":
            return [e.ids for e in self._enc.encode_batch(texts, add_special_tokens=False)]
        return self._enc.encode_batch(texts, allowed_special=set(), disallowed_special=())


def is_tokenizer_path(value: str) -> bool:
    """True when --tokenizer names a file or folder rather than a built-in family."""
    from traces.tokenizers import FAMILIES

    return value not in FAMILIES


def _file_of(path: Path) -> Path:
    """The tokenizer file a path names: the file itself, or in a folder its tokenizer.json, else
    its one *.tiktoken or tokenizer.model file."""
    if not path.exists():
        from traces.tokenizers import FAMILIES

        raise InputError("no such tokenizer file or folder (nor a tokenizer family: "
                         f"{', '.join(FAMILIES)})", path=str(path), field="tokenizer")
    if path.is_file():
        return path
    if (path / HF_FILE).is_file():
        return path / HF_FILE
    found = sorted(path.glob("*.tiktoken")) + [path / n for n in TIKTOKEN_NAMES
                                               if (path / n).is_file()]
    if len(found) == 1:
        return found[0]
    what = "several tiktoken files: name one" if found else (
        f"no {HF_FILE} (a Hugging Face tokenizer folder) nor a *.tiktoken or tokenizer.model file")
    raise InputError(f"the tokenizer folder holds {what}", path=str(path), field="tokenizer")


def _hf(path: Path, raw: bytes) -> OwnTokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError:                       # a dependency: only a broken install lacks it
        raise InputError("reading a Hugging Face tokenizer needs the `tokenizers` package "
                         "(pip install tokenizers)", field="tokenizer") from None
    try:
        enc = Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as exc:                  # the library raises its own Exception types
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"not a Hugging Face tokenizer.json ({first[:200]})", path=str(path),
                         field="tokenizer") from None
    return OwnTokenizer(path, "huggingface", enc.get_vocab_size(with_added_tokens=True),
                        hashlib.sha256(raw).hexdigest()[:16], None, enc)


def _tiktoken(path: Path, raw: bytes, model_family: str | None) -> OwnTokenizer:
    import base64
    import binascii

    import tiktoken

    from traces import tokenizers as T

    ranks: dict[bytes, int] = {}
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            ranks[base64.b64decode(parts[0], validate=True)] = int(parts[1])
        except (ValueError, binascii.Error):
            raise InputError("not a tiktoken file: expected 'BASE64TOKEN RANK' on every line "
                             "(or give a Hugging Face tokenizer.json)", path=str(path), line=n,
                             field="tokenizer") from None
    if not ranks:
        raise InputError("empty tokenizer file", path=str(path), field="tokenizer")
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise InputError("tiktoken ranks must be 0..N-1, each once", path=str(path),
                         field="tokenizer")
    base = {"llama3": T.LLAMA3_N_BASE, "r1-llama": T.LLAMA3_N_BASE, "qwen": T.QWEN_N_BASE,
            "r1-qwen": T.QWEN_N_BASE}
    specials_from = model_family if model_family and base.get(model_family) == len(ranks) else None
    if specials_from:
        ref = T.get_tokenizer_from_ranks(specials_from, ranks)
        pat, specials = ref._pat_str, dict(ref._special_tokens)
    else:
        pat, specials = T.LLAMA3_PATTERN, {}
    enc = tiktoken.Encoding(name=f"own-{path.name}", pat_str=pat, mergeable_ranks=ranks,
                            special_tokens=specials)
    h = hashlib.sha256(raw)
    h.update(pat.encode())
    h.update(repr(sorted(specials.items())).encode())
    return OwnTokenizer(path, "tiktoken", enc.n_vocab, h.hexdigest()[:16], specials_from, enc)


def load_own_tokenizer(path: Path | str, model_family: str | None = None) -> OwnTokenizer:
    """The tokenizer a file or folder holds (`model_family`: the --model's tokenizer family, whose
    special tokens a tiktoken file of that family gets). One InputError naming the path on a
    missing, unreadable or malformed file."""
    file = _file_of(Path(path).expanduser())
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the tokenizer file ({exc.strerror or exc})",
                         path=str(file), field="tokenizer") from None
    if raw.lstrip()[:1] == b"{":
        return _hf(file.resolve(), raw)
    return _tiktoken(file.resolve(), raw, model_family)
