"""Build the SparkSession every job uses: Hive catalog, metastore and warehouse inside the lake.

Precedence, as Spark's own: what the user gave Spark (spark-submit's `--master`/`--conf`,
`spark-defaults.conf`, `PYSPARK_SUBMIT_ARGS`) wins; the sluice config's `spark:` section only
fills keys the user did not set; sluice's own defaults (the lake's warehouse and embedded
metastore) come last.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shlex
import shutil
import sys
import tempfile
from functools import cache

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from jobs.kit.errors import ConfigError
from jobs.kit.launcher import SQL_CONF, sluice_path
from jobs.lake.lock import hold_metastore
from jobs.lake.metastore import (
    CONNECTION_URL,
    METASTORE_URIS,
    THRIFT_FAIL_FAST,
    check_reachable,
    metastore_conf,
    shared_in_use,
)
from udfs.paths import is_local_path, local_path


def lake_uri(root: str) -> str:
    """Absolute URI of the lake root: a relative local path would otherwise be resolved
    against the catalog's database directory."""
    if is_local_path(root):
        return f"file://{local_path(root)}"
    return root.rstrip("/")


def user_spark_conf() -> SparkConf:
    """The settings the user gave Spark before this process built a context.

    Under spark-submit the JVM is already up and holds them as system properties; a plain
    `python` launches it here (with PYSPARK_SUBMIT_ARGS and spark-defaults.conf). A SparkConf
    made before the gateway exists would be empty, so start the gateway first."""
    SparkContext._ensure_initialized()
    return SparkConf()


@cache
def hive_resources_dir() -> str:
    """A directory for the Hive client's session resources, removed when this process exits.
    Hive's default, java.io.tmpdir/<session id>_resources, is made by every session that opens
    the catalog and never removed (SPARK-51571; Spark ships Hive 2.3): one a job, so a refresh
    scheduled hourly leaves 8,760 of them in /tmp a year."""
    path = tempfile.mkdtemp(prefix="sluice-hive-")
    atexit.register(shutil.rmtree, path, True)
    return os.path.join(path, "resources")


def session_conf(user: SparkConf, lake_root: str, conf: dict[str, str] | None) -> dict[str, str]:
    """The keys this job sets: the config's `spark:` section and sluice's defaults, each only
    where the user set nothing (and the config's section before sluice's defaults)."""
    wanted = {k: str(v) for k, v in (conf or {}).items()}
    defaults = {
        # Partition values such as corpus=2019 stay strings.
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        "spark.hadoop.hive.downloaded.resources.dir": hive_resources_dir(),
    }
    if not user.contains(METASTORE_URIS) and METASTORE_URIS not in wanted:
        defaults.update(embedded_catalog_conf(lake_root))
    else:
        defaults["spark.sql.warehouse.dir"] = f"{lake_uri(lake_root)}/warehouse"
    for key, value in defaults.items():
        wanted.setdefault(key, value)
    return {k: v for k, v in wanted.items() if not user.contains(k)}


def build_session(
    app_name: str,
    lake_root: str,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    lock: bool = False,
    run_id: str | None = None,
) -> SparkSession:
    """A Hive-enabled session whose warehouse (and, for a local lake, Derby metastore) live
    under the lake root, so a fresh `spark-sql` pointed at the same lake sees every table.

    A cluster with its own Hive metastore passes `spark.hadoop.hive.metastore.uris` (or sets
    it in hive-site.xml) and the embedded Derby metastore is not used. `master` is for callers
    in Python (tests, benches); jobs take theirs from spark-submit.

    With `lock` (every job: jobs/lake/runs.py `open_lake_at`) a session that is to open the lake's
    embedded metastore first takes the lake's metastore lock for the process's life
    (jobs/lake/lock.py MetastoreLock; `run_id` names the holder to a second job, which gets
    LakeBusy). Without it (the tests' shared session, query helpers) only the Derby probe."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    first = SparkContext._gateway is None  # no JVM of this process has opened a metastore yet
    user = user_spark_conf()
    chosen = session_conf(user, lake_root, conf)
    # A shared metastore (metastore.uris, or a JDBC URL to a database server): nothing to lock.
    if first and chosen.get(CONNECTION_URL, "").startswith("jdbc:derby:"):
        if lock:
            hold_metastore(lake_root, run_id, app_name)
        check_metastore_free(lake_root)
    check_reachable(chosen, user)
    shared_in_use(user.get(METASTORE_URIS, None) or chosen.get(METASTORE_URIS)
                  or user.get(CONNECTION_URL, None) or chosen.get(CONNECTION_URL))
    builder = SparkSession.builder.enableHiveSupport()
    # Spark's placeholders (pyspark's, or spark-submit's script name) give way to ours.
    if user.get("spark.app.name") in (None, "pyspark-shell", os.path.basename(sys.argv[0])):
        builder = builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in chosen.items():
        builder = builder.config(key, value)
    # pyspark's launcher turns Spark's progress bar on for every Python process; sluice keeps it
    # for terminals, where it helps, and out of logs and pipes, where it is noise.
    builder = builder.config("spark.ui.showConsoleProgress", str(sys.stderr.isatty()).lower())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SLUICE_SPARK_LOG_LEVEL", "WARN"))
    if is_local_path(lake_root):
        # Derby writes derby.log into the working directory unless told otherwise; the Hive
        # client starts lazily, so setting the property now is early enough.
        log = os.path.join(local_path(lake_root), "derby.log")
        spark.sparkContext._jvm.java.lang.System.setProperty("derby.stream.error.file", log)
    return spark


class MetastoreBusy(ConfigError):
    """The local lake's embedded metastore is open in another process that took no metastore
    lock (a `spark-sql` shell): exit 2 as before the lock, a refresh turns it into LakeBusy."""


def check_metastore_free(lake_root: str) -> None:
    """Refuse, in one line and at once, a local lake whose embedded Derby metastore another
    process has open: Derby lets one JVM in at a time, and the Hive client would otherwise
    retry for ~40 s and fail with thousands of lines.

    A booted Derby database holds an exclusive POSIX (fcntl) lock on `dbex.lck` (Java's
    FileChannel.tryLock); flock(2) does not see it. A shared lockf probe fails while that lock
    is held and succeeds once the holder has exited, whatever lock files it left behind."""
    lock = os.path.join(local_path(lake_root), "metastore_db", "dbex.lck")
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:  # no metastore yet (or not readable: Derby will say what is wrong)
        return
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        raise MetastoreBusy(
            f"the lake's metastore {os.path.dirname(lock)} is in use by another job or a "
            "spark-sql shell (its embedded Derby database allows one process at a time): wait "
            "for it to finish, or run concurrent jobs with a shared Hive metastore: "
            f"--conf {METASTORE_URIS}=thrift://HOST:9083"
        ) from None
    finally:
        os.close(fd)  # also drops the probe's lock


def embedded_catalog_conf(lake_root: str) -> dict[str, str]:
    """Warehouse under the lake; for a local lake also an embedded Derby metastore there."""
    conf = {"spark.sql.warehouse.dir": f"{lake_uri(lake_root)}/warehouse"}
    if is_local_path(lake_root):
        root = local_path(lake_root)
        os.makedirs(root, exist_ok=True)
        conf[CONNECTION_URL] = (
            f"jdbc:derby:;databaseName={root}/metastore_db;create=true"
        )
    return conf


def spark_sql_command(lake_root: str, query: str | None = None,
                      metastore: str = "embedded") -> str:
    """The spark-sql shell on the same catalog as the jobs, shell-quoted so it can be pasted as
    printed from any shell (a JDBC metastore's password stays out of it): this installation's
    `sluice sql` (jobs/kit/launcher.py: the venv's Spark, column names printed), else
    `spark-sql` on the PATH."""
    sluice = sluice_path()
    # `sluice sql` adds what a long-lived shell needs (jobs/kit/launcher.py SQL_CONF)
    args = [sluice, "sql"] if sluice != "sluice" else ["spark-sql", *SQL_CONF]
    shared = {k: v for k, v in metastore_conf(metastore).items()
              if "Password" not in k and k not in THRIFT_FAIL_FAST}
    if metastore.startswith("jdbc:"):
        args += ["--driver-class-path", "/usr/share/java/postgresql.jar"]
    catalog = ({"spark.sql.warehouse.dir": f"{lake_uri(lake_root)}/warehouse", **shared}
               if shared else embedded_catalog_conf(lake_root))
    for key, value in catalog.items():
        args += ["--conf", f"{key}={value}"]
    command = shlex.join(args)
    if query is None:
        return command
    return f"{command} -e {shell_quote(query)}"


def shell_quote(text: str) -> str:
    """`text` as one shell word; SQL reads better in double quotes where that is safe."""
    if not any(c in text for c in '"$`\\!'):
        return f'"{text}"'
    return shlex.quote(text)
