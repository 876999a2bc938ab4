"""Noise on a back-translation's output (Edunov et al. 2018, "Understanding Back-Translation
at Scale"; the DiDi WMT20 recipe uses 0.05 for each kind): words are deleted, replaced by a
filler token, or swapped with a word at most `max_swap_distance` positions further on.

Words are the filter's tokens (udfs/tokens.py): jieba words for Chinese, characters for
Japanese/Thai, whitespace tokens otherwise; CJK output is joined back without spaces.
A row's noise depends only on the seed and the row, so a rerun gives the same output.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from udfs.tokens import CHARACTER_LANGS, tokenize

UNSPACED_LANGS = CHARACTER_LANGS | {"zh"}


@dataclass(frozen=True)
class Noise:
    delete: float = 0.05
    filler: float = 0.05
    swap: float = 0.05
    filler_token: str = "<blank>"
    max_swap_distance: int = 3


def noise_words(words: list[str], noise: Noise, rng: random.Random) -> list[str]:
    """Swap, then delete or fill, each word independently with its probability."""
    words = list(words)
    for i in range(len(words) - 1):
        if rng.random() < noise.swap:
            j = min(len(words) - 1, i + rng.randint(1, noise.max_swap_distance))
            words[i], words[j] = words[j], words[i]
    out = []
    for word in words:
        draw = rng.random()
        if draw < noise.delete:
            continue
        out.append(noise.filler_token if draw < noise.delete + noise.filler else word)
    return out


def noise_text(text: str, lang: str, noise: Noise, seed: int, row_id: int) -> str:
    """`text` with noise; the same (seed, row_id) always gives the same result."""
    rng = random.Random(seed * 1_000_003 + row_id)
    words = noise_words(tokenize(text, lang), noise, rng)
    return ("" if lang in UNSPACED_LANGS else " ").join(words)
