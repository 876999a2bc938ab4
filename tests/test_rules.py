"""Every rule of udfs/rules.py, in Spark, on real pairs with one injected fault each; and the
registry's contract: the config, the defaults YAML, the stats steps and the stored columns all
come from it, and udfs/ does not import jobs/.

Pairs are Tatoeba zh-en / ru-en lines (tests/data) and two OpenNMT toy en-de pairs that carry
their fault as found (a URL, a U+FFFD). Each case checks the stored score and that the expected
rule is the first failure in the configured order. The texts are taken as already normalized
(udfs/sides.py still runs: t2s, full-width, jieba, fastText), as the job scores them.
"""

from __future__ import annotations

import ast
import gzip
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F

from jobs.filtering.config import DEFAULTS, FilterConfig, LangidConf, RulesConf, load_config
from jobs.filtering.layout import Layout
from jobs.filtering.stages import (
    first_failure,
    normalize_and_analyze,
    rule_failures,
    score_and_decide,
    score_columns,
)
from jobs.filtering.steps import rule_sequence
from jobs.kit.errors import ConfigError
from udfs.rules import RULE_NAMES, RULES, settings
from udfs.sides import SideOptions, side_analyzer

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
MODEL = str(REPO / "models" / "lid.176.ftz")


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


ZH, EN = lines("tatoeba-zh-en.zh"), lines("tatoeba-zh-en.en")
RU, RU_EN = lines("tatoeba-ru-en.ru"), lines("tatoeba-ru-en.en")
TOY = dict(line.split("\t", 1) for line in lines("ende-toy-escaped.txt"))
DE = "Nicht alle meine Freunde schwimmen gern."  # moses_de.txt (Tatoeba deu)


def zh_en(zh: str) -> tuple[str, str]:
    """The real pair whose Chinese side is `zh` (tatoeba-zh-en)."""
    return zh, EN[ZH.index(zh)]


def ru_en(ru: str) -> tuple[str, str]:
    return ru, RU_EN[RU.index(ru)]


def anki(zh: str) -> tuple[str, str]:
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        return next((z, e) for z, e, _ in (line.split("\t") for line in f) if z == zh)


# Real pairs the faults are injected into (A: 18/14 tokens, C: 10/10, D: 19/23).
A = zh_en("3个马来西亚侨民与一个菲律宾国民在棉兰老岛达沃市爆炸里被炸死了。")
B = zh_en("五千元是一大笔钱。")
C = zh_en("阿尔及尔是一座有着超过三百多万人口的繁华都市。")
D = zh_en("人类登上月球、柏林墙倒下，世界被我们的科学和想像被连接在一起。")
HANT = zh_en("巴士司機有責任保護乘客的安全。")  # cmn_Hant: scored after t2s
SHORT = zh_en("他身肩重任。")  # 3 jieba words
LONG = [  # four real cmn lines of 37 + 34 + 30 + 27 jieba words
    zh_en("“汤姆，我得告诉你点事。我爱某个人。他的名字以T开头以M结尾。”“呃，那能是谁？我认识吗？”"),
    zh_en(
        "一個人就算不吃肉，也可以健健康康的生活。所以人殺生、吃肉，只不過是為了滿足自己的口腹之慾而已。"
        "這種行為是不道德的。"
    ),
    zh_en("如果你想要那把水槍，你必須自己存錢買。我沒有辦法一直買玩具給你。錢不會從我背上長出來。"),
    zh_en(
        "生意停頓了以後，許多公共浴堂都添置了桑拿浴室、健身器材等的新設備，希望能吸引多點人來光顧。"
    ),
]

# A configured special pattern on top of the defaults (replacement_char, private_use).
EMOJI = {"rules": {"special_patterns": {"emoji": "[\\x{1F300}-\\x{1FAFF}]"}}}

# name -> (src, tgt, expected first failure, expected scores)
ZH_EN: dict[str, tuple[str, str, str | None, dict]] = {
    "clean_a": (*A, None, {"src_tokens": 18, "tgt_tokens": 14, "token_ratio": 18 / 14}),
    "clean_b": (*B, None, {"src_lang": "zh", "tgt_lang": "en", "bracket_mismatch": 0}),
    "clean_c": (*C, None, {"url_email_html": None, "special_chars": None}),
    "clean_traditional": (*HANT, None, {"src": "巴士司机有责任保护乘客的安全。", "src_lang": "zh"}),
    "empty_src": ("", C[1], "empty", {"src_chars": 0, "tgt_chars": 56}),
    "empty_tgt": (C[0], "", "empty", {"tgt_chars": 0, "tgt_tokens": 0, "token_ratio": None}),
    "identical": (C[1], C[1], "identical", {"identical": True}),
    "identical_but_case": (C[1].upper(), C[1], "identical", {"identical": True}),
    # Four real lines merged (an alignment slip): 128 jieba words on the source side.
    "too_many_tokens": (
        "".join(z for z, _ in LONG),
        " ".join(e for _, e in LONG),
        "too_many_tokens",
        {"src_tokens": 128, "tgt_tokens": 116},
    ),
    # Spaces lost: one 65-character "word".
    "long_word": (
        A[0],
        A[1].replace(" ", ""),
        "long_word",
        {"tgt_max_word_chars": 65, "tgt_tokens": 1},
    ),
    # A truncated translation.
    "token_ratio_truncated": (A[0], "3 Malay nationals", "token_ratio", {"token_ratio": 6.0}),
    "token_ratio_real": (*zh_en("你用跑的。"), "token_ratio", {"token_ratio": 5.0}),
    # Spaces partly lost: 95 letters in 7 "words" (13.6 a word), none over 40.
    "char_word_ratio": (
        D[0],
        "Amantouched downonthemoon. Awallcame downinBerlin. Aworldwas connectedbyour "
        "ownscienceandimagination.",
        "char_word_ratio",
        {"tgt_char_word_ratio": 95 / 7, "token_ratio": 19 / 7},
    ),
    # A real one-word translation ("Congratulations!", 16 characters): a ratio over one token
    # is that word's length, so sides under char_word_min_tokens are not checked. (Its
    # 4-character source still fails language ID: issue 14's failure class 1, not fixed yet.)
    "char_word_ratio_one_word": (
        *anki("恭喜你！"),
        None,
        {"tgt_char_word_ratio": 16.0, "tgt_tokens": 1},
    ),
    "punct_share": (
        C[0],
        C[1].replace(".", "!" * 20),
        "punct_share",
        {"tgt_punct_share": 20 / 66, "tgt_tokens": 10},
    ),
    "punct_share_real": (*zh_en("上马。"), "punct_share", {"src_punct_share": 1 / 3}),
    "unclosed_bracket": (
        A[0].replace("在棉兰老岛", "在棉兰老岛（菲律宾南部"),
        A[1],
        "unbalanced_brackets",
        {"bracket_mismatch": 1},
    ),
    "unclosed_quote": (B[0], f'"{B[1]}', "unbalanced_brackets", {"bracket_mismatch": 1}),
    "unclosed_chinese_quote": (
        f"“{C[0]}",
        C[1],
        "unbalanced_brackets",
        {"bracket_mismatch": 1},
    ),
    # A quotation split at a sentence boundary, cut the same way on both sides (the quote
    # marks of each language): the same imbalance passes.
    "quote_split_on_both_sides": (f"“{C[0]}", f'"{C[1]}', None, {"bracket_mismatch": 0}),
    "german_quote_split_on_both_sides": (f"「{B[0]}", f"„{B[1]}", None, {"bracket_mismatch": 0}),
    # A bracket opened and never closed inside a sentence is rejected as HW-TSC WMT21 rejects
    # it ("Filter out sentences with mismatched parentheses and quotation marks"), even when
    # both sides leave it open (issue 23). ZengHuiMT lists no bracket rule.
    "bracket_open_on_both_sides": (
        A[0].replace("在棉兰老岛", "在棉兰老岛（菲律宾南部"),
        A[1].replace("in ", "in (", 1),
        "unbalanced_brackets",
        {"bracket_mismatch": 2},
    ),
    "issue_23_unclosed_bracket_on_both_sides": (
        "他（非常高兴地离开了会场。", "He (left the venue very happily.", "unbalanced_brackets",
        {"bracket_mismatch": 2}),
    # A list item's marker (`3)`, `d)`, `iv)`) closes no bracket the line opened: it passes,
    # and a bracket the item's text leaves open is still counted.
    "list_item_markers": (f"3）{A[0]}", f"3) {A[1]}", None, {"bracket_mismatch": 0}),
    "bracket_open_after_a_list_marker": (
        "iv）他（非常高兴地离开了会场。", "iv) He (left the venue very happily.",
        "unbalanced_brackets", {"bracket_mismatch": 2}),
    # Opposite imbalances do not cancel: the profiles are compared per kind of bracket.
    "bracket_open_and_closed": (
        A[0].replace("在棉兰老岛", "在棉兰老岛（菲律宾南部"),
        A[1] + ")",
        "unbalanced_brackets",
        {"bracket_mismatch": 2},
    ),
    # Full-width opening, ASCII closing: one kind of bracket, balanced.
    "mixed_width_brackets": (
        A[0].replace("棉兰老岛", "棉兰老岛（Mindanao)"),
        A[1],
        None,
        {"bracket_mismatch": 0},
    ),
    "url": (
        C[0],
        f"{C[1]} https://tatoeba.org/en/about",
        "url_email_html",
        {"url_email_html": "https://tatoeba.org/en/about"},
    ),
    "url_upper_case": (
        C[0],
        f"{C[1]} WWW.TATOEBA.ORG",
        "url_email_html",
        {"url_email_html": "WWW.TATOEBA.ORG"},
    ),
    "email": (
        B[0],
        f"{B[1]} Mail tom.jackson@tatoeba.org",
        "url_email_html",
        {"url_email_html": "tom.jackson@tatoeba.org"},
    ),
    "html_tag": (
        C[0],
        C[1].replace("a bustling city", '<span class="place">a bustling city</span>'),
        "url_email_html",
        {"url_email_html": '<span class="place">'},
    ),
    "html_entity": (C[0] + "&nbsp;", C[1], "url_email_html", {"url_email_html": "&nbsp;"}),
    "unparsable_numeric_entity": (
        C[0],
        f"{C[1]} &#99999999;",
        "url_email_html",
        {"url_email_html": "&#99999999;"},
    ),
    "url_source_side_reported_first": (
        f"{C[0]} www.tatoeba.org",
        f"{C[1]} https://tatoeba.org",
        "url_email_html",
        {"url_email_html": "www.tatoeba.org"},
    ),
    "prose_lt_gt": (
        C[0],
        C[1].replace("people.", "people, if a<b then c>d."),
        None,
        {"url_email_html": None},
    ),
    "replacement_char": (
        C[0].replace("繁华", "繁\ufffd"),
        C[1],
        "special_chars",
        {"special_chars": "replacement_char"},
    ),
    "private_use": (
        B[0],
        B[1].replace("money", "money\ue000"),
        "special_chars",
        {"special_chars": "private_use"},
    ),
    "configured_pattern": (
        C[0],
        f"{C[1]} \U0001f37a",
        "special_chars",
        {"special_chars": "emoji"},
    ),
    # English in the Chinese column: no Han letters at all.
    "langid_src_script": (B[1], C[1], "langid_src", {"src_script_share": 0.0, "src_lang": "en"}),
    # Real Cantonese pair (labelled yue_Hant), Han script: the language decides.
    "langid_src_cantonese_real": (
        *zh_en("佢起得比平時早。"),
        "langid_src",
        {"src_script_share": 1.0, "src_lang": "yue"},
    ),
    # Chinese in the English column, 6 characters: below min_chars the script decides.
    "langid_tgt_script_short": (
        SHORT[0],
        "对事不对人。",
        "langid_tgt",
        {"tgt_script_share": 0.0, "tgt_chars": 6},
    ),
    "langid_tgt_cyrillic_short": (
        "你回家吗？",
        "Окна открыты?",
        "langid_tgt",
        {"tgt_script_share": 0.0},
    ),
    "langid_tgt_german": (C[0], DE, "langid_tgt", {"tgt_script_share": 1.0, "tgt_lang": "de"}),
    # Real pair, 30 characters: fastText's top label is nl (0.49), but en has 0.30, above the
    # 0.23 a 30-character side needs (the old top-1 rule rejected it).
    "langid_tgt_real": (
        *zh_en("出去的时候把门关上。"),
        None,
        {"tgt_lang": "nl", "tgt_chars": 30},
    ),
    # Real pair: 15 characters, and fastText gives en only 0.29: enough for its length.
    "short_target_passes": (
        *zh_en("你保证？"),
        None,
        {"tgt_chars": 15, "tgt_script_share": 1.0},
    ),
    # A real pair whose Chinese side stops translating halfway: the rest of the English
    # sentence copied in (its ordinary words, not Han, are what copy_share counts).
    "copied_text_half_translated": (
        D[0][: len(D[0]) // 2] + " " + " ".join(D[1].split()[13:]),
        D[1],
        "copied_text",
        {"copied_words": 8},
    ),
    # Two faults: identical comes before url_email_html in the default order.
    "identical_and_url": (
        f"{C[1]} https://tatoeba.org",
        f"{C[1]} https://tatoeba.org",
        "identical",
        {"identical": True, "url_email_html": "https://tatoeba.org"},
    ),
}

RU_EN_CASES = {
    "clean_ru": (*ru_en(RU[0]), None, {"src_lang": "ru", "src_script_share": 1.0}),
    "clean_ru_short": (*ru_en("Ох, как же я зол!"), None, {"tgt_lang": "en"}),
    # Real pair: 21 characters, and fastText gives en only 0.44 (rejected by the old flat 0.5).
    "langid_tgt_unsure_real": (
        *ru_en("Окна открыты?"),
        None,
        {"tgt_chars": 21, "tgt_lang": "en"},
    ),
    "langid_src_latin_in_ru": (
        RU_EN[2],
        RU_EN[0],
        "langid_src",
        {"src_script_share": 0.0, "src_lang": "en"},
    ),
    "langid_src_swapped": (
        RU_EN[1],
        RU[1],
        "langid_src",
        {"src_script_share": 0.0, "tgt_script_share": 0.0},
    ),
}

# As found in the OpenNMT toy corpus (Moses-escaped, not unescaped here).
EN_DE_CASES = {
    # Names are the same on both sides of a translation and are not counted.
    "names_are_not_copies": (
        "Tom is reading a book with Mary.",
        "Tom liest mit Mary ein Buch.",
        None,
        {"copied_words": 0, "copy_share": 0.0},
    ),
    # Issue 14's class 5: a half-translated web phrase (two of its three words left English).
    "copied_text_web_phrase": (
        "Double room, shower, toilet",
        "Doppelzimmer, shower, toilet",
        "copied_text",
        {"copied_words": 2, "copy_share": 12 / 24},  # shower, toilet over the English side
    ),
    # One ordinary word rightly the same on both sides (a quoted term; the German is
    # moses_de.txt's NTREX line, the English written for it): fewer than min_copied_words.
    "one_copied_word": (
        "Collins Dictionary named \"lockdown\" its word of the year 2020.",
        "Das Englischwörterbuch von Collins hat „lockdown“ zum Wort des Jahres 2020 ernannt.",
        None,
        {"copied_words": 1},
    ),
    # Issue 14's web phrases: fastText gives en only 0.41 / 0.44, enough for their length.
    "web_phrase_room": (
        "Double room, shower, toilet",
        "Doppelzimmer, Dusche, WC",
        None,
        {"src_chars": 27, "src_lang": "en"},
    ),
    "web_phrase_storage": (
        "Highly available storage cluster",
        "Hochverfügbarer Storage-Cluster",
        None,
        {"src_chars": 32, "tgt_lang": "de"},
    ),
    # A short English target where German belongs (Tatoeba eng): 17 characters, under the old
    # flat min_chars 20 (passed then); p(de) 0.011 is far under the 0.11 it needs.
    "short_english_as_german": (
        "Don't be nervous.",
        "Don't be nervous!",
        "langid_tgt",
        {"tgt_chars": 17, "tgt_lang": "en"},
    ),
    # A web phrase of two German compounds: 39 characters over 2 tokens. One or two words are
    # not checked (their ratio is one word's length); `long_word` covers run-on tokens.
    "de_compound_phrase": (
        "Privacy policy and terms",
        "Datenschutzerklärung Nutzungsbedingungen",
        None,
        {"tgt_char_word_ratio": 39 / 2},
    ),
    # From three tokens on the range applies.
    "de_three_compounds": (
        "Privacy policy, terms of use and customer survey",
        "Datenschutzerklärung Nutzungsbedingungen Kundenzufriedenheitsumfrage",
        "char_word_ratio",
        {"tgt_char_word_ratio": 66 / 3},
    ),
    "toy_urls": (
        TOY["src-train.txt:5487"],
        TOY["tgt-train.txt:5487"],
        "url_email_html",
        {"url_email_html": "www.cetrel.lu)"},  # the match runs to the next space
    ),
    "toy_replacement_char": (
        TOY["src-train.txt:800"],
        TOY["tgt-train.txt:800"],
        "special_chars",
        {"special_chars": "replacement_char"},
    ),
    "toy_escaped_apostrophe": (
        TOY["src-train.txt:30"],
        "Der vom Rat schließlich erzielte Kompromiss entspricht im Großen und Ganzen der "
        "Position des Parlaments .",
        "url_email_html",
        {"url_email_html": "&apos;"},
    ),
}

def config(pair: str, *overrides: str, extra: dict | None = None) -> FilterConfig:
    merged = {"pair": pair, "langid": {"model": MODEL}} | (extra or {})
    return load_config(None, list(overrides), extra=merged)


def order(names) -> str:
    return f"rules.order=[{', '.join(names)}]"


ORDER = config("zh-en").rules.order  # conf/defaults.yaml, src_digit_share (disabled) included
RUNS = config("zh-en").rule_order  # the rules a default zh-en run runs, in order


def scored(spark, cases: dict, cfg, others: dict) -> dict[str, dict]:
    """One Spark job: the side pass, every score, the rules each row fails (by name, in no
    rule order) and the first failure under `cfg` and under each config in `others` (same
    scores, other thresholds/order)."""
    src_lang, tgt_lang = cfg.langs
    df = spark.createDataFrame(
        [(name, src, tgt) for name, (src, tgt, _, _) in cases.items()],
        "name string, src string, tgt string",
    )
    for side, lang in (("src", src_lang), ("tgt", tgt_lang)):
        df = df.withColumn(f"{side}_a", side_analyzer(SideOptions(lang, MODEL))(F.col(side)))
    df = df.withColumn("src", F.col("src_a.text")).withColumn("tgt", F.col("tgt_a.text"))
    df = df.withColumns(score_columns(cfg)).drop("src_a", "tgt_a")
    failures = rule_failures(cfg)
    failing = [
        F.when(F.coalesce(failures[name], F.lit(False)), F.lit(name)) for name in sorted(failures)
    ]
    df = df.select(
        "*",
        F.array_compact(F.array(*failing)).alias("failing"),
        first_failure(cfg).alias("reject_rule"),
        *[first_failure(other).alias(f"reject_rule_{key}") for key, other in others.items()],
    )
    return {r["name"]: r.asDict() for r in df.collect()}


@pytest.fixture(scope="module")
def results(spark) -> dict[str, dict]:
    reverse = order(reversed(ORDER))
    url_first = order(["url_email_html", *[r for r in ORDER if r != "url_email_html"]])
    out = scored(
        spark,
        ZH_EN,
        config("zh-en", extra=EMOJI),
        {
            "reversed": config("zh-en", reverse, extra=EMOJI),
            "url_first": config("zh-en", url_first, extra=EMOJI),
            "no_empty": config("zh-en", "rules.disabled=[src_digit_share, empty]", extra=EMOJI),
            "flat": config("zh-en", "langid.min_prob_short=0.5", extra=EMOJI),
        },
    )
    out |= scored(spark, RU_EN_CASES, config("ru-en"), {"reversed": config("ru-en", reverse)})
    out |= scored(spark, EN_DE_CASES, config("en-de"), {"reversed": config("en-de", reverse)})
    return out


ALL = ZH_EN | RU_EN_CASES | EN_DE_CASES


@pytest.mark.parametrize("name", list(ALL))
def test_rule_and_scores(results: dict, name: str) -> None:
    _, _, rule, scores = ALL[name]
    row = results[name]
    assert row["reject_rule"] == rule, (row["failing"], row)
    for column, value in scores.items():
        if isinstance(value, float):
            assert row[column] == pytest.approx(value), column
        else:
            assert row[column] == value, column


def first_in(order: list[str], failing: list[str]) -> str | None:
    return next((rule for rule in order if rule in failing), None)


@pytest.mark.parametrize("name", list(ALL))
def test_first_failure_follows_the_configured_order(results: dict, name: str) -> None:
    # `failing` holds every rule the row fails, by name; the rejecting rule is the first of
    # them in `rules.order`, and reversing the order reports the last instead.
    row = results[name]
    assert row["reject_rule"] == first_in(RUNS, row["failing"])
    assert row["reject_rule_reversed"] == first_in(RUNS[::-1], row["failing"])


def test_injected_cases_fail_exactly_where_expected(results: dict) -> None:
    # A clean pair fails nothing; most injected faults trip only their own rule.
    for name in ("clean_a", "clean_b", "clean_c", "clean_traditional", "mixed_width_brackets"):
        assert results[name]["failing"] == [], name
    single = [
        "too_many_tokens",
        "token_ratio_truncated",
        "char_word_ratio",
        "punct_share",
        "unclosed_bracket",
        "url",
        "email",
        "replacement_char",
        "configured_pattern",
        "langid_src_cantonese_real",
        "langid_tgt_german",
    ]
    for name in single:
        assert results[name]["failing"] == [ZH_EN[name][2]], name


def test_order_override_decides_between_two_failures(results: dict) -> None:
    row = results["identical_and_url"]
    # (and, English in the zh column, char_word_ratio and langid_src)
    assert {"identical", "url_email_html"} <= set(row["failing"])
    assert row["reject_rule"] == "identical"
    assert row["reject_rule_url_first"] == "url_email_html"


def test_a_disabled_rule_is_never_reported(results: dict) -> None:
    # With `empty` disabled, the next failing rule is reported.
    assert not any(r.get("reject_rule_no_empty") == "empty" for r in results.values())
    src, tgt = results["empty_src"], results["empty_tgt"]
    assert {"empty", "token_ratio"} <= set(src["failing"])  # 0 source tokens: ratio 0.0
    assert src["token_ratio"] == 0.0
    assert src["reject_rule_no_empty"] == "token_ratio"
    # An empty English side fails nothing else (below min_chars, no letters to judge).
    assert tgt["failing"] == ["empty"]
    assert tgt["reject_rule_no_empty"] is None


def test_short_text_needs_less_certainty(results: dict) -> None:
    """The expected language's probability is judged against a threshold that grows with
    length: real short lines fastText is unsure of pass; with one flat threshold (min_prob
    from min_chars on) the same stored scores reject them."""
    for name, side in (("short_target_passes", "tgt"), ("langid_tgt_unsure_real", "tgt"),
                       ("langid_tgt_real", "tgt")):
        row = results[name]
        assert row["reject_rule"] is None, row
        assert 0.1 < row[f"{side}_lang_probs"]["en"] < 0.5, row
    row = results["short_target_passes"]
    assert row["tgt_lang_probs"]["en"] == pytest.approx(0.289, abs=1e-3)
    assert row["reject_rule_flat"] == "langid_tgt"
    assert results["langid_tgt_real"]["reject_rule_flat"] == "langid_tgt"


# Real Tatoeba pairs whose sources are dense with digits (stored after t2s), and real pairs
# with few or none: name -> (pair, digits over non-space characters).
DIGITS = {
    "date": (zh_en("我出生於1960年2月14日。"), 7 / 15),
    "money": (zh_en("他只有100美元。"), 3 / 9),
    "books": (zh_en("这个图书馆有超过50000册书。"), 5 / 16),
    "few": (A, 1 / 32),
    "none": (B, 0.0),
}


def test_src_digit_share_rejects_number_heavy_sources_when_on(spark) -> None:
    cases = {name: (*pair, None, {}) for name, (pair, _) in DIGITS.items()}
    rows = scored(spark, cases, config("zh-en", "rules.disabled=[]"), {"off": config("zh-en")})
    for name, (_, share) in DIGITS.items():
        row = rows[name]
        assert row["src_digit_share"] == pytest.approx(share), name
        assert row["failing"] == (["src_digit_share"] if share > 0.3 else []), (name, row)
        assert row["reject_rule_off"] is None  # off by default: nothing rejected
    assert "src_digit_share" not in score_columns(config("zh-en"))  # nor a column stored


def test_order_names_every_rule_once_and_no_other() -> None:
    with pytest.raises(ConfigError, match=r"unknown rule 'src_digits'"):
        config("zh-en", order([*ORDER, "src_digits"]))
    with pytest.raises(ConfigError, match=r"unknown rule 'emtpy'"):
        config("zh-en", "rules.disabled=[emtpy]")
    with pytest.raises(ConfigError, match=r"rules.order leaves out punct_share \(and"):
        config("zh-en", order(r for r in ORDER if r != "punct_share"))
    with pytest.raises(ConfigError, match=r"rules.order lists empty twice"):
        config("zh-en", order([*ORDER, "empty"]))
    # Left out of the order but disabled: explicit, so allowed.
    cfg = config("zh-en", order(r for r in ORDER if r != "punct_share"),
                 "rules.disabled=[src_digit_share, punct_share]")
    assert "punct_share" not in cfg.rule_order and "src_digit_share" not in cfg.rule_order


# filter_stats' steps of a default zh-en run, in order.
STATS_ZH_EN = [
    ("ingest", "invalid_utf8"), ("ingest", "nul_byte"), ("ingest", "line_too_long"),
    ("ingest", "malformed_line"), ("rules", "empty"), ("rules", "identical"),
    ("rules", "url_email_html"), ("rules", "special_chars"), ("rules", "too_many_tokens"),
    ("rules", "long_word"), ("rules", "token_ratio"), ("rules", "char_word_ratio"),
    ("rules", "punct_share"), ("rules", "unbalanced_brackets"), ("rules", "copied_text"),
    ("langid", "langid_src"), ("langid", "langid_tgt"), ("dedup", "duplicate"),
]
PAIR_ONLY = ("identical", "token_ratio", "copied_text", "langid_tgt")


def test_stats_steps_follow_the_order_with_each_rules_stage() -> None:
    assert rule_sequence(config("zh-en")) == STATS_ZH_EN
    mono = load_config(None, [], extra={"lang": "en"})
    assert rule_sequence(mono) == [step for step in STATS_ZH_EN if step[1] not in PAIR_ONLY]
    digits_on = rule_sequence(config("zh-en", "rules.disabled=[]"))
    assert digits_on == [*STATS_ZH_EN[:13], ("rules", "src_digit_share"), *STATS_ZH_EN[13:]]
    scorers = config("zh-en", "align.enabled=true", "embedding.enabled=true",
                     "embedding.margin_k=4")
    assert rule_sequence(scorers)[-3:] == [
        ("align", "align_coverage"), ("embed", "embed_cosine"), ("embed", "embed_margin")]


# The stored columns of a default run, as the tables hold them (udfs/rules.py's order).
ROW_COLUMNS = ["row_id", "pair", "corpus", "file", "file_tgt", "line", "src", "tgt", "extra"]
ZH_EN_SCORES = [
    "src_chars", "tgt_chars", "identical", "src_tokens", "tgt_tokens", "src_max_word_chars",
    "tgt_max_word_chars", "token_ratio", "src_char_word_ratio", "tgt_char_word_ratio",
    "src_punct_share", "tgt_punct_share", "bracket_mismatch", "copied_words", "copy_share",
    "url_email_html", "special_chars", "src_script_share", "tgt_script_share", "src_lang",
    "src_lang_prob", "src_lang_probs", "tgt_lang", "tgt_lang_prob", "tgt_lang_probs",
]
MONO_COLUMNS = ["row_id", "lang", "corpus", "file", "line", "text", "extra"]
MONO_SCORES = [
    "chars", "tokens", "max_word_chars", "char_word_ratio", "punct_share", "bracket_mismatch",
    "url_email_html", "special_chars", "script_share", "lid_lang", "lid_prob", "lid_probs",
]


def stored_columns(spark, cfg) -> list[str]:
    """The columns a run under `cfg` writes (the plan's, nothing is computed)."""
    row = ("en", "c", "f", None, 1, "One line.", None, None, None)
    raw = spark.createDataFrame(
        [(1, *row)],
        "row_id long, pair string, corpus string, file string, file_tgt string, line long, "
        "src string, tgt string, extra array<string>, ingest_error string",
    )
    decided = score_and_decide(normalize_and_analyze(raw, cfg, MODEL), cfg)
    return Layout(cfg.mono).outward(decided).columns


def test_stored_columns_and_their_monolingual_names(spark) -> None:
    decision = ["reject_rule", "reject_stage"]
    assert stored_columns(spark, config("zh-en")) == [*ROW_COLUMNS, *ZH_EN_SCORES, *decision]
    mono = load_config(None, [f"langid.model={MODEL}"], extra={"lang": "en"})
    assert stored_columns(spark, mono) == [*MONO_COLUMNS, *MONO_SCORES, *decision]
    on = load_config(None, [f"langid.model={MODEL}", "rules.disabled=[]"], extra={"lang": "en"})
    digits = [*MONO_SCORES[:5], "digit_share", *MONO_SCORES[5:]]
    assert stored_columns(spark, on) == [*MONO_COLUMNS, *digits, *decision]


def test_the_rules_settings_have_their_defaults_in_the_yaml_only() -> None:
    documented = yaml.safe_load(DEFAULTS.read_text(encoding="utf-8"))
    # The rules' settings are the registry's, with their defaults in the YAML only.
    for section, model, own in (("rules", RulesConf, {"order", "disabled"}),
                                ("langid", LangidConf,
                                 {"model", "backends", "backend_by_lang", "scripts"})):
        declared = set(settings(section))
        assert set(documented[section]) == declared | own, section
        assert all(model.model_fields[name].is_required() for name in declared), section
    assert sorted(documented["rules"]["order"]) == sorted(RULE_NAMES)
    assert all(rule.doc and all(s.doc for s in rule.settings) for rule in RULES)


def test_udfs_import_nothing_from_jobs() -> None:
    for path in sorted((REPO / "udfs").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            jobs = [m for m in modules if m == "jobs" or m.startswith("jobs.")]
            assert not jobs, f"udfs/{path.name}:{node.lineno} imports {jobs}"


# Valid pairs of ParaCrawl's human-labelled release 7 (CC0) that the bracket rule rejected
# before list markers were skipped, and two whose brackets stay unmatched.
@pytest.mark.parametrize("src,tgt,unmatched", [
    ("2) Permitted Users of Web site", "2) Позволени потребители на интернет страницата", False),
    ("d) The importance of the job to the company", "d) L-importanza tal-impjieg lill-kumpannija",
     False),
    ("(56) 'asset management vehicle' means a legal person",
     "56) \"vara valitsemise ettevõtja\" - juriidiline isik", False),
    ("3.) - You can continue to edit started document.",
     "3.) - Megkezdett dokumentum szerkesztése.", False),
    ("job, organization, career).", "práca, organizácia, kariéra).", True),
    ("civil) rights", "civil) rights", True),  # a word, not a marker
])
def test_a_list_items_marker_is_no_unmatched_bracket(src: str, tgt: str, unmatched: bool) -> None:
    from udfs.brackets import bracket_profile

    assert (any(bracket_profile(src)) or any(bracket_profile(tgt))) == unmatched


# The `mojibake` special pattern (conf/defaults.yaml), on sides as the job normalizes them.
# Garbled: ParaCrawl human-evaluation lines, verbatim or cut short (releases 6.2 and 7 of the public
# repository paracrawl/human-evaluations, CC-BY-SA-4.0; labels L, T and V). Clean: the letters
# mojibake borrows, where real orthographies put them, and a no-break space's harmless `Â `.
MOJIBAKE = [
    ("hu", "Ez a cookie egy jellegzetes karakterlánc, amely a böngészÅ' egyértelmÅ± "
           "azonosítását teszi lehetÅ'vé a weboldal újbóli megjelenítésekor.", True),
    ("hu", "Ott lehet előnézeti összes tartalom és szelektÃ ven jelölje meg azokat a tételt", True),
    ("lt", "ElektrinÄ— gitara ir bosinÄ— gitara Epiphone DÄ—vÄ—ti G-400 - aprašymas", True),
    ("hr", "Najvažnije je ne pobrkati taj dogaÄ‘aj s nekakvim mistinim egzodusom.", True),
    ("es", "Dificultad para respirar, respiraciÃ3n lenta o superficial, suspiros, debilidad", True),
    ("lv", "For sale is offered industrial land KaudzÄ«šu iela, Rumbula.", True),
    ("en", "Ä°stanbul Şehir University continues its activities in Altunizade East, West, and "
           "South Campuses, under the roof of 6 colleges and 3 graduate schools", True),
    ("en", "In 2008, the Daily Mail newspaper published an article claiming to identify "
           "Banksyâ€TMs real name.", True),
    ("hu", "Ez a cookie egy jellegzetes karakterlánc, amely a böngésző egyértelmű "
           "azonosítását teszi lehetővé a weboldal újbóli megjelenítésekor.", False),
    ("lt", "Elektrinė gitara ir bosinė gitara Epiphone Dėvėti G-400 - aprašymas", False),
    ("pt", "«A MAÇÃ» É VERMELHA, DISSE A IRMÃ.", False),
    ("sv", "PÅ SVENSKA: byn Å ligger i Lofoten.", False),
    ("es", "¿MAÑANA? ESPAÑA, AÑO 2024.", False),
    ("fi", "»PÄIVÄ» ja JÄÄ ovat sanoja.", False),
    ("is", "GUÐRÚN fór heim.", False),
    ("en", "If you forget your password, call your mailbox and press buttonÂ 9 to go to the "
           "menu.", False),
]


def test_mojibake_is_special_and_the_letters_it_borrows_are_not(spark) -> None:
    from functools import reduce

    from udfs.rules import special_match

    patterns = config("en-de").rule_settings["special_patterns"]
    frames = [
        spark.createDataFrame([(text, garbled) for lang, text, garbled in MOJIBAKE if lang == code],
                              "text string, garbled boolean")
        .withColumn("side", side_analyzer(SideOptions(code, MODEL))(F.col("text")).text)
        for code in sorted({lang for lang, _, _ in MOJIBAKE})
    ]
    rows = reduce(lambda a, b: a.unionByName(b), frames).select(
        "text", "garbled", special_match(F.col("side"), F.col("side"), patterns).alias("hit"),
    ).collect()
    assert len(rows) == len(MOJIBAKE)
    for row in rows:
        assert row.hit == ("mojibake" if row.garbled else None), row.text


def test_no_line_of_the_seed_languages_test_data_is_mojibake(spark) -> None:
    """Every line of tests/data/langs (the seed systems' languages) and the Tatoeba slices."""
    from udfs.rules import special_match

    patterns = {"mojibake": config("en-de").rule_settings["special_patterns"]["mojibake"]}
    paths = [*sorted((DATA / "langs").glob("*.tsv")), *sorted(DATA.glob("tatoeba-*-en.*"))]
    texts = [(p.name, line) for p in paths for line in lines(p.relative_to(DATA).as_posix())]
    assert len(texts) > 4000
    hits = spark.createDataFrame(texts, "file string, text string").where(
        special_match(F.col("text"), F.col("text"), patterns).isNotNull()).collect()
    assert hits == []
