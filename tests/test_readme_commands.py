"""The documentation's command blocks (README and docs/) run as printed, from a bare shell (no
venv activated, no SPARK_HOME), at the checkout's root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from doc_pages import block_under
from integration_helpers import JIT_OPTS

from jobs.filtering.pair_score_model import auc

REPO = Path(__file__).resolve().parent.parent
# A bare shell: no venv activated, no SPARK_HOME; only the JIT setting every JVM of the tests
# runs with (conftest.py: C1 only), which changes no result and ~40% of these cold JVMs' CPU.
BARE_SHELL = {"HOME": os.environ.get("HOME", "/tmp"), "PATH": "/usr/bin:/bin",
              "SPARK_SUBMIT_OPTS": JIT_OPTS}
pytestmark = pytest.mark.integration  # whole jobs: not in the fast tier


def readme_block(heading: str) -> list[str]:
    return block_under(heading)  # on whichever page (README, docs/) has the heading


def result_rows(printed: str) -> list[tuple[str, ...]]:
    """(corpus, rule, count) rows of duckdb's box table or spark-sql's tab-separated lines."""
    rows = []
    for line in printed.splitlines():
        cells = tuple(c.strip() for c in re.split(r"[│\t]", line.strip(" │")))
        if len(cells) == 3 and cells[2].isdigit():
            rows.append(cells)
    return rows


def test_running_the_filter_job_as_printed() -> None:
    lines = readme_block("## Running the filter job")
    assert len(lines) == 3 and all("--lake /tmp/sluice-examples" in line for line in lines)
    shutil.rmtree("/tmp/sluice-examples", ignore_errors=True)
    try:
        for line in lines:
            done = subprocess.run(line, shell=True, cwd=REPO, env=BARE_SHELL,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
            if "--master" in line:  # the README's "Jobs and flags" line too (test below)
                said = done.stdout + done.stderr
                assert "committed run" in said
                # conf/log4j2.properties silences the start-up warnings that are harmless here
                for noise in ("NativeCodeLoader", "CreateNamespaceExec", "SparkStringUtils",
                              "SessionState", "HiveConf", " INFO "):
                    assert noise not in said, noise
        bitext = ds.dataset("/tmp/sluice-examples/tables/bitext", partitioning="hive")
        corpora = bitext.to_table(columns=["corpus"]).column("corpus").to_pylist()
        assert set(corpora) == {"anki", "tatoeba"}
        lines_in = len((REPO / "tests/data/tatoeba-zh-en.zh").read_text().splitlines())
        assert corpora.count("tatoeba") == lines_in  # every input line, clean or rejected
        runs = ds.dataset("/tmp/sluice-examples/tables/runs", partitioning="hive")
        assert runs.count_rows() == 3
        # "Querying the stats": both lines, as printed, on this lake; the same answer
        queries = readme_block("### Querying the stats")
        assert [q.split()[:2] for q in queries] == [[".venv/bin/sluice", "query"],
                                                    [".venv/bin/sluice", "sql"]]
        answers = []
        for line in queries:
            done = subprocess.run(line, shell=True, cwd=REPO, capture_output=True, text=True,
                                  env=dict(BARE_SHELL, LAKE="/tmp/sluice-examples"), timeout=300)
            assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
            answers.append(sorted(result_rows(done.stdout)))
        assert len(answers[0]) >= 3 and answers[0] == answers[1]
        # "Re-deciding a run" and "Seeing a run", as printed, on the same lake
        for heading in ("### Re-deciding a run", "### Seeing a run"):
            (line,) = readme_block(heading)
            done = subprocess.run(line, shell=True, cwd=REPO, env=BARE_SHELL,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
        runs = ds.dataset("/tmp/sluice-examples/tables/runs", partitioning="hive").to_table(
            columns=["run_id", "job", "status"]).to_pylist()
        assert {"run_id": "b1", "job": "redecide", "status": "succeeded"} in runs
        page = Path("/tmp/sluice-examples/report.html").read_text(encoding="utf-8")
        assert "run b1" in page and "rules.max_tokens" in page
    finally:
        shutil.rmtree("/tmp/sluice-examples", ignore_errors=True)


def test_crawled_corpora_as_printed(data_dir: Path) -> None:
    """A crawl's `url1 url2 src tgt label` rows, filtered and queried as the README prints:
    every row has its URLs, its website counted as the registrable domain."""
    lines = readme_block("### Crawled corpora")
    assert len(lines) == 4 and all("--lake /tmp/sluice-crawl" in line for line in lines)
    shutil.rmtree("/tmp/sluice-crawl", ignore_errors=True)
    try:
        done = [subprocess.run(line, shell=True, cwd=REPO, env=BARE_SHELL, capture_output=True,
                               text=True, timeout=600) for line in lines]
        for line, ran in zip(lines, done, strict=True):
            assert ran.returncode == 0, f"{line}\n{ran.stderr[-3000:]}"
        def rows_of(pair: str) -> list[dict]:  # each run's files: the columns it stored
            return ds.dataset(f"/tmp/sluice-crawl/tables/bitext/pair={pair}",
                              partitioning="hive").to_table().to_pylist()

        bitext = rows_of("en-hr")
        crawl = (data_dir / "crawl/urls/en-hr.tsv").read_text(encoding="utf-8").splitlines()
        assert len(bitext) == len(crawl)
        for row in bitext:
            url1, url2, *_, label = crawl[row["line"] - 1].split("\t")
            assert (row["src_url"], row["tgt_url"], row["extra"]) == (url1, url2, [label])
        hosts = [row["host"] for row in bitext]
        printed = {cells[0]: int(cells[1]) for cells in
                   (tuple(c.strip() for c in line.strip(" │").split("│"))
                    for line in done[1].stdout.splitlines() if line.count("│") == 4)
                   if cells[1].isdigit()}
        assert printed["stroifaq.com"] == hosts.count("stroifaq.com") == 12
        assert printed["europa.eu"] == hosts.count("europa.eu") == 12  # www.europarl.europa.eu
        page = Path("/tmp/sluice-crawl/report.html").read_text(encoding="utf-8")
        websites = page[page.index('<h2 id="hosts">'):page.index('<h2 id="scores">')]
        assert "<td>stroifaq.com</td><td>en-hr</td>" in websites
        # conf/crawl.yaml's run: the MT evidence and the cross-encoder's score stored, the
        # pair_score that reads them decides alone
        polish = rows_of("en-pl")
        judged = [r for r in polish if r["pair_score"] is not None]
        assert len(judged) >= 25
        assert all(r["mt_human"] is not None and r["cross_encoder"] is not None for r in judged)
        assert {r["reject_rule"] for r in polish if r["reject_stage"] in (
            "cross_encoder", "mt_detector", "pair_score")} <= {"pair_score"}
        assert sum(r["host_mt"] is not None for r in judged) >= 2  # pairs sharing a scored site
        labels = {r["line"]: r["extra"][0] for r in polish}
        valid = [r["pair_score"] for r in judged if labels[r["line"]] == "V"]
        machine = [r["pair_score"] for r in judged if labels[r["line"]] == "MT"]
        assert auc(valid, machine) >= 0.7
    finally:
        shutil.rmtree("/tmp/sluice-crawl", ignore_errors=True)


def test_jobs_and_flags_as_printed() -> None:
    lines = readme_block("### Jobs and flags")
    assert lines[0] == ".venv/bin/sluice" and len(lines) == 2
    listed = subprocess.run(lines[0], shell=True, cwd=REPO, env=BARE_SHELL,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "filter" in listed.stdout
    # The job line, spark-submit's options before the job's name, is also docs/filtering.md's:
    # the test above runs it as printed, once for both pages (a cold JVM costs ~40 CPU-s).
    assert "--master 'local[2]' filter" in lines[1]
    assert lines[1] in readme_block("## Running the filter job")
