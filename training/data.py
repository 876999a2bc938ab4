"""Training pairs from the lake (Parquet: columns src/tgt, via pyarrow, no Spark) or plain
files (TSV, Moses file pairs); subword encoding; token-based batching whose order is a pure
function of (seed, epoch), so a position (epoch, batch) is enough to resume exactly."""

from __future__ import annotations

import glob
import gzip
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import torch

from jobs.kit.errors import ConfigError
from training.config import SourceConf
from training.vocab import BOS, EOS, PAD, Vocab

Pair = tuple[str, str, str | None]  # (source, target, target language)


def _expand(paths: Sequence[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if any(c in p for c in "*?["):
            hits = sorted(glob.glob(p, recursive=True))
            if not hits:
                raise FileNotFoundError(f"no file matches {p}")
            out.extend(hits)
        else:
            if not Path(p).exists():
                raise FileNotFoundError(f"not found: {p}")
            out.append(p)
    return out


def _open_text(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="\n")
    return open(path, encoding="utf-8-sig", newline="\n")  # utf-8-sig drops a leading BOM


def _detect_format(paths: Sequence[str]) -> str:
    first = paths[0]
    if first.endswith(".parquet") or Path(first).is_dir():
        return "parquet"
    if len(paths) == 2 and not first.endswith((".tsv", ".tsv.gz", ".txt")):
        return "moses"
    return "tsv"


def read_parquet(paths: Sequence[str], pair: str | None = None) -> Iterator[tuple[str, str, str]]:
    """Rows (src, tgt, pair) of Parquet data: a directory (hive partitions pair=/corpus=...),
    files or globs. Only the needed columns are read; `pair` filters on the partition. Where
    an `outcome` partition column exists (the filter job's staged `bitext` directory of a
    run, partitioned pair/corpus/outcome), only `outcome=clean` rows are read."""
    import pyarrow.dataset as ds

    files = _expand(paths)
    dataset = ds.dataset(files if len(files) > 1 else files[0], format="parquet",
                         partitioning="hive")
    names = set(dataset.schema.names)
    missing = {"src", "tgt"} - names
    if missing:
        raise ValueError(f"{paths}: parquet has no column(s) {sorted(missing)}; "
                         f"has {sorted(names)}")
    columns = ["src", "tgt"] + (["pair"] if "pair" in names else [])
    flt = None
    if pair is not None:
        if "pair" not in names:
            raise ValueError(f"{paths}: pair={pair} asked for but the table has no `pair` column")
        flt = ds.field("pair") == pair
    if "outcome" in names:
        clean = ds.field("outcome") == "clean"
        flt = clean if flt is None else flt & clean
    for batch in dataset.to_batches(columns=columns, filter=flt):
        src = batch.column("src").to_pylist()
        tgt = batch.column("tgt").to_pylist()
        pairs = batch.column("pair").to_pylist() if "pair" in columns else [None] * len(src)
        for s, t, p in zip(src, tgt, pairs, strict=True):
            if s is not None and t is not None:
                yield s, t, p


def mixture_stages(lake: str, spec: str) -> list[str]:
    """`NAME:all` as each stage of the mixture in order (`NAME:1`, `NAME:2`, ...): the
    denoising curriculum trains on one after the other; any other spec as itself."""
    name, _, stage = spec.partition(":")
    if stage != "all":
        return [spec]
    base = Path(lake) / "tables" / "mixture" / f"mixture={name}"
    found = sorted(int(p.name.removeprefix("stage=")) for p in base.glob("stage=*")
                   if p.name.removeprefix("stage=").isdigit() and any(p.glob("*.parquet")))
    if not found:
        raise ConfigError(f"--mixture {spec}: no stages at {base}")
    return [f"{name}:{k}" for k in found]


def mixture_source(lake: str, spec: str) -> SourceConf:
    """The Parquet of a mixture stage in the lake (jobs/mix.py): `NAME` (stage 1) or
    `NAME:STAGE`, at <lake>/tables/mixture/mixture=NAME/stage=STAGE. Its sources carry their
    tags already, so no target language is set here."""
    name, _, stage = spec.partition(":")
    stage = stage or "1"
    base = Path(lake) / "tables" / "mixture" / f"mixture={name}"
    path = base / f"stage={stage}"
    if not stage.isdigit() or not any(path.glob("*.parquet")):
        stages = sorted(p.name.removeprefix("stage=") for p in base.glob("stage=*")
                        if any(p.glob("*.parquet")))
        raise ConfigError(f"--mixture {spec}: no rows at {path} (stages of {name!r} there: "
                          f"{', '.join(stages) or 'none'})")
    return SourceConf(paths=[str(path)], format="parquet")


def mixture_tags(conf: SourceConf) -> list[str]:
    """The tags a mixture's rows carry (`<2en>`, `<BT>`), to reserve as whole pieces."""
    table = ds.dataset(conf.paths[0], format="parquet").to_table(columns=["tags"])
    found = {t.strip() for tags in table.column("tags").to_pylist() for t in tags or []}
    return sorted(t for t in found if t)


# A target tag (training/vocab.py tag_piece) as jobs/mix.py prepends it: `<2en> `.
TARGET_TAG_PREFIX = re.compile(r"<2([A-Za-z]+(?:[_-][A-Za-z]+)*)> ")


def read_source(conf: SourceConf) -> Iterator[Pair]:
    """Pairs of one configured corpus, stripped, empty sides skipped, `limit` applied."""
    fmt = conf.format if conf.format != "auto" else _detect_format(conf.paths)
    n = 0

    def emit(src: str, tgt: str, lang: str | None) -> Pair | None:
        src, tgt = src.strip(), tgt.strip()
        if not src or not tgt:
            return None
        if conf.swap:
            src, tgt = tgt, src
        if conf.tag_in_source and (tagged := TARGET_TAG_PREFIX.match(src)):
            return src[tagged.end():], tgt, tagged.group(1)
        return src, tgt, conf.tgt_lang or lang

    def rows() -> Iterator[tuple[str, str, str | None]]:
        if fmt == "parquet":
            for s, t, p in read_parquet(conf.paths, conf.pair):
                lang = None
                if p and "-" in p:
                    a, b = p.split("-", 1)
                    lang = a if conf.swap else b
                yield s, t, lang
        elif fmt == "tsv":
            i, j = conf.tsv_columns
            for path in _expand(conf.paths):
                with _open_text(path) as fh:
                    for line in fh:
                        cols = line.rstrip("\n").split("\t")
                        if len(cols) > max(i, j):
                            yield cols[i], cols[j], None
        elif fmt == "moses":
            if len(conf.paths) != 2:
                raise ValueError(f"moses format needs two paths (src, tgt), got {conf.paths}")
            a, b = _expand(conf.paths)
            with _open_text(a) as fa, _open_text(b) as fb:
                for s, t in zip(fa, fb, strict=True):
                    yield s, t, None
        else:  # pragma: no cover - pydantic restricts the values
            raise ValueError(fmt)

    for s, t, lang in rows():
        pair = emit(s, t, lang)
        if pair is None:
            continue
        yield pair
        n += 1
        if conf.limit is not None and n >= conf.limit:
            return


def read_sources(confs: Sequence[SourceConf], default_tgt_lang: str | None) -> list[Pair]:
    out: list[Pair] = []
    for conf in confs:
        pairs = [(s, t, lang or default_tgt_lang) for s, t, lang in read_source(conf)]
        out.extend(pairs * max(1, conf.weight))
    return out


@dataclass
class EncodedCorpus:
    """Token ids of all pairs as two flat arrays with offsets (compact for millions of rows)."""

    src: np.ndarray
    src_off: np.ndarray
    tgt: np.ndarray
    tgt_off: np.ndarray

    def __len__(self) -> int:
        return len(self.src_off) - 1

    @property
    def src_lens(self) -> np.ndarray:
        return np.diff(self.src_off)

    @property
    def tgt_lens(self) -> np.ndarray:
        return np.diff(self.tgt_off)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return (self.src[self.src_off[i]:self.src_off[i + 1]],
                self.tgt[self.tgt_off[i]:self.tgt_off[i + 1]])

    def num_target_tokens(self) -> int:
        return int(self.tgt_lens.sum()) + len(self)  # + </s>


def encode_corpus(pairs: Sequence[Pair], vocab: Vocab, max_len: int,
                  max_len_ratio: float | None = None) -> tuple[EncodedCorpus, int]:
    """Encode; skip pairs whose source (with tag and </s>) or target (+1) exceeds max_len.
    Returns the corpus and the number of skipped pairs."""
    src_all: list[np.ndarray] = []
    tgt_all: list[np.ndarray] = []
    skipped = 0
    for s, t, lang in pairs:
        si = vocab.source_ids(s, lang)
        ti = vocab.target_ids(t)
        if len(si) > max_len or len(ti) + 1 > max_len or not ti:
            skipped += 1
            continue
        if max_len_ratio is not None:
            ratio = max(len(si), len(ti)) / max(1, min(len(si), len(ti)))
            if ratio > max_len_ratio:
                skipped += 1
                continue
        src_all.append(np.asarray(si, dtype=np.int32))
        tgt_all.append(np.asarray(ti, dtype=np.int32))

    def flat(arrs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        off = np.zeros(len(arrs) + 1, dtype=np.int64)
        if arrs:
            off[1:] = np.cumsum([len(a) for a in arrs])
            return np.concatenate(arrs), off
        return np.zeros(0, dtype=np.int32), off

    s, so = flat(src_all)
    t, to = flat(tgt_all)
    return EncodedCorpus(s, so, t, to), skipped


def epoch_batches(corpus: EncodedCorpus, max_tokens: int, seed: int, epoch: int,
                  max_sentences: int | None = None) -> list[np.ndarray]:
    """Index batches for one epoch: shuffle, sort by length (ties in shuffled order), cut so
    that sentences x longest side (incl. specials) <= max_tokens, then shuffle the batches.
    A pure function of its arguments."""
    rng = np.random.default_rng([seed, epoch])
    n = len(corpus)
    perm = rng.permutation(n)
    slen = corpus.src_lens[perm]
    tlen = corpus.tgt_lens[perm] + 1
    order = perm[np.lexsort((slen, tlen))]
    longest = np.maximum(corpus.src_lens, corpus.tgt_lens + 1)
    batches: list[np.ndarray] = []
    cur: list[int] = []
    cur_max = 0
    for idx in order:
        m = max(cur_max, int(longest[idx]))
        too_many = max_sentences is not None and len(cur) + 1 > max_sentences
        if cur and (m * (len(cur) + 1) > max_tokens or too_many):
            batches.append(np.asarray(cur, dtype=np.int64))
            cur, m = [], int(longest[idx])
        cur.append(int(idx))
        cur_max = m
    if cur:
        batches.append(np.asarray(cur, dtype=np.int64))
    return [batches[i] for i in rng.permutation(len(batches))]


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) ids, PAD-padded, ends with </s>
    tgt_in: torch.Tensor  # (B, T) <s> + target
    tgt_out: torch.Tensor  # (B, T) target + </s>, PAD-padded
    num_tokens: int  # non-pad target tokens

    def to(self, device: torch.device) -> Batch:
        """On `device`; to a GPU from pinned memory, without blocking the host."""
        if device.type != "cuda":
            return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device),
                         self.num_tokens)
        return Batch(*(t.pin_memory().to(device, non_blocking=True)
                       for t in (self.src, self.tgt_in, self.tgt_out)), self.num_tokens)


def collate(corpus: EncodedCorpus, indices: Sequence[int]) -> Batch:
    pairs = [corpus.pair(int(i)) for i in indices]
    b = len(pairs)
    s_max = max(len(s) for s, _ in pairs)
    t_max = max(len(t) for _, t in pairs) + 1
    src = np.full((b, s_max), PAD, dtype=np.int64)
    tin = np.full((b, t_max), PAD, dtype=np.int64)
    tout = np.full((b, t_max), PAD, dtype=np.int64)
    for k, (s, t) in enumerate(pairs):
        src[k, :len(s)] = s
        tin[k, 0] = BOS
        tin[k, 1:len(t) + 1] = t
        tout[k, :len(t)] = t
        tout[k, len(t)] = EOS
    ntok = int((tout != PAD).sum())
    return Batch(torch.from_numpy(src), torch.from_numpy(tin), torch.from_numpy(tout), ntok)


def pad_sources(seqs: Sequence[Sequence[int]]) -> torch.Tensor:
    s_max = max(len(s) for s in seqs)
    out = torch.full((len(seqs), s_max), PAD, dtype=torch.long)
    for k, s in enumerate(seqs):
        out[k, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out
