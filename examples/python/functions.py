"""Python functions for tfdata workers: load with `tfdata worker --python-module examples/python/functions.py`
(or `tfdata run/local --python-module ...`); pipelines call them by name (docs/python.md)."""

import os

import numpy as np

import tfdata

_VOCAB_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "vocab.txt")
with open(_VOCAB_FILE) as f:
    _VOCAB = {word.strip(): i for i, word in enumerate(f) if word.strip()}


@tfdata.function("double")
def double(x):
    return x * 2


@tfdata.function("words_to_ids")
def words_to_ids(line):
    """A tokenizer on text lines: lower-cased words to ids (examples/data/vocab.txt; unknown: 1)."""
    words = line.decode("utf-8").lower().split()
    return np.array([_VOCAB.get(w, 1) for w in words], dtype=np.int64)
