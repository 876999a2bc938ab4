"""SentencePiece vocabulary with reserved tags, and the text pipeline conventions."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.config import SourceConf
from training.data import read_source
from training.vocab import BOS, EOS, PAD, UNK, TextOptions, Vocab, tag_piece, train_sentencepiece

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory) -> Path:
    conf = SourceConf(paths=[str(DATA / "train_anki_cmn.tsv")], format="tsv", tsv_columns=(1, 0))
    sentences = [s for src, tgt, _ in read_source(conf) for s in (src, tgt)]
    out = tmp_path_factory.mktemp("spm") / "spm"
    return train_sentencepiece(sentences, out, 2000, tags=["en", "zh", "ru"])


def test_special_ids_and_tags_are_single_reserved_pieces(spm_model: Path) -> None:
    v = Vocab.from_file(spm_model)
    assert [v.sp.id_to_piece(i) for i in (PAD, UNK, BOS, EOS)] == ["<pad>", "<unk>", "<s>", "</s>"]
    for lang in ("en", "zh", "ru"):
        idx = v.tag_id(lang)
        assert idx > EOS
        # a tag in running text is kept whole, never split into <, 2, z, h, >
        pieces = v.sp.encode(f"{tag_piece(lang)} 你好", out_type=str)
        assert tag_piece(lang) in pieces
        assert not any(p in ("<", ">", "2") for p in pieces)
    with pytest.raises(KeyError):
        v.tag_id("de")
    assert len(v) >= 1000 and len(v.pieces()) == len(v)


def test_pipeline_tags_reversal_and_rtl(spm_model: Path) -> None:
    plain = Vocab.from_file(spm_model)
    text_src, text_tgt = "我们明天去北京。", "We are going to Beijing tomorrow."
    ids = plain.sp.encode(text_src)
    tids = plain.sp.encode(text_tgt)
    assert plain.source_ids(text_src) == ids + [EOS]
    assert plain.target_ids(text_tgt) == tids

    v = Vocab(plain.proto, TextOptions(rtl=True, reverse_source=True, target_tags=True))
    src = v.source_ids(text_src, "en")
    assert src == [v.tag_id("en")] + ids[::-1] + [EOS]
    assert v.source_pieces(text_src, "en")[0] == "<2en>"
    assert v.target_ids(text_tgt) == tids[::-1]
    # decoding a model-order (reversed) target gives the text back
    assert v.decode_target(v.target_ids(text_tgt)) == text_tgt
    assert v.decode_target_pieces([v.sp.id_to_piece(i) for i in v.target_ids(text_tgt)]) == text_tgt
    with pytest.raises(ValueError, match="target language"):
        v.source_ids(text_src)


def test_rejects_a_model_without_the_reserved_ids(tmp_path: Path) -> None:
    import io

    import sentencepiece as spm

    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["hello world", "good morning"] * 50),
                                   model_writer=proto, vocab_size=30, minloglevel=2,
                                   hard_vocab_limit=False)
    with pytest.raises(ValueError, match="expected '<pad>'"):
        Vocab(proto.getvalue())
