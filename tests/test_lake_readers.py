"""The lake as any Parquet reader sees it, with jobs run as spark-submit runs them (the warm
driver, docs/testing.md; the killed one by spark-submit itself): after a commit, after a run
killed in the middle of its commit, and after the next run, pyarrow and duckdb
pointed at a table's documented path read exactly what the catalog shows. Corpus names that
Spark escapes in paths (`:`, `#`, non-ASCII) keep their rows; a run id is never reused."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pytest
import yaml
from doc_pages import section
from integration_helpers import BIN, REPO, query_lake, spark_env, spark_submit, submit_to

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

CORPORA = ["opus:2024", "wmt#21", "新闻"]


def inputs(data_dir: Path, tmp: Path, n: int, offset: int = 0) -> dict[str, Path]:
    """One small real TSV per corpus name (Tatoeba zh-en, different lines per corpus)."""
    zh = (data_dir / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()
    en = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()
    out = {}
    for i, corpus in enumerate(CORPORA):
        start = offset + i * n
        path = tmp / f"c{i}-{offset}.tsv"
        path.write_text("".join(f"{z}\t{e}\n" for z, e in zip(zh[start:start + n],
                                                              en[start:start + n],
                                                              strict=True)), "utf-8")
        out[corpus] = path
    return out


def filter_corpus(lake: Path, corpus: str, path: Path, run_id: str, kill_at: str = ""):
    """The filter job on one corpus; `kill_at`: SIGKILLed at that commit step, in a
    spark-submit of its own (the warm driver runs the others)."""
    args = ("--pair", "zh-en", "--corpus", corpus, "--input", str(path), "--lake", str(lake),
            "--run-id", run_id)
    if kill_at:
        return submit_to("local[2]", "filter", *args,
                         env=dict(spark_env(), SLUICE_KILL_AT=kill_at))
    return spark_submit(*args)


def pyarrow_counts(lake: Path, table: str, outcome: str | None = None) -> Counter:
    data = ds.dataset(lake / "tables" / table, format="parquet", partitioning="hive")
    flt = ds.field("outcome") == outcome if outcome else None
    return Counter(data.to_table(columns=["corpus"], filter=flt).column("corpus").to_pylist())


def duckdb_counts(lake: Path, glob: str) -> Counter:
    rows = duckdb.sql(f"SELECT corpus, count(*) FROM read_parquet('{lake}/tables/{glob}', "
                      "hive_partitioning = true) GROUP BY 1").fetchall()
    return Counter(dict(rows))


COUNTED = ("bitext_clean", "bitext_rejected", "bitext_raw")


def catalog_counts(lake: Path, **more: str) -> dict[str, Counter | list]:
    """Rows per corpus of each table as a new Spark session's catalog shows them; the rows of
    `more` named queries asked in the same session, as lists."""
    got = query_lake(lake, {**{t: f"SELECT corpus, count(*) FROM sluice.{t} GROUP BY 1"
                               for t in COUNTED}, **more})
    return {t: Counter(dict(rows)) if t in COUNTED else rows for t, rows in got.items()}


def plain_counts(lake: Path) -> dict[str, Counter]:
    """Each table read by pyarrow and by duckdb (as the README shows); the two must agree."""
    out = {
        "bitext_clean": pyarrow_counts(lake, "bitext", "clean"),
        "bitext_rejected": pyarrow_counts(lake, "bitext", "rejected"),
        "bitext_raw": pyarrow_counts(lake, "bitext_raw"),
    }
    assert duckdb_counts(lake, "bitext/*/*/outcome=clean/*.parquet") == out["bitext_clean"]
    assert duckdb_counts(lake, "bitext/*/*/outcome=rejected/*.parquet") == out["bitext_rejected"]
    assert duckdb_counts(lake, "bitext_raw/**/*.parquet") == out["bitext_raw"]
    return out


@pytest.fixture(scope="module")
def lake(tmp_path_factory, data_dir: Path) -> dict:
    root = tmp_path_factory.mktemp("readers")
    lake = root / "lake"
    first = inputs(data_dir, root, 40)
    config = root / "three.yaml"  # one run, three corpora whose names Spark escapes
    config.write_text(yaml.safe_dump({
        "pair": "zh-en", "lake": {"root": str(lake)},
        "inputs": [{"corpus": c, "paths": [str(p)]} for c, p in first.items()],
    }, allow_unicode=True), encoding="utf-8")
    done = spark_submit("--config", str(config), "--run-id", "first-0")
    assert done.returncode == 0, done.stderr[-3000:]
    return {"root": root, "lake": lake, "first": first,
            "after_first": catalog_counts(lake)}


def test_escaped_corpus_names_keep_their_rows(lake) -> None:
    seen = lake["after_first"]
    for corpus in CORPORA:
        assert seen["bitext_raw"][corpus] == 40
        assert seen["bitext_clean"][corpus] + seen["bitext_rejected"][corpus] == 40
        assert seen["bitext_clean"][corpus] > 30


def test_plain_readers_see_what_the_catalog_shows(lake) -> None:
    assert plain_counts(lake["lake"]) == lake["after_first"]


def test_the_readme_reads_the_lake_as_printed(lake) -> None:
    """The README's pyarrow/duckdb/pandas/polars snippet, run as printed beside the lake."""
    text = section("### Reading the lake without Spark")
    script = text.split("```\n", 2)[1].split("```", 1)[0]
    env = dict(spark_env(), PATH=f"{BIN}:/usr/bin:/bin")  # `python` is the venv's
    done = subprocess.run(["bash", "-c", script], cwd=lake["root"], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    for corpus in CORPORA:
        assert f"{corpus}" in done.stdout, done.stdout


def test_training_reads_the_table_directory(lake) -> None:
    from training.data import read_parquet

    rows = list(read_parquet([str(lake["lake"] / "tables" / "bitext")], "zh-en"))
    assert len(rows) == sum(lake["after_first"]["bitext_clean"].values())


def test_gc_command_keeps_the_tables(lake) -> None:
    done = subprocess.run([sys.executable, "-m", "jobs.lake_gc", "--lake", str(lake["lake"])],
                          cwd=REPO, env=spark_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "unreferenced directories" in done.stdout
    assert plain_counts(lake["lake"]) == lake["after_first"]


def test_a_run_id_that_committed_is_refused(lake) -> None:
    corpus, path = next(iter(lake["first"].items()))
    done = filter_corpus(lake["lake"], "other", path, "first-0")
    assert done.returncode == 2
    assert "run id first-0 has already committed" in done.stdout + done.stderr
    assert catalog_counts(lake["lake"]) == lake["after_first"]  # nothing wiped


def test_a_retry_of_a_committed_run_does_nothing_and_succeeds(lake) -> None:
    # A scheduler retrying a task whose run committed (it died after the commit, say): the
    # same command, the same --run-id. Exit 0, one line, the lake as it was.
    config = lake["root"] / "three.yaml"
    done = spark_submit("--config", str(config), "--run-id", "first-0")
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr  # spark-submit passes the driver's stderr to its stdout
    assert "run first-0 (filter) has already committed" in said
    assert "nothing to do (a retry)" in said
    assert catalog_counts(lake["lake"]) == lake["after_first"]


def test_run_ids_outside_the_lake_are_refused(lake) -> None:
    done = filter_corpus(lake["lake"], "x", lake["first"]["新闻"], "../../escape")
    assert done.returncode == 2 and "run id '../../escape'" in done.stdout + done.stderr
    assert not (lake["root"] / "escape").exists()


@pytest.mark.parametrize("step", ["published bitext"])  # every step: test_lake_commit.py
def test_a_commit_killed_midway_shows_all_old_or_all_new(lake, data_dir: Path, step) -> None:
    """A real SIGKILL at a step of the commit; then a fresh reader before any recovery."""
    corpus = "wmt#21"
    newer = inputs(data_dir, lake["root"], 25, offset=600)[corpus]
    before = plain_counts(lake["lake"])
    done = filter_corpus(lake["lake"], corpus, newer, f"killed-{step.replace(' ', '-')}",
                         kill_at=step)
    assert done.returncode != 0
    now = plain_counts(lake["lake"])
    old = (before["bitext_clean"][corpus], before["bitext_rejected"][corpus])
    got = (now["bitext_clean"][corpus], now["bitext_rejected"][corpus])
    assert got == old or sum(got) == 25, (step, old, got)  # never a mix
    # A scheduler's retry of the killed command (same --run-id): the run's own interrupted
    # commit is rolled forward before the retry writes into its run directory, and the retry
    # then has nothing to do.
    retry = filter_corpus(lake["lake"], corpus, newer, f"killed-{step.replace(' ', '-')}")
    assert retry.returncode == 0, retry.stderr[-3000:]
    assert "nothing to do (a retry)" in retry.stdout + retry.stderr
    retried = plain_counts(lake["lake"])
    assert retried["bitext_clean"][corpus] + retried["bitext_rejected"][corpus] == 25
    # The next job rolls the commit forward, marks the dead run failed, and readers agree.
    again = spark_submit("--pair", "zh-en", "--corpus", "新闻", "--input",
                         str(lake["first"]["新闻"]), "--lake", str(lake["lake"]))
    assert again.returncode == 0, again.stderr[-3000:]
    after = plain_counts(lake["lake"])
    catalog = catalog_counts(lake["lake"], status="SELECT run_id, status FROM sluice.runs")
    status = catalog.pop("status")
    assert after == catalog
    assert after["bitext_clean"][corpus] + after["bitext_rejected"][corpus] in (40, 25)
    assert all(state != "running" for _, state in status), status
    assert not list((lake["lake"] / "runs").iterdir())  # gc left no staged data behind
