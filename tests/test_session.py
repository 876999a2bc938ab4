"""Spark's precedence for a job's settings, shell-safe printed commands, and model paths as
executors see them (jobs/lake/session.py, jobs/lake/models.py), without starting a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from integration_helpers import spark_default
from pyspark import SparkConf

from jobs.filtering.config import load_config
from jobs.kit.errors import ConfigError
from jobs.lake.models import for_executors, shipped_aliases
from jobs.lake.session import session_conf, spark_sql_command

REPO = Path(__file__).resolve().parent.parent
SHUFFLE = "spark.sql.shuffle.partitions"


def test_user_settings_win_config_fills_the_rest(tmp_path: Path) -> None:
    mine = SparkConf(loadDefaults=False).set(SHUFFLE, "400")
    got = session_conf(mine, str(tmp_path), {SHUFFLE: "16", "spark.sql.ansi.enabled": "false"})
    assert SHUFFLE not in got  # spark-submit's --conf stays as the user gave it
    assert got["spark.sql.ansi.enabled"] == "false"
    assert got["spark.hadoop.javax.jdo.option.ConnectionURL"].endswith("metastore_db;create=true")


def test_the_hive_clients_resources_go_with_the_process(tmp_path: Path) -> None:
    # Hive's default leaves java.io.tmpdir/<session>_resources behind after every job.
    script = ("from jobs.lake.session import hive_resources_dir\n"
              "import os; d = hive_resources_dir(); os.makedirs(d); print(d)")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=120)
    assert done.returncode == 0, done.stderr
    made = Path(done.stdout.strip())
    assert made.parent.parent == tmp_path and not made.parent.exists()
    got = session_conf(SparkConf(loadDefaults=False), str(tmp_path), {})
    assert got["spark.hadoop.hive.downloaded.resources.dir"].endswith("/resources")


def test_a_shared_metastore_replaces_the_embedded_one(tmp_path: Path) -> None:
    mine = SparkConf(loadDefaults=False).set("spark.hadoop.hive.metastore.uris", "thrift://m:9083")
    got = session_conf(mine, str(tmp_path), {})
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in got
    assert got["spark.sql.warehouse.dir"] == f"file://{tmp_path}/warehouse"
    mine.set("spark.sql.warehouse.dir", "hdfs:///warehouse")
    assert "spark.sql.warehouse.dir" not in session_conf(mine, str(tmp_path), {})


def test_master_is_not_a_config_key() -> None:
    with pytest.raises(ConfigError, match="pass --master to spark-submit"):
        load_config(None, ["spark.master=yarn", "pair=zh-en"])


def test_embedding_thresholds_by_shorthand_land_on_the_chosen_encoder() -> None:
    # The re-decide command sets `embedding.min_margin`; thresholds belong to an
    # encoder, so the resolved config (stored in `runs`) holds them there.
    cfg = load_config(None, ["embedding.min_margin=1.02", "embedding.min_cosine=0.3"],
                      {"pair": "zh-en"})
    chosen = cfg.embedding.chosen
    assert (chosen.min_margin, chosen.min_cosine_for("zh-en")) == (1.02, 0.3)
    assert cfg.embedding.encoders["labse"].min_cosine == 0.8  # the others are untouched
    resolved = cfg.resolved()["embedding"]
    assert "min_margin" not in resolved
    assert resolved["encoders"]["use-multilingual"]["min_margin"] == 1.02
    other = load_config(None, ["embedding.encoder=labse", "embedding.min_margin=1.1"],
                        {"pair": "zh-en"})
    assert other.embedding.chosen.min_margin == 1.1
    assert other.embedding.encoders["use-multilingual"].min_margin == 1.05


def test_printed_spark_sql_command_is_one_argv_in_a_shell(tmp_path: Path) -> None:
    lake = tmp_path / "my lake; rm -rf x"
    query = "SELECT * FROM sluice.filter_stats WHERE run_id = 'a' AND rule <> \"$HOME\""
    command = spark_sql_command(str(lake), query)
    sluice = Path(sys.executable).parent / "sluice"  # works from any shell: no venv needed
    assert command.startswith(f"{sluice} sql ")
    words = command.removeprefix(f"{sluice} sql ")
    argv = subprocess.run(["bash", "-c", f"printf '%s\\n' {words}"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert argv[-2:] == ["-e", query]
    derby = next(a for a in argv if a.startswith("spark.hadoop.javax.jdo"))
    assert f"databaseName={lake}/metastore_db;create=true" in derby


class FakeContext:
    def __init__(self, conf: dict[str, str]) -> None:
        self.conf, self.added = SparkConf(loadDefaults=False).setAll(conf.items()), []

    def getConf(self) -> SparkConf:  # noqa: N802 - SparkContext's name
        return self.conf

    def addFile(self, path: str, recursive: bool = False) -> None:  # noqa: N802
        self.added.append(path)


class FakeSession:
    def __init__(self, **conf: str) -> None:
        self.sparkContext = FakeContext(conf)


def test_model_paths_for_executors(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lid.ftz").write_bytes(b"x")
    (tmp_path / "ct2").mkdir()
    spark = FakeSession(**{"spark.archives": "hdfs:///m/en-zh.tgz#en-zh,file:/x/spm.tgz",
                           "spark.files": "/y/vocab.txt"})
    assert shipped_aliases(spark) == {"en-zh", "spm.tgz", "vocab.txt"}
    assert for_executors(spark, "lid.ftz", "lid") == str(tmp_path / "lid.ftz")
    assert for_executors(spark, "ct2", "model") == str(tmp_path / "ct2")
    assert spark.sparkContext.added == [str(tmp_path / "lid.ftz")]  # files ship, dirs cannot
    assert for_executors(spark, "en-zh", "model") == "en-zh"  # unpacked in the working dir
    assert for_executors(spark, "en-zh/spm.model", "tokenizer") == "en-zh/spm.model"
    assert for_executors(spark, "s3a://b/models/lid.ftz", "lid") == "s3a://b/models/lid.ftz"
    assert spark.sparkContext.added[-1] == "s3a://b/models/lid.ftz"


def test_the_shipped_models_are_found_from_any_directory(tmp_path: Path, monkeypatch) -> None:
    """A job started elsewhere (cron, Airflow, its config's directory) finds the models the
    shipped defaults name in sluice's installation; a user's own relative path is still read
    from the working directory first."""
    from jobs.lake.models import INSTALLATION

    monkeypatch.chdir(tmp_path)
    spark = FakeSession()
    for default in ("models/lid.176.ftz", "models/use-multilingual-v3"):
        assert (INSTALLATION / default).exists(), "make setup fetches it"
        assert for_executors(spark, default, "model") == str(INSTALLATION / default)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "lid.176.ftz").write_bytes(b"the user's own")
    assert for_executors(spark, "models/lid.176.ftz", "lid") == str(
        tmp_path / "models" / "lid.176.ftz")


def test_a_model_that_is_nowhere_is_one_clear_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    spark = FakeSession(**{"spark.archives": "/m/en-zh.tgz#en-zh"})
    with pytest.raises(ConfigError) as err:
        for_executors(spark, "zh-en", "stream bt: model")
    message = str(err.value)
    assert "\n" not in message and message.startswith("stream bt: model: zh-en not found")
    assert str(tmp_path / "zh-en") in message and "en-zh" in message
    with pytest.raises(ConfigError):  # an absolute path is never an alias
        for_executors(spark, "/en-zh", "model")


def test_the_venvs_spark_defaults_reach_the_driver_jvm(spark) -> None:
    """Spark reads conf/spark-defaults.conf (SPARK_CONF_DIR, as the Makefile and `sluice`
    set it; nothing is copied into the installed pyspark): the JIT setting is on the running
    driver JVM's command line, next to the tests' own flags (defaultJavaOptions adds to, not
    replaces, what a user passes)."""
    wanted = spark_default("spark.driver.defaultJavaOptions")
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    flags = list(runtime.getInputArguments())
    assert wanted in flags
    assert "-XX:TieredStopAtLevel=1" in flags  # the tests' JIT_OPTS still apply
