"""The GPU scheduling path without a GPU (issue 36): a real standalone cluster whose workers
offer one GPU each from a fake discovery script, and the filter job with the embedding scorer
on it. The embed stage runs under a resource profile of its own (one whole GPU and the cores
per GPU for each task), the CPU stages under the job's default (no GPU): Spark's event log
says which stage ran under which profile, and the embed stage's tasks fail loudly if Spark
gives them no GPU (udfs/embed.py `score_partition`), so the run succeeding means each got
one. The encoder (USE, numpy) computes on the CPU whatever it is given. The run has the
learned pair_score on as well (the model shipped for USE, with English fluency): the English
LM reaches the executors as the job ships it, and pair_score decides every row it scores. And
the cross-encoder (the shipped model on the e5-small checkpoint, computing on the CPU): its
tokenizing UDF runs in a CPU stage, its scoring (`mapInArrow`) under the GPU profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from integration_helpers import JIT_OPTS, read_lake, submit_to

from jobs.filtering.pair_scores import embed_profile
from udfs.cross_encoder_model import CrossEncoderCard

pytestmark = pytest.mark.integration
DATA = Path(__file__).resolve().parent / "data"
SHIPPED_CROSS_ENCODER = DATA.parent.parent / "conf" / "cross_encoder" / "paracrawl-e5-small"


def events(log_dir: Path) -> list[dict]:
    (log,) = [p for p in log_dir.iterdir() if p.is_file()]
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def scope(stage: dict) -> str:
    return " ".join(str(r.get("Scope")) for r in stage["RDD Info"])


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
        "--set", "cross_encoder.enabled=true", "--set", "cross_encoder.device=cpu",
        spark_args=spark_args)
    assert done.returncode == 0, done.stderr[-4000:]

    log = events(log_dir)
    profiles = {e["Resource Profile Id"]: e for e in log
                if e["Event"] == "SparkListenerResourceProfileAdded"}
    gpu_profiles = {pid for pid, e in profiles.items()
                    if e["Task Resource Requests"].get("gpu", {}).get("Amount") == 1.0}
    assert 1 <= len(gpu_profiles) <= 2, profiles  # the embed and cross-encoder stages
    stages = [e["Stage Info"] for e in log if e["Event"] == "SparkListenerStageSubmitted"]
    on_gpu = [s for s in stages if s["Resource Profile Id"] in gpu_profiles]
    scored_by = {name: [s for s in on_gpu if f'"name":"{name}"' in scope(s)]
                 for name in ("MapInPandas", "MapInArrow")}
    assert scored_by["MapInPandas"] and scored_by["MapInArrow"], [scope(s) for s in on_gpu]
    assert len(on_gpu) == len(scored_by["MapInPandas"]) + len(scored_by["MapInArrow"])
    tokenizing = [s for s in stages if '"name":"ArrowEvalPython"' in scope(s)]
    assert tokenizing and not set(map(id, tokenizing)) & set(map(id, on_gpu))
    assert len(on_gpu) < len(stages)  # the CPU stages: the default profile, no GPU
    assert {s["Resource Profile Id"] for s in stages} - gpu_profiles == {0}

    rows = read_lake(lake, {"scored": "SELECT count(embed_cosine), count(*) FROM "
                                      "sluice.bitext WHERE outcome = 'clean'"})
    ((scored, clean),) = rows["scored"]
    assert scored == clean > 1000
    # pair_score, from the embedding cosine and the English LM scored on the executors: on
    # every row the rules kept, and the only judge of them (its threshold stored per row).
    # The cross-encoder scores every row the embed stage did and, like the cosine, rejects
    # nothing: the pair_score decides alone (its rows under the model's own threshold stay).
    threshold = CrossEncoderCard.read(str(SHIPPED_CROSS_ENCODER)).threshold
    rows = read_lake(lake, {"judged": (
        "SELECT count(pair_score), count(english_lm), count(pair_score_threshold), "
        "count_if(reject_rule = 'pair_score'), "
        "count_if(reject_rule = 'pair_score') = count_if(pair_score < pair_score_threshold), "
        "count_if(reject_rule IN ('embed_cosine', 'embed_margin')), "
        "count(embed_cosine), count(cross_encoder), count_if(reject_rule = 'cross_encoder'), "
        f"count_if(cross_encoder < {threshold}) "
        "FROM sluice.bitext")})
    ((judged, fluency, thresholds, cut, cut_by_threshold, cut_by_embedding, embedded,
      crossed, cross_cut, under_cross_threshold),) = rows["judged"]
    assert crossed == embedded >= scored and cross_cut == 0 < under_cross_threshold
    assert judged == fluency == thresholds == crossed
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
