"""The parts of jobs/refresh.py that decide what a refresh does, without a whole job: the plan
against the manifest, listing (here and through Hadoop), Moses partners, the lake lock, and
lake-wide dedup over real Chinese-English pairs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from jobs.kit.errors import ConfigError
from jobs.lake.lock import LakeBusy, LocalLock
from jobs.refreshing.config import SourceConf, load_refresh_config
from jobs.refreshing.manifest import (
    Entry,
    SourceFile,
    hadoop_files,
    local_files,
    moses_partner,
    plan_refresh,
    source_files,
)

REPO = Path(__file__).resolve().parent.parent


def source(path: str, size: int = 100, modified: int = 1_000, corpus: str = "crawl"):
    return SourceFile(corpus, "tsv", f"file:/in/{path}", None, size, modified)


def entry(file: SourceFile, digest: str = "sha256:a", config: str = "c1",
          status: str = "done") -> Entry:
    return Entry(file.corpus, file.path, None, "tsv", file.size, file.modified_ms, digest,
                 config, "run1", status, 10, file.file_id)


def digests(table: dict[str, str]):
    calls: list[str] = []

    def checksum(file: SourceFile) -> str:
        calls.append(file.path)
        return table[file.path]

    return checksum, calls


def test_plan_new_unchanged_touched_changed_and_config() -> None:
    a, b, c, d = source("a.tsv"), source("b.tsv"), source("c.tsv"), source("d.tsv")
    manifest = {(f.corpus, f.path): entry(f) for f in (a, b, c)}
    touched = replace(b, modified_ms=2_000)  # same bytes, new time
    changed = replace(c, size=120, modified_ms=3_000)
    checksum, calls = digests({a.path: "sha256:a", b.path: "sha256:a", c.path: "sha256:z",
                               d.path: "sha256:d"})
    plan = plan_refresh([a, touched, changed, d], manifest, "c1", "keep", checksum)
    assert [f.path for f in plan.process] == [c.path, d.path]
    assert plan.why == {c.file_id: "changed", d.file_id: "new"}
    assert plan.removed == {c.file_id}  # its old rows go; d had none
    assert sorted(calls) == sorted([b.path, c.path, d.path])  # `a`: size and time say it all
    assert plan.manifest_changed and not plan.up_to_date
    kept = {e.path: e for e in plan.kept}
    assert kept[b.path].modified_ms == 2_000 and kept[a.path] == manifest[(a.corpus, a.path)]

    reconfigured = plan_refresh([a, b], manifest, "c2", "keep", checksum)
    assert {reconfigured.why[f.file_id] for f in reconfigured.process} == {"config"}
    assert reconfigured.removed == {a.file_id, b.file_id}


def test_plan_nothing_new_is_up_to_date_without_reading_a_file() -> None:
    files = [source("a.tsv"), source("b.tsv", corpus="wmt")]
    checksum, calls = digests({})
    plan = plan_refresh(files, {(f.corpus, f.path): entry(f) for f in files}, "c1", "keep",
                        checksum)
    assert plan.up_to_date and calls == []


def test_plan_missing_files_kept_or_dropped() -> None:
    a, gone = source("a.tsv"), source("gone.tsv")
    manifest = {(f.corpus, f.path): entry(f) for f in (a, gone)}
    checksum, _ = digests({})
    keep = plan_refresh([a], manifest, "c1", "keep", checksum)
    assert [e.status for e in keep.kept if e.path == gone.path] == ["missing"]
    assert keep.manifest_changed and not keep.removed and not keep.process
    # Seen missing before: nothing new to record.
    again = {**manifest, (gone.corpus, gone.path): entry(gone, status="missing")}
    assert plan_refresh([a], again, "c1", "keep", checksum).up_to_date
    drop = plan_refresh([a], manifest, "c1", "drop", checksum)
    assert [e.path for e in drop.dropped] == [gone.path] and drop.removed == {gone.file_id}
    assert drop.corpora == {"crawl"}
    # It comes back as it was: done again, nothing reprocessed.
    back = plan_refresh([a, gone], again, "c1", "keep", checksum)
    assert not back.process and back.manifest_changed
    assert {e.status for e in back.kept} == {"done"}


def test_full_rebuild_processes_every_file() -> None:
    a = source("a.tsv")
    checksum, _ = digests({a.path: "sha256:a"})
    plan = plan_refresh([a], {(a.corpus, a.path): entry(a)}, "c1", "keep", checksum, full=True)
    assert plan.why == {a.file_id: "full"} and plan.removed == {a.file_id}


def test_file_ids_are_stable_and_per_corpus() -> None:
    a = source("a.tsv")
    assert a.file_id == source("a.tsv", size=5).file_id
    assert a.file_id != source("a.tsv", corpus="other").file_id
    assert len(a.file_id) == 16 and int(a.file_id, 16) >= 0


def test_moses_partners() -> None:
    assert moses_partner("file:/x/news.zh", ("zh", "en")) == "file:/x/news.en"
    assert moses_partner("file:/x/news.zh.gz", ("zh", "en")) == "file:/x/news.en.gz"
    assert moses_partner("file:/x/news.en", ("zh", "en")) is None
    files = {"file:/x/a.zh": (5, 1), "file:/x/a.en": (6, 2), "file:/x/b.zh": (1, 1),
             "file:/x/README": (1, 1)}
    found = source_files(SourceConf(corpus="wmt", path="/x", format="moses"), files,
                         ("zh", "en"), False)
    # b.zh waits for its partner; README is neither side: both said in the log, not read.
    assert [(f.path, f.path_tgt, f.size, f.modified_ms) for f in found] == [
        ("file:/x/a.zh", "file:/x/a.en", 11, 2)]


def test_listing_here_equals_hadoop(spark, tmp_path: Path) -> None:
    """The quick up-to-date check lists local sources without Spark: it must see the very
    files, paths and times Spark's listing does."""
    root = tmp_path / "crawl dumps"
    (root / "2026" / "11").mkdir(parents=True)
    for name in ["a.tsv", "2026/b #1.tsv", "2026/11/新闻:c.tsv.gz", ".hidden.tsv",
                 "_tmp.tsv", "2026/.part.tsv"]:
        (root / name).write_bytes(b"x\ty\n" * (len(name) + 1))
    for pattern in [str(root), f"{root}/*.tsv", f"{root}/2026/*"]:
        conf = SourceConf(corpus="crawl", path=pattern)
        assert local_files(conf) == hadoop_files(spark, conf), pattern
    assert len(local_files(SourceConf(corpus="crawl", path=str(root)))) == 3
    assert local_files(SourceConf(corpus="crawl", path=f"{root}/{{a,b}}.tsv")) is None
    missing = SourceConf(corpus="crawl", path=str(tmp_path / "nowhere"))
    assert local_files(missing) is None
    from jobs.kit.errors import InputError

    with pytest.raises(InputError, match="no such file or directory"):
        hadoop_files(spark, missing)


HOLD = """
import sys, time
from jobs.lake.lock import LocalLock
LocalLock(sys.argv[1]).acquire("holder-run")
print("held", flush=True)
time.sleep(600)
"""


def test_lake_lock_refuses_a_second_refresh_and_frees_on_crash(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LakeBusy, match=r"run holder-run \(pid \d+ on .*\)"):
            LocalLock(str(tmp_path)).acquire("second")
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # a crash: no release, no cleanup
        holder.wait()
    lock = LocalLock(str(tmp_path))
    lock.acquire("after-crash")  # the kernel let go of the dead holder's lock
    lock.release()
    again = LocalLock(str(tmp_path))
    again.acquire("next")
    again.release()


def test_refresh_config_errors(tmp_path: Path) -> None:
    config = tmp_path / "r.yaml"
    config.write_text("pair: zh-en\n")
    with pytest.raises(ConfigError, match="no `sources:`"):
        load_refresh_config(config)
    config.write_text("pair: zh-en\nsources: [{corpus: a, path: /x}, {corpus: a, path: /y}]\n")
    with pytest.raises(ConfigError, match="named by two sources"):
        load_refresh_config(config)
    config.write_text("pair: zh-en\nsources: [{corpus: _a, path: /x}]\n")
    with pytest.raises(ConfigError, match="corpus name"):
        load_refresh_config(config)
    config.write_text(f"extends: {REPO}/conf/zh-en.yaml\nsources: [{{corpus: a, path: /x}}]\n")
    cfg = load_refresh_config(config)
    # The filter hash follows the filter settings, not where the lake is or how it refreshes.
    same = load_refresh_config(config, ["lake.root=/elsewhere", "refresh.missing_files=drop"])
    other = load_refresh_config(config, ["rules.max_tokens=100"])
    assert cfg.filter_hash() == same.filter_hash() != other.filter_hash()


def test_lake_dedup_keeps_the_committed_row(spark) -> None:
    """New rows that repeat a committed clean row (after normalization: case, spaces,
    punctuation) are rejected as its duplicates; among themselves the first survives."""
    from pyspark.sql import functions as F

    from jobs.filtering.config import load_config
    from jobs.filtering.stages import dedup

    cfg = load_config(REPO / "conf/zh-en.yaml")
    committed_rows = [(101, "news", "f:/a", 3, "我们明天见。", "See you tomorrow."),
                      (102, "news", "f:/a", 4, "他在看书。", "He is reading a book.")]
    new_rows = [(201, "crawl", "f:/c", 1, "我们明天见", "see you tomorrow"),  # dup of 101
                (202, "crawl", "f:/c", 2, "天气很好。", "The weather is nice."),
                (203, "crawl", "f:/c", 3, "天气很好。", "The weather is nice!")]  # of 202
    schema = "row_id long, corpus string, file string, line long, src string, tgt string"
    committed = dedup(spark.createDataFrame(committed_rows, schema)
                      .withColumn("reject_rule", F.lit(None).cast("string"))
                      .withColumn("reject_stage", F.lit(None).cast("string")), cfg)
    new = (spark.createDataFrame(new_rows, schema)
           .withColumn("reject_rule", F.lit(None).cast("string"))
           .withColumn("reject_stage", F.lit(None).cast("string")))
    out = {r.row_id: (r.reject_rule, r.dup_of)
           for r in dedup(new, cfg, committed).collect()}
    assert out == {201: ("duplicate", 101), 202: (None, None), 203: ("duplicate", 202)}


def test_lock_timing_is_validated(tmp_path: Path) -> None:
    config = tmp_path / "r.yaml"
    config.write_text("pair: zh-en\nsources: [{corpus: a, path: /x}]\n"
                      "refresh: {heartbeat_s: 60, stale_after_s: 100}\n")
    with pytest.raises(ConfigError, match="stale_after_s"):
        load_refresh_config(config)


def test_remote_lock_heartbeat_and_stale_takeover(spark, tmp_path: Path) -> None:
    """The lock of a lake on HDFS/S3A, exercised through Hadoop's API on a local path: held
    while its heartbeat runs, refused to others, taken over once the heartbeat stops for
    `stale_after_s`; the old holder then sees it lost it."""
    from jobs.lake.lock import RemoteLock
    from jobs.lake.store import Lake

    lake = Lake(spark, str(tmp_path / "remote"), "remote_lock_probe")
    first = RemoteLock(lake, heartbeat_s=0.2, stale_after_s=1.0)
    first.acquire("first")
    time.sleep(1.5)  # longer than stale_after_s: only the heartbeat keeps it fresh
    with pytest.raises(LakeBusy, match="run first"):
        RemoteLock(lake, heartbeat_s=0.2, stale_after_s=1.0).acquire("second")
    first.stop.set()
    first.thread.join()  # the holder "crashes": no more heartbeats, no release
    time.sleep(1.5)
    second = RemoteLock(lake, heartbeat_s=0.2, stale_after_s=1.0)
    second.acquire("second")
    first.stop.clear()
    first._beat_once()
    assert first.lost.is_set()  # the old holder finds the lock is no longer its own
    second.release()
    assert not lake.exists(second.path)


def test_remote_lock_names_a_holder_caught_mid_heartbeat(spark, tmp_path: Path) -> None:
    """A heartbeat rewrites the lock; Hadoop's local file system shows it empty for a moment.
    A refresh refused at that moment still names the holder (it read once and said
    "another refresh" before)."""
    import threading

    from jobs.lake.lock import RemoteLock, holder_info
    from jobs.lake.store import Lake

    lake = Lake(spark, str(tmp_path / "remote"), "remote_lock_probe")
    lake.mkdirs(f"{lake.root}/locks")
    path = f"{lake.root}/locks/refresh.lock"
    lake.write_text(path, "")  # the holder's heartbeat, caught between truncate and write
    late = threading.Timer(0.4, lambda: lake.write_text(path, json.dumps(holder_info("first"))))
    late.start()
    with pytest.raises(LakeBusy, match="run first"):
        RemoteLock(lake, heartbeat_s=1.0, stale_after_s=30.0).acquire("second")
    late.join()


@pytest.mark.integration  # a whole refresh job, in this process
def test_monolingual_refresh_in_process(spark, tmp_path: Path, data_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A refresh of monolingual text (`lang: en`, format text), run in this test's Spark
    session: a second file repeating lines of the first gets them rejected as duplicates of
    the committed lines; then nothing new is "up to date"."""
    import pyarrow.dataset as ds

    from jobs.refreshing.job import main

    lines = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "a.txt").write_text("\n".join(lines[:120]) + "\n", encoding="utf-8")
    config = tmp_path / "mono.yaml"
    config.write_text(f"lang: en\nlake: {{root: {tmp_path / 'lake'}, database: refresh_mono}}\n"
                      f"sources: [{{corpus: news, path: {sources}, format: text}}]\n")
    assert main(["--config", str(config)]) == 0
    (sources / "b.txt").write_text("\n".join(lines[:20] + lines[120:150]) + "\n",
                                   encoding="utf-8")
    assert main(["--config", str(config)]) == 0
    rows = ds.dataset(tmp_path / "lake/tables/mono", partitioning="hive").to_table().to_pylist()
    by_place = {(Path(r["file"]).name, r["line"]): r for r in rows}
    assert len(rows) == 170 and {r["lang"] for r in rows} == {"en"}
    for line in range(1, 21):
        original, again = by_place[("a.txt", line)], by_place[("b.txt", line)]
        if original["outcome"] == "clean":
            assert (again["reject_rule"], again["dup_of"]) == ("duplicate", original["row_id"])
    capsys.readouterr()
    assert main(["--config", str(config)]) == 0
    assert "up to date: 2 source files of en" in capsys.readouterr().out
