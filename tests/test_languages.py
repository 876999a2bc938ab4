"""Every language of the seed systems through the real filter job (issue 35): real Tatoeba
pairs of ta, jv, ms, tl, ha, xh, zu, is, ja, bn, hi with English and bn-hi (tests/data/langs/,
see ATTRIBUTION.md). Before: ha/xh/zu were refused at config time, bn/ta sides were judged as
Latin script and rejected wholesale, ja-en kept nothing (a whole sentence was one word).

The runs go through `jobs.filtering.job.main` in the test session's JVM (as
test_determinism.py's); the guard's run is a spark-submit, as a user starts it, with its
funnel read off stdout."""

from __future__ import annotations

from pathlib import Path

import pytest
from integration_helpers import spark_submit
from pyspark.sql import functions as F

from jobs.filtering.job import main

pytestmark = pytest.mark.integration
LANGS = Path(__file__).resolve().parent / "data" / "langs"
PAIRS = ("ta-en", "jv-en", "ms-en", "tl-en", "ha-en", "xh-en", "zu-en", "is-en", "ja-en",
         "bn-en", "hi-en", "bn-hi")
DB = "langs"


@pytest.fixture(scope="module")
def runs(spark, lake_root: Path) -> Path:
    """One filter run per pair, into a database of its own in the session's lake."""
    root = lake_root / DB
    for pair in PAIRS:
        argv = ["--pair", pair, "--corpus", "tatoeba", "--input", str(LANGS / f"{pair}.tsv"),
                "--lake", str(root), "--set", f"lake.database={DB}", "--run-id", f"lang-{pair}"]
        assert main(argv) == 0, pair
    return root


def outcomes(spark, root: Path, pair: str) -> dict[str, int]:
    rows = (spark.read.parquet(str(root / "tables" / "bitext")).where(F.col("pair") == pair)
            .groupBy(F.coalesce("reject_rule", F.lit("kept")).alias("fate")).count().collect())
    return {r.fate: r["count"] for r in rows}


@pytest.mark.parametrize("pair", PAIRS)
def test_each_seed_language_keeps_its_real_pairs(spark, runs: Path, pair: str) -> None:
    fates = outcomes(spark, runs, pair)
    total = sum(fates.values())
    langid = fates.get("langid_src", 0) + fates.get("langid_tgt", 0)
    # Tatoeba's conversational lines are short (xh 25 characters on average): language ID is
    # least sure there (docs/filtering.md "Language ID": xh 88.5% kept on the report half).
    assert langid / total <= 0.12, fates
    assert fates.get("kept", 0) / total >= 0.8, fates
    # The token rules fit every script: none takes more than a few pairs.
    for rule in ("char_word_ratio", "token_ratio", "too_many_tokens", "long_word"):
        assert fates.get(rule, 0) / total <= 0.03, (rule, fates)


def test_each_side_is_read_by_its_languages_backend(spark, runs: Path) -> None:
    """ha/xh/zu by CLD3 (lid.176 has no such labels: a stored `ha` is CLD3's), the rest by
    lid.176: the stored top label is the expected language (or an accepted relative) on most
    sides (Javanese least: lid.176 spreads it over jv, id, ms, su)."""
    bitext = spark.read.parquet(str(runs / "tables" / "bitext"))
    for pair in PAIRS:
        src = pair.split("-")[0]
        labels = {r.src_lang: r["count"] for r in bitext.where(F.col("pair") == pair)
                  .groupBy("src_lang").count().collect()}
        accepted = {"ms": {"ms", "id"}, "jv": {"jv", "su", "id", "ms"},
                    "xh": {"xh", "zu"}}.get(src, {src})
        share = sum(labels.get(label, 0) for label in accepted) / sum(labels.values())
        assert share >= 0.6, (pair, labels)


def test_japanese_is_cut_into_words(spark, runs: Path) -> None:
    """ICU's dictionary words: a Japanese side has about as many tokens as its English one
    (it had one token per sentence)."""
    rows = (spark.read.parquet(str(runs / "tables" / "bitext"))
            .where(F.col("pair") == "ja-en").select("src_tokens", "tgt_tokens").collect())
    ratios = sorted(r.src_tokens / r.tgt_tokens for r in rows if r.tgt_tokens)
    assert 1.0 <= ratios[len(ratios) // 2] <= 2.5


def test_a_mislabelled_corpus_is_said_in_plain_words(tmp_path: Path) -> None:
    """Hindi-Bengali pairs given as bn-hi are kept; the same pairs with their sides swapped
    are rejected by langid, and the funnel says what is likely wrong."""
    swapped = tmp_path / "swapped.tsv"
    lines = (LANGS / "bn-hi.tsv").read_text(encoding="utf-8").splitlines()
    swapped.write_text("".join("\t".join(reversed(line.split("\t"))) + "\n" for line in lines),
                       encoding="utf-8")
    config = tmp_path / "job.yaml"
    config.write_text(
        "pair: bn-hi\n"
        f"lake: {{root: {tmp_path / 'lake'}}}\n"
        "inputs:\n"
        f"  - {{corpus: real, paths: [{LANGS / 'bn-hi.tsv'}]}}\n"
        f"  - {{corpus: swapped, paths: [{swapped}]}}\n"
    )
    done = spark_submit("--config", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    assert "! langid_src rejected 100% of bn-hi/swapped: is the language code right?" in out
    assert "of bn-hi/real:" not in out  # the real pairs: no warning
