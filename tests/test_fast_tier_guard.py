"""The fast tier's guard (conftest.py `_fast_tier_starts_no_job`): a test not marked
`integration` that starts a job fails at once, naming the command."""

from __future__ import annotations

import subprocess

import pytest
from conftest import starts_a_job


@pytest.mark.parametrize("argv", [
    ["/v/bin/spark-submit", "--master", "local[2]", "/r/jobs/filter.py", "--pair", "zh-en"],
    ["/v/bin/spark-sql", "-e", "SELECT 1"],
    ["/v/bin/python", "/r/jobs/select_data.py", "--config", "c.yaml"],
    ["/v/bin/python", "-m", "jobs.lake_gc", "--lake", "L"],
    ["/v/bin/sluice", "--master", "local[2]", "filter", "--config", "conf/zh-en.yaml"],
    ["/v/bin/sluice", "report", "--lake", "L", "--out", "r.html"],
    ".venv/bin/sluice --master 'local[2]' filter --pair zh-en --lake /tmp/l",  # a shell line
])
def test_a_job_start_is_recognised(argv: str | list[str]) -> None:
    assert starts_a_job(argv)


@pytest.mark.parametrize("argv", [
    ["/v/bin/sluice", "query", "--lake", "L", "SELECT corpus FROM sluice.filter_stats"],
    ["/v/bin/sluice", "filtr"],
    ["/v/bin/spark-submit", "/r/jobs/filter.py", "--help"],
    ["/v/bin/python", "-c", "import jobs"],
    ["bash", "docker/entrypoint.sh", "driver", "local:///opt/sluice/jobs/refresh.py"],
    ["git", "status"],
])
def test_what_starts_no_job_passes(argv: list[str]) -> None:
    assert not starts_a_job(argv)


def test_a_fast_test_that_starts_spark_submit_fails_naming_it(tmp_path) -> None:
    with pytest.raises(AssertionError, match="a fast-tier test starts a job: .*spark-submit"):
        subprocess.run([str(tmp_path / "spark-submit"), "--version"], check=False)


def test_a_fast_test_that_runs_a_job_in_the_warm_driver_fails_naming_it(tmp_path) -> None:
    from integration_helpers import spark_submit

    with pytest.raises(AssertionError, match="a fast-tier test starts a job: .*/jobs/report.py"):
        spark_submit("--lake", str(tmp_path), job="report")
