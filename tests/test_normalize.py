"""The language-independent normalizers (udfs/normalize.py) on real lines, in Spark.

Real escaped text comes from the OpenNMT toy en-de corpus (tests/data/ende-toy-escaped.txt,
Moses-tokenized with `&apos;`, `&quot;`, `&#91;`...); the other noise (tags, double escapes,
invisible characters, odd spaces) is injected into real Tatoeba / Anki / NTREX lines. All cases
go through one Spark job (module fixture); the tests read its rows.
"""

from __future__ import annotations

import gzip
import html
import re
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from udfs import normalize as N

DATA = Path(__file__).resolve().parent / "data"
ENTITY = re.compile(r"&(?:[a-z]+|#\d+|#x[0-9a-f]+);", re.I)


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def anki() -> list[list[str]]:
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        return [line.split("\t") for line in f.read().splitlines()]


TOY = [line.split("\t", 1) for line in lines("ende-toy-escaped.txt")]
EN = lines("tatoeba-zh-en.en")
ZH = lines("tatoeba-zh-en.zh")
RU = lines("tatoeba-ru-en.ru")
ANKI = anki()

# Real lines the injected noise is wrapped around.
EN1 = "Algiers is a bustling city of over three million people."
EN2 = "Don't be scared of making mistakes."
ZH1 = "反正事情已过去了，那不用再提了。"
ZH2 = "去地铁的路上差点踩到一只壁虎。"
RU1 = "Он женился на моей двоюродной сестре."
DE_NBSP = "„Wir hatten darüber gesprochen, dass er 55, 60\u00a0Minuten spielen sollte."
RU_NBSP = "«Какой ужас!»,\u00a0— повторяла она."
ANKI_BOM = "\ufeffHi."  # the first Anki line's English side, as found
ATTRIBUTION = ANKI[0][2]  # "... #538123 (CM) & #891077 (Martha)": a bare & in prose

# name -> (input, expected after the whole chain: unescape, tags, invisible, whitespace)
CASES: dict[str, tuple[str, str]] = {
    # entities
    "double_escaped_tag": (f"&amp;lt;b&amp;gt;{EN1}&amp;lt;/b&amp;gt;", EN1),
    "double_escaped_hex_apos": (html.escape(html.escape(EN2)), EN2),  # &amp;#x27;
    "decimal_apos": (EN2.replace("'", "&#39;"), EN2),
    "hex_apos": (EN2.replace("'", "&#x27;"), EN2),
    "xml_apos": (EN2.replace("'", "&apos;"), EN2),
    "double_xml_apos": (EN2.replace("'", "&amp;apos;"), EN2),
    "escaped_tag": (f"&lt;b&gt;{ZH1}&lt;/b&gt;", ZH1),
    "nbsp_entity": (EN1.replace(" ", "&nbsp;"), EN1),
    "bare_ampersand": (ATTRIBUTION, ATTRIBUTION),
    "out_of_range_decimal": (f"{EN1} &#99999999;", f"{EN1} &#99999999;"),
    "out_of_range_hex": (f"&#x110000; {EN1}", f"&#x110000; {EN1}"),
    "triple_escaped": ("&amp;amp;lt;", "&lt;"),  # two rounds, by design
    # tags
    "bold": (f"<b>{ZH1}</b>", ZH1),
    "span_attributes": (f"<span class=\"quote\" data-id='7'>{EN1}</span>", EN1),
    "upper_case_unquoted": (f"<FONT COLOR=red>{RU1}</FONT>", RU1),
    "link": (
        f'<a href="https://tatoeba.org/en/sentences/show/538123" title="Tatoeba">{EN1}</a>',
        EN1,
    ),
    "inline_inside_sentence": ("<i>Don't</i> be scared of making <em>mistakes</em>.", EN2),
    "line_break_between": (f"{EN1}<br/>{EN2}", f"{EN1} {EN2}"),
    "paragraphs": (f"<p>{EN1}</p><P class=x>{EN2}</P>", f"{EN1} {EN2}"),
    "self_closing_img": (f'{EN1}<img src="smile.png" alt=":)"/>', EN1),
    "comment": (f"<!-- translated by M -->{ZH1}", ZH1),
    "prose_lt_gt": ("if a<b then c>d", "if a<b then c>d"),
    "unlisted_tag": (f'<ref name="x">{EN1}', f'<ref name="x">{EN1}'),
    "book_title_marks": ("我在看《红楼梦》。", "我在看《红楼梦》。"),
    # invisible and control characters
    "zero_width_spaces": (ZH2.replace("地铁", "地\u200b铁\u200b"), ZH2),
    "bom_real": (ANKI_BOM, "Hi."),
    "soft_hyphens": (EN1.replace("drunk", "dru\u00adnk").replace("friends", "fri\u00adends"), EN1),
    "bidi_embedding": (f"\u202b{RU1}\u202c", RU1),
    "bidi_isolate_and_marks": (f"\u2067{EN1}\u2069\u200e", EN1),
    "zero_width_joiners": (ZH1.replace("事情", "事\u200d情\u200c").replace("。", "\u2060。"), ZH1),
    "c0_controls": (f"\x07{EN1}\x1b\x7f", EN1),
    "c1_controls": (f"\x80{RU1}\x9b\x9f", RU1),
    "form_feed_between_sentences": (f"{EN1}\x0c{EN2}", f"{EN1} {EN2}"),
    "vertical_tab_between_words": (EN1.replace(" ", "\x0b"), EN1),
    "next_line_between_sentences": (f"{EN1}\x85{EN2}", f"{EN1} {EN2}"),
    # spaces
    "nbsp_real_de": (DE_NBSP, DE_NBSP.replace("\u00a0", " ")),
    "nbsp_real_ru": (RU_NBSP, RU_NBSP.replace("\u00a0", " ")),
    "ideographic_space": (ZH1.replace("，", "，\u3000"), ZH1.replace("，", "， ")),
    "thin_and_narrow_spaces": (EN1.replace(" ", "\u2009", 2).replace(" ", "\u202f", 1), EN1),
    "tabs_newlines_crlf": (f"  {EN1}\t\t{EN2}\r\n", f"{EN1} {EN2}"),
    "line_separator": (f"{EN1}\u2028{EN2}\u2029", f"{EN1} {EN2}"),
    "only_spaces": (" \u3000\u00a0\t", ""),
}


def arrow_steps(texts: list[str | None]) -> list[str | None]:
    """The steps of the per-side Arrow pass, in their order (udfs/sides.py)."""
    return N.collapse_whitespace(N.remove_invisible(pa.array(texts, pa.string()))).to_pylist()


@pytest.fixture(scope="module")
def out(spark) -> dict[str, dict]:
    """key -> {text, unescaped, stripped, visible, collapsed, chained}: the JVM steps from one
    Spark job, the Arrow steps on the same texts, and the chain of all four as the filter
    runs them (JVM first)."""
    rows = [(f"case:{k}", v[0]) for k, v in CASES.items()]
    rows += [(f"toy:{origin}", text) for origin, text in TOY]
    rows += [
        (f"{name}:{i}", t)
        for name, ls in (("en", EN), ("zh", ZH), ("ru", RU))
        for i, t in enumerate(ls)
    ]
    rows += [(f"anki:{i}:{side}", r[side]) for i, r in enumerate(ANKI) for side in (0, 1)]
    rows.append(("null", None))
    t = F.col("text")
    df = spark.createDataFrame(rows, "key string, text string").select(
        "key",
        "text",
        N.unescape_entities(t).alias("unescaped"),
        N.strip_html(t).alias("stripped"),
        N.strip_html(N.unescape_entities(t)).alias("jvm"),
    )
    got = [r.asDict() for r in df.collect()]
    texts = [r["text"] for r in got]
    visible = N.remove_invisible(pa.array(texts, pa.string())).to_pylist()
    collapsed = N.collapse_whitespace(pa.array(texts, pa.string())).to_pylist()
    chained = arrow_steps([r.pop("jvm") for r in got])
    for r, v, c, ch in zip(got, visible, collapsed, chained, strict=True):
        r.update(visible=v, collapsed=c, chained=ch)
    return {r["key"]: r for r in got}


def test_base_lines_are_real() -> None:
    assert {EN1, EN2} <= set(EN)
    assert {ZH1, ZH2} <= set(ZH)
    assert {RU1, RU_NBSP} <= set(RU) | set(lines("moses_ru.txt"))
    assert DE_NBSP in lines("moses_de.txt")
    assert ANKI[0][1] == ANKI_BOM


@pytest.mark.parametrize("name", list(CASES))
def test_chain_on_noisy_real_lines(out: dict, name: str) -> None:
    assert out[f"case:{name}"]["chained"] == CASES[name][1]


def test_moses_escaped_lines_unescape_like_python_html(out: dict) -> None:
    assert len(TOY) == 43
    escaped = [(o, t) for o, t in TOY if ENTITY.search(t)]
    assert len(escaped) == 39
    for origin, text in escaped:
        got = out[f"toy:{origin}"]["unescaped"]
        assert got == html.unescape(html.unescape(text)), origin
        assert not ENTITY.search(got), origin


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        (
            "src-train.txt:30",
            "The compromise finally reached by the Council is , broadly speaking , in line with "
            "Parliament ' s stance .",
        ),
        (
            "src-train.txt:1669",
            "His costume from the episode { { e | Rules of Acquisition } } was sold off on the "
            "[ [ It 's A Wrap ! sale and auction ] ] on eBay .",
        ),
        ("src-train.txt:5299", "You are here: Home > France > Paris > 08 ."),
        (
            "tgt-train.txt:243",
            'Hinweis: socket _ read () gibt einen leeren String (" ") zurück , wenn es keine Daten '
            "mehr zu lesen gibt .",
        ),
        (
            "src-train.txt:675",
            "However , if you 're building an init string , it 's best to start with a simple & F "
            ', and not use the " customized " form of defaults .',
        ),
    ],
)
def test_moses_escaped_lines_through_the_chain(out: dict, origin: str, expected: str) -> None:
    # `>` from &gt; is prose, not a tag: the tag step leaves it alone.
    assert out[f"toy:{origin}"]["chained"] == expected


def test_each_step_alone(out: dict) -> None:
    bold = out["case:bold"]
    assert bold["unescaped"] == bold["text"]  # no & -> untouched
    assert bold["stripped"] == ZH1
    assert bold["visible"] == bold["collapsed"] == bold["text"]
    esc = out["case:double_escaped_tag"]
    assert esc["unescaped"] == f"<b>{EN1}</b>"
    assert esc["stripped"] == esc["text"]  # escaped tags are text until unescaped
    # Block tags leave a space (words stay apart), inline tags none.
    assert out["case:line_break_between"]["stripped"] == f"{EN1} {EN2}"
    assert out["case:inline_inside_sentence"]["stripped"] == EN2
    # The invisible step keeps the separators the whitespace step turns into spaces.
    ff = out["case:form_feed_between_sentences"]
    assert ff["visible"] == ff["text"]
    assert ff["collapsed"] == f"{EN1} {EN2}"
    tabs = out["case:tabs_newlines_crlf"]
    assert tabs["visible"] == tabs["text"]
    zwsp = out["case:zero_width_spaces"]
    assert zwsp["visible"] == ZH2
    assert zwsp["collapsed"] == zwsp["text"]  # a zero-width space is no space
    assert out["case:nbsp_entity"]["unescaped"] == EN1.replace(" ", "\u00a0")
    assert out["case:nbsp_real_de"]["visible"] == DE_NBSP  # NBSP is a space, not invisible


def test_out_of_range_numeric_entity_does_not_fail_the_job(out: dict) -> None:
    # commons-text throws on &#99999999; (beyond U+10FFFF); that row keeps its text as is
    # (the url_email_html rule rejects the remnant) and every other row is still unescaped.
    for name in ("out_of_range_decimal", "out_of_range_hex"):
        row = out[f"case:{name}"]
        assert row["unescaped"] == row["text"]
    assert out["case:decimal_apos"]["unescaped"] == EN2


def test_clean_real_lines_are_left_alone(out: dict) -> None:
    real = [
        (f"{n}:{i}", t) for n, ls in (("en", EN), ("zh", ZH), ("ru", RU)) for i, t in enumerate(ls)
    ]
    real += [(f"anki:{i}:{s}", r[s]) for i, r in enumerate(ANKI) for s in (0, 1)]
    changed = {k for k, t in real if out[k]["chained"] != t}
    # Only the real line with an invisible character changes: the BOM of the first Anki line.
    assert changed == {"anki:0:1"}
    assert len(real) == 1500 + 1500 + 500 + 2 * 2000


def test_null_stays_null(out: dict) -> None:
    row = out["null"]
    assert row["unescaped"] is row["stripped"] is row["visible"] is row["chained"] is None
