"""examples/schedule/: the crontab's job line run as cron runs it, the Airflow DAG run by a real
Airflow (`airflow dags test`, .venv-airflow), and the Kubernetes Spark operator's application
(which cannot run here) checked against the crontab.

The crontab's own command string is run with /bin/sh from a directory that is not the
deployment, in cron's near-empty environment (PATH=/usr/bin:/bin, no PYSPARK_* variables,
nothing of this test process's venv) plus the crontab's variable lines, SLUICE_HOME pointing at
a temporary deployment: links to this checkout's .venv, jobs, udfs, conf and models, and an
incoming/zh-en/ with one crawl dump of 300 real pairs. Three starts: the first commits the
dump, the second finds it up to date, the third (a new dump, the lake lock held by this test as
a running refresh holds it) exits 75 and writes nothing.
"""

from __future__ import annotations

import ast
import fcntl
import gzip
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import yaml
from integration_helpers import JIT_OPTS

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

REPO = Path(__file__).resolve().parent.parent
SCHEDULE = REPO / "examples" / "schedule"
DATA = REPO / "tests" / "data"
LINKED = (".venv", "jobs", "udfs", "conf", "models")
CRAWL_LINES = 300
VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


# -- the crontab ------------------------------------------------------------------------------
def parse_crontab(text: str) -> tuple[dict[str, str], list[tuple[list[str], str]]]:
    """Variable lines ({name: value}, quotes stripped as cron strips them) and job lines
    (five schedule fields, command), as cron reads a user crontab."""
    variables, jobs = {}, []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if m := VARIABLE.match(line):
            value = m.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            variables[m.group(1)] = value
            continue
        fields = line.split(None, 5)
        assert len(fields) == 6, f"not a job line (5 schedule fields + command): {line!r}"
        jobs.append((fields[:5], fields[5]))
    return variables, jobs


def job_arguments(command: str, variables: dict[str, str]) -> list[str]:
    """The arguments the command passes to the refresh job (`sluice ... refresh ARGS`), its
    variables substituted."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    start = tokens.index("refresh", tokens.index(".venv/bin/sluice")) + 1
    args = []
    for token in tokens[start:]:
        if set(token) <= set("();<>|&"):
            break
        args.append(re.sub(r"\$\{?(\w+)\}?", lambda m: variables[m.group(1)], token))
    return args


@pytest.fixture(scope="module")
def crontab() -> dict:
    variables, jobs = parse_crontab((SCHEDULE / "crontab").read_text(encoding="utf-8"))
    assert len(jobs) == 1, jobs
    (schedule, command), = jobs
    return {"variables": variables, "schedule": schedule, "command": command,
            "args": job_arguments(command, variables)}


def test_crontab_is_one_hourly_refresh(crontab: dict) -> None:
    variables, command = crontab["variables"], crontab["command"]
    assert variables["SLUICE_HOME"] == "/srv/sluice"
    assert variables["SLUICE_CONFIG"] == "conf/refresh-zh-en.yaml"
    minute, *rest = crontab["schedule"]
    assert minute.isdigit() and 0 <= int(minute) < 60 and rest == ["*"] * 4  # once an hour
    assert "%" not in command  # cron would turn it into a newline
    assert ".venv/bin/sluice --master 'local[*]' refresh" in command
    assert crontab["args"] == ["--config", "conf/refresh-zh-en.yaml"]
    assert (REPO / crontab["args"][1]).is_file()


# -- the crontab's command, run --------------------------------------------------------------
def java_home() -> str | None:
    """JAVA_HOME for a machine whose java is not in cron's PATH (a crontab there sets it)."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    if java and os.path.dirname(java) not in ("/usr/bin", "/bin"):
        return str(Path(java).resolve().parent.parent)
    return None


def cron_env(crontab: dict, home: Path) -> dict[str, str]:
    """What cron gives a job: HOME, LOGNAME, SHELL, PATH=/usr/bin:/bin and the crontab's
    variables; SLUICE_HOME is the test's deployment. SPARK_SUBMIT_OPTS (C1-only JIT,
    tests/conftest.py) only makes the JVMs cheaper."""
    env = {
        "HOME": os.environ.get("HOME", "/"),
        "LOGNAME": os.environ.get("LOGNAME", os.environ.get("USER", "root")),
        "SHELL": "/bin/sh",
        "PATH": "/usr/bin:/bin",
        **crontab["variables"],
        "SLUICE_HOME": str(home),
        "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", JIT_OPTS),
    }
    if java := java_home():
        env["JAVA_HOME"] = java
    return env


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, crontab: dict) -> dict:
    """SLUICE_HOME as a deployment (`make setup` done) with 300 crawl pairs dropped in, and a
    function running the crontab's command once: returns (exit status, what it added to the
    log)."""
    root = tmp_path_factory.mktemp("schedule").resolve()
    home = root / "sluice"
    home.mkdir()
    for name in LINKED:
        (home / name).symlink_to(REPO / name)
    crawl, wmt = home / "incoming/zh-en/crawl", home / "incoming/zh-en/wmt"
    crawl.mkdir(parents=True)
    wmt.mkdir(parents=True)
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(CRAWL_LINES)]
    (crawl / "anki-001.tsv").write_text("".join(lines), encoding="utf-8")
    log = home / crontab["variables"].get("SLUICE_LOG", "logs/refresh.log")
    env = cron_env(crontab, home)

    def run() -> tuple[int, str]:
        before = log.stat().st_size if log.exists() else 0
        done = subprocess.run(["/bin/sh", "-c", crontab["command"]], cwd=root, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.stdout == done.stderr == "", "the job line sends everything to its log"
        with open(log, encoding="utf-8") as f:
            f.seek(before)
            return done.returncode, f.read()

    return {"home": home, "lake": home / "lake", "crawl": crawl, "log": log, "run": run}


def crawl_rows(lake: Path) -> dict[str, int]:
    """Rows of corpus crawl in the bitext table, by outcome, read as any Parquet reader would."""
    table = ds.dataset(lake / "tables" / "bitext", format="parquet", partitioning="hive")
    rows = table.to_table(columns=["outcome"], filter=ds.field("corpus") == "crawl")
    outcomes = rows.column("outcome").to_pylist()
    return {o: outcomes.count(o) for o in set(outcomes)}


@pytest.fixture(scope="module")
def first_start(deployment: dict) -> tuple[int, str]:
    return deployment["run"]()


@pytest.fixture(scope="module")
def second_start(deployment: dict, first_start: tuple[int, str]) -> tuple[int, str]:
    return deployment["run"]()


@pytest.fixture(scope="module")
def busy_start(deployment: dict, second_start: tuple[int, str]) -> tuple[int, str]:
    """A new dump arrives while another refresh holds the lake lock: this test holds the
    flock on <lake>/locks/refresh.lock, as jobs/lake/lock.py's LocalLock does."""
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        more = [line for i, line in enumerate(f) if CRAWL_LINES <= i < CRAWL_LINES + 20]
    (deployment["crawl"] / "anki-002.tsv").write_text("".join(more), encoding="utf-8")
    lock = deployment["lake"] / "locks" / "refresh.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return deployment["run"]()
    finally:
        os.close(fd)


def test_cron_start_commits_the_new_dump(deployment: dict, first_start: tuple[int, str]) -> None:
    code, log = first_start
    assert code == 0, log[-4000:]
    assert log.startswith("== ")  # the job line's stamp before each start
    lake_uri = f"file://{deployment['lake']}"
    assert re.search(rf"committed run \S+ to {re.escape(lake_uri)} ", log), log[-4000:]
    rows = crawl_rows(deployment["lake"])
    assert sum(rows.values()) == CRAWL_LINES, rows  # every line: clean or rejected
    assert rows.get("clean", 0) > CRAWL_LINES // 2, rows
    assert not (deployment["lake"] / "locks" / "refresh.lock").read_text()  # released


def test_cron_start_again_is_up_to_date(deployment: dict, second_start: tuple[int, str]) -> None:
    code, log = second_start
    assert code == 0, log[-4000:]
    assert "up to date" in log, log[-4000:]
    assert "committed run" not in log
    assert sum(crawl_rows(deployment["lake"]).values()) == CRAWL_LINES


def test_overlapping_cron_start_exits_75(deployment: dict, busy_start: tuple[int, str]) -> None:
    code, log = busy_start
    assert code == 75, log[-4000:]
    assert "the lake is being refreshed" in log and "this refresh did nothing" in log, log
    assert "committed run" not in log
    assert sum(crawl_rows(deployment["lake"]).values()) == CRAWL_LINES  # the new dump waits


# -- the examples that do not run here -------------------------------------------------------
def keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def call_name(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")


AIRFLOW = REPO / ".venv-airflow" / "bin" / "airflow"  # scripts/install_airflow.sh (make test)


def test_airflow_dag_runs_the_crontab_command(crontab: dict) -> None:
    tree = ast.parse((SCHEDULE / "airflow_refresh_dag.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    (task,) = [keywords(c) for c in calls if call_name(c) == "BashOperator"]
    command = ast.literal_eval(task["bash_command"])
    default_spark = "${SLUICE_SPARK:---master local[*]}"
    cron = crontab["command"].split("; ")[1].split(";")[0]  # the sluice call in { ...; }
    cron = cron.replace("'local[*]'", "local[*]").replace('"$SLUICE_CONFIG"',
                                                          crontab["variables"]["SLUICE_CONFIG"])
    assert command.replace(default_spark, "--master local[*]") == cron


def airflow(deployment: dict, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"HOME": os.environ.get("HOME", "/"), "PATH": "/usr/bin:/bin",
           "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(SCHEDULE),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "SLUICE_HOME": str(deployment["home"]),
           "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", JIT_OPTS)}
    if java := java_home():
        env["JAVA_HOME"] = java
    return subprocess.run([str(AIRFLOW), *args], cwd=home, env=env, capture_output=True,
                          text=True, timeout=900)


def test_airflow_runs_the_dag_and_skips_it_while_the_lake_is_busy(
        deployment: dict, busy_start: tuple[int, str], tmp_path: Path) -> None:
    """A real Airflow (`airflow dags test`) runs the DAG: while another refresh holds the lake
    lock the task is skipped (exit 75, `skip_on_exit_code`) and nothing is written; then it
    commits the dump that waited."""
    assert AIRFLOW.is_file(), "no Airflow: scripts/install_airflow.sh .venv-airflow"
    assert airflow(deployment, tmp_path, "db", "migrate").returncode == 0
    lock = deployment["lake"] / "locks" / "refresh.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        busy = airflow(deployment, tmp_path, "dags", "test", "sluice_refresh_zh_en",
                       "2025-06-01T00:00:00+00:00")
    finally:
        os.close(fd)
    said = busy.stdout + busy.stderr
    assert busy.returncode == 0, said[-4000:]
    assert "exit code 75" in said and "new_state=skipped" in said, said[-4000:]
    assert sum(crawl_rows(deployment["lake"]).values()) == CRAWL_LINES  # nothing written
    done = airflow(deployment, tmp_path, "dags", "test", "sluice_refresh_zh_en",
                   "2025-06-01T01:00:00+00:00")
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    assert "committed run" in said, said[-4000:]
    assert sum(crawl_rows(deployment["lake"]).values()) == CRAWL_LINES + 20  # the new dump


def test_kubernetes_app_submits_the_crontab_job(crontab: dict) -> None:
    path = SCHEDULE / "refresh-scheduled-spark-application.yaml"
    app = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert app["kind"] == "ScheduledSparkApplication"
    spec = app["spec"]
    assert spec["schedule"] == "@hourly" and spec["concurrencyPolicy"] == "Forbid"
    template = spec["template"]
    assert template["type"] == "Python" and template["pythonVersion"] == "3"
    # The project's place in docker/Dockerfile's image: its WORKDIR, jobs/ and conf/ copied in.
    dockerfile = (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    (workdir,) = re.findall(r"^WORKDIR\s+(\S+)", dockerfile, re.M)
    assert re.search(r"^COPY jobs jobs$", dockerfile, re.M)
    assert re.search(r"^COPY conf conf$", dockerfile, re.M)
    assert template["mainApplicationFile"] == f"local://{workdir}/jobs/refresh.py"
    args = template["arguments"]
    assert args[:2] == crontab["args"]
    assert args[2] == "--lake" and args[3].startswith("s3a://") and len(args) == 4
    assert "driver" in template and "executor" in template
