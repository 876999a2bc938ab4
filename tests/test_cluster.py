"""Both jobs on a real Spark standalone cluster (pyspark's own scripts, loopback only, two
one-core workers), checked against `local[2]` runs of the same input and config: the cluster
run must really run there (the master's and workers' JSON status), honour spark-submit's
`--conf`, and write the same rows and scores. The translate model travels with `--archives`.

The filter job's local[2] run is shared with test_determinism.py (conftest.py's
`scored_tatoeba`, in the test session's JVM). The translate job's cluster run is in
test_translate_job.py, beside the local run it is compared with (one lake, built once).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from integration_helpers import (
    JIT_OPTS,
    alongside,
    read_lake,
    spark_default,
    spark_submit,
    submit_to,
)

from jobs.filtering.config import load_config

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

SHUFFLE = "spark.sql.shuffle.partitions"
# Executors of one core each, one per worker; small enough for two on this machine. Their
# JVMs compile with C1 only, as the tests' other JVMs do (conftest.py).
EXECUTORS = ("--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
             "--executor-memory", "1g", "--conf", f"{SHUFFLE}=5",
             "--conf", f"spark.executor.extraJavaOptions={JIT_OPTS}")
DECIDED = ("SELECT {cols}, {reject} FROM {db}.bitext WHERE outcome = '{outcome}' "
           "AND run_id = '{run}'")
RUN = "SELECT spark, status FROM {db}.runs WHERE run_id = '{run}'"


def ok(done) -> str:
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def run_record(rows: list[list]) -> dict:
    """The `spark` facts of a succeeded run, from the rows of RUN."""
    ((spark, status),) = rows
    assert status == "succeeded"
    return json.loads(spark)


def decided_queries(db: str, run_id: str, columns: list[str]) -> dict[str, str]:
    """Named queries: the run record, and the run's clean and rejected rows."""
    cols = ", ".join(columns)
    q = {o: DECIDED.format(outcome=o, cols=cols, db=db, run=run_id, reject=reject)
         for o, reject in [("clean", "NULL"), ("rejected", "reject_rule, dup_of")]}
    return {"run": RUN.format(db=db, run=run_id), **q}


def committed(lake: Path, db: str, queries: dict[str, str]) -> dict[str, list[list]]:
    """The answers from the lake's committed Parquet files (duckdb, no JVM: read_lake), the
    local and the cluster lake read alike, so their rows compare bit for bit. The cluster
    lake's catalog is read by the re-decide and the report below."""
    return read_lake(lake, queries, database=db)


# Every column but run_id: text, provenance and every score.
SCORE_COLUMNS = [
    "row_id", "file", "file_tgt", "line", "src", "tgt", "extra", "src_chars", "tgt_chars",
    "identical", "src_tokens", "tgt_tokens", "src_max_word_chars", "tgt_max_word_chars",
    "token_ratio", "src_char_word_ratio", "tgt_char_word_ratio", "src_punct_share",
    "tgt_punct_share", "bracket_mismatch", "copied_words", "copy_share", "url_email_html",
    "special_chars",
    "src_script_share", "tgt_script_share", "src_lang", "src_lang_prob", "src_lang_probs",
    "tgt_lang", "tgt_lang_prob", "tgt_lang_probs", "align_fwd_logprob", "align_rev_logprob",
    "align_coverage", "embed_cosine", "embed_margin", "pair", "corpus",
]


@pytest.fixture(scope="module")
def cluster(standalone):
    return standalone  # the session's cluster (conftest.py), shared with the GPU test


def test_filter_on_a_standalone_cluster_equals_local(cluster, tmp_path, request,
                                                    scored_config: Path):
    """conftest.py's `scored_config` (1,500 Tatoeba pairs, both pair scorers) submitted to the
    cluster; its local[2] run (`scored_tatoeba`, in the test session's JVM) is made meanwhile
    if no other test made it yet: the two are independent and overlap on two cores."""
    remote = tmp_path / "cluster"
    done, local = alongside(
        lambda: submit_to(cluster.url, "filter", "--config", str(scored_config), "--lake",
                          str(remote), "--run-id", "cluster-1", spark_args=EXECUTORS),
        lambda: request.getfixturevalue("scored_tatoeba"))
    assert "kept" in ok(done)
    db = local["database"]
    remote_rows = committed(remote, db, decided_queries(db, "cluster-1", SCORE_COLUMNS))
    local_rows = committed(local["lake"], db, decided_queries(db, local["run_id"], SCORE_COLUMNS))

    facts = run_record(remote_rows["run"])
    assert facts["master"] == cluster.url  # not silently local
    assert facts["conf"][SHUFFLE] == "5"  # spark-submit's --conf beats the config's 16
    assert run_record(local_rows["run"])["master"] == "local[2]"
    (app,) = [a for a in cluster.status()["completedapps"] if a["id"] == facts["app_id"]]
    assert app["name"] == "sluice-filter"
    per_worker = [{e["appid"] for e in execs} for execs in cluster.worker_executors()]
    assert all(facts["app_id"] in apps for apps in per_worker), per_worker  # both workers
    # conf/spark-defaults.conf (installed by `make setup`) reaches the executors' JVMs too,
    # next to spark-submit's own extraJavaOptions.
    wanted = spark_default("spark.executor.defaultJavaOptions")
    commands = cluster.executor_commands()
    assert commands and all(wanted in c and JIT_OPTS.split()[0] in c for c in commands)

    local_decided = sorted(local_rows["clean"] + local_rows["rejected"])
    remote_decided = sorted(remote_rows["clean"] + remote_rows["rejected"])
    assert len(local_decided) == 1500
    assert remote_decided == local_decided  # same split, same scores, bit for bit

    # Issue 16 on the cluster: re-decided with a looser margin (the command), then
    # reported from the cluster's lake. Every score stays; rows between the margins come back.
    ok(submit_to(cluster.url, "filter", "--redecide", "cluster-1", "--lake", str(remote),
                 "--run-id", "cluster-2", "--set", f"lake.database={db}",
                 "--set", "embedding.min_margin=1.02", spark_args=EXECUTORS))
    columns = ["row_id", "embed_cosine", "embed_margin"]
    again = committed(remote, db, decided_queries(db, "cluster-2", columns))
    assert run_record(again["run"])["master"] == cluster.url
    before = {r[0]: r for r in remote_rows["clean"] + remote_rows["rejected"]}
    after = {r[0]: r for r in again["clean"] + again["rejected"]}
    assert set(after) == set(before)
    cosine, margin = SCORE_COLUMNS.index("embed_cosine"), SCORE_COLUMNS.index("embed_margin")
    assert all(list(after[k][1:3]) == [before[k][cosine], before[k][margin]]
               for k in after)  # stored, not recomputed
    # A row that reached the embedding scorer is decided by its stored cosine and the new
    # margin; every other keeps its rule and dup_of (a rule before the scorer, align's).
    rule = len(SCORE_COLUMNS)  # the rows' reject_rule, then (rejected) dup_of
    min_cosine = load_config(None, [], {"pair": "zh-en"}).embedding.chosen.min_cosine_for("zh-en")
    readmitted = 0
    for k, r in before.items():
        if r[rule] in (None, "embed_cosine", "embed_margin"):
            want = ("embed_cosine" if r[cosine] < min_cosine
                    else "embed_margin" if r[margin] < 1.02 else None)
            assert after[k][3] == want, k
            readmitted += r[rule] == "embed_margin" and want is None
        else:
            assert list(after[k][3:]) == list(r[rule:]), k
    assert readmitted > 0 and len(again["clean"]) > len(remote_rows["clean"])
    report = tmp_path / "report.html"
    # The report only reads the lake: the warm driver's local[2] (a cluster run costs a driver
    # and two executor JVMs more, and the cluster's own part is the re-decide above).
    ok(spark_submit("--lake", str(remote), "--set", f"lake.database={db}", "--run-id",
                    "cluster-2", "--out", str(report), job="report"))
    assert "cluster-2" in report.read_text(encoding="utf-8")


def test_a_model_that_is_nowhere_fails_fast_on_the_driver(cluster, tmp_path):
    done = submit_to(cluster.url, "translate", "--model", "no-such-model", "--direction", "zh-en",
                     "--lake", str(tmp_path / "lake"), spark_args=EXECUTORS)
    assert done.returncode == 2
    said = done.stdout + done.stderr  # spark-submit passes the driver's stderr to stdout
    (line,) = [x for x in said.splitlines() if x.startswith("sluice: error:")]
    assert "no-such-model not found" in line and "--archives" in line
