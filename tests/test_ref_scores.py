"""Sentence-level BLEU and chrF of synthetic sentences against their references
(udfs/ref_scores.py), as sacrebleu computes them, on real Tatoeba pairs."""

from __future__ import annotations

from pathlib import Path

import pytest
import sacrebleu

from jobs.translation.config import ReferenceConf
from udfs.ref_scores import bleu_tokenizer, sentence_scores

DATA = Path(__file__).resolve().parent / "data"
EN = (DATA / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()
ZH = (DATA / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()


def test_a_sentence_against_itself_scores_100_and_against_another_low() -> None:
    for line, lang in ((EN[10], "en"), (ZH[10], "zh")):
        assert sentence_scores(line, line, lang) == pytest.approx((100.0, 100.0))
    bleu, chrf = sentence_scores(EN[10], EN[500], "en")
    assert bleu < 20 and chrf < 30


def test_the_scores_are_sacrebleus_with_the_targets_tokenizer() -> None:
    hyp, ref = ZH[20][:-1] + "了。", ZH[20]  # a near miss
    bleu, chrf = sentence_scores(hyp, ref, "zh")
    assert bleu == pytest.approx(sacrebleu.sentence_bleu(hyp, [ref], tokenize="zh").score)
    assert chrf == pytest.approx(sacrebleu.sentence_chrf(hyp, [ref]).score)
    assert 0 < bleu < 100
    assert [bleu_tokenizer(x) for x in ("zh", "ja", "th", "de", "en")] == \
        ["zh", "char", "char", "13a", "13a"]
    assert sentence_scores(None, ref, "zh") == (None, None)


def test_a_minimum_needs_the_reference_column() -> None:
    with pytest.raises(ValueError, match="need reference.column"):
        ReferenceConf(min_bleu=28)
    assert ReferenceConf(column="tgt", min_bleu=28).min_bleu == 28
