"""A truncated `.gz` in a refresh source is quarantined (issue 22): the refresh goes on with
the other files, says which file and why in one line, records it in the run's inputs, keeps
that file's committed rows, and takes the file once it is whole again."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from test_refresh_property import Sources, config, rows, run_refresh

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier


def write_gz(path: Path, lines: list[str], cut: bool = False) -> None:
    data = gzip.compress("".join(f"{line}\n" for line in lines).encode())
    path.write_bytes(data[: len(data) // 2] if cut else data)


def files_of(lake: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for row in rows(lake).values():
        name = Path(row[2]).name
        found[name] = found.get(name, 0) + 1
    return found


def test_a_truncated_gzip_source_is_quarantined_and_the_rest_refreshed(
        spark, tmp_path: Path, anki_pool: list[str], capsys) -> None:
    sources = Sources(tmp_path / "src", anki_pool, random.Random(0))
    crawl = sources.root / "crawl"
    write_gz(crawl / "a.tsv.gz", anki_pool[:20])
    write_gz(crawl / "b.tsv.gz", anki_pool[20:40], cut=True)
    lake_cfg = config(tmp_path, sources.root, "lake", "keep")
    run_refresh(spark, lake_cfg, "q-1")
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if line.startswith("sluice: warning: quarantined")]
    assert len(warned) == 1 and "b.tsv.gz: truncated gzip file" in warned[0], err
    assert files_of(tmp_path / "lake") == {"a.tsv.gz": 20}
    runs = ds.dataset(tmp_path / "lake" / "tables" / "runs", partitioning="hive").to_table()
    [inputs] = [json.loads(r["inputs"]) for r in runs.to_pylist()
                if r["run_id"] == "q-1" and r["status"] == "succeeded"]
    assert [i["why"].split(":")[0] for i in inputs] == ["new", "quarantined"]

    # Whole again: taken. Then a.tsv.gz is cut while rewritten: its committed rows stay.
    write_gz(crawl / "b.tsv.gz", anki_pool[20:40])
    run_refresh(spark, lake_cfg, "q-2")
    assert files_of(tmp_path / "lake") == {"a.tsv.gz": 20, "b.tsv.gz": 20}
    write_gz(crawl / "a.tsv.gz", anki_pool[40:60], cut=True)
    sources.touch(crawl / "a.tsv.gz")
    run_refresh(spark, lake_cfg, "q-3")
    warned = [line for line in capsys.readouterr().err.splitlines()
              if line.startswith("sluice: warning: quarantined")]
    assert len(warned) == 1 and "a.tsv.gz: truncated gzip file" in warned[0]
    assert files_of(tmp_path / "lake") == {"a.tsv.gz": 20, "b.tsv.gz": 20}
    srcs = {r[7] for r in rows(tmp_path / "lake").values() if r[2].endswith("a.tsv.gz")}
    assert srcs & {line.split("\t")[0] for line in anki_pool[:20]}  # the old rows, as committed
