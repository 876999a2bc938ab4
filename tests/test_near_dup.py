"""Near-duplicates by MinHash LSH (issue 40), in this session's Spark on real Anki zh-en and
English pairs: the bands chosen from the threshold, near copies rejected with their survivor
and Jaccard, distinct pairs kept, the same result on any partitioning, and recall and precision
against brute-force Jaccard over every pair."""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql import functions as F

from jobs.filtering.config import load_config
from jobs.filtering.near_dup import JACCARD, bands, near_dup, shingles, text_of

ROW = "row_id long, corpus string, file string, line int, src string, tgt string, " \
      "reject_stage string, reject_rule string, dup_of long"


def config(*sets: str, pair: str = "zh-en"):
    return load_config(None, ["near_dup.enabled=true", *sets], {"pair": pair})


def test_the_bands_follow_the_threshold() -> None:
    b, r = bands(0.8, 64)
    assert b * r <= 64
    candidate = lambda s: 1 - (1 - s ** r) ** b  # noqa: E731
    assert candidate(0.8) >= 0.85 and candidate(0.9) >= 0.99  # few misses at the threshold
    assert candidate(0.4) <= 0.05  # and few pairs far below it to verify
    assert bands(0.5, 64)[1] < r < bands(0.9, 64)[1]  # a higher threshold, longer bands


def variants(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each pair again with what a crawl changes: a number, a word added, punctuation."""
    out = []
    for zh, en in pairs:
        words = en.rstrip(".!?").split()
        out.append((zh, " ".join(words) + " again, 2024!"))  # ~ a word and a year more
    return out


def frame(spark, pairs: list[tuple[str, str]], partitions: int = 3):
    rows = [(i + 1, "anki", "a.tsv", i + 1, s, t, None, None, None)
            for i, (s, t) in enumerate(pairs)]
    return spark.createDataFrame(rows, ROW).repartition(partitions)


@pytest.fixture(scope="module")
def long_pairs(anki_pool: list[str]) -> list[tuple[str, str]]:
    pairs = [tuple(p.split("\t")) for p in anki_pool]
    return [(z, e) for z, e in pairs if len(e.split()) >= 7][:15]


@pytest.mark.integration  # several Spark jobs of joins and label rounds
def test_near_copies_are_rejected_with_their_survivor_and_distinct_pairs_kept(
        spark, long_pairs) -> None:
    pairs = long_pairs + variants(long_pairs)
    cfg = config("near_dup.side=tgt", "near_dup.threshold=0.5", pair="zh-en")
    got = {r.line: r for r in near_dup(frame(spark, pairs), cfg).collect()}
    n = len(long_pairs)
    assert all(got[i].reject_rule is None for i in range(1, n + 1))  # the first of each kept
    caught = [i for i in range(n + 1, 2 * n + 1) if got[i].reject_rule == "near_dup"]
    assert len(caught) >= 0.8 * n
    for i in caught:
        assert got[i].reject_stage == "near_dup" and got[i].dup_of == i - n
        assert 0.5 <= got[i][JACCARD] < 1.0
    assert all(got[i][JACCARD] is None for i in range(1, n + 1))


@pytest.mark.integration  # several Spark jobs of joins and label rounds
def test_the_result_is_the_same_on_any_partitioning(spark, long_pairs) -> None:
    pairs = long_pairs + variants(long_pairs) + variants(variants(long_pairs))
    cfg = config("near_dup.side=tgt", "near_dup.threshold=0.5")
    runs = [sorted(near_dup(frame(spark, pairs, k), cfg)
                   .select("line", "reject_rule", "dup_of", JACCARD).collect())
            for k in (1, 4)]
    assert runs[0] == runs[1]


def plan_nodes(node):
    """Every node of an executed physical plan (a JVM object), into adaptive plans and their
    query stages."""
    yield node
    name = node.nodeName()
    if name.startswith("AdaptiveSparkPlan"):
        yield from plan_nodes(node.executedPlan())
    elif "QueryStage" in name:
        yield from plan_nodes(node.plan())
    children = node.children()
    for i in range(children.size()):
        yield from plan_nodes(children.apply(i))


def broadcast_types(df) -> list[str]:
    """The data types of the columns each BroadcastExchange of `df`'s executed plan sends."""
    types = []
    for node in plan_nodes(df._jdf.queryExecution().executedPlan()):
        if node.nodeName() == "BroadcastExchange":
            output = node.output()
            types += [output.apply(i).dataType().typeName() for i in range(output.size())]
    return types


@pytest.mark.integration  # several Spark jobs of joins and label rounds
def test_nothing_is_broadcast_whatever_spark_estimates(spark, long_pairs, monkeypatch) -> None:
    """Spark sizes an array column at one element and a checkpointed table by its plan, so
    the shingles, bucket keys and edges of 1M rows looked small enough to broadcast and filled
    a 1 GB heap (bench/downstream/near_dup.py scale). With Spark allowed to broadcast anything,
    every query of the stage (each checkpointed step, and the result) joins by sort-merge."""
    from pyspark.sql.classic.dataframe import DataFrame  # what the session's frames are

    ran, checkpoint = [], DataFrame.localCheckpoint

    def recorded(df, *args, **kwargs):
        ran.append(df)  # its query execution is the one the checkpoint runs
        return checkpoint(df, *args, **kwargs)

    monkeypatch.setattr(DataFrame, "localCheckpoint", recorded)
    key, before = "spark.sql.autoBroadcastJoinThreshold", spark.conf.get(
        "spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set(key, str(2**30))
    try:
        out = near_dup(frame(spark, long_pairs + variants(long_pairs)),
                       config("near_dup.side=tgt", "near_dup.threshold=0.5"))
        assert any(r.reject_rule == "near_dup" for r in out.collect())
    finally:
        spark.conf.set(key, before)
    assert len(ran) >= 5  # shingles, bucket keys, edges, labels and their rounds
    joined = [df._jdf.queryExecution().executedPlan().toString() for df in [*ran, out]]
    assert sum("SortMergeJoin" in plan for plan in joined) >= 3
    assert not any("BroadcastHashJoin" in plan or "BroadcastNestedLoop" in plan
                   for plan in joined)
    assert [broadcast_types(df) for df in [*ran, out]] == [[]] * (len(ran) + 1)


@pytest.mark.integration  # several Spark jobs of joins and label rounds
def test_recall_and_precision_against_brute_force(spark, anki_pool) -> None:
    """Every pair of 120 rows (60 real pairs and a variant of each) by its true Jaccard: the
    rows LSH rejects all have a true near-duplicate, and it finds nearly every row that has
    one among the rows before it."""
    pairs = [tuple(p.split("\t")) for p in anki_pool]
    pairs = pairs + variants(pairs)
    cfg = config("near_dup.threshold=0.6", "near_dup.side=tgt")
    df = frame(spark, pairs)
    sh = {r.line: set(r.sh) for r in df.select(
        "line", shingles(text_of(cfg.near_dup, False), cfg.near_dup, False).alias("sh"))
        .collect()}
    partners = {a: set() for a in sh}
    for a, b in itertools.combinations(sorted(sh), 2):
        if len(sh[a] & sh[b]) / len(sh[a] | sh[b]) >= 0.6:
            partners[a].add(b)
            partners[b].add(a)
    later = {a for a, p in partners.items() if p and min(p) < a}  # not first of its group
    found = {r.line for r in near_dup(df, cfg).where(F.col("reject_rule") == "near_dup")
             .collect()}
    assert len(later) >= 40
    assert len(found & later) / len(later) >= 0.85  # recall
    assert all(partners[a] for a in found)  # precision: each has a true near-duplicate


@pytest.mark.integration  # several Spark jobs of joins and label rounds
def test_chinese_text_is_compared_by_characters(spark) -> None:
    cfg = config("near_dup.side=src")
    rows = [("我们明天在火车站见面，别迟到了。", "a"), ("我们明天在火车站见面，别迟到了！", "b"),
            ("他每天早上都去公园跑步。", "c")]
    got = {r.line: r.reject_rule for r in near_dup(frame(spark, rows), cfg).collect()}
    assert got == {1: None, 2: "near_dup", 3: None}


@pytest.mark.integration  # a whole filter job, in this process
def test_the_filter_job_runs_the_stage_and_counts_it(spark, tmp_path, anki_pool,
                                                     capsys) -> None:
    import pyarrow.dataset as ds

    from jobs.filtering.job import main

    pairs = [tuple(p.split("\t")) for p in anki_pool]
    tsv = tmp_path / "crawl.tsv"
    tsv.write_text("".join(f"{z}\t{e}\n" for z, e in pairs + variants(pairs)), "utf-8")
    lake = tmp_path / "lake"
    assert main(["--pair", "zh-en", "--corpus", "crawl", "--input", str(tsv), "--lake",
                 str(lake), "--set", "near_dup.enabled=true", "--set", "near_dup.side=tgt",
                 "--set", "near_dup.threshold=0.6", "--run-id", "nd-1"]) == 0
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table().to_pylist()
    near = [r for r in rows if r["reject_rule"] == "near_dup"]
    assert len(near) >= 40 and all(r["line"] > len(pairs) for r in near)
    by_id = {r["row_id"]: r for r in rows}
    assert all(by_id[r["dup_of"]]["line"] == r["line"] - len(pairs) for r in near)
    stats = ds.dataset(lake / "tables/filter_stats", partitioning="hive").to_table().to_pylist()
    step = [s for s in stats if s["stage"] == "near_dup"]
    assert [s["rule"] for s in step] == ["near_dup"] and step[0]["rows_rejected"] == len(near)

    # Near-duplicates are found from the text, not decided from a stored score: a re-decide
    # may not turn the stage off (its rows would keep their survivor and Jaccard).
    assert main(["--redecide", "nd-1", "--lake", str(lake), "--run-id", "nd-2",
                 "--set", "near_dup.enabled=false"]) == 2
    assert "near_dup.enabled changes how scores are computed" in capsys.readouterr().err


@pytest.mark.parametrize("setting", ["near_dup.threshold=1.5", "near_dup.num_perm=1",
                                     "near_dup.side=both", "near_dup.word_ngram=0"])
def test_a_bad_setting_is_a_config_error(setting: str) -> None:
    from jobs.kit.errors import ConfigError

    with pytest.raises(ConfigError, match="near_dup"):
        config(setting)


def test_words_keep_their_vowel_signs() -> None:
    """Hindi, Tamil and Bengali (seed languages) are word-shingled whole: a regex of `\\w`
    dropped their combining vowel signs and made distinct words the same fragments."""
    from udfs.minhash import WORD, shingle_hashes

    assert WORD.findall("हिन्दी भारत की राजभाषा है।") == ["हिन्दी", "भारत", "की", "राजभाषा", "है"]
    assert WORD.findall("தமிழ் ஒரு மொழி.") == ["தமிழ்", "ஒரு", "மொழி"]
    assert WORD.findall("don't stop, (2024)!") == ["don", "t", "stop", "2024"]
    # Two Hindi sentences that share no word share no shingle.
    import pandas as pd

    a, b = shingle_hashes(pd.Series(["राम घर जाता है", "सीता बाजार गई थी"]), 1, False)
    assert not set(a) & set(b)
