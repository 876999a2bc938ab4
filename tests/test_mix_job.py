"""jobs/mix.py end to end, run as spark-submit runs it (in the tests' warm driver,
docs/testing.md): a lake of real Tatoeba pairs in
three directions (zh-en, ru-en, en-zh swapped) plus back-translated rows
(tests/data/mix/seed_lake.py, one job instead of a filter run per pair), a test set
registered with --register-eval, and one mixture: temperature 5, a synthetic share, a noised
fine-tuning share, the registered set as a fixed count, two curriculum stages. The same
mixture made before on other partitioning with three stages: the same rows, its third
stage emptied.
The parts: tests/test_mix_units.py."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from integration_helpers import REPO, spark_submit, submit_script

from jobs.mixing.config import load_mix_config
from jobs.mixing.decontaminate import contains, normalize, tokens
from jobs.mixing.sampling import plan

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

DATA = REPO / "tests" / "data"
CONFIG = """extends: {repo}/conf/mix-defaults.yaml
name: multi
lake: {{root: {lake}}}
total: 3000
temperature: 5.0
synthetic_share_by_direction: {{zh-en: 0.3}}
sources:
  - {{name: zh-en, table: bitext_clean, direction: zh-en}}
  - {{name: ru-en, table: bitext_clean, direction: ru-en}}
  - {{name: en-zh, table: bitext_clean, direction: en-zh, swap: true, where: "line <= 150"}}
  - {{name: bt, table: synthetic, direction: zh-en, swap: true, where: "method = 'sampling'"}}
  - {{name: ft, table: synthetic, direction: en-zh, share: 0.1,
      noise: {{delete: 0.2, filler: 0.2, swap: 0.2}}}}
  - {{name: dev, eval_set: tatoeba-dev, direction: zh-en, count: 200}}
  - {{name: ru-ft, eval_set: ru-dev, direction: ru-en, count: 50,
      noise: {{delete: 0.3, filler: 0.3, swap: 0.3}}}}
eval_sets:   # registered by the run itself; role dev: fine-tuning data, not kept out
  - {{name: ru-dev, pair: ru-en, files: [{data}/tatoeba-ru-en.ru, {data}/tatoeba-ru-en.en],
      role: dev}}
stages: {{column: embed_cosine, quantiles: [0.0, 0.5]}}
"""


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def read(lake: Path, table: str) -> list[dict]:
    """A table as any Parquet reader sees it (partition columns from the directories)."""
    return ds.dataset(str(lake / "tables" / table), format="parquet",
                      partitioning="hive").to_table().to_pylist()


def submit_mix(*args: str) -> str:
    done = spark_submit(*args, job="mix")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The seeded lake; in the same spark-submit (its JVM, with 3 shuffle partitions where
    the mixture's own run has 16) the test set registered by `jobs/mix.py --register-eval`
    and the mixture made once before, with three stages (run `pre`)."""
    lake = tmp_path_factory.mktemp("mix") / "lake"
    config = lake.parent / "multi.yaml"
    config.write_text(CONFIG.format(repo=REPO, lake=lake, data=DATA), encoding="utf-8")
    register = ["--register-eval", "tatoeba-dev", "--pair", "zh-en", "--input",
                str(DATA / "train_dev_tatoeba.zh"), str(DATA / "train_dev_tatoeba.en"),
                "--lake", str(lake), "--run-id", "eval1"]
    pre = ["--config", str(config), "--run-id", "pre", "--set", "stages.quantiles=[0, .3, .6]"]
    seed = submit_script(DATA / "mix/seed_lake.py", str(lake), json.dumps(register),
                         json.dumps(pre), conf={"spark.sql.shuffle.partitions": "3"})
    assert seed.returncode == 0, seed.stdout[-3000:] + seed.stderr[-3000:]
    return {"root": lake, "config": config, "pre": read(lake, "mixture")}


@pytest.fixture(scope="module")
def mixed(lake: dict) -> dict:
    log = submit_mix("--config", str(lake["config"]), "--run-id", "mix1")
    rows = read(lake["root"], "mixture")
    stats = {r["source"]: r for r in read(lake["root"], "mixture_stats")
             if r["run_id"] == "mix1"}
    return {"config": lake["config"], "log": log, "rows": rows, "stats": stats}


def test_the_eval_set_is_registered(lake: dict) -> None:
    rows = [r for r in read(lake["root"], "eval_sets") if r["name"] == "tatoeba-dev"]
    assert {(r["pair"], r["role"], r["run_id"]) for r in rows} == {("zh-en", "test", "eval1")}
    assert sum(r["side"] == "src" for r in rows) == 150
    assert all(r["norm"] == normalize(r["text"]) for r in rows)


def test_exact_counts_in_temperature_and_synthetic_proportions(mixed: dict) -> None:
    stats, cfg = mixed["stats"], load_mix_config(mixed["config"])
    plans = plan(cfg, {name: r["eligible"] for name, r in stats.items()})
    assert {n: r["sampled"] for n, r in stats.items()} == {n: p.count for n, p in plans.items()}
    assert sum(stats[n]["sampled"] for n in ("zh-en", "ru-en", "en-zh")) == 3000
    q = {n: stats[n]["eligible"] ** 0.2 for n in ("zh-en", "ru-en", "en-zh")}
    for name, v in q.items():
        assert abs(stats[name]["sampled"] - 3000 * v / sum(q.values())) <= 1
    assert stats["bt"]["sampled"] == round(stats["zh-en"]["sampled"] * 0.3 / 0.7)
    whole = sum(r["sampled"] for r in stats.values())
    assert abs(stats["ft"]["sampled"] / whole - 0.1) < 1e-3
    assert stats["en-zh"]["epochs"] > 5  # 150 rows up-sampled
    assert stats["en-zh"]["eligible"] == 150 - 14  # the dev lines among them removed
    # the registered set as a fine-tuning source: not contamination of itself
    assert (stats["dev"]["eligible"], stats["dev"]["sampled"]) == (150, 200)
    assert (stats["ru-ft"]["eligible"], stats["ru-ft"]["sampled"]) == (495, 50)  # 5 test
    assert dict(stats["ru-en"]["decontaminated_by"]) == {"tatoeba-dev": 5}  # not by ru-dev
    stage1 = [r for r in mixed["rows"] if r["stage"] == 1]
    assert len(stage1) == whole  # quantile 0 keeps every scored row, unscored ones kept
    en_zh = [r for r in stage1 if r["source"] == "en-zh"]
    assert max(r["copy"] for r in en_zh) == stats["en-zh"]["sampled"] // 136 >= 5


def test_the_test_set_is_kept_out_and_counted(mixed: dict) -> None:
    zh, en = lines("train_dev_tatoeba.zh"), lines("train_dev_tatoeba.en")
    norms = {normalize(t) for t in zh + en}
    # only segments of >= 13 tokens have 13-grams (the rest: exact match only)
    segments = [t for t in [tokens(t, "zh") for t in zh] + [tokens(t, "en") for t in en]
                if len(t) >= 13]
    bitext = list(zip(lines("tatoeba-zh-en.zh"), lines("tatoeba-zh-en.en"), strict=True))
    planted = [("她说：" + zh[1] + "我不信。", "She said that, but I don't believe her."),
               (zh[1].replace("。", " . "), "Three Malaysians died.")]

    def dirty(a: str, b: str) -> bool:
        return normalize(a) in norms or normalize(b) in norms or any(
            contains([tokens(a, "zh"), tokens(b, "en")], s, 13, 0.5) for s in segments)

    expected = sum(dirty(a, b) for a, b in bitext + planted)
    assert expected >= 16  # 14 dev lines are in the Tatoeba slice too, and 2 planted
    zh_en = mixed["stats"]["zh-en"]
    assert zh_en["decontaminated"] == expected
    assert dict(zh_en["decontaminated_by"]) == {"tatoeba-dev": expected}
    assert zh_en["eligible"] == zh_en["available"] - expected == 1500 + 2 - expected
    assert all(r["corpus"] != "planted" for r in mixed["rows"])
    dev = {normalize(t) for t in zh}
    assert not [r for r in mixed["rows"] if r["source"] == "zh-en"
                and normalize(r["src"].removeprefix("<2en> ")) in dev]


def test_tags_noise_and_provenance(mixed: dict) -> None:
    rows = [r for r in mixed["rows"] if r["stage"] == 1]
    for r in rows:
        assert r["src"].startswith("".join(r["tags"]))
        assert r["source_table"] in ("sluice.bitext_clean", "sluice.synthetic",
                                     "sluice.eval_sets")
        assert r["mixture"] == "multi" and r["run_id"] == "mix1"
    tags = {r["source"]: r["tags"] for r in rows}
    assert tags == {"zh-en": ["<2en> "], "ru-en": ["<2en> "], "en-zh": ["<2zh> "],
                    "bt": ["<2en> ", "<BT> "], "ft": ["<2zh> ", "<BT> "], "dev": ["<2en> "],
                    "ru-ft": ["<2en> "]}
    ft = [r for r in rows if r["source"] == "ft"]
    assert all(r["noised"] for r in ft) and not any(r["noised"] for r in rows
                                                    if r["source"] not in ("ft", "ru-ft"))
    originals = dict(zip(lines("tatoeba-zh-en.en"), lines("tatoeba-zh-en.zh"), strict=True))
    changed = sum(r["tgt"] != originals[r["src"].removeprefix("<2zh> <BT> ")] for r in ft)
    assert changed > len(ft) / 2
    assert "<blank>" in "".join(r["tgt"] for r in ft)


def test_stages_are_nested_by_quantile(mixed: dict) -> None:
    ident = {1: set(), 2: set()}
    scores: dict[str, list[float]] = {}
    for r in mixed["rows"]:
        ident[r["stage"]].add((r["source"], r["row_id"], r["copy"]))
        if r["stage"] == 1 and r["copy"] == 0 and r["score"] is not None:
            scores.setdefault(r["direction"], []).append(r["score"])
    assert ident[2] < ident[1]
    for direction, values in scores.items():
        cut = sorted(values)[len(values) // 2]
        kept = [r for r in mixed["rows"] if r["stage"] == 2 and r["direction"] == direction
                and r["score"] is not None]
        assert kept and min(r["score"] for r in kept) == cut
    unscored = {(r["source"], r["row_id"], r["copy"]) for r in mixed["rows"]
                if r["score"] is None and r["stage"] == 1}
    assert unscored and unscored <= ident[2]  # synthetic rows: no cosine, kept in each stage
    per_stage = dict(mixed["stats"]["zh-en"]["stage_rows"])
    assert per_stage[2] < per_stage[1] == mixed["stats"]["zh-en"]["sampled"]


def test_the_run_is_recorded_and_a_run_on_other_partitions_drew_the_same(
        lake: dict, mixed: dict) -> None:
    dev = [r for r in read(lake["root"], "eval_sets") if r["name"] == "ru-dev"]
    assert len(dev) == 1000 and {(r["role"], r["run_id"]) for r in dev} == {("dev", "mix1")}
    runs = {r["run_id"]: r for r in read(lake["root"], "runs")}
    assert runs["mix1"]["job"] == "mix" and runs["mix1"]["status"] == "succeeded"
    assert runs["eval1"]["job"] == "register-eval" and runs["pre"]["status"] == "succeeded"
    assert {r["stage"] for r in lake["pre"]} == {1, 2, 3}
    assert {r["stage"] for r in mixed["rows"]} == {1, 2}  # pre's stage 3 is empty now
    assert {r["run_id"] for r in mixed["rows"]} == {"mix1"}

    def keyed(rows: list[dict], stage: int) -> list[tuple]:
        return sorted((r["source"], r["row_id"], r["copy"], r["src"], r["tgt"]) for r in rows
                      if r["stage"] == stage)

    assert keyed(mixed["rows"], 1) == keyed(lake["pre"], 1)  # 16 vs 3 shuffle partitions


def test_a_bad_mixture_is_one_line_and_exit_2_before_spark(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: m\nsources: [{name: a, table: bitext_clean, direction: zh-en, "
                   "count: 5, share: 0.1}]\n", encoding="utf-8")
    done = spark_submit("--config", str(bad), "--lake", str(tmp_path / "lake"), job="mix")
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    ours = [line for line in said.splitlines() if line.startswith("sluice: ")]
    assert ours == [ours[0]] and "give one of `count`, `share` and `epochs`" in ours[0]
    assert "Traceback" not in said and not (tmp_path / "lake").exists()
