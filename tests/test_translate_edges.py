"""Edge cases of the translate job and of table inputs, run in the test session's JVM
(`main()`, the spark-submit code path): a stream that selects nothing still commits a run
with its stats, a balanced run with an empty stream and a table input matching no rows fail
with errors that say why."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.filtering import job as filter_job
from jobs.translation import job as translate

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

DB = "bt_edges"


def flag_run(lake: Path, model: Path, run_id: str, *flags: str) -> list[str]:
    """argv of a one-stream en-zh run from flags on this module's lake."""
    return ["--model", str(model), "--direction", "en-zh", *flags, "--lake", str(lake),
            "--set", f"lake.database={DB}", "--run-id", run_id]


@pytest.fixture(scope="module")
def lake(spark, lake_root: Path, data_dir: Path, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("bt-edges")
    text = work / "en.txt"
    lines = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:40]
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lake = lake_root / DB
    assert filter_job.main(["--lang", "en", "--corpus", "tiny", "--input", str(text),
                            "--lake", str(lake), "--set", f"lake.database={DB}"]) == 0
    return lake


def test_a_stream_that_selects_nothing_commits_an_empty_run(spark, lake: Path,
                                                            tiny_multi_ct2: Path) -> None:
    assert translate.main(flag_run(lake, tiny_multi_ct2, "empty", "--corpus", "no-such")) == 0
    [row] = spark.sql(f"SELECT available, selected, synthetic, rejected FROM {DB}.translate_stats"
                      " WHERE run_id = 'empty'").collect()
    assert tuple(row) == (0, 0, 0, 0)
    assert spark.sql(f"SELECT * FROM {DB}.synthetic WHERE run_id = 'empty'").count() == 0


def test_the_default_input_is_the_lakes_own_mono_clean(spark, lake: Path,
                                                        tiny_multi_ct2: Path) -> None:
    assert translate.main(flag_run(lake, tiny_multi_ct2, "some", "--method", "greedy")) == 0
    [row] = spark.sql(f"SELECT source_table, count(*) FROM {DB}.synthetic WHERE run_id = 'some'"
                      " GROUP BY 1").collect()
    kept = spark.sql(f"SELECT * FROM {DB}.mono_clean").count()
    rejected = spark.sql(f"SELECT * FROM {DB}.synthetic_rejected WHERE run_id = 'some'").count()
    assert row[0] == f"{DB}.mono_clean" and row[1] + rejected == kept


def test_balance_with_an_empty_stream_is_an_error(lake: Path, tiny_multi_ct2: Path,
                                                  tmp_path: Path, capsys) -> None:
    conf = tmp_path / "ftst.yaml"
    conf.write_text(
        f"lake: {{root: {lake}, database: {DB}}}\nbalance: true\nstreams:\n"
        f"  - {{name: ft, model: {tiny_multi_ct2}, direction: zh-en}}\n"
        f"  - {{name: bt, model: {tiny_multi_ct2}, direction: en-zh}}\n", encoding="utf-8")
    assert translate.main(["--config", str(conf)]) == 2  # this lake holds no Chinese
    assert "stream ft: no sentences" in capsys.readouterr().err


def test_a_table_input_matching_no_rows_is_an_error(lake: Path, capsys) -> None:
    argv = ["--lang", "en", "--corpus", "again", "--format", "table", "--input",
            f"{DB}.mono_clean", "--where", "corpus = 'no-such'", "--lake", str(lake),
            "--set", f"lake.database={DB}"]
    assert filter_job.main(argv) == 2
    assert f"no rows in {DB}.mono_clean where corpus = 'no-such'" in capsys.readouterr().err


def test_a_converted_third_party_model_through_the_job(spark, lake: Path, marian_ct2: Path,
                                                        tmp_path: Path) -> None:
    """An OPUS-MT-style model (MarianMT, converted by CTranslate2) with its tokenizer
    configured: the job decodes with it and records its id."""
    conf = tmp_path / "marian.yaml"
    conf.write_text(
        f"lake: {{root: {lake}, database: {DB}}}\ndecoding: {{max_output_tokens: 12}}\n"
        "streams:\n"
        f"  - name: opus\n    model: {marian_ct2}\n    direction: en-zh\n"
        "    tokenizer: {kind: sentencepiece, source_model: "
        f"{marian_ct2 / 'source.spm'}, target_model: {marian_ct2 / 'target.spm'}, "
        'source_suffix: ["</s>"], max_positions: 64}\n', encoding="utf-8")
    assert translate.main(["--config", str(conf), "--run-id", "opus"]) == 0
    [stats] = spark.sql(f"SELECT selected, synthetic, rejected, model FROM {DB}.translate_stats"
                        " WHERE run_id = 'opus'").collect()
    assert stats.selected > 30 and stats.selected == stats.synthetic + stats.rejected
    assert stats.model == translate.model_id(str(marian_ct2))
    decoded = spark.sql(f"SELECT hypothesis FROM {DB}.synthetic_rejected WHERE run_id = 'opus' "
                        f"UNION ALL SELECT hypothesis FROM {DB}.synthetic WHERE run_id = 'opus'")
    assert decoded.where("hypothesis IS NULL OR hypothesis = ''").count() == 0


def test_distilled_pairs_are_scored_against_their_reference_and_cut(
        spark, lake: Path, tiny_multi_ct2: Path, data_dir: Path, tmp_path: Path) -> None:
    """The mechanism of DiDi WMT20's distillation filter, the other way round: DiDi scores the
    "English translations" of a zh->en teacher (conf/recipes/didi-wmt20-zh-en/distill.yaml);
    the stream here is en->zh, so a bitext's English side is translated, the output's
    sentence-BLEU against the bitext's own Chinese stored, and pairs under the floor rejected
    (`ref_bleu`). The tiny model translates poorly: many fall under 10."""
    import sacrebleu

    zh = (data_dir / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()[:60]
    en = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:60]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in zip(zh, en, strict=True)),
                   encoding="utf-8")
    assert filter_job.main(["--pair", "zh-en", "--corpus", "kd", "--input", str(tsv),
                            "--lake", str(lake), "--set", f"lake.database={DB}"]) == 0
    conf = tmp_path / "kd.yaml"
    conf.write_text(
        f"lake: {{root: {lake}, database: {DB}}}\nstreams:\n"
        f"  - {{name: kd, model: {tiny_multi_ct2}, direction: en-zh, method: greedy, role: "
        "forward, input: {table: bitext_clean, column: tgt}, "
        "reference: {column: src, min_bleu: 10}}\n", encoding="utf-8")
    assert translate.main(["--config", str(conf), "--run-id", "kd"]) == 0
    kept = spark.sql(f"SELECT tgt, reference, ref_bleu, ref_chrf FROM {DB}.synthetic "
                     "WHERE run_id = 'kd'").collect()
    cut = spark.sql(f"SELECT tgt, reference, ref_bleu FROM {DB}.synthetic_rejected "
                    "WHERE run_id = 'kd' AND reject_reason = 'ref_bleu'").collect()
    assert kept and cut
    assert all(r.ref_bleu >= 10 for r in kept) and all(r.ref_bleu < 10 for r in cut)
    for r in kept[:5]:  # stored as sacrebleu scores them
        assert r.ref_bleu == pytest.approx(
            sacrebleu.sentence_bleu(r.tgt, [r.reference], tokenize="zh").score)
        assert r.reference in zh
    [stats] = spark.sql(f"SELECT selected, synthetic, rejected_by FROM {DB}.translate_stats "
                        "WHERE run_id = 'kd'").collect()
    assert stats.rejected_by["ref_bleu"] == len(cut) and stats.synthetic == len(kept)


def test_first_by_hash_takes_exactly_the_quota_stably(spark) -> None:
    from jobs.kit.sampling import first_by_hash

    rows = spark.range(50_000).withColumnRenamed("id", "row_id").repartition(4)

    def ids(quota: int, seed: int = 0) -> set[int]:
        return {r.row_id for r in first_by_hash(rows, quota, seed, "row_id").collect()}

    twenty, ten = ids(20_000), ids(10_000)
    assert len(twenty) == 20_000 and len(ten) == 10_000 and ten < twenty  # exact, nested
    assert ids(10_000) == ten  # the same rows again
    assert len(ten & ids(10_000, seed=1)) < 3_000  # another seed, another sample (~2,000)
    assert 4_000 < sum(i < 25_000 for i in ten) < 6_000  # uniform over the ids
    assert ids(0) == set() and len(ids(60_000)) == 50_000
