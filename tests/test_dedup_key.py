"""The dedup key (udfs/dedup.py) on real Tatoeba lines and their near-duplicate variants.

The key is computed on normalized text; two rows are duplicates when their keys are equal. One
Spark job computes the key of every text under every configuration used here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from jobs.filtering.config import DedupConf
from udfs.dedup import dedup_key

DATA = Path(__file__).resolve().parent / "data"


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


ZH, EN, RU = lines("tatoeba-zh-en.zh"), lines("tatoeba-zh-en.en"), lines("tatoeba-ru-en.ru")

CONFS = {
    "default": DedupConf(),  # case, whitespace, punctuation insensitive; digits count
    "digits": DedupConf(ignore_digits=True),
    "exact": DedupConf(
        ignore_case=False, ignore_whitespace=False, ignore_punctuation=False, ignore_digits=False
    ),
    "case_only": DedupConf(ignore_whitespace=False, ignore_punctuation=False),
    "no_punct_keep_space": DedupConf(ignore_whitespace=False),
}

EN1 = "Don't be scared of making mistakes."
EN2 = "He has two children, aged 4 and 1."
ZH1 = "25日,中国政府发布《钓鱼岛是中国的固有领土》白皮书。"
ZH2 = "你回家吗？"
RU1 = "Тома задрал медведь."

# Variants of real lines, as they turn up in crawled corpora.
VARIANTS = {
    "en1": EN1,
    "en1_upper": EN1.upper(),
    "en1_moses": "Don 't be scared of making mistakes .",
    "en1_no_period": EN1.rstrip("."),
    "en1_spaces": EN1.replace(" ", "  "),
    "en1_curly": EN1.replace("'", "\u2019"),
    "en2": EN2,
    "en2_other_digits": EN2.replace("4", "5"),
    "en2_more_digits": EN2.replace("4", "14"),
    "zh1": ZH1,
    "zh1_no_marks": ZH1.replace("《", "").replace("》", ""),
    "zh1_fullwidth_comma": ZH1.replace(",", "，"),
    "zh1_other_date": ZH1.replace("25", "26"),
    "zh2": ZH2,
    "zh2_ascii_question": ZH2.replace("？", "?"),
    "zh2_spaced": " ".join(ZH2),
    "ru1": RU1,
    "ru1_upper": RU1.upper(),
    "ru1_guillemets": f"«{RU1[:-1]}».",
    "symbols": "Price: 5000 yuan + tax",
    "symbols_other": "Price 5000 yuan tax",
}


@pytest.fixture(scope="module")
def keys(spark) -> dict[str, dict]:
    """text id -> {conf name: key}, for the variants and every real line."""
    rows = list(VARIANTS.items())
    rows += [
        (f"{name}:{i}", t)
        for name, ls in (("en", EN), ("zh", ZH), ("ru", RU))
        for i, t in enumerate(ls)
    ]
    rows.append(("null", None))
    df = spark.createDataFrame(rows, "id string, text string")
    df = df.select("id", *[dedup_key(F.col("text"), c).alias(n) for n, c in CONFS.items()])
    return {r["id"]: r.asDict() for r in df.collect()}


def same(keys: dict, a: str, b: str, conf: str) -> bool:
    return keys[a][conf] == keys[b][conf]


def test_variants_come_from_real_lines() -> None:
    assert {EN1, EN2} <= set(EN)
    assert {ZH1, ZH2} <= set(ZH)
    assert RU1 in RU


@pytest.mark.parametrize(
    "variant",
    ["en1_upper", "en1_moses", "en1_no_period", "en1_spaces", "en1_curly"],
)
def test_default_key_ignores_case_spaces_and_punctuation(keys: dict, variant: str) -> None:
    assert same(keys, "en1", variant, "default")
    assert not same(keys, "en1", variant, "exact")


def test_default_key_on_chinese_and_russian(keys: dict) -> None:
    for a, b in [
        ("zh1", "zh1_no_marks"),  # 《》 are punctuation
        ("zh1", "zh1_fullwidth_comma"),
        ("zh2", "zh2_ascii_question"),
        ("zh2", "zh2_spaced"),
        ("ru1", "ru1_upper"),  # Unicode lower-casing
        ("ru1", "ru1_guillemets"),
        ("symbols", "symbols_other"),  # : and + (a symbol) go too
    ]:
        assert same(keys, a, b, "default"), (a, b)
    assert keys["zh2"]["default"] == "你回家吗"
    assert keys["en1"]["default"] == "dontbescaredofmakingmistakes"


def test_digits_count_unless_configured(keys: dict) -> None:
    for a, b in [
        ("en2", "en2_other_digits"),
        ("en2", "en2_more_digits"),
        ("zh1", "zh1_other_date"),
    ]:
        assert not same(keys, a, b, "default"), (a, b)
        assert same(keys, a, b, "digits"), (a, b)
    assert keys["en2"]["digits"] == "hehastwochildrenaged0and0"


def test_each_switch_alone(keys: dict) -> None:
    for name, text in VARIANTS.items():
        assert keys[name]["exact"] == text
    assert same(keys, "en1", "en1_upper", "case_only")
    assert not same(keys, "en1", "en1_no_period", "case_only")
    assert not same(keys, "en1", "en1_spaces", "case_only")
    assert same(keys, "en1", "en1_no_period", "no_punct_keep_space")
    assert not same(keys, "en1", "en1_spaces", "no_punct_keep_space")
    # Whitespace-sensitive keys keep the space punctuation leaves behind: a Moses-tokenized
    # line is no duplicate of its detokenized form then.
    assert keys["en1_moses"]["no_punct_keep_space"] == "don t be scared of making mistakes "
    assert not same(keys, "en1", "en1_moses", "no_punct_keep_space")


def test_distinct_real_lines_keep_distinct_keys(keys: dict) -> None:
    for name, ls in (("en", EN), ("zh", ZH), ("ru", RU)):
        for conf in ("default", "digits"):
            distinct_keys = {keys[f"{name}:{i}"][conf] for i in range(len(ls))}
            assert len(distinct_keys) == len(set(ls)), (name, conf)
    # The corpus's real repeats collide, as they must: one English line, eight Chinese ones.
    assert len(EN) - len(set(EN)) == 1
    assert len(ZH) - len(set(ZH)) == 8
    i, j = [k for k, t in enumerate(EN) if t == "5000 yuan is a lot of money."]
    assert keys[f"en:{i}"]["default"] == keys[f"en:{j}"]["default"]


def test_null_text_has_null_key(keys: dict) -> None:
    assert all(value is None for conf, value in keys["null"].items() if conf != "id")


@pytest.mark.parametrize("extra", [{"pair": "zh-en"}, {"lang": "zh"}])
def test_filter_and_refresh_hash_the_same_keys(spark, extra: dict) -> None:
    """The hashes a filter run stores with every row are the ones a refresh computes for
    committed rows that lack them: one definition (jobs/filtering/stages.py `key_hashes`). A
    monolingual run stores only the pair key."""
    from jobs.filtering.config import load_config
    from jobs.filtering.stages import with_dedup_keys
    from jobs.refreshing.dedup import with_key_hashes

    cfg = load_config(extra=extra)
    zh, en = lines("tatoeba-zh-en.zh")[:300], lines("tatoeba-zh-en.en")[:300]
    rows = [(i, z, None if cfg.mono else e) for i, (z, e) in enumerate(zip(zh, en, strict=True))]
    df = spark.createDataFrame(rows, "row_id long, src string, tgt string")
    stored = with_dedup_keys(df, cfg).drop("dup_of")
    recomputed = with_key_hashes(df, cfg)
    assert sorted(stored.columns) == sorted(recomputed.columns)
    hashes = [c for c in stored.columns if c.startswith("dup_key")]
    assert hashes == (["dup_key"] if cfg.mono else ["dup_key", "dup_key_src", "dup_key_tgt"])
    assert stored.orderBy("row_id").collect() == recomputed.select(stored.columns).orderBy(
        "row_id").collect()
    assert stored.select(*hashes).distinct().count() > 250  # real, distinct keys
