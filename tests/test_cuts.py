"""Cuts (jobs/filtering/cuts.py): the worst share of the scored, alive rows by a stored score
is rejected, exactly, whatever the partitioning; or the rows outside bounds."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from jobs.filtering.config import load_config
from jobs.filtering.cuts import apply_cuts
from jobs.filtering.steps import rule_sequence
from jobs.kit.errors import ConfigError


def rows(spark, partitions: int):
    """100 scored alive rows (coverage 0.00..0.99), 5 without a score, 5 already rejected."""
    data = [(i, i / 100, i / 200, None, None) for i in range(100)]
    data += [(100 + i, None, None, None, None) for i in range(5)]
    data += [(200 + i, 0.0, 0.9, "langid", "langid_src") for i in range(5)]
    schema = ("row_id long, align_coverage double, punct_share double, reject_stage string, "
              "reject_rule string")
    return spark.createDataFrame(data, schema).repartition(partitions)


def fates(df) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in df.select("row_id", F.coalesce("reject_rule", F.lit("kept")).alias("f")).collect():
        out.setdefault(r.f, []).append(r.row_id)
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("partitions", [1, 7])
def test_the_worst_tenth_by_score_is_rejected_and_nothing_else(spark, partitions: int) -> None:
    cfg = load_config(None, ["pair=zh-en", "cuts=[{score: align_coverage, drop: 0.1}]"])
    got = fates(apply_cuts(rows(spark, partitions), cfg))
    assert got["cut_align_coverage"] == list(range(10))  # 0.00..0.09
    assert got["langid_src"] == list(range(200, 205))  # rejected before: not re-judged
    assert set(range(100, 105)) <= set(got["kept"])  # no score: passes
    assert len(got["kept"]) == 95
    assert rule_sequence(cfg)[-1] == ("cut", "cut_align_coverage")


def test_a_score_where_more_is_worse_cuts_from_the_top_after_the_first_cut(spark) -> None:
    cuts = ("[{score: align_coverage, drop: 0.1}, "
            "{score: punct_share, drop: 0.2, worst: high}]")
    cfg = load_config(None, ["pair=zh-en", f"cuts={cuts}"])
    got = fates(apply_cuts(rows(spark, 3), cfg))
    # The second cut's percentile is over the 90 rows the first kept (ids 10..99): the top
    # 20% of their punct_share (ids 82..99 are above the 80th percentile, 81.2 of 90).
    assert got["cut_punct_share"] == list(range(82, 100))


def test_a_cut_on_a_score_the_run_does_not_store_is_one_clear_error(spark) -> None:
    cfg = load_config(None, ["pair=zh-en", "cuts=[{score: embed_cosine, drop: 0.1}]"])
    with pytest.raises(ConfigError, match=r"cuts\[0\].score: 'embed_cosine' is not"):
        apply_cuts(rows(spark, 2), cfg)


def test_bounds_reject_outside_them_and_a_cut_is_a_share_or_bounds(spark) -> None:
    cfg = load_config(None, ["pair=zh-en",
                             "cuts=[{score: align_coverage, min: 0.25, max: 0.9}]"])
    got = fates(apply_cuts(rows(spark, 2), cfg))
    assert got["cut_align_coverage"] == [*range(25), *range(91, 100)]
    with pytest.raises(ConfigError, match="give `drop` .* or `min`/`max`"):
        load_config(None, ["pair=zh-en", "cuts=[{score: lm_src, drop: 0.1, min: -3}]"])


def test_two_cuts_on_one_score_need_their_own_names() -> None:
    """Both ends of one score (ZengHuiMT's LM trim): each cut its own rule, so filter_stats
    counts each once; two cuts that would share a rule are refused."""
    ends = ("[{score: lm_src, drop: 0.1, name: lm_src_low}, "
            "{score: lm_src, drop: 0.1, worst: high, name: lm_src_high}]")
    cfg = load_config(None, ["lang=en", f"cuts={ends}"])
    assert rule_sequence(cfg)[-2:] == [("cut", "cut_lm_src_low"), ("cut", "cut_lm_src_high")]
    with pytest.raises(ConfigError, match=r"cuts\[0\] and cuts\[1\] both reject as cut_lm_src"):
        load_config(None, ["lang=en", "cuts=[{score: lm_src, drop: 0.1}, "
                                      "{score: lm_src, drop: 0.1, worst: high}]"])
