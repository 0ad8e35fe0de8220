"""A user's own chat log and tokenizer, made at test time with no file from ../shared: a small
byte-level BPE trained on the fly (the `tokenizers` library) on public-domain text written here,
and an OpenAI-style chat log of made-up requests whose answers repeat phrases of the prompt (so
that the suffix drafter has something to accept)."""

from __future__ import annotations

import json
from pathlib import Path

# Public-domain sentences (the Gettysburg Address, 1863, and common proverbs).
TEXT = [
    "Four score and seven years ago our fathers brought forth on this continent, a new nation,",
    "conceived in Liberty, and dedicated to the proposition that all men are created equal.",
    "Now we are engaged in a great civil war, testing whether that nation, or any nation so",
    "conceived and so dedicated, can long endure. We are met on a great battle-field of that war.",
    "A stitch in time saves nine. Still waters run deep. Many hands make light work.",
    "Add the two numbers and explain each step of the sum in plain words.",
]
MARKERS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


def train_tokenizer(folder: Path, vocab_size: int = 600) -> Path:
    """A Hugging Face tokenizer folder (tokenizer.json) of a byte-level BPE trained on TEXT, with
    the Llama-3 chat markers as its special tokens; returns the folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=MARKERS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXT * 10, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def write_chat_log(path: Path, n: int = 48) -> Path:
    """n OpenAI-style records (`messages` + `response.choices`): a question over one of TEXT's
    sentences and an answer that quotes it back."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            line = TEXT[i % len(TEXT)]
            answer = (f"You asked about: {line} In short, {line.lower()} "
                      f"That is answer number {i}, and {i} + {i + 1} = {2 * i + 1}. " * (1 + i % 3))
            fh.write(json.dumps({
                "model": "my-llama", "temperature": 0,
                "messages": [{"role": "user", "content": f"Request {i}: explain this. {line}"}],
                "response": {"choices": [{"message": {"role": "assistant",
                                                      "content": answer}}]}}) + "\n")
    return path
