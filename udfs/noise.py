"""Noise on a back-translation's output (Edunov et al. 2018, "Understanding Back-Translation
at Scale"; the DiDi WMT20 recipe uses 0.05 for each kind): words are deleted, replaced by a
filler token, or moved; no word ends up more than `max_swap_distance` positions from where
it was (the local shuffle of Lample et al. 2018, applied to the words picked for swapping).

Words are the filter's tokens (udfs/tokens.py): whitespace tokens for most languages; for
Chinese (jieba words) and Japanese/Thai (ICU words) the words of each space-separated run,
joined back without spaces inside a run and with one space between runs ("我喜欢 New York"
keeps its spaces). Noise that would delete every word leaves the text as it was. A row's
noise depends only on the seed and the row, so a rerun gives the same output.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from udfs.scripts import unspaced
from udfs.tokens import tokenize


@dataclass(frozen=True)
class Noise:
    delete: float = 0.05
    filler: float = 0.05
    swap: float = 0.05
    filler_token: str = "<blank>"
    max_swap_distance: int = 3


def shuffle_locally(words: list[str], share: float, distance: int, rng: random.Random) -> list[str]:
    """Each word is picked with probability `share` and moved right by less than `distance`+1
    positions (sorting on position + a random offset); the words it passes move left by one,
    so no word moves further than `distance`."""
    keys = [i + (rng.uniform(0, distance + 1) if rng.random() < share else 0.0)
            for i in range(len(words))]
    return [w for _, w in sorted(zip(keys, words, strict=True), key=lambda kw: kw[0])]


def noise_words(words: list[str], noise: Noise, rng: random.Random) -> list[str]:
    """Swap, then delete or fill, each word independently with its probability."""
    words = shuffle_locally(words, noise.swap, noise.max_swap_distance, rng)
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
    if unspaced(lang):
        runs = ["".join(noise_words(tokenize(run, lang), noise, rng)) for run in text.split()]
        noised = " ".join(run for run in runs if run)
    else:
        noised = " ".join(noise_words(text.split(), noise, rng))
    return noised if noised.strip() else text
