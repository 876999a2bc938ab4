"""The report's samples and charts (jobs/reporting/data.py, page.py): a duplicate shows the row
it duplicates, its place and text, even where that row is an earlier run's (lake-wide dedup);
the history labels each run by its start."""

from __future__ import annotations

from jobs.reporting.data import KEPT, REJECTED_HERE, RunScores, ScoreStats
from jobs.reporting.page import duplicated, histogram_chart, history_chart

COLUMNS = "pair string, corpus string, line long, row_id long, src string, tgt string, " \
          "outcome string, reject_stage string, reject_rule string, dup_of long, run_id string"


def test_a_duplicate_sample_shows_the_text_it_duplicates(spark) -> None:
    table = spark.createDataFrame([
        # an earlier run's row, the survivor of a later run's duplicate
        ("zh-en", "crawl", 7, 101, "你好。", "Hello.", "clean", None, None, None, "r1"),
        ("zh-en", "crawl", 1, 201, "谢谢！", "Thanks!", "clean", None, None, None, "r2"),
        ("zh-en", "crawl", 2, 202, "谢谢", "thanks", "rejected", "dedup", "duplicate", 201, "r2"),
        ("zh-en", "crawl", 3, 203, "你好", "hello", "rejected", "dedup", "duplicate", 101, "r2"),
        ("zh-en", "crawl", 4, 204, "再见", "bye", "rejected", "dedup", "duplicate", 999, "r2"),
    ], COLUMNS)
    run = table.where("run_id = 'r2'")
    rows = RunScores(run, "pair", None, [], None).rejected_samples([], table)
    shown = {r["line"]: duplicated(r) for r in rows}
    assert shown == {2: "duplicate of crawl:1: 谢谢！ ||| Thanks!",
                     3: "duplicate of crawl:7: 你好。 ||| Hello.",
                     4: "duplicate of row 999 (no longer in the lake)"}


def test_a_near_duplicate_sample_shows_its_survivor_and_jaccard(spark) -> None:
    """Issue 40: a near-duplicate is shown beside the row it duplicates, with their Jaccard."""
    table = spark.createDataFrame([
        ("zh-en", "crawl", 1, 301, "价格是35元。", "The price is 35 yuan.", "clean", None, None,
         None, "r3", None),
        ("zh-en", "crawl", 2, 302, "价格是36元。", "The price is 36 yuan.", "rejected",
         "near_dup", "near_dup", 301, "r3", 0.82),
    ], COLUMNS + ", near_dup_jaccard double")
    rows = RunScores(table, "pair", None, [], None).rejected_samples([], table)
    assert [duplicated(r) for r in rows] == [
        "duplicate of crawl:1 (Jaccard 0.82): 价格是35元。 ||| The price is 35 yuan."]


def test_a_one_run_history_is_labelled_by_the_runs_start() -> None:
    spec = history_chart([{"run_id": "a", "corpus": "c", "started_at": "2026-11-26 02:02:51.9",
                           "rows_in": 10, "kept": 9, "kept_share": 0.9}])
    assert spec["encoding"]["x"]["type"] == "ordinal"  # not a time axis ticking in ms
    assert [v["run"] for v in spec["data"]["values"]] == ["2026-11-26 02:02:51"]


def test_a_flag_gets_a_bar_per_value_and_the_rejected_a_panel_of_their_own() -> None:
    flag = ScoreStats("zh-en", "bracket_mismatch", "unbalanced_brackets", None, True, [
        {"bin_start": 0, "bin_end": 1, "group": KEPT, "rows": 1480},
        {"bin_start": 1, "bin_end": 2, "group": REJECTED_HERE, "rows": 3}])
    spec = histogram_chart(flag)
    top, below = spec["vconcat"]
    assert top["encoding"]["x"]["type"] == "ordinal"  # 0 and 1, not one wide binned bar
    assert [v["value"] for v in below["data"]["values"]] == [1]  # the 3 rejected, alone
    share = ScoreStats("zh-en", "punct_share", "punct_share", None, False, [
        {"bin_start": 0.0, "bin_end": 0.05, "group": KEPT, "rows": 900}])
    (only,) = histogram_chart(share)["vconcat"]  # nothing rejected: one panel
    assert only["encoding"]["x"]["bin"] == "binned"
