"""Run the real `spark-submit` and `spark-sql` against a lake, as a user would."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import yaml

from jobs.lake.session import embedded_catalog_conf

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
T, U = TypeVar("T"), TypeVar("U")
# The tests' JVMs compile with C1 only (conftest.py says why). C1-only also shrinks the default
# code cache from 240 MB to 48 MB, which a refresh chaining a selection in one driver filled
# ("Out of space in CodeCache for method handle intrinsic", one CI run): keep the 240 MB.
# No bytecode verification of the jars' classes either (Spark's own, loaded afresh by every
# cold JVM): a cold Tatoeba filter job 38.7 -> 36.4 CPU-s (docs/testing.md). Tests only: a
# user's JVM verifies what it loads.
JIT_OPTS = ("-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m "
            "-XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote")


def spark_default(key: str) -> str:
    """A setting of conf/spark-defaults.conf, which Spark reads there (SPARK_CONF_DIR)."""
    for line in (REPO / "conf" / "spark-defaults.conf").read_text().splitlines():
        if line.split(None, 1)[:1] == [key]:
            return line.split(None, 1)[1].strip()
    raise KeyError(key)


def spark_env() -> dict[str, str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_CONF_DIR=str(REPO / "conf"))
    env.pop("SPARK_HOME", None)
    return env


def spark_submit(*args: str, cwd: Path = REPO, job: str = "filter",
                 env: dict[str, str] | None = None, cold: bool = False
                 ) -> subprocess.CompletedProcess:
    """`spark-submit --master local[2] jobs/JOB.py ARGS` (`submit_script`)."""
    return submit_script(REPO / f"jobs/{job}.py", *args, env=env, cwd=cwd, cold=cold)


def submit_script(script: Path, *args: str, conf: dict[str, str] | None = None,
                  env: dict[str, str] | None = None, cwd: Path = REPO, cold: bool = False
                  ) -> subprocess.CompletedProcess:
    """`[ENV] spark-submit --master local[2] [--conf K=V ...] SCRIPT ARGS`, run by this
    worker's warm driver (tests/warm_spark.py: the same script, argv, settings, working
    directory, output and exit code, in a JVM that ran jobs before); `cold`
    (SLUICE_TESTS_COLD=1: every job) by spark-submit itself, in a process of its own. `env`:
    variables the job's Python reads (PYSPARK_PYTHON), over the tests' own; one the JVM reads
    at start needs `cold`."""
    conf, env = conf or {}, env or {}
    if not (cold or os.environ.get("SLUICE_TESTS_COLD")):
        return WARM.submit(str(script), list(args), cwd, conf=conf, env=env)
    settings = [x for key, value in conf.items() for x in ("--conf", f"{key}={value}")]
    cmd = [str(BIN / "spark-submit"), "--master", "local[2]", *settings, str(script), *args]
    return subprocess.run(
        cmd, cwd=cwd, env=spark_env() | env, capture_output=True, text=True, timeout=900
    )


class WarmDriver:
    """This worker's tests/warm_spark.py, started on first use; jobs run one at a time (a
    second caller waits its turn), each with spark-submit's timeout. Stopped at exit: its
    stdin closes, and the JVM goes with it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        logs = Path(tempfile.mkdtemp(prefix="sluice-warm-spark-"))
        env = dict(spark_env(), PYTHONPATH=str(REPO),
                   PYSPARK_SUBMIT_ARGS="--master local[2] pyspark-shell")
        return subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("warm_spark.py")), str(logs)],
            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def submit(self, script: str, argv: list[str], cwd: Path, timeout: float = 900,
               conf: dict[str, str] | None = None, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess:
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self.process = self.start()
            request = {"script": script, "argv": argv, "cwd": str(cwd), "conf": conf or {},
                       "env": env or {}}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            line = self.process.stdout.readline() if ready else ""
            if not line:  # timed out, or the driver died: the next job gets a new one
                self.process.kill()
                self.process.wait()
                self.process = None
                raise subprocess.TimeoutExpired([script, *argv], timeout) if not ready else \
                    RuntimeError(f"the warm Spark driver died running {script} {argv}")
            answer = json.loads(line)
            return subprocess.CompletedProcess([script, *argv], answer["code"],
                                               answer["stdout"], answer["stderr"])


WARM = WarmDriver()


def spark_sql(lake: Path, query: str) -> list[list[str]]:
    """Rows of a query run by a fresh `spark-sql` shell on the lake's catalog."""
    conf = [x for k, v in embedded_catalog_conf(str(lake)).items() for x in ("--conf", f"{k}={v}")]
    cmd = [str(BIN / "spark-sql"), "--master", "local[1]", *conf, "-S", "-e", query]
    done = subprocess.run(
        cmd, cwd=lake, env=spark_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [line.split("\t") for line in done.stdout.splitlines() if line.strip()]


def query_lake(lake: Path, queries: dict[str, str]) -> dict[str, list[list]]:
    """Named queries answered by one new Spark session on the lake (see query_lake.py), in this
    worker's warm driver (`spark_submit`)."""
    script = Path(__file__).with_name("query_lake.py")
    argv = [str(lake), json.dumps(queries)]
    if os.environ.get("SLUICE_TESTS_COLD"):
        done = subprocess.run([sys.executable, str(script), *argv], cwd=REPO,
                              env=dict(spark_env(), PYTHONPATH=str(REPO)),
                              capture_output=True, text=True, timeout=300)
    else:
        done = WARM.submit(str(script), argv, REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("JSON:"))
    return json.loads(line.removeprefix("JSON:"))


def read_lake(lake: Path, queries: dict[str, str], database: str = "sluice"
              ) -> dict[str, list[list]]:
    """Named queries over the lake's committed Parquet files with duckdb, no JVM (`sluice
    query`, jobs/lake/plain_query.py): for tests that check rows, not what the catalog shows
    (query_lake; tests/test_lake_readers.py checks that the two agree). Tables, not the
    catalog's views: `bitext WHERE outcome = 'clean'` for `bitext_clean`."""
    from jobs.lake.plain_query import connect

    con = connect(Path(lake), database)
    try:
        return {name: [list(row) for row in con.execute(q).fetchall()]
                for name, q in queries.items()}
    finally:
        con.close()


def submit_to(master: str, job: str, *args: str, spark_args: tuple[str, ...] = (),
              cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real `spark-submit --master MASTER [spark_args] jobs/JOB.py [args]`."""
    cmd = [str(BIN / "spark-submit"), "--master", master, *spark_args,
           str(REPO / f"jobs/{job}.py"), *args]
    return subprocess.run(cmd, cwd=cwd, env=env or spark_env(), capture_output=True, text=True,
                          timeout=900)


def alongside(background: Callable[[], T], foreground: Callable[[], U]) -> tuple[T, U]:
    """`background` in a thread while `foreground` runs here; both results. For independent
    work (a spark-submit waits for its subprocess without holding the GIL) that would leave
    one of the two cores idle if run one after the other. The thread is always waited for,
    also when `foreground` fails."""
    with ThreadPoolExecutor(1) as pool:
        later = pool.submit(background)
        now = foreground()
        return later.result(), now


# The back-/forward-translation lake of test_translate_job.py, also the local reference of
# test_cluster.py's translate run (conftest.py's `translate_lake`, built once per session).
BT_STREAMS = [
    {"name": "ft-beam", "direction": "zh-en", "role": "forward", "method": "beam"},
    {"name": "ft-beam-again", "direction": "zh-en", "role": "forward", "method": "beam"},
    {"name": "ft-greedy", "direction": "zh-en", "role": "forward", "method": "greedy"},
    {"name": "ft-greedy-spm", "direction": "zh-en", "role": "forward", "method": "greedy"},
    {"name": "bt-sampling", "direction": "en-zh", "method": "sampling", "weight": 2},
    {"name": "bt-sampling-seed2", "direction": "en-zh", "method": "sampling", "weight": 2,
     "seed": 2},
    {"name": "bt-sampling-again", "direction": "en-zh", "method": "sampling", "weight": 2},
    {"name": "bt-noised", "direction": "en-zh", "method": "noised_beam"},
]
BT_MAX_IN, BT_MAX_OUT = 24, 40
BT_BAD_LINES = [
    "",
    "see http://example.com for more details on this",
    "Добрый день, как дела у вас сегодня?",
]
# The second translate run (bt2), from flags: also what test_cluster.py runs on the cluster.
BT_FLAGS_STREAM = ("--direction", "zh-en", "--method", "beam", "--role", "forward",
                   "--limit", "80", "--round", "2")


def ok_submit(job: str, *args: str) -> str:
    done = spark_submit(*args, job=job)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def build_translate_lake(root: Path, data_dir: Path, get_model: Callable[[], Path]) -> dict:
    """Monolingual Tatoeba text into mono_clean (en: 500 lines and three bad ones; zh: all
    1,500), the streams of BT_STREAMS decoded by one run (bt1) from a config, a second run
    (bt2) from flags, and bt1's synthetic pairs fed back through the filter job (fb1); then
    every table the tests look at, read once. `get_model` (the tiny model, trained on first
    use) runs while the two filter runs do: neither needs the other."""
    from jobs.translation.job import model_id

    lake = root / "lake"
    en = root / "mono.en"
    en_lines = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:500]
    en.write_text("\n".join(en_lines + BT_BAD_LINES) + "\n", encoding="utf-8")
    zh = data_dir / "tatoeba-zh-en.zh"

    def monolingual() -> str:
        out = ok_submit("filter", "--lang", "en", "--corpus", "tatoeba", "--input", str(en),
                        "--lake", str(lake))
        ok_submit("filter", "--lang", "zh", "--corpus", "tatoeba", "--input", str(zh),
                  "--lake", str(lake))
        return out

    mono_en, model = alongside(monolingual, get_model)
    out = {"lake": lake, "mono_en": mono_en}
    streams = []
    for s in BT_STREAMS:
        stream = {**s, "model": str(model), "input": {"limit": 60 * s.get("weight", 1)}}
        if s["name"] == "ft-greedy-spm":  # the generic tokenizer: any CTranslate2 model
            stream["tokenizer"] = {"kind": "sentencepiece",
                                   "source_model": str(model / "spm.model"),
                                   "source_prefix": ["<2en>"]}
        streams.append(stream)
    conf = root / "bt.yaml"
    conf.write_text(yaml.safe_dump({
        "lake": {"root": str(lake)}, "balance": True,
        "decoding": {"max_input_tokens": BT_MAX_IN, "max_output_tokens": BT_MAX_OUT},
        "streams": streams,
    }), encoding="utf-8")
    out["translate"] = ok_submit("translate", "--config", str(conf), "--run-id", "bt1")
    out["flags"] = ok_submit("translate", "--model", str(model), *BT_FLAGS_STREAM,
                             "--lake", str(lake), "--run-id", "bt2")
    out["feedback"] = ok_submit(
        "filter", "--pair", "en-zh", "--corpus", "bt-sampling-r1", "--format", "table",
        "--input", "sluice.synthetic", "--where", "stream = 'bt-sampling' AND run_id = 'bt1'",
        "--lake", str(lake), "--run-id", "fb1")
    synth_cols = ("stream, role, method, params, model, round, direction, run_id, src, tgt, "
                  "hypothesis, score, src_tokens, tgt_tokens, source_row_id, source_corpus, "
                  "row_id")
    out["rows"] = query_lake(lake, {
        "synthetic": f"SELECT {synth_cols}, NULL FROM sluice.synthetic",
        "synthetic_rejected": f"SELECT {synth_cols}, reject_reason "
                              "FROM sluice.synthetic_rejected",
        "stats": "SELECT stream, direction, role, method, model, available, selected, "
                 "synthetic, rejected, rejected_by, run_id FROM sluice.translate_stats",
        "mono": "SELECT lang, row_id, text FROM sluice.mono_clean",
        "mono_rejected": "SELECT lang, text, reject_rule FROM sluice.mono_rejected",
        "mono_stats": "SELECT pair, sum(rows_rejected), max(rows_in) FROM sluice.filter_stats "
                      "WHERE run_id != 'fb1' GROUP BY pair",
        "runs": "SELECT run_id, job, status FROM sluice.runs",
        "fb_stats": "SELECT max(rows_in), sum(rows_rejected) FROM sluice.filter_stats "
                    "WHERE run_id = 'fb1'",
        "fb_clean": "SELECT src, tgt, extra FROM sluice.bitext_clean WHERE corpus = "
                    "'bt-sampling-r1'",
    })
    out["model_id"] = model_id(str(model))
    return out
