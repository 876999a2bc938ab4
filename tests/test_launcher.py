"""`sluice` (jobs/kit/launcher.py): the console script lists the jobs and runs each through
spark-submit from a shell with no venv activated and no SPARK_HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jobs.kit import launcher
from jobs.kit.launcher import JOBS, JOBS_DIR, OWN_COMMANDS, command, entry_scripts, split

SLUICE = Path(sys.executable).parent / "sluice"
BARE_SHELL = {"HOME": os.environ.get("HOME", "/tmp"), "PATH": "/usr/bin:/bin"}


def test_options_before_the_job_go_to_spark_submit() -> None:
    assert split(["--master", "local[2]", "--conf", "a=b", "--verbose", "filter", "--lake", "L"]) \
        == (["--master", "local[2]", "--conf", "a=b", "--verbose"], "filter", ["--lake", "L"])
    assert split(["--conf=a=b", "report"]) == (["--conf=a=b"], "report", [])


def test_every_job_has_its_entry_script() -> None:
    for name, (script, _) in JOBS.items():
        if name not in OWN_COMMANDS:  # the spark-sql shell; duckdb in this interpreter
            assert (JOBS_DIR / script).is_file(), name


def test_the_job_table_is_built_from_the_entry_scripts(tmp_path, monkeypatch) -> None:
    """Each script spark-submit runs names its `sluice` job and says what it does in its
    docstring: a new job is one script, listed without touching the launcher. Only
    train_lm.py and train_cross_encoder.py are not Spark jobs (python runs them, README)."""
    scripts = {p.name for p in JOBS_DIR.glob("*.py")} - {"__init__.py", "train_lm.py",
                                                         "train_cross_encoder.py"}
    assert {script for script, _ in entry_scripts().values()} == scripts
    assert JOBS["select"] == ("select_data.py", "The selection job: score a lake table "
                              "against an in-domain seed and keep the best rows")
    (tmp_path / "dedup_lake.py").write_text(
        '"""The dedup job: near-duplicates across the lake.\n\nMore words."""\n\n'
        'from jobs.nowhere import main  # never imported by the launcher\n\n'
        'SLUICE_JOB = "dedup"\n')
    (tmp_path / "helper.py").write_text('"""Not a job."""\n')
    monkeypatch.setattr(launcher, "JOBS_DIR", tmp_path)
    assert launcher.entry_scripts() == {
        "dedup": ("dedup_lake.py", "The dedup job: near-duplicates across the lake")}


def test_sql_is_the_spark_sql_shell_printing_column_names() -> None:
    cmd, env = command(["sql", "-e", "SELECT 1"])
    assert cmd[0].endswith("/bin/spark-sql") and Path(cmd[0]).is_file()
    assert cmd[1:] == ["--conf", "spark.sql.cli.print.header=true", "--conf",
                       "spark.sql.hive.filesourcePartitionFileCacheSize=0", "-e", "SELECT 1"]
    assert Path(env["SPARK_CONF_DIR"], "spark-defaults.conf").is_file()


def test_the_command_is_spark_submit_of_the_entry_script() -> None:
    cmd, env = command(["--master", "local[1]", "select", "--config", "c.yaml"])
    assert cmd[0].endswith("/bin/spark-submit") and Path(cmd[0]).is_file()
    assert cmd[1:] == ["--master", "local[1]", str(JOBS_DIR / "select_data.py"),
                       "--config", "c.yaml"]
    assert env["PYSPARK_PYTHON"] == sys.executable


def test_sluice_lists_the_jobs_from_a_bare_shell() -> None:
    done = subprocess.run([str(SLUICE), "--help"], env=BARE_SHELL, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert all(f"  {name} " in done.stdout for name in JOBS)


def test_an_unknown_job_is_one_line_and_exit_2() -> None:
    done = subprocess.run([str(SLUICE), "filtr"], env=BARE_SHELL, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no job 'filtr'" in done.stderr


def test_a_jobs_help_is_printed_without_starting_spark() -> None:
    """`sluice JOB --help` runs the entry script on this interpreter: no JVM, no Spark log."""
    cmd, _ = command(["filter", "--help"])
    assert cmd == [sys.executable, str(JOBS_DIR / "filter.py"), "--help"]
    for job in ("filter", "select", "report"):
        done = subprocess.run([str(SLUICE), job, "--help"], env=BARE_SHELL, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: jobs/") and "--lake" in done.stdout
        assert "WARN" not in done.stdout + done.stderr
