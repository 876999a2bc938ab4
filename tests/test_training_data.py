"""Reading training pairs (TSV with BOM, Moses pairs, a hive-partitioned Parquet lake table)
and token-based batching that a (seed, epoch) pair fully determines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from training.config import SourceConf
from training.data import collate, encode_corpus, epoch_batches, read_source, read_sources
from training.vocab import BOS, EOS, PAD, Vocab, train_sentencepiece

DATA = Path(__file__).resolve().parent / "data"
ANKI = DATA / "train_anki_cmn.tsv"
DEV = [str(DATA / "train_dev_tatoeba.zh"), str(DATA / "train_dev_tatoeba.en")]


def anki(**kw) -> SourceConf:
    return SourceConf(paths=[str(ANKI)], format="tsv", tsv_columns=(1, 0), **kw)


def test_tsv_drops_the_bom_and_picks_columns() -> None:
    pairs = list(read_source(anki()))
    assert len(pairs) == 1200
    # line 1 of cmn.txt is "\ufeffHi.\t嗨。\t..." : the BOM must not reach the text
    assert pairs[0] == ("嗨。", "Hi.", None)
    assert not any("\ufeff" in s or "\ufeff" in t for s, t, _ in pairs)
    assert all("CC-BY" not in t for _, t, _ in pairs)  # the attribution column is not read
    limited = list(read_source(anki(limit=10, tgt_lang="en")))
    assert len(limited) == 10 and limited[3][2] == "en"


def test_moses_pair_and_swap() -> None:
    zh_en = list(read_source(SourceConf(paths=DEV)))  # auto: two non-tsv files -> moses
    assert len(zh_en) == 150
    en_zh = list(read_source(SourceConf(paths=DEV, swap=True)))
    assert [(t, s) for s, t, _ in en_zh] == [(s, t) for s, t, _ in zh_en]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh_en[0][0])


def test_read_sources_applies_weight_and_default_language() -> None:
    pairs = read_sources([anki(limit=5, weight=3)], "en")
    assert len(pairs) == 15 and {lang for _, _, lang in pairs} == {"en"}


def write_lake(root: Path) -> Path:
    """A bitext_clean-like table: hive partitions pair=/corpus=, src/tgt plus score columns."""
    table_dir = root / "bitext_clean"
    rows = list(read_source(anki()))
    for pair, corpus, chunk in (("zh-en", "anki", rows[:700]), ("zh-en", "tatoeba", rows[700:]),
                                ("ru-en", "x", [("Привет.", "Hello.", None)] * 3)):
        d = table_dir / f"pair={pair}" / f"corpus={corpus}"
        d.mkdir(parents=True)
        t = pa.table({"src": [s for s, _, _ in chunk], "tgt": [t for _, t, _ in chunk],
                      "score_lid": np.ones(len(chunk)), "row_id": np.arange(len(chunk))})
        pq.write_table(t, d / "part-00000.parquet")
    return table_dir


def test_parquet_lake_table_with_pair_filter(tmp_path: Path) -> None:
    table = write_lake(tmp_path)
    zh = list(read_source(SourceConf(paths=[str(table)], pair="zh-en")))
    assert len(zh) == 1200
    assert {lang for _, _, lang in zh} == {"en"}  # target language from the pair column
    assert sorted(s for s, _, _ in zh) == sorted(s for s, _, _ in read_source(anki()))
    rev = list(read_source(SourceConf(paths=[str(table)], pair="zh-en", swap=True, limit=4)))
    assert len(rev) == 4 and {lang for _, _, lang in rev} == {"zh"}
    everything = list(read_source(SourceConf(paths=[str(table)])))
    assert len(everything) == 1203
    glob_files = list(read_source(SourceConf(
        paths=[str(table / "pair=zh-en" / "*" / "*.parquet")], format="parquet")))
    assert len(glob_files) == 1200
    # the filter job's staged layout pair=/corpus=/outcome=: only clean rows are read
    staged = tmp_path / "runs" / "r1" / "bitext" / "pair=zh-en" / "corpus=anki"
    for outcome, rows in (("clean", [("好。", "Good.")]), ("rejected", [("x", "y")] * 5)):
        (staged / f"outcome={outcome}").mkdir(parents=True)
        pq.write_table(pa.table({"src": [r[0] for r in rows], "tgt": [r[1] for r in rows],
                                 "reject_rule": [None if outcome == "clean" else "length"]
                                 * len(rows)}),
                       staged / f"outcome={outcome}" / "part-0.parquet")
    assert list(read_source(SourceConf(paths=[str(tmp_path / "runs" / "r1" / "bitext")],
                                       pair="zh-en"))) == [("好。", "Good.", "en")]
    with pytest.raises(ValueError, match="no column"):
        bad = tmp_path / "bad.parquet"
        pq.write_table(pa.table({"text": ["a"]}), bad)
        list(read_source(SourceConf(paths=[str(bad)])))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    pairs = list(read_source(anki()))
    spm_path = train_sentencepiece([x for s, t, _ in pairs for x in (s, t)],
                                   tmp_path_factory.mktemp("v") / "spm", 2000)
    vocab = Vocab.from_file(spm_path)
    enc, skipped = encode_corpus(pairs, vocab, max_len=24)
    return enc, skipped, vocab, pairs


def test_encode_skips_long_pairs(corpus) -> None:
    enc, skipped, vocab, pairs = corpus
    assert skipped > 0 and len(enc) + skipped == len(pairs)
    assert enc.src_lens.max() <= 24 and enc.tgt_lens.max() + 1 <= 24
    src0, tgt0 = enc.pair(0)
    assert list(src0) == vocab.source_ids(pairs[0][0]) and list(tgt0) == vocab.target_ids("Hi.")


def test_epoch_batches_cover_everything_once_within_budget(corpus) -> None:
    enc = corpus[0]
    b1 = epoch_batches(enc, 300, seed=7, epoch=0)
    flat = np.concatenate(b1)
    assert sorted(flat.tolist()) == list(range(len(enc)))
    longest = np.maximum(enc.src_lens, enc.tgt_lens + 1)
    for b in b1:
        assert len(b) * longest[b].max() <= 300 or len(b) == 1
    again = epoch_batches(enc, 300, seed=7, epoch=0)
    assert all(np.array_equal(x, y) for x, y in zip(b1, again, strict=True))
    other = epoch_batches(enc, 300, seed=7, epoch=1)
    assert [x.tolist() for x in other] != [x.tolist() for x in b1]
    capped = epoch_batches(enc, 10_000, seed=7, epoch=0, max_sentences=16)
    assert max(len(b) for b in capped) == 16


def test_collate_shapes_and_specials(corpus) -> None:
    enc = corpus[0]
    batch = collate(enc, [0, 5, 9])
    assert batch.src.shape[0] == 3
    assert (batch.tgt_in[:, 0] == BOS).all()
    for k, i in enumerate([0, 5, 9]):
        s, t = enc.pair(i)
        assert batch.src[k, : len(s)].tolist() == s.tolist()
        assert batch.tgt_out[k, len(t)] == EOS
        assert batch.tgt_in[k, 1 : len(t) + 1].tolist() == t.tolist()
        assert (batch.tgt_out[k, len(t) + 1 :] == PAD).all()
    assert batch.num_tokens == int(sum(len(enc.pair(i)[1]) + 1 for i in [0, 5, 9]))
