"""The mix job's parts on real text (Tatoeba zh-en and ru-en slices, three directions), in
the test session's Spark: sizing by temperature, exact draws that do not depend on the
partitioning, exact nested stage quantiles, tags, decontamination of a planted test segment,
and config errors. The whole job through spark-submit: tests/test_mix_job.py."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from test_cli_flags import SHARED, help_text
from test_config_defaults import disagreeing_defaults, unknown_keys

from jobs.kit.config import LAKE_DEFAULTS, load_chain
from jobs.kit.errors import ConfigError
from jobs.kit.launcher import JOBS, JOBS_DIR, command
from jobs.mixing import job
from jobs.mixing.config import DEFAULTS, MixConfig, load_mix_config
from jobs.mixing.decontaminate import contains, contamination, norm_col, normalize, tokens
from jobs.mixing.job import main
from jobs.mixing.sampling import apportion, draw, plan, temperature_shares, thresholds
from jobs.mixing.tags import source_tags, tag_columns, tagged

DATA = Path(__file__).resolve().parent / "data"
POOL = ("source string, direction string, synthetic boolean, source_table string, "
        "corpus string, row_id long, source_run_id string, src string, tgt string, "
        "score double, _key long")


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def ratio(a: str, b: str) -> float:
    """A real score of a pair: how close the sides' lengths are (0..1)."""
    return min(len(a), len(b)) / max(len(a), len(b), 1)


def directions() -> dict[str, list[tuple[str, str]]]:
    """zh-en (1,500 pairs), ru-en (500), en-zh (the first 150 zh-en pairs, swapped)."""
    zh = list(zip(lines("tatoeba-zh-en.zh"), lines("tatoeba-zh-en.en"), strict=True))
    ru = list(zip(lines("tatoeba-ru-en.ru"), lines("tatoeba-ru-en.en"), strict=True))
    return {"zh-en": zh, "ru-en": ru, "en-zh": [(b, a) for a, b in zh[:150]]}


def pool_rows(extra: dict[str, list[tuple[str, str]]] | None = None) -> list[tuple]:
    rows = []
    for direction, pairs in {**directions(), **(extra or {})}.items():
        for i, (src, tgt) in enumerate(pairs, 1):
            key = hash((direction, i)) & 0x7FFFFFFFFFFF
            rows.append((direction, direction, False, "sluice.bitext_clean", "tatoeba", i,
                         None, src, tgt, ratio(src, tgt), key))
    return rows


def mix_config(tmp_path: Path, body: str):
    path = tmp_path / "mix.yaml"
    path.write_text("extends: " + str(DATA.parent.parent / "conf/mix-defaults.yaml") + "\n"
                    + body, encoding="utf-8")
    return load_mix_config(path)


SOURCES = """
name: t
sources:
  - {name: zh-en, table: bitext_clean, direction: zh-en}
  - {name: ru-en, table: bitext_clean, direction: ru-en}
  - {name: en-zh, table: bitext_clean, direction: en-zh, swap: true}
"""


# -- sizing (pure) -----------------------------------------------------------------------------
def test_apportion_is_exact_and_proportional() -> None:
    got = apportion(1000, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert sum(got.values()) == 1000 and sorted(got.values()) == [333, 333, 334]
    assert apportion(7, {"a": 0.0, "b": 0.0}) == {"a": 0, "b": 0}
    assert apportion(10, {"a": 3.0, "b": 1.0}) == {"a": 8, "b": 2}  # 7.5 / 2.5: first key


def test_temperature_one_is_natural_and_large_is_uniform() -> None:
    sizes = {"a": 1500, "b": 500, "c": 150}
    assert temperature_shares(sizes, {}, 1.0)["a"] == pytest.approx(1500 / 2150)
    flat = temperature_shares(sizes, {}, 1e9)
    assert all(v == pytest.approx(1 / 3) for v in flat.values())
    t5 = temperature_shares(sizes, {}, 5.0)
    q = {k: n ** 0.2 for k, n in sizes.items()}
    assert t5 == pytest.approx({k: v / sum(q.values()) for k, v in q.items()})


def test_plan_three_directions_at_temperature_five(tmp_path: Path) -> None:
    cfg = mix_config(tmp_path, SOURCES + "total: 6000\n")
    plans = plan(cfg, {"zh-en": 1500, "ru-en": 500, "en-zh": 150})
    assert sum(p.count for p in plans.values()) == 6000
    q = {"zh-en": 1500 ** 0.2, "ru-en": 500 ** 0.2, "en-zh": 150 ** 0.2}
    for name, p in plans.items():
        assert abs(p.count - 6000 * q[name] / sum(q.values())) <= 1
    assert plans["en-zh"].epochs == plans["en-zh"].count // 150 >= 10  # up-sampled
    assert plans["zh-en"].count < 3 * 1500


def test_plan_keeps_the_largest_direction_and_over_samples_the_rest(tmp_path: Path) -> None:
    """`total: largest`, as HW-TSC WMT21 multilingual's Table 3 sizes its mixture: "temperature
    sampling strategy ... with T=5 to over-sample the low-resource language pairs", En/Id 56M
    kept at 56M and Jv/Ta's 8.9M over-sampled to 39M (56 x (8.9/56)^(1/5) = 38.8)."""
    cfg = mix_config(tmp_path, SOURCES + "total: largest\n")
    sizes = {"zh-en": 56_000, "ru-en": 8_900, "en-zh": 2_200}
    plans = plan(cfg, sizes)
    assert plans["zh-en"].count == 56_000
    assert plans["ru-en"].count == pytest.approx(38_800, abs=60)
    assert plans["en-zh"].count == pytest.approx(56_000 * (2_200 / 56_000) ** 0.2, abs=2)


def test_plan_repeats_a_source_a_fixed_number_of_times(tmp_path: Path) -> None:
    """HW-TSC WMT21 news: "Every multilingual model is trained with 10x bilingual data sampled
    from the training corpora and 50M En-De parallel data": `epochs: 10` and a `count`."""
    cfg = mix_config(tmp_path, """
name: t
temperature: 1.0
sources:
  - {name: en-ha, table: bitext_clean, direction: en-ha, epochs: 10}
  - {name: en-de, table: bitext_clean, direction: en-de, count: 5000}
""")
    plans = plan(cfg, {"en-ha": 321, "en-de": 90_000})
    assert (plans["en-ha"].count, plans["en-ha"].epochs) == (3210, 10)
    assert plans["en-de"].count == 5000


def test_plan_synthetic_share_caps_counts_and_shares(tmp_path: Path) -> None:
    cfg = mix_config(tmp_path, SOURCES + """
  - {name: bt, table: synthetic, direction: zh-en, swap: true}
  - {name: dev, eval_set: devset, direction: zh-en, share: 0.2}
  - {name: fixed, table: bitext_clean, direction: ru-en, count: 77}
synthetic_share_by_direction: {zh-en: 0.3}
temperature: 1.0
""")
    cfg.sources[2].max_epochs = 2.0
    plans = plan(cfg, {"zh-en": 1500, "ru-en": 500, "en-zh": 150, "bt": 10_000, "dev": 150,
                       "fixed": 500})
    assert plans["zh-en"].count == 1500 and plans["ru-en"].count == 500  # T = 1: natural
    assert plans["bt"].count == round(1500 * 0.3 / 0.7)  # zh-en: 30% synthetic
    assert plans["fixed"].count == 77
    mixture = sum(p.count for p in plans.values())
    assert abs(plans["dev"].count / mixture - 0.2) < 1e-3
    assert plans["en-zh"].count == 150  # natural share, within max_epochs 2


def test_plan_over_sources_with_weights_and_caps(tmp_path: Path) -> None:
    cfg = mix_config(tmp_path, SOURCES + """
  - {name: zh-en-b, table: bitext_clean, direction: zh-en, weight: 3, cap: 100}
temperature_over: source
temperature: 2.0
total: 2000
""")
    sizes = {"zh-en": 1500, "ru-en": 500, "en-zh": 150, "zh-en-b": 1500}
    plans = plan(cfg, sizes)
    q = {n: v ** 0.5 * (3 if n == "zh-en-b" else 1) for n, v in sizes.items()}
    for name, p in plans.items():
        assert abs(p.planned - 2000 * q[name] / sum(q.values())) <= 1
    assert sum(p.planned for p in plans.values()) == 2000
    assert plans["zh-en-b"].count == 100 < plans["zh-en-b"].planned  # the cap is not given on
    assert sum(p.count for p in plans.values()) == 2000 - plans["zh-en-b"].planned + 100
    assert plan(cfg, {**sizes, "ru-en": 0})["ru-en"].count == 0


def test_bad_configs_are_one_line_errors(tmp_path: Path, capsys) -> None:
    bad = {
        "temperature: 0\n": "temperature",
        "sources: [{name: a, direction: zh-en}]\n": "give `table` or `eval_set`",
        "sources: [{name: a, table: t, direction: zhen}]\n": "must look like",
        "stages: {column: x, quantiles: [0.5, 0.2]}\n": "rising",
        "stages: {column: x, quantiles: [0, 0.5], floors: [null, 0.8]}\n": "not both",
        "stages: {column: x, floors: [null, 0.8], directions: [null]}\n":
            "one entry a stage (2 stages): directions has 1",
        "sources: [{name: a, table: t, direction: zh-en}]\n"
        "stages: {directions: [null, [ru-zh]]}\n": "ru-zh is not one of the mixture's",
        "synthetic_share: 0.3\nsources: [{name: b, table: synthetic, direction: zh-en}]\n":
            "needs a natural source",
        "sources: [{name: a, table: t, direction: zh-en, weight: 1}, "
        "{name: a, table: u, direction: zh-en}]\n": "repeat",
    }
    for body, words in bad.items():
        path = tmp_path / "bad.yaml"
        path.write_text("name: m\n" + body, encoding="utf-8")
        assert main(["--config", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("sluice: error: ") and err.count("\n") == 1, err
        assert words in err, err
    with pytest.raises(ConfigError, match="mixture name"):
        mix_config(tmp_path, "name: ../x\n")
    assert main(["--register-eval", "wmt", "--pair", "zh-en"]) == 2
    assert "needs --pair and --input" in capsys.readouterr().err


# -- drawing (Spark) ---------------------------------------------------------------------------
def keys_of(df) -> list[tuple]:
    return sorted((r.source, r._key, r.copy) for r in df.select("source", "_key", "copy")
                  .collect())


def test_draws_exact_counts_in_temperature_proportions(spark, tmp_path: Path) -> None:
    cfg = mix_config(tmp_path, SOURCES + "total: 3001\n")
    pool = spark.createDataFrame(pool_rows(), POOL)
    plans = plan(cfg, {r.source: r["count"] for r in pool.groupBy("source").count().collect()})
    drawn = draw(spark, pool, plans, cfg.seed)
    got = {r.source: r["count"] for r in drawn.groupBy("source").count().collect()}
    assert got == {name: p.count for name, p in plans.items()}
    assert sum(got.values()) == 3001
    p = temperature_shares({"zh-en": 1500, "ru-en": 500, "en-zh": 150}, {}, 5.0)
    for name, n in got.items():
        assert abs(n / 3001 - p[name]) < 1 / 3001  # the formula, up to one row's rounding
    # en-zh is up-sampled: every row in every full copy, the remainder distinct rows
    en_zh = [r for r in drawn.where("source = 'en-zh'").select("_key", "copy").collect()]
    full = plans["en-zh"].epochs
    per_copy = {c: sum(1 for r in en_zh if r.copy == c) for c in range(full + 1)}
    assert all(per_copy[c] == 150 for c in range(full))
    assert per_copy[full] == plans["en-zh"].remainder
    assert len({(r._key, r.copy) for r in en_zh}) == len(en_zh)
    # zh-en is down-sampled, without replacement
    zh = drawn.where("source = 'zh-en'")
    assert zh.select("_key").distinct().count() == got["zh-en"] < 1500


def test_the_same_seed_draws_the_same_rows_on_any_partitioning(spark, tmp_path: Path) -> None:
    cfg = mix_config(tmp_path, SOURCES + "total: 1234\n")
    pool = spark.createDataFrame(pool_rows(), POOL)
    plans = plan(cfg, {"zh-en": 1500, "ru-en": 500, "en-zh": 150})
    one = keys_of(draw(spark, pool.repartition(1), plans, 1))
    seven = keys_of(draw(spark, pool.repartition(7, "src").sortWithinPartitions("tgt"), plans, 1))
    assert one == seven and len(one) == 1234
    other = keys_of(draw(spark, pool, plans, 2))
    assert other != one and len(other) == 1234


def test_stage_thresholds_are_exact_quantiles_and_nested(spark) -> None:
    pool = spark.createDataFrame(pool_rows(), POOL)
    quantiles = [0.0, 0.5, 0.8]
    cut = thresholds(pool, "direction", "score", quantiles)
    stages: list[set] = []
    for k, q in enumerate(quantiles):
        kept = set()
        for direction, pairs in directions().items():
            scores = sorted(ratio(a, b) for a, b in pairs)
            assert cut[direction][k] == scores[math.floor(q * len(scores))]
            kept |= {(direction, i) for i, (a, b) in enumerate(pairs, 1)
                     if ratio(a, b) >= cut[direction][k]}
            share = sum(s >= cut[direction][k] for s in scores) / len(scores)
            assert share >= 1 - q - 1e-9
        stages.append(kept)
    assert stages[0] == {(d, i) for d, p in directions().items() for i in range(1, len(p) + 1)}
    assert stages[2] <= stages[1] <= stages[0] and len(stages[2]) < len(stages[1])
    again = thresholds(pool.repartition(5, "tgt"), "direction", "score", quantiles)
    assert again == cut


def test_stages_by_absolute_floors_with_their_own_directions(spark, tmp_path: Path) -> None:
    """HW-TSC WMT21 triangular's curriculum: every row, then the rows scoring over a floor
    (a lower one for one direction), then those of one direction only."""
    cfg = mix_config(tmp_path, SOURCES + "stages: {column: score, floors: [null, 0.8, 0.8], "
                     "floors_by_direction: {ru-en: [null, 0.7, 0.7]}, "
                     "directions: [null, null, [ru-en]]}\n")
    drawn = spark.createDataFrame(pool_rows(), POOL).withColumn("copy", F.lit(0))
    run = job.MixRun.__new__(job.MixRun)  # only the stages are under test: no lake
    run.cfg, run.name, run.run_id = cfg, "t", "r1"
    got: dict[int, set] = {}
    for r in run.stages(drawn).select("stage", "direction", "row_id").collect():
        got.setdefault(r.stage, set()).add((r.direction, r.row_id))
    want = {d: {(d, i) for i, (a, b) in enumerate(p, 1)
                if ratio(a, b) >= (0.7 if d == "ru-en" else 0.8)}
            for d, p in directions().items()}
    assert got[1] == {(d, i) for d, p in directions().items() for i in range(1, len(p) + 1)}
    assert got[2] == want["zh-en"] | want["ru-en"] | want["en-zh"]
    assert got[3] == want["ru-en"] and got[3] < got[2] < got[1]
    assert cfg.stage_numbers() == [1, 2, 3]


# -- tags ----------------------------------------------------------------------------------
def test_tags_for_a_multilingual_model_and_tagged_back_translation(spark, tmp_path: Path
                                                                  ) -> None:
    cfg = mix_config(tmp_path, "")
    assert source_tags(cfg.tags, "zh", False) == ["<2zh> "]
    assert source_tags(cfg.tags, "en", True) == ["<2en> ", "<BT> "]
    off = cfg.tags.model_copy(update={"target": None})
    assert source_tags(off, "en", True) == ["<BT> "]
    src, applied = tag_columns({"bt": ["<2en> ", "<BT> "], "ru-en": ["<2en> "]})
    df = spark.createDataFrame([("bt", "他走了。"), ("ru-en", "Привет."), ("x", "a")],
                               "source string, src string")
    got = {r.source: (r.s, r.t) for r in df.select("source", src.alias("s"),
                                                   applied.alias("t")).collect()}
    assert got["bt"] == (tagged("他走了。", ["<2en> ", "<BT> "]), ["<2en> ", "<BT> "])
    assert got["bt"][0] == "<2en> <BT> 他走了。"
    assert got["ru-en"] == ("<2en> Привет.", ["<2en> "])
    assert got["x"] == ("a", [])


# -- decontamination -------------------------------------------------------------------------
def test_normalization_in_spark_equals_its_python_twin(spark) -> None:
    texts = lines("tatoeba-zh-en.zh")[:300] + lines("tatoeba-ru-en.ru")[:300] + \
        lines("tatoeba-zh-en.en")[:300] + ["  Hello,   World! ", "“Quoted” — dash…", "ＡＢＣ你好！"]
    df = spark.createDataFrame([(t,) for t in texts], "text string")
    got = [r.n for r in df.select(norm_col(F.col("text")).alias("n")).collect()]
    assert got == [normalize(t) for t in texts]
    assert normalize("  Hello,   World! ") == "helloworld"


def eval_frame(spark, segments: list[tuple[str, str, str, str, int, str]]):
    rows = [(pair, "test", side, lang, line, text, normalize(text), "r", name)
            for name, pair, side, lang, line, text in segments]
    return spark.createDataFrame(rows, "pair string, role string, side string, lang string, "
                                       "line long, text string, norm string, run_id string, "
                                       "name string")


def test_a_planted_test_segment_is_found_exactly_and_inside_longer_lines(spark) -> None:
    zh, en, ru = lines("tatoeba-zh-en.zh"), lines("tatoeba-zh-en.en"), lines("tatoeba-ru-en.ru")
    long_zh = max(zh, key=len)  # a test segment of >= 13 characters
    long_en = max(en, key=lambda t: len(t.split()))  # >= 13 words
    short_ru = ru[34]  # 4 words: no 13-gram, found by the exact match alone
    assert len(long_zh) >= 20 and len(long_en.split()) >= 13 and len(short_ru.split()) < 13
    test = [("wmt-test", "zh-en", "src", "zh", 1, long_zh),
            ("wmt-test", "zh-en", "tgt", "en", 1, long_en),
            ("other", "ru-en", "src", "ru", 1, short_ru)]
    planted = {
        "zh-en": [(long_zh.replace("。", " . "), "whatever"),            # exact, after norm
                  ("她说：" + long_zh + "我不信。", "She said so."),     # inside a longer line
                  ("你好。", "Hello, " + long_en.upper() + " And more.")],  # inside, target side
        "ru-en": [(short_ru.upper() + "!!", "x")],                       # exact, after norm
    }
    extra = [(d, d, False, "t", "planted", 10_000 + j, None, src, tgt, None, 10_000 + j)
             for d, pairs in planted.items() for j, (src, tgt) in enumerate(pairs)]
    pool = spark.createDataFrame(pool_rows() + extra, POOL).withColumn(
        "_uid", F.xxhash64("source", "_key")).withColumn(
        "_src_lang", F.split("direction", "-")[0]).withColumn(
        "_tgt_lang", F.split("direction", "-")[1])
    out = contamination(pool, eval_frame(spark, test), 13, 0.5).collect()
    assert len(out) == pool.count()  # no row lost or doubled by the joins
    got = {(r.source, r.corpus, r.row_id): (r._exact, r._overlap) for r in out}
    # the Python twin, on every row: exact by normalized text, overlap by 13-gram containment
    norms = {}
    for name, _, _, _, _, text in test:
        norms.setdefault(normalize(text), set()).add(name)
    for r in out:
        a, b = r.direction.split("-")
        exact = sorted(norms.get(normalize(r.src), set()) | norms.get(normalize(r.tgt), set()))
        over = sorted({name for name, _, _, lang, _, text in test
                       if contains([tokens(r.src, a), tokens(r.tgt, b)], tokens(text, lang),
                                   13, 0.5)})
        assert got[(r.source, r.corpus, r.row_id)] == (exact, over), r
    assert {k: v for k, v in got.items() if k[1] == "planted"} == {
        ("zh-en", "planted", 10_000): (["wmt-test"], ["wmt-test"]),
        ("zh-en", "planted", 10_001): ([], ["wmt-test"]),
        ("zh-en", "planted", 10_002): ([], ["wmt-test"]),
        ("ru-en", "planted", 10_000): (["other"], [])}
    hits = sum(1 for v in got.values() if v != ([], []))
    assert 4 < hits < 20  # the corpus's own copies of the segments, and nothing by chance


# -- the job's surfaces ------------------------------------------------------------------------
def test_the_job_has_the_shared_flags_and_a_launcher_entry() -> None:
    text = help_text(job)
    for flag, words in SHARED.items():
        assert f"{flag} {words}" in text, flag
    assert JOBS["mix"][0] == "mix.py" and (JOBS_DIR / "mix.py").is_file()
    cmd, _ = command(["mix", "--config", "conf/mix-multi-en.yaml"])
    assert cmd[-3:] == [str(JOBS_DIR / "mix.py"), "--config", "conf/mix-multi-en.yaml"]


def test_the_defaults_yaml_and_the_model_agree() -> None:
    documented = load_chain(DEFAULTS)
    assert disagreeing_defaults(MixConfig, documented) == []
    assert unknown_keys(MixConfig, documented) == []
    assert documented["lake"] == load_chain(LAKE_DEFAULTS)["lake"]
    for example in sorted((DATA.parent.parent / "conf").glob("mix-*.yaml")):
        load_mix_config(example)  # every shipped mixture is valid
