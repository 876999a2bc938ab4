"""The GPU scheduling path without a GPU (issue 36): a real standalone cluster whose workers
offer one GPU each from a fake discovery script, and the filter job with the embedding scorer
on it. The embed stage runs under a resource profile of its own (one whole GPU and the cores
per GPU for each task), the CPU stages under the job's default (no GPU): Spark's event log
says which stage ran under which profile, and the embed stage's tasks fail loudly if Spark
gives them no GPU (udfs/embed.py `score_partition`), so the run succeeding means each got
one. The encoder (USE, numpy) computes on the CPU whatever it is given. The run has the
learned pair_score on as well (the model shipped for USE, with English fluency): the English
LM reaches the executors as the job ships it, and pair_score decides every row it scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from integration_helpers import JIT_OPTS, read_lake, submit_to

from jobs.filtering.pair_scores import embed_profile

pytestmark = pytest.mark.integration
DATA = Path(__file__).resolve().parent / "data"


def events(log_dir: Path) -> list[dict]:
    (log,) = [p for p in log_dir.iterdir() if p.is_file()]
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_the_embed_stage_takes_whole_gpus_and_the_cpu_stages_none(standalone,
                                                                  tmp_path: Path) -> None:
    script = standalone.gpu_script  # the session cluster's workers offer one fake GPU each
    log_dir, lake = tmp_path / "events", tmp_path / "lake"
    log_dir.mkdir()
    spark_args = (
        "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
        "--executor-memory", "1g", "--conf", f"spark.executor.extraJavaOptions={JIT_OPTS}",
        "--conf", "spark.executor.resource.gpu.amount=1",
        "--conf", f"spark.executor.resource.gpu.discoveryScript={script}",
        "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={log_dir}",
        # one plain JSON file (Spark 4 rolls and compresses event logs by default)
        "--conf", "spark.eventLog.rolling.enabled=false",
        "--conf", "spark.eventLog.compress=false",
    )
    done = submit_to(
        standalone.url, "filter", "--pair", "zh-en", "--corpus", "tatoeba", "--input",
        str(DATA / "tatoeba-zh-en.zh"), str(DATA / "tatoeba-zh-en.en"), "--lake", str(lake),
        "--set", "embedding.enabled=true", "--set", "pair_score.enabled=true",
        spark_args=spark_args)
    assert done.returncode == 0, done.stderr[-4000:]

    log = events(log_dir)
    profiles = {e["Resource Profile Id"]: e for e in log
                if e["Event"] == "SparkListenerResourceProfileAdded"}
    gpu_profiles = {pid for pid, e in profiles.items()
                    if e["Task Resource Requests"].get("gpu", {}).get("Amount") == 1.0}
    assert len(gpu_profiles) == 1, profiles
    stages = [e["Stage Info"] for e in log if e["Event"] == "SparkListenerStageSubmitted"]
    on_gpu = [s for s in stages if s["Resource Profile Id"] in gpu_profiles]
    scopes = [" ".join(str(r.get("Scope")) for r in s["RDD Info"]) for s in on_gpu]
    assert on_gpu and all('"name":"MapInPandas"' in scope for scope in scopes), scopes
    assert len(on_gpu) < len(stages)  # the CPU stages: the default profile, no GPU
    assert {s["Resource Profile Id"] for s in stages} - gpu_profiles == {0}

    rows = read_lake(lake, {"scored": "SELECT count(embed_cosine), count(*) FROM "
                                      "sluice.bitext WHERE outcome = 'clean'"})
    ((scored, clean),) = rows["scored"]
    assert scored == clean > 1000
    # pair_score, from the embedding cosine and the English LM scored on the executors: on
    # every row the rules kept, and the only judge of them (its threshold stored per row).
    rows = read_lake(lake, {"judged": (
        "SELECT count(pair_score), count(english_lm), count(pair_score_threshold), "
        "count_if(reject_rule = 'pair_score'), "
        "count_if(reject_rule = 'pair_score') = count_if(pair_score < pair_score_threshold), "
        "count_if(reject_rule IN ('embed_cosine', 'embed_margin')) FROM sluice.bitext")})
    ((judged, fluency, thresholds, cut, cut_by_threshold, cut_by_embedding),) = rows["judged"]
    assert judged == fluency == thresholds >= scored
    assert 0 < cut <= judged - clean and cut_by_threshold is True
    assert cut_by_embedding == 0


def test_the_profile_is_asked_only_where_executors_have_gpus_and_tasks_none(spark) -> None:
    assert embed_profile({}) is None
    assert embed_profile({"spark.executor.resource.gpu.amount": "1",
                          "spark.task.resource.gpu.amount": "0.125"}) is None
    profile = embed_profile({"spark.executor.resource.gpu.amount": "2",
                             "spark.executor.cores": "16"})
    assert profile.taskResources["gpu"].amount == 1.0
    assert profile.taskResources["cpus"].amount == 8  # the executor's cores per GPU
