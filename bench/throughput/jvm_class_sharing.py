"""Does a class-data-sharing archive start sluice's JVMs faster? Measured: no, not here.

Issue 37 proposed a dynamic CDS archive (JDK 13+: `-XX:ArchiveClassesAtExit` on one run,
`-XX:SharedArchiveFile` on the next) for every spark-submit, Spark's ~12,000 classes mapped
in already parsed and verified. The JVM maps an archive only when its class path matches the
dump's and holds no non-empty directory; spark-submit puts SPARK_CONF_DIR on the class path, so
the settings must travel by `--properties-file` and SPARK_CONF_DIR be an empty directory.

This script does exactly that (`--build`: an archive dumped from a filter run on the bundled
Tatoeba slice, into <venv>/spark-cds/; `--measure`: a small job with and without it,
alternating). On the project's 2-core machine (JDK 17.0.15, Spark 4.3, 2026-11-27) the archive
mapped (12,436 of 13,676 classes came from it, `-Xlog:class+load`) and saved nothing a run
could see: 5.5 vs 5.5 CPU-s for `range(1000).sum()` idle and with the tests' C1-only JIT,
6.6-6.9 vs 6.2 with both cores busy, and 23.5-26.6 vs 22.7-25.1 CPU-s for the Tatoeba filter
run. So sluice does not ship it: the suite's time is spent elsewhere (the per-module table
tests/conftest.py prints).

    python -m bench.throughput.jvm_class_sharing --build &&
        python -m bench.throughput.jvm_class_sharing --measure
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.kit import REPO
from jobs.kit.config import CONF_DIR

SPARK_DEFAULTS = CONF_DIR / "spark-defaults.conf"
LOG4J = CONF_DIR / "log4j2.properties"
CDS_DIR = Path(sys.prefix) / "spark-cds"
ARCHIVE = CDS_DIR / "spark.jsa"
PROPERTIES = CDS_DIR / "spark-defaults.conf"  # conf/spark-defaults.conf + the archive lines
EMPTY_CONF = CDS_DIR / "conf"  # SPARK_CONF_DIR with an archive: on the class path, empty
FINGERPRINT = CDS_DIR / "fingerprint"
# The JVM's CDS messages (a jar it skips while dumping, a mismatch it falls back on) stay off
# the job's output.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
JAVA_OPTION_KEYS = ("spark.driver.defaultJavaOptions", "spark.executor.defaultJavaOptions")


def spark_home() -> Path:
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def java_binary() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(java).resolve() if java and Path(java).exists() else None


def fingerprint() -> str:
    """What the archive depends on: the JVM, Spark's jars, sluice's JVM settings."""
    digest = hashlib.sha256()
    java = java_binary()
    digest.update(f"{java}:{java.stat().st_mtime_ns if java else 0}\n".encode())
    for jar in sorted((spark_home() / "jars").glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    digest.update(SPARK_DEFAULTS.read_bytes())
    return digest.hexdigest()


def archive_is_current() -> bool:
    if os.environ.get("SLUICE_CDS", "").lower() in ("off", "0", "false", "no"):
        return False
    try:
        return (ARCHIVE.is_file() and PROPERTIES.is_file() and EMPTY_CONF.is_dir()
                and FINGERPRINT.read_text().strip() == fingerprint())
    except OSError:
        return False


def submit_settings(env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(environment, spark-submit options) that give a spark-submit sluice's Spark settings:
    the archive's properties file and an empty SPARK_CONF_DIR when the archive is current,
    else SPARK_CONF_DIR=conf/. A SPARK_CONF_DIR already in `env` is the user's: kept, no
    archive. `PYSPARK_SUBMIT_ARGS` carries the same options to a SparkSession that a Python
    process starts itself."""
    env = dict(env)
    if "SPARK_CONF_DIR" in env or not archive_is_current():
        env.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
        return env, []
    options = ["--properties-file", str(PROPERTIES)]
    env["SPARK_CONF_DIR"] = str(EMPTY_CONF)
    env.setdefault("PYSPARK_SUBMIT_ARGS", " ".join([*options, "pyspark-shell"]))
    return env, options


def properties(extra_driver_options: str) -> str:
    """conf/spark-defaults.conf with log4j's file named (conf/ is no longer on the class path)
    and `extra_driver_options` added to the driver's JVM options."""
    lines, seen = [], set()
    for line in SPARK_DEFAULTS.read_text(encoding="utf-8").splitlines():
        key, _, value = line.strip().partition(" ")
        if key in JAVA_OPTION_KEYS:
            seen.add(key)
            line = f"{key}  {java_options(key, value.strip(), extra_driver_options)}"
        lines.append(line)
    for key in JAVA_OPTION_KEYS:
        if key not in seen:
            lines.append(f"{key}  {java_options(key, '', extra_driver_options)}")
    return "\n".join(lines) + "\n"


def java_options(key: str, value: str, extra_driver_options: str) -> str:
    log4j = f"-Dlog4j2.configurationFile={LOG4J.as_uri()}"
    driver = extra_driver_options if key.startswith("spark.driver.") else ""
    return " ".join(part for part in (value, log4j, driver) if part)


def warm_up_job(lake: Path) -> list[str]:
    """A filter run on the bundled Tatoeba slice: the classes a real job loads (SQL, Parquet,
    the Hive catalog, Arrow, the Python runner)."""
    data = REPO / "tests" / "data"
    return [str(REPO / "jobs" / "filter.py"), "--pair", "zh-en", "--corpus", "warmup",
            "--input", str(data / "tatoeba-zh-en.zh"), str(data / "tatoeba-zh-en.en"),
            "--lake", str(lake)]


def submit(options: list[str], job: list[str], env: dict[str, str]
           ) -> subprocess.CompletedProcess:
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", "local[2]", *options, *job]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=REPO)


def build(force: bool = False) -> int:
    """Dump the archive from a warm-up job, unless it is current. Exit 0 either way when the
    jobs can still run: without an archive they start as before."""
    if not force and archive_is_current():
        print(f"spark-cds: {ARCHIVE} is current")
        return 0
    if java_binary() is None:
        print("spark-cds: no java found: jobs start without a class archive", file=sys.stderr)
        return 0
    shutil.rmtree(CDS_DIR, ignore_errors=True)
    EMPTY_CONF.mkdir(parents=True)
    dump = CDS_DIR / "dump.conf"
    dump.write_text(properties(f"-XX:ArchiveClassesAtExit={ARCHIVE} {QUIET}"))
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "SPARK_HOME")}
    env |= {"SPARK_CONF_DIR": str(EMPTY_CONF), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="spark-cds-") as tmp:
        done = submit(["--properties-file", str(dump)], warm_up_job(Path(tmp) / "lake"), env)
    dump.unlink()
    if done.returncode != 0 or not ARCHIVE.is_file():
        shutil.rmtree(CDS_DIR, ignore_errors=True)
        print(f"spark-cds: the warm-up job failed (exit {done.returncode}); jobs start "
              f"without a class archive:\n{done.stderr[-2000:]}", file=sys.stderr)
        return 0
    PROPERTIES.write_text(properties(f"-XX:SharedArchiveFile={ARCHIVE} {QUIET}"))
    FINGERPRINT.write_text(fingerprint() + "\n")
    size = ARCHIVE.stat().st_size / 2**20
    print(f"spark-cds: {ARCHIVE} ({size:.0f} MiB) built in {time.monotonic() - start:.0f} s")
    return 0


PROBE = """from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.range(1000).selectExpr("sum(id)").collect()
spark.stop()
"""


def measure(runs: int = 2) -> None:
    """CPU seconds of the same small job with and without the archive, alternating."""
    probe = Path(tempfile.mkdtemp(prefix="spark-cds-probe-")) / "probe.py"
    probe.write_text(PROBE)
    job = [str(probe)]
    for _ in range(runs):
        for name, cds in (("conf dir", "off"), ("archive", "on")):
            env, options = submit_settings(
                {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
                | {"SLUICE_CDS": cds, "PYSPARK_PYTHON": sys.executable})
            before = os.times()
            done = submit(options, job, env)
            after = os.times()
            cpu = (after.children_user + after.children_system
                   - before.children_user - before.children_system)
            print(f"{name:>8}: {after.elapsed - before.elapsed:5.1f} s wall, {cpu:5.1f} CPU-s"
                  f"{'' if done.returncode == 0 else ' FAILED'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="store_true", help="build the archive unless current")
    ap.add_argument("--force", action="store_true", help="rebuild it even when current")
    ap.add_argument("--measure", action="store_true", help="a small job with and without it")
    args = ap.parse_args(argv)
    if args.build or args.force:
        return build(force=args.force)
    if args.measure:
        measure()
        return 0
    print(f"{ARCHIVE}: {'current' if archive_is_current() else 'missing or stale'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
