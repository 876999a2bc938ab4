"""Language ID on valid web-crawled pairs (issue 39): human-labelled valid ParaCrawl pairs of
languages lid.176 reads poorly or under another name (tests/data/crawl/, release 6, the
calibration half of bench/crawl/rule_loss.py) go through the real filter job. Before: en-nb
was refused (no backend knows `nb`: both say `no`), 31% of valid Croatian lines were `sh`,
`sr` or `bs` to lid.176 and rejected, Maltese and Irish lost a quarter of their valid lines
to lid.176's low confidence (CLD3 names them right 97% of the time). Norwegian still loses
more than the rest: lid.176 spreads it over Danish and its two standards."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from jobs.filtering.config import load_config
from jobs.filtering.job import main
from udfs.langid_backends import backend_for

CRAWL = Path(__file__).resolve().parent / "data" / "crawl"
DB = "crawl_langid"
# The most language ID may take of the 80 valid pairs (the English side included): measured
# 8, 6, 5, 21 pairs (the English side 4, 3, 1, 2 of them); before the fixes hr, mt and ga lost
# 30-45% of their valid pairs and nb was refused. Norwegian stays the hardest.
LOSS = {"hr": 0.12, "mt": 0.1, "ga": 0.1, "nb": 0.33}


def test_a_language_a_backend_names_otherwise_is_read_by_it() -> None:
    assert backend_for("nb") is None
    assert backend_for("nb", accepted=["nb", "no"]) == "lid176"
    cfg = load_config(None, ["pair=en-nb"])
    assert cfg.langid.backend("nb") == "lid176" and cfg.langid.accept["nb"] == ["nb", "no", "nn"]
    assert [load_config(None, [f"pair=en-{x}"]).langid.backend(x) for x in ("mt", "ga")] == \
        ["cld3", "cld3"]


@pytest.mark.integration
@pytest.mark.parametrize("lang", ["hr", "mt", "ga", "nb"])
def test_valid_crawl_pairs_are_kept_by_language_id(spark, lake_root: Path, lang: str) -> None:
    root = lake_root / DB
    argv = ["--pair", f"en-{lang}", "--corpus", "crawl", "--input",
            str(CRAWL / f"en-{lang}.valid.tsv"), "--lake", str(root),
            "--set", f"lake.database={DB}", "--run-id", f"crawl-{lang}"]
    assert main(argv) == 0
    rows = (spark.read.parquet(str(root / "tables" / "bitext"))
            .where(F.col("run_id") == f"crawl-{lang}")
            .groupBy("reject_rule").count().collect())
    fates = {r.reject_rule: r["count"] for r in rows}
    langid = fates.get("langid_src", 0) + fates.get("langid_tgt", 0)
    assert langid <= LOSS[lang] * sum(fates.values()), fates
