"""Word-alignment model: fast_align training (PyPI `systran-align`), the model files, and
per-pair scoring with the trained parameters fixed (numpy). No Spark here (see `udfs/align.py`).

Tokens are `udfs.tokens.tokenize(text.lower(), lang)` (zh = jieba words (rjieba), spaces
dropped; ja/th/lo/km/my = characters; other languages = whitespace tokens) with leading and
trailing punctuation split off each token (see `align_tokens`).

A model directory holds
- `forward.probs` (src->tgt) and `backward.probs` (tgt->src): systran-align's binary parameter
  files (vocabulary and lexical translation table t(generated | conditioning) of each direction);
- `manifest.json`, written last (a directory without it is incomplete): pair, languages, sample
  size and hash, library and version, training options, tokenization, sha256 of each parameter
  file, creation time (UTC), and what the caller says of it (jobs/lake/models.py `AlignerStore`:
  name, source, run id).

Why train with systran-align and score here (measured on newstest and Tatoeba: real pairs vs
the same corpus with targets shifted by one line; more in tests/test_align.py and the bench):
- eflomal (with priors) trains ~5x slower (204 vs ~1,000 pairs/s on newstest zh-en) and cannot
  score with fixed parameters: aligning new pairs re-runs its Gibbs sampler on each batch with
  the priors re-read (89 pairs/s), so scores are stochastic and depend on the batch.
- systran-align's own `Aligner` does score with fixed parameters, but its links are symmetrized
  with grow-diag-final, which links nearly every token of any pair: coverage from them keeps
  71% (newstest zh-en), 90% (ru-en), 99.4% (Tatoeba zh-en) of shifted pairs at 0.6.
- So the scores come from the learned tables, with fast_align's own model: per generated token,
  log(p0 t(e|NULL) + (1-p0) sum_i d(i,j) t(e|f_i)) with the diagonal prior d, and a Viterbi
  link to the best f_i unless NULL explains the token better. At 0.6, coverage from these
  directional links keeps / rejects 99.9% / 89.5% of real / shifted newstest zh-en pairs
  (ru-en 100% / 97.2%, Tatoeba zh-en 99.8% / 99.1%); the log-probs separate as the library's.

Training is repeatable: the same pairs, in any order, give the same parameter files byte for
byte. fast_align's E-step adds expected counts into one shared table from all its OpenMP
threads without synchronization (upstream TTable::Increment: "Ignore race conditions here";
systran-align is a fork), so with more than one thread updates are lost at random, and the
statistics for the diagonal tension are summed in the order threads finish: two trainings on
the same 5,499 Tatoeba pairs in one process gave different files and changed
align_fwd_logprob on 3,475 of 3,500 pairs. So it trains on one thread (`one_openmp_thread`),
at a cost on an idle driver: on newstest zh-en 2017-20 (9,982 pairs, 2 cores) one thread
trains in 31-33 s, two in 15-17 s (more cores would lose more). With another Spark job on
the same 2 cores, one thread was the faster (20k WMT21-23 zh-en pairs: 34-37 s against
47-56 s on two). Lines are sorted before training, so the order the sample arrives in does not
matter either (it sets the vocabulary ids and the order floating-point counts are summed in).

Scores are in-sample-optimistic: pairs the model was trained on score higher than unseen pairs
of the same kind (newstest zh-en trained on 2017-19 only, 8k pairs, scored on 2020: 85% of real
pairs keep 0.6, 92% of shifted fall below), so train on as large a sample as the driver affords.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version

import numpy as np

from udfs.tokens import tokenize

FORMAT = "sluice-align/1"
LIBRARY = "systran-align"
FORWARD, BACKWARD, MANIFEST = "forward.probs", "backward.probs", "manifest.json"
# fast_align as its authors recommend it (-d -o -v): a diagonal-favouring prior whose tension
# is re-estimated, and variational Bayes for sparser translation tables.
TRAIN_OPTIONS = {
    "iterations": 5,
    "favor_diagonal": True,
    "optimize_tension": True,
    "variational_bayes": True,
}
SEPARATOR = "|||"  # fast_align's input format splits source from target on this token
# Whitespace tokens keep their punctuation (`drunk.`, `"Yes,`): one word would be many types,
# rare ones, out of the sample's vocabulary. Splitting it off raised held-out coverage of real
# newstest zh-en pairs from 74% to 85% at 0.6 (shifted pairs below 0.6: 91% -> 92%).
_EDGE_PUNCT = re.compile(r"^(\W*)(.*?)(\W*)$", re.DOTALL)


def align_tokens(text: str | None, lang: str) -> list[str]:
    """The tokens the aligner sees: project tokens, lowercased, with leading and trailing
    punctuation split off (`drunk.` -> `drunk`, `.`; jieba already cuts it off Chinese words),
    made safe for fast_align's input format."""
    if not text:
        return []
    out = []
    for tok in tokenize(text.lower(), lang):
        tok = "".join(tok.split()).replace("\0", "")  # the binary vocabulary is NUL-terminated
        out.extend(p for p in _EDGE_PUNCT.match(tok).groups() if p)
    return ["<|||>" if tok == SEPARATOR else tok for tok in out]


def write_training_text(
    pairs: Iterable[tuple[str, str]], src_lang: str, tgt_lang: str, path: str
) -> tuple[int, int, str]:
    """Write `src ||| tgt` lines for pairs with tokens on both sides, sorted (the model then
    depends on the pairs, not on their order); returns (pairs read, lines written, sha256 of
    the lines)."""
    lines, read = [], 0
    for src, tgt in pairs:
        read += 1
        s, t = align_tokens(src, src_lang), align_tokens(tgt, tgt_lang)
        if s and t:  # fast_align cannot learn from an empty side
            lines.append(f"{' '.join(s)} {SEPARATOR} {' '.join(t)}\n")
    lines.sort()
    digest = hashlib.sha256()
    with open(path, "w", encoding="utf-8") as out:
        for line in lines:
            out.write(line)
            digest.update(line.encode("utf-8"))
    return read, len(lines), digest.hexdigest()


def _loaded_openmp_runtimes() -> list[str]:
    """Paths of the OpenMP runtimes (libgomp) mapped into this process."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        paths = {line.split(None, 5)[-1].strip() for line in maps if "libgomp" in line}
    return sorted(p for p in paths if os.path.basename(p).startswith("libgomp"))


@contextmanager
def one_openmp_thread() -> Iterator[None]:
    """OpenMP parallel regions started from the calling thread run on one thread for the block
    (omp_set_num_threads in every libgomp loaded, restored afterwards; the setting belongs to
    the calling thread, so other threads of the process are not affected). Setting
    OMP_NUM_THREADS would come too late: libgomp reads it once, when it is loaded."""
    runtimes = [ctypes.CDLL(path) for path in _loaded_openmp_runtimes()]
    if not runtimes:
        raise RuntimeError(
            "no OpenMP runtime (libgomp) found in this process: cannot make fast_align train"
            " on one thread, and on several its results change from run to run"
        )
    before = [lib.omp_get_max_threads() for lib in runtimes]
    try:
        for lib in runtimes:
            lib.omp_set_num_threads(1)
        yield
    finally:
        for lib, threads in zip(runtimes, before, strict=True):
            lib.omp_set_num_threads(threads)


def train_local(
    pairs: Iterable[tuple[str, str]],
    src_lang: str,
    tgt_lang: str,
    out_dir: str,
    about: dict | None = None,
) -> dict:
    """Train both directions on `pairs` and write the model files into local `out_dir`;
    `about` (e.g. name, source, run_id) is added to the manifest."""
    try:
        import systran_align
    except ImportError as err:  # scoring needs only numpy; training needs the library
        raise RuntimeError(
            "training the word aligner needs the systran-align package (binary wheels only:"
            " CPython 3.10/3.11 on Linux x86_64)"
        ) from err

    os.makedirs(out_dir, exist_ok=True)
    _remove(os.path.join(out_dir, MANIFEST))  # the directory is incomplete until rewritten
    with tempfile.TemporaryDirectory(prefix="sluice-align-") as tmp:
        text = os.path.join(tmp, "train.txt")
        given, used, sample_hash = write_training_text(pairs, src_lang, tgt_lang, text)
        if used == 0:
            raise ValueError("no pair with tokens on both sides to train the aligner on")
        start = time.perf_counter()
        fwd, bwd = os.path.join(tmp, FORWARD), os.path.join(tmp, BACKWARD)
        with one_openmp_thread():  # several threads race on the counts (module docstring)
            systran_align.generate_alignment_probabilities(text, fwd, bwd, **TRAIN_OPTIONS)
        seconds = time.perf_counter() - start
        for name in (FORWARD, BACKWARD):
            shutil.move(os.path.join(tmp, name), os.path.join(out_dir, name))
    manifest = {
        **(about or {}),
        "format": FORMAT,
        "pair": f"{src_lang}-{tgt_lang}",
        "created": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "sample_pairs_given": given,
        "sample_pairs_used": used,
        "sample_sha256": sample_hash,
        "library": LIBRARY,
        "library_version": version(LIBRARY),
        "options": TRAIN_OPTIONS,
        "threads": 1,
        "sample_order": "lines sorted",
        "tokenization": "udfs.tokens.tokenize(text.lower(), lang), edge punctuation split off",
        "train_seconds": round(seconds, 3),
        "scoring": {"p_null": P_NULL, "tension": TENSION, "min_prob": MIN_PROB},
        "files": {name: _sha256(os.path.join(out_dir, name)) for name in (FORWARD, BACKWARD)},
    }
    with open(os.path.join(out_dir, MANIFEST), "w", encoding="utf-8") as out:
        json.dump(manifest, out, indent=2, sort_keys=True)
    return manifest


def read_manifest(model_dir: str) -> dict:
    """The manifest of a local model directory; FileNotFoundError if training did not finish."""
    path = os.path.join(model_dir, MANIFEST)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no alignment model in {model_dir} (missing {MANIFEST})")
    with open(path, encoding="utf-8") as f:
        manifest = json.load(f)
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
    return manifest


def check_langs(manifest: dict, src_lang: str, tgt_lang: str, model_dir: str) -> None:
    """A model trained for the other direction would score every pair as misaligned."""
    trained = (manifest["src_lang"], manifest["tgt_lang"])
    if trained != (src_lang, tgt_lang):
        raise ValueError(
            f"alignment model {model_dir} is {trained[0]}-{trained[1]}, not {src_lang}-{tgt_lang}"
        )


# fast_align's model (Dyer et al. 2013) as the library trains it: NULL-link probability and the
# diagonal tension's starting value (the optimized tension is not in the parameter files).
P_NULL = 0.08
TENSION = 4.0
# Probability floor for a token no table entry explains: keeps log-probs finite (log 1e-7 = -16.1).
MIN_PROB = 1e-7
MAX_CELLS = 1 << 20  # (target token x source token) cells scored at once: bounds batch memory


class HashTable:
    """int64 key -> float probability, open addressing with linear probing, looked up a whole
    array at a time (a sorted-array binary search costs ~20 cache misses a key; this ~1)."""

    MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        self.bits = max(4, int(np.ceil(np.log2(len(keys) / 0.6 + 1))))  # load factor <= 0.6
        self.mask = (1 << self.bits) - 1
        self.keys = np.full(1 << self.bits, -1, np.int64)
        self.values = np.zeros(1 << self.bits, np.float32)
        self.max_probe = self._insert(keys, values)

    def _slot(self, keys: np.ndarray) -> np.ndarray:
        product = keys.view(np.uint64) * self.MULTIPLIER  # keys are >= 0; wraps, as intended
        return (product >> np.uint64(64 - self.bits)).view(np.int64)

    def _insert(self, keys: np.ndarray, values: np.ndarray) -> int:
        """Place every key at its first free slot from its hash on; returns the longest probe.
        Each round, the keys whose current slot is free claim it (one winner per slot) and the
        rest move one slot on, so every slot a key skipped is occupied, as lookups assume."""
        home, pending, probe = self._slot(keys), np.arange(len(keys)), 0
        while pending.size:
            slot = (home[pending] + probe) & self.mask
            free = self.keys[slot] == -1
            slot_won, first = np.unique(slot[free], return_index=True)
            won = pending[free][first]
            self.keys[slot_won], self.values[slot_won] = keys[won], values[won]
            placed = np.zeros(len(keys), bool)
            placed[won] = True
            pending = pending[~placed[pending]]
            probe += 1
        return probe

    def get(self, keys: np.ndarray) -> np.ndarray:
        """Value of each key, 0 where absent."""
        out = np.zeros(len(keys), np.float32)
        home = self._slot(keys)
        stored = self.keys[home]  # the first probe settles most keys: no index array for it
        found = stored == keys
        out[found] = self.values[home[found]]
        active = np.flatnonzero(~found & (stored != -1))
        for probe in range(1, self.max_probe):
            slot = (home[active] + probe) & self.mask
            stored = self.keys[slot]
            found = stored == keys[active]
            out[active[found]] = self.values[slot[found]]
            active = active[~found & (stored != -1)]  # an empty slot ends the search
            if not active.size:
                break
        return out


@dataclass(frozen=True)
class LexicalTable:
    """One direction's lexical translation table t(generated word | conditioning word), read from
    systran-align's parameter file, keyed by `conditioning id * width + generated id`."""

    index: dict[str, int]  # word -> id (1-based, as in the file; 0 = unknown)
    table: HashTable
    generated: np.ndarray  # bool per id: the word occurs as a generated (entry) word
    width: int
    null_id: int

    def ids(self, tokens: list[str]) -> np.ndarray:
        return np.fromiter((self.index.get(t, 0) for t in tokens), np.int64, len(tokens))

    def prob(self, cond: np.ndarray, gen: np.ndarray) -> np.ndarray:
        """t(gen | cond) elementwise (float32), 0 where the table has no entry."""
        return self.table.get(cond * self.width + gen)


def read_table(path: str, sha256: str | None = None) -> LexicalTable:
    """Parse systran-align's binary parameter file (format version 2: int32 version, int32
    vocabulary size, NUL-terminated words, int32 table size, then per row int32 word id, int32
    n, n x (int32 word id, float32 probability)); ids are 1-based positions in the vocabulary."""
    with open(path, "rb") as f:
        data = f.read()
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{path} does not match its manifest (changed or partly copied)")
    file_version, n_words = struct.unpack_from("<ii", data)
    if file_version != 2:
        raise ValueError(f"{path}: systran-align parameter format {file_version}, expected 2")
    words = data[8:].split(b"\0", n_words)[:n_words]
    offset = 8 + sum(len(w) + 1 for w in words) + 4  # + the table size, unused
    rows, entries = [], []
    entry = np.dtype([("id", "<i4"), ("p", "<f4")])
    while offset < len(data):
        row, n = struct.unpack_from("<ii", data, offset)
        rows.append(np.full(n, row, np.int64))
        entries.append(np.frombuffer(data, entry, n, offset + 8))
        offset += 8 + 8 * n
    table = np.concatenate(entries)
    width = n_words + 1
    keys = np.concatenate(rows) * width + table["id"]
    generated = np.zeros(width, bool)
    generated[table["id"]] = True
    index = {w.decode("utf-8"): i + 1 for i, w in enumerate(words)}
    return LexicalTable(index, HashTable(keys, table["p"]), generated, width, index["<eps>"])


@dataclass(frozen=True)
class AlignmentModel:
    """A reloaded model: both directions' lexical tables, parameters fixed."""

    forward: LexicalTable  # t(tgt word | src word)
    backward: LexicalTable  # t(src word | tgt word)
    manifest: dict

    @classmethod
    def load(cls, model_dir: str) -> AlignmentModel:
        manifest = read_manifest(model_dir)
        files = manifest["files"]
        return cls(
            read_table(os.path.join(model_dir, FORWARD), files[FORWARD]),
            read_table(os.path.join(model_dir, BACKWARD), files[BACKWARD]),
            manifest,
        )


def score_tokens(
    model: AlignmentModel, src: Sequence[list[str]], tgt: Sequence[list[str]]
) -> np.ndarray:
    """(n, 3) array per pair: forward log-prob (src->tgt model, mean over target tokens),
    reverse log-prob (tgt->src model, mean over source tokens), coverage.

    Each token's log-prob is fast_align's: log(p0 t(e|NULL) + (1-p0) sum_i d(i,j) t(e|f_i)),
    d the diagonal prior. A token counts as aligned when its Viterbi link (the best source word
    under the same prior) beats the NULL word; coverage = (share of target tokens aligned under
    src->tgt + share of source tokens aligned under tgt->src) / 2. Tokens the model never saw
    generated (out of its training sample) are left out of both means: they say nothing about
    this pair. A pair with an empty side scores coverage 0 and NaN log-probs; a side with no
    known token scores log(MIN_PROB) and share 0.
    """
    out = np.full((len(src), 3), np.nan)
    scored = [i for i in range(len(src)) if src[i] and tgt[i]]
    out[[i for i in range(len(src)) if not (src[i] and tgt[i])], 2] = 0.0
    for chunk in _chunks(scored, src, tgt):
        s, t = [src[i] for i in chunk], [tgt[i] for i in chunk]
        fwd_lp, fwd_share = _direction(model.forward, s, t)
        rev_lp, rev_share = _direction(model.backward, t, s)
        out[chunk] = np.column_stack([fwd_lp, rev_lp, (fwd_share + rev_share) / 2])
    return out


def score_texts(
    model: AlignmentModel,
    src: Sequence[str | None],
    tgt: Sequence[str | None],
    src_lang: str,
    tgt_lang: str,
) -> np.ndarray:
    """`score_tokens` on raw texts, tokenized as in training."""
    return score_tokens(
        model, [align_tokens(t, src_lang) for t in src], [align_tokens(t, tgt_lang) for t in tgt]
    )


def _chunks(rows: list[int], src: Sequence[list[str]], tgt: Sequence[list[str]]):
    """Runs of `rows` whose score grids stay under MAX_CELLS cells."""
    chunk, cells = [], 0
    for i in rows:
        size = len(src[i]) * len(tgt[i])
        if chunk and cells + size > MAX_CELLS:
            yield chunk
            chunk, cells = [], 0
        chunk.append(i)
        cells += size
    if chunk:
        yield chunk


def _direction(
    table: LexicalTable, cond: list[list[str]], gen: list[list[str]]
) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: mean log-prob of the known generated tokens and the share of them aligned.

    Vectorized over the chunk: the (generated token x conditioning token) cells of one token are
    contiguous; most have no table entry, so the prior is computed only on the cells that do."""
    m = np.array([len(c) for c in cond])  # conditioning length per pair
    n = np.array([len(g) for g in gen])  # generated length per pair
    gen_ids = table.ids([w for g in gen for w in g])
    cond_ids = table.ids([w for c in cond for w in c])
    tok_start = np.cumsum(n) - n
    pair_of_tok = np.repeat(np.arange(len(gen)), n)
    j = np.arange(len(gen_ids)) - tok_start[pair_of_tok] + 1  # 1-based position
    m_tok, n_tok = m[pair_of_tok], n[pair_of_tok]
    cell_start = np.cumsum(m_tok) - m_tok
    src_offset = (np.cumsum(m) - m)[pair_of_tok]  # where each token's conditioning words start
    cell = np.arange(cell_start[-1] + m_tok[-1])
    f = cond_ids[cell - np.repeat(cell_start - src_offset, m_tok)]
    t = table.prob(f, np.repeat(gen_ids, m_tok))
    hit = np.flatnonzero(t)
    tok = np.searchsorted(cell_start, hit, side="right") - 1
    i = hit - cell_start[tok] + 1  # 1-based conditioning position
    prior = np.exp(-TENSION * np.abs(i / m_tok[tok] - j[tok] / n_tok[tok]))
    linked = (1 - P_NULL) * t[hit].astype(np.float64) * prior / _diagonal_z(j, m_tok, n_tok)[tok]
    total = np.bincount(tok, weights=linked, minlength=len(gen_ids))
    best = np.zeros(len(gen_ids))
    if hit.size:  # hits are in token order: one maximum per run of equal tokens
        runs = np.flatnonzero(np.r_[True, tok[1:] != tok[:-1]])
        best[tok[runs]] = np.maximum.reduceat(linked, runs)
    null = P_NULL * table.prob(np.full(gen_ids.size, table.null_id), gen_ids).astype(np.float64)
    tok_lp = np.log(np.maximum(total + null, MIN_PROB))
    aligned = best > null
    known = table.generated[gen_ids]
    n_known = np.add.reduceat(known, tok_start)
    lp_sum = np.add.reduceat(np.where(known, tok_lp, 0.0), tok_start)
    aligned_sum = np.add.reduceat(aligned & known, tok_start)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_lp = np.where(n_known > 0, lp_sum / n_known, np.log(MIN_PROB))
        share = np.where(n_known > 0, aligned_sum / n_known, 0.0)
    return mean_lp, share


def _diagonal_z(j: np.ndarray, m: np.ndarray, n: np.ndarray) -> np.ndarray:
    """sum over i = 1..m of exp(-tension |i/m - j/n|) in closed form: two geometric series, the
    positions below j's diagonal point and those above (as fast_align's DiagonalAlignment)."""
    split = np.floor(j * m / n)
    ratio = np.exp(-TENSION / m)
    above = np.exp(-TENSION * np.abs((split + 1) / m - j / n)) * (1 - ratio ** (m - split))
    below = np.exp(-TENSION * np.abs(split / m - j / n)) * (1 - ratio**split)
    return (above + below) / (1 - ratio)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)
