"""Lake-wide near-dup in a refresh (issue 40, jobs/refreshing/near_dup.py) on a sequence
built to need it, beside the seeded random sequences of test_refresh_property.py (whose
helpers it uses; a file of its own so the two run on different test workers)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_refresh_property import Sources, check_survivors, config, near_copies, rows, run_refresh

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier


def test_near_copies_are_found_across_refreshes_and_come_back_with_their_survivor(
        spark, tmp_path: Path, anki_pool: list[str]) -> None:
    """Lake-wide near-dup (issue 40): near copies in a later file are rejected against the
    committed originals (not only among the new rows), come back clean when the originals'
    file is rewritten without them (carried), and go again when a file that sorts first
    brings the originals back; the lake then equals a `--full` refresh's."""
    sources = Sources(tmp_path / "src", anki_pool, random.Random(0))
    copies = near_copies(anki_pool)[:12]
    originals = [line for line in anki_pool if len(line.split("\t")[1].split()) >= 6][:12]
    crawl = sources.root / "crawl"
    sources.write(crawl / "a.tsv", originals + anki_pool[40:50])
    lake_cfg = config(tmp_path, sources.root, "lake", "keep", near=True)
    run_refresh(spark, lake_cfg, "n-1")
    sources.write(crawl / "b.tsv", copies)
    run_refresh(spark, lake_cfg, "n-2")

    def fates(name: str) -> list[tuple]:
        lake = rows(tmp_path / "lake", near=True)
        return [(r[5], lake[r[6]][2].rsplit("/", 1)[-1] if r[6] else None)
                for r in lake.values() if r[2].endswith(f"/{name}")]

    assert sum(f == ("near_dup", "a.tsv") for f in fates("b.tsv")) >= 8
    sources.write(crawl / "a.tsv", anki_pool[40:50])  # the originals gone
    run_refresh(spark, lake_cfg, "n-3")
    assert {rule for rule, _ in fates("b.tsv")} <= {None, "langid_src", "langid_tgt"}
    sources.write(crawl / "0.tsv", originals)  # sorts before b.tsv: its rows survive
    run_refresh(spark, lake_cfg, "n-4")
    assert sum(f == ("near_dup", "0.tsv") for f in fates("b.tsv")) >= 8
    got = rows(tmp_path / "lake", near=True)
    check_survivors(got)
    run_refresh(spark, lake_cfg, "n-full", full=True)
    assert got == rows(tmp_path / "lake", near=True)
