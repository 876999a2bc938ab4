"""Evidence from a crawled pair's website (jobs/filtering/hosts.py) on real ParaCrawl pairs
with their URLs (tests/data/crawl/urls: en-hr and en-lv, sharing stroifaq.com and europa.eu):
the features equal a brute-force count, and a refresh that adds pairs to a website gives its
older pairs the features a full refresh of the same files gives."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.dataset as ds
import pytest
from pyspark.sql import functions as F

from jobs.filtering.hosts import HOST_FEATURES, with_host_features
from jobs.lake.store import Lake
from jobs.refreshing.config import load_refresh_config
from jobs.refreshing.job import refresh
from udfs.hosts import registrable

REPO = Path(__file__).resolve().parent.parent
URLS = REPO / "tests" / "data" / "crawl" / "urls"
COLUMNS = ["src_url", "tgt_url", "src", "tgt", "label"]


def brute_force(rows: list[dict], pool: list[dict]) -> dict[int, tuple]:
    """row_id -> (host_pairs, host_langs, host_mt), counted pair by pair."""
    by_host: dict[str, list[dict]] = defaultdict(list)
    for r in pool:
        by_host[r["host"]].append(r)
    out = {}
    for r in rows:
        if r["host"] is None:
            out[r["row_id"]] = (None, None, None)
            continue
        site = by_host[r["host"]]
        others = [o["mt_human"] for o in site if o is not r and o["mt_human"] is not None]
        out[r["row_id"]] = (len(site) - 1, len({o["pair"] for o in site}),
                            sum(others) / len(others) if others else None)
    return out


def test_host_features_equal_a_brute_force_count(spark) -> None:
    """Two language pairs' crawl rows, the run's and the lake's, with MT scores on most."""
    rng = random.Random(5)
    rows = []
    for lang in ("hr", "lv"):
        for i, line in enumerate((URLS / f"en-{lang}.tsv").read_text(
                encoding="utf-8").splitlines()):
            url = line.split("\t")[0]
            host = registrable(urlsplit(url if "//" in url else "//" + url).hostname)
            mt = None if rng.random() < 0.2 else round(rng.random(), 3)
            row_id = (1000 if lang == "lv" else 0) + i + 2  # 1: the row without a URL
            rows.append({"row_id": row_id, "pair": f"en-{lang}", "host": host, "mt_human": mt})
    rows.append({"row_id": 1, "pair": "en-hr", "host": None, "mt_human": 0.5})  # no URL
    schema = "row_id long, pair string, host string, mt_human double"
    df = spark.createDataFrame(rows, schema)
    run = df.where(F.col("pair") == "en-lv")
    lake = df.where(F.col("pair") == "en-hr")
    got = {r.row_id: (r.host_pairs, r.host_langs, r.host_mt)
           for r in with_host_features(run, "pair", lake).collect()}
    assert set(got) == {r["row_id"] for r in rows if r["pair"] == "en-lv"}
    want = brute_force([r for r in rows if r["pair"] == "en-lv"],
                       [r for r in rows if r["host"] is not None])
    for row_id, (pairs, langs, mt) in want.items():
        assert got[row_id][:2] == (pairs, langs)
        assert (got[row_id][2] is None) == (mt is None)
        assert mt is None or abs(got[row_id][2] - mt) < 1e-9
    assert {v[1] for v in got.values()} == {1, 2}  # stroifaq.com and europa.eu are in both
    alone = {r.row_id: r.host_pairs for r in with_host_features(lake, "pair", None).collect()}
    assert alone[1] is None and max(alone.values(), key=lambda v: v or 0) >= 11


def write_crawl(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def refresh_config(tmp: Path, sources: Path, name: str) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"pair: en-hr\nlake: {{root: {tmp / name}, database: hosts_{name}}}\n"
        "hosts: {enabled: true}\nmt_detector: {enabled: true}\n"
        f"sources:\n  - {{corpus: paracrawl, path: {sources}, format: tsv, "
        f"columns: {COLUMNS}}}\n", encoding="utf-8")
    return path


def features(lake: Path) -> dict[int, tuple]:
    data = ds.dataset(lake / "tables" / "bitext", format="parquet", partitioning="hive")
    table = data.to_table(columns=["row_id", "host", "mt_human", *HOST_FEATURES]).to_pylist()
    return {r["row_id"]: (r["host"], r["mt_human"], *[r[c] for c in HOST_FEATURES])
            for r in table}


@pytest.mark.integration  # three refreshes, in this process
def test_a_refresh_that_adds_pairs_to_a_website_updates_its_older_pairs(
        spark, tmp_path: Path) -> None:
    lines = (URLS / "en-hr.tsv").read_text(encoding="utf-8").splitlines()
    sources = tmp_path / "sources"
    write_crawl(sources / "a.tsv", lines[:30])
    incremental = refresh_config(tmp_path, sources, "lake")

    def run(config: Path, run_id: str, full: bool = False) -> None:
        cfg = load_refresh_config(str(config))
        assert refresh(spark, Lake(spark, cfg.lake.root, cfg.lake.database), cfg, run_id,
                       full) == 0

    run(incremental, "h-1")
    before = features(tmp_path / "lake")
    write_crawl(sources / "b.tsv", lines[30:])  # more pairs from stroifaq.com and europa.eu
    run(incremental, "h-2")
    after = features(tmp_path / "lake")
    grown = [row_id for row_id, f in before.items()
             if f[0] in ("stroifaq.com", "europa.eu")]
    assert grown and all(after[i][2] > before[i][2] for i in grown)  # host_pairs grew
    run(refresh_config(tmp_path, sources, "full"), "h-full", full=True)
    full = features(tmp_path / "full")
    assert after.keys() == full.keys()
    for row_id, (*same, host_mt) in after.items():  # a mean: summed in another order
        assert same == list(full[row_id][:-1])
        assert (host_mt is None) == (full[row_id][-1] is None)
        assert host_mt is None or abs(host_mt - full[row_id][-1]) < 1e-9
