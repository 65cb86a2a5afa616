"""Mutated log lines for testing a compiled parser against its Python original."""

from __future__ import annotations

import random
import string


def mutate(rng: random.Random, line: str, delims: list[str]) -> str:
    """1–3 edits of `line`: a character replaced, a run cut, a delimiter of the format inserted,
    a run repeated."""
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(line) + 1)
        kind = rng.randrange(4)
        if kind == 0 and line:
            line = line[:i] + rng.choice(string.printable) + line[i + 1:]
        elif kind == 1:
            line = line[:i] + line[i + rng.randint(1, 12):]
        elif kind == 2:
            line = line[:i] + rng.choice(delims) + line[i:]
        else:
            line = line[:i] + line[i:i + rng.randint(1, 30)] + line[i:]
    return line
