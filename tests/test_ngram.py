"""N-gram LMs (udfs/ngram.py) on real text: in-domain lines score lower than out-of-domain ones.

Trained on the first 1,200 lines of a Tatoeba side (everyday conversation), scored on its last
300 (held out) and on the 120 TICO-19 lines (COVID-19 medical conversation). Measured, mean
bits per token (held out / medical):

    en 3-gram   lmplz 6.52 / 9.59    varikn 6.54 / 9.64
    zh 2-gram   lmplz 8.09 / 9.72    varikn 8.18 / 9.84   (characters)

lmplz comes from `make setup` (scripts/build_kenlm.sh into the venv's bin).
"""

from __future__ import annotations

import csv
import logging
import math
import statistics
from pathlib import Path

import pytest

from udfs import ngram
from udfs.ngram import cross_entropy, lm_tokens, load_lm, train_lm

N_TRAIN = 1200
KENLM_BINARY = b"mmap lm "  # the magic of build_binary's output


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def corpora(data_dir: Path) -> dict[str, tuple[list[str], list[str], list[str]]]:
    """lang -> (train, held out, medical) sentences."""
    with open(data_dir / "embed_tico19.tsv", encoding="utf-8", newline="") as f:
        tico = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    out = {}
    for lang in ("en", "zh"):
        lines = _lines(data_dir / f"tatoeba-zh-en.{lang}")
        out[lang] = (lines[:N_TRAIN], lines[N_TRAIN:], [row[lang] for row in tico])
    return out


def _mean_ce(path: str, sentences: list[str], lang: str) -> float:
    model = load_lm(path)
    return statistics.mean(cross_entropy(model, lm_tokens(s, lang)) for s in sentences)


def _train(corpora, lang: str, order: int, out: Path, **kw) -> str:
    train, _, _ = corpora[lang]
    return train_lm((lm_tokens(s, lang) for s in train), order, str(out), **kw)


# Margins: about half the measured gap (en 3.1 bits, zh 1.6 bits).
CASES = [("en", 3, 1.5), ("zh", 2, 0.8)]


@pytest.mark.parametrize(("lang", "order", "margin"), CASES)
def test_lmplz_ranks_in_domain_lower(corpora, tmp_path: Path, lang, order, margin) -> None:
    path = _train(corpora, lang, order, tmp_path / "lm.bin", trainer="lmplz")
    assert Path(path).read_bytes().startswith(KENLM_BINARY)  # build_binary ran
    _, held, medical = corpora[lang]
    assert _mean_ce(path, held, lang) + margin < _mean_ce(path, medical, lang)
    assert 4 < _mean_ce(path, held, lang) < 10  # bits per token: a sane range


@pytest.mark.parametrize(("lang", "order", "margin"), CASES)
def test_varikn_fallback_without_lmplz(
    corpora, tmp_path: Path, monkeypatch, caplog, lang, order, margin
) -> None:
    """No lmplz or build_binary anywhere (tools_dir, the venv's bin, PATH): "auto" trains with
    VariKN and leaves an ARPA file that KenLM loads, ranking like lmplz's model."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(ngram, "VENV_BIN", str(empty))
    with caplog.at_level(logging.INFO, logger="udfs.ngram"):
        path = _train(corpora, lang, order, tmp_path / "lm.arpa", tools_dir=str(empty))
    monkeypatch.undo()
    assert "trainer varikn" in caplog.text
    arpa = Path(path).read_text(encoding="utf-8")
    assert arpa.lstrip().startswith("\\data\\") and "\t<unk>\n" in arpa and "<UNK>" not in arpa
    _, held, medical = corpora[lang]
    assert _mean_ce(path, held, lang) + margin < _mean_ce(path, medical, lang)

    # Explicitly asked for, with build_binary found: a KenLM binary, close to lmplz's scores.
    varikn = _train(corpora, lang, order, tmp_path / "varikn.bin", trainer="varikn")
    lmplz = _train(corpora, lang, order, tmp_path / "lmplz.bin", trainer="lmplz")
    assert Path(varikn).read_bytes().startswith(KENLM_BINARY)
    assert abs(_mean_ce(varikn, held, lang) - _mean_ce(lmplz, held, lang)) < 0.5


def test_unknown_words_cost_finite_bits(corpora, tmp_path: Path) -> None:
    """Both trainers give <unk> a real probability: an unseen word costs bits, not -100 log10."""
    for trainer in ("lmplz", "varikn"):
        model = load_lm(_train(corpora, "en", 3, tmp_path / f"{trainer}.bin", trainer=trainer))
        seen = cross_entropy(model, "i like it .")
        unseen = cross_entropy(model, "i like zxqwv .")
        assert seen < unseen < seen + 30, trainer


def test_empty_corpus_and_bad_arguments(tmp_path: Path) -> None:
    for trainer in ("auto", "lmplz", "varikn"):
        with pytest.raises(ValueError, match="empty corpus"):
            train_lm(["", "   "], 3, str(tmp_path / "lm.bin"), trainer=trainer)
    assert not (tmp_path / "lm.bin").exists()
    for order in (1, 7):
        with pytest.raises(ValueError, match="order must be 2..6"):
            train_lm(["a b"], order, str(tmp_path / "lm.bin"))
    with pytest.raises(ValueError, match="trainer"):
        train_lm(["a b"], 3, str(tmp_path / "lm.bin"), trainer="srilm")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", str(empty))
        mp.setattr(ngram, "VENV_BIN", str(empty))
        with pytest.raises(FileNotFoundError, match="lmplz"):
            train_lm(["a b"], 3, str(tmp_path / "lm.bin"), tools_dir=str(empty), trainer="lmplz")


def test_tiny_corpus_trains(tmp_path: Path) -> None:
    """A handful of lines (--discount_fallback: too few counts to estimate discounts)."""
    lines = [lm_tokens(s, "en") for s in ("Hello there!", "Hello, world.", "Good night.")]
    for trainer in ("lmplz", "varikn"):
        model = load_lm(train_lm(lines, 3, str(tmp_path / f"{trainer}.bin"), trainer=trainer))
        assert math.isfinite(cross_entropy(model, "hello world ."))


def test_load_lm_is_cached(corpora, tmp_path: Path) -> None:
    path = _train(corpora, "en", 2, tmp_path / "lm.bin")
    assert load_lm(path) is load_lm(str(Path(path).resolve()))


def test_cross_entropy_definition(corpora, tmp_path: Path) -> None:
    model = load_lm(_train(corpora, "en", 3, tmp_path / "lm.bin"))
    tokens = "how are you ?"
    bits = -model.score(tokens, bos=True, eos=True) * math.log2(10) / 5  # 4 tokens + </s>
    assert cross_entropy(model, tokens) == pytest.approx(bits)
    assert math.isnan(cross_entropy(model, ""))
    assert math.isnan(cross_entropy(model, lm_tokens("  \t", "en")))


@pytest.mark.parametrize(
    ("text", "lang", "tokens"),
    [
        ("Don't stop, Mr. Smith!", "en", "don ' t stop , mr . smith !"),
        ("It costs $5.99 (tax incl.)", "en", "it costs $ 5 . 99 ( tax incl . )"),
        ("  Привет,   МИР!  ", "ru", "привет , мир !"),
        ("Straße—Über", "de", "straße — über"),
        ("你好， 世界！", "zh", "你 好 ， 世 界 ！"),
        ("我有 3 本書。", "zh-Hant", "我 有 3 本 書 。"),
        ("今日は いい天気", "ja", "今 日 は い い 天 気"),
        ("佢哋喺度", "yue", "佢 哋 喺 度"),
        ("", "en", ""),
        ("   ", "zh", ""),
    ],
)
def test_lm_tokens(text: str, lang: str, tokens: str) -> None:
    assert lm_tokens(text, lang) == tokens
