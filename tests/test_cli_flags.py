"""The jobs' shared flags (jobs/kit/cli.py) mean the same thing in every job, and a renamed
flag's old spelling still parses the same (scheduled commands keep working)."""

from __future__ import annotations

import contextlib
import io

import pytest

from jobs.filtering import job as filter_job
from jobs.lake import cleanup
from jobs.refreshing import job as refresh_job
from jobs.reporting import job as report_job
from jobs.scorer_training import align_reference, pair_score
from jobs.selection import job as select_job
from jobs.translation import job as translate_job

JOBS = {"filter": filter_job, "select": select_job, "refresh": refresh_job,
        "translate": translate_job, "report": report_job, "train_pair_score": pair_score,
        "align_reference": align_reference, "lake_gc": cleanup}
# Every job reads a lake through a config: these flags, with these words, everywhere.
SHARED = {"--config FILE": "YAML config (extends conf/", "--set KEY=VALUE": "override one config",
          "--lake ROOT": "lake root (local path, hdfs://, s3a://)"}


def help_text(module) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        module.parse_args(["--help"])
    return " ".join(out.getvalue().split())


@pytest.mark.parametrize("name", JOBS)
def test_the_shared_flags_read_the_same_in_every_job(name: str) -> None:
    text = help_text(JOBS[name])
    for flag, words in SHARED.items():
        assert f"{flag} {words}" in text, (name, flag)


def test_jobs_that_read_a_table_take_input_table() -> None:
    for module in (filter_job, select_job, translate_job):
        assert "--input-table TABLE" in help_text(module)


def test_old_spellings_parse_as_the_new_ones() -> None:
    new = report_job.parse_args(["--run-id", "r1", "--set", "lake.database=x"])
    old = report_job.parse_args(["--run", "r1", "--set", "lake.database=x"])
    assert vars(new) == vars(old)
    assert pair_score.parse_args(["--config", "c", "--name", "n", "--pairs", "7"]).max_pairs == 7
    a = align_reference.parse_args(["--pair", "zh-en", "--src", "a", "--tgt", "b",
                                    "--lake", "L", "--name", "n"])
    b = align_reference.parse_args(["--pair", "zh-en", "--input", "a", "b",
                                    "--lake", "L", "--name", "n"])
    assert (a.src, a.tgt) == (b.src, b.tgt) == ("a", "b")


def test_filter_input_table_is_a_table_input() -> None:
    args = filter_job.parse_args(["--pair", "zh-en", "--corpus", "bt",
                                  "--input-table", "sluice.synthetic", "--where", "round = 1"])
    cfg = filter_job.config_from_args(args)
    assert [(i.corpus, i.paths, i.format, i.where) for i in cfg.inputs] == [
        ("bt", ["sluice.synthetic"], "table", "round = 1")]


def test_report_reads_only_the_lake_of_another_jobs_config() -> None:
    args = report_job.parse_args(["--config", "conf/select-zh-en.yaml", "--lake", "/data/l"])
    cfg = report_job.lake_config(args)
    assert (cfg.lake.root, cfg.lake.database) == ("/data/l", "sluice")
