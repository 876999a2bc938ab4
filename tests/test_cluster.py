"""Both jobs on a real Spark standalone cluster (pyspark's own scripts, loopback only, two
one-core workers), checked against `local[2]` runs of the same input and config: the cluster
run must really run there (the master's and workers' JSON status), honour spark-submit's
`--conf`, and write the same rows and scores. The translate model travels with `--archives`.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from integration_helpers import query_lake, spark_env, submit_to
from standalone_cluster import standalone_cluster

PAIR_INPUT = ("--pair", "zh-en", "--corpus", "tatoeba")
SCORERS = ("--set", "align.enabled=true", "--set", "embedding.enabled=true",
           "--set", "embedding.margin_k=4")
SHUFFLE = "spark.sql.shuffle.partitions"
# Executors of one core each, one per worker; small enough for two on this machine.
EXECUTORS = ("--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
             "--executor-memory", "1g", "--conf", f"{SHUFFLE}=5")
DECIDED = "SELECT {cols}, {reject} FROM sluice.bitext_{outcome} WHERE run_id = '{run}'"


def ok(done) -> str:
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def run_record(lake: Path, run_id: str) -> dict:
    query = f"SELECT spark, status FROM sluice.runs WHERE run_id = '{run_id}'"
    rows = query_lake(lake, {"r": query})
    ((spark, status),) = rows["r"]
    assert status == "succeeded"
    return json.loads(spark)


def decided_rows(lake: Path, run_id: str, columns: list[str]) -> list[list]:
    cols = ", ".join(columns)
    q = {o: DECIDED.format(outcome=o, cols=cols, run=run_id, reject=reject)
         for o, reject in [("clean", "NULL"), ("rejected", "reject_rule, dup_of")]}
    rows = query_lake(lake, q)
    return sorted(rows["clean"] + rows["rejected"])


# Every column but run_id: text, provenance and every score.
SCORE_COLUMNS = [
    "row_id", "file", "file_tgt", "line", "src", "tgt", "extra", "src_chars", "tgt_chars",
    "identical", "src_tokens", "tgt_tokens", "src_max_word_chars", "tgt_max_word_chars",
    "token_ratio", "src_char_word_ratio", "tgt_char_word_ratio", "src_punct_share",
    "tgt_punct_share", "bracket_mismatch", "url_email_html", "special_chars",
    "src_script_share", "tgt_script_share", "src_lang", "src_lang_prob", "tgt_lang",
    "tgt_lang_prob", "align_fwd_logprob", "align_rev_logprob", "align_coverage", "embed_cosine",
    "embed_margin", "pair", "corpus",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), spark_env()) as running:
        yield running


def test_filter_on_a_standalone_cluster_equals_local(cluster, tmp_path, data_dir: Path):
    files = (str(data_dir / "tatoeba-zh-en.zh"), str(data_dir / "tatoeba-zh-en.en"))
    args = (*PAIR_INPUT, "--input", *files, *SCORERS)
    local, remote = tmp_path / "local", tmp_path / "cluster"
    ok(submit_to("local[2]", "filter", *args, "--lake", str(local), "--run-id", "local-1"))
    out = ok(submit_to(cluster.url, "filter", *args, "--lake", str(remote), "--run-id",
                       "cluster-1", spark_args=EXECUTORS))
    assert "kept" in out

    facts = run_record(remote, "cluster-1")
    assert facts["master"] == cluster.url  # not silently local
    assert facts["conf"][SHUFFLE] == "5"  # spark-submit's --conf beats the config's 16
    assert run_record(local, "local-1")["master"] == "local[2]"
    (app,) = [a for a in cluster.status()["completedapps"] if a["id"] == facts["app_id"]]
    assert app["name"] == "sluice-filter"
    per_worker = [{e["appid"] for e in execs} for execs in cluster.worker_executors()]
    assert all(facts["app_id"] in apps for apps in per_worker), per_worker  # both workers

    local_rows = decided_rows(local, "local-1", SCORE_COLUMNS)
    remote_rows = decided_rows(remote, "cluster-1", SCORE_COLUMNS)
    assert len(local_rows) == 1500
    assert remote_rows == local_rows  # same split, same scores, bit for bit


def test_translate_on_a_standalone_cluster_with_archives(cluster, tmp_path, data_dir: Path,
                                                        tiny_multi_ct2: Path):
    lake = tmp_path / "lake"
    ok(submit_to("local[2]", "filter", "--lang", "zh", "--corpus", "tatoeba", "--input",
                 str(data_dir / "tatoeba-zh-en.zh"), "--lake", str(lake)))
    archive = tmp_path / "model.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tiny_multi_ct2, arcname=".")
    stream = ("--direction", "zh-en", "--method", "beam", "--role", "forward", "--limit", "80",
              "--lake", str(lake))
    ok(submit_to("local[2]", "translate", "--model", str(tiny_multi_ct2), *stream,
                 "--run-id", "local-bt"))
    # The documented cluster form: the model shipped as an archive, named by its alias. The
    # driver runs elsewhere (another working directory) to prove nothing is found by accident.
    elsewhere = tmp_path / "driver"
    elsewhere.mkdir()
    ok(submit_to(cluster.url, "translate", "--model", "tiny-ct2", *stream, "--run-id",
                 "cluster-bt", spark_args=(*EXECUTORS, "--archives", f"{archive}#tiny-ct2"),
                 cwd=elsewhere))
    assert run_record(lake, "cluster-bt")["master"] == cluster.url

    cols = "source_row_id, src, tgt, hypothesis, score, model"
    rows = query_lake(lake, {r: f"SELECT {cols} FROM sluice.synthetic WHERE run_id = '{r}' "
                                "ORDER BY source_row_id" for r in ("local-bt", "cluster-bt")})
    assert len(rows["local-bt"]) > 40
    assert rows["cluster-bt"] == rows["local-bt"]


def test_a_model_that_is_nowhere_fails_fast_on_the_driver(cluster, tmp_path):
    done = submit_to(cluster.url, "translate", "--model", "no-such-model", "--direction", "zh-en",
                     "--lake", str(tmp_path / "lake"), spark_args=EXECUTORS)
    assert done.returncode == 2
    said = done.stdout + done.stderr  # spark-submit passes the driver's stderr to stdout
    (line,) = [x for x in said.splitlines() if x.startswith("sluice: error:")]
    assert "no-such-model not found" in line and "--archives" in line
