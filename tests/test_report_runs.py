"""The report of a selection run and of a translation run (jobs/report.py with
jobs/reporting/select_data.py and translate_data.py): one small lake (English Tatoeba lines filtered
into mono_clean; a selection of them against the medical seed by two methods; a translation of some
into Chinese by the tiny model, with limits low enough to reject some), each run's page made by the
report job in the tests' warm driver (docs/testing.md), and what the pages say checked against the
lake's tables read with pyarrow. The pure parts (copy detection, ratio bins, the selection's cut)
are tested without Spark."""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from integration_helpers import alongside, spark_submit

from jobs.reporting.bins import Bins
from jobs.reporting.data import Run, ScoreStats
from jobs.reporting.page import histogram_chart, slug
from jobs.reporting.select_data import (
    COMBINED,
    NOT_SELECTED,
    SELECTED,
    cut_is_a_score,
    cut_rule,
    seed_facts,
)
from jobs.reporting.select_page import SELECT_GROUPS
from jobs.reporting.translate_data import (
    RATIO_BINS,
    WHITESPACE,
    TranslateReport,
    is_copy,
    length_ratio,
    normalise_space,
)
from jobs.reporting.translate_page import render_translate

SELECT_DIR = Path(__file__).resolve().parent / "data" / "select"
POOL_LINES = 200  # English Tatoeba lines filtered into mono_clean
METHODS = ("moore_lewis", "fasttext_domain")
TOP = 40
TRANSLATE_LIMIT = 40
MAX_IN, MAX_OUT = 16, 10  # low: some inputs too long, some outputs truncated


# -- without Spark ---------------------------------------------------------------------------
def test_whitespace_is_pythons_for_every_code_point() -> None:
    """The class Spark's regexp_replace normalises by is exactly str.isspace (what
    str.split() splits on), so the page's copies are `is_copy`'s."""
    pattern = re.compile(WHITESPACE)
    for cp in range(0x110000):
        c = chr(cp)
        assert bool(pattern.fullmatch(c)) == c.isspace(), hex(cp)


def test_copy_detection_ignores_whitespace_only() -> None:
    for text in ("  Hello,\tworld \u3000!\n", "a\xa0b", "", "x\u2028y  "):
        assert normalise_space(text) == " ".join(text.split())
    assert is_copy("Hello  world.", " Hello world. ")
    assert is_copy("你好\u3000世界", "你好 世界")
    assert not is_copy("Hello world.", "hello world.")  # case is not whitespace
    assert not is_copy("Hello world.", "Helloworld.")
    assert not is_copy("Hello", None) and not is_copy(None, None)


def test_length_ratio_and_its_bins() -> None:
    assert length_ratio("你好", "Hello") == 2.5
    assert length_ratio("", "x") is None and length_ratio(None, "x") is None
    assert length_ratio("abc", "") == 0.0
    b = RATIO_BINS
    assert (b.start, b.width, b.count) == (0.0, 0.05, 120)
    assert b.index(0.0) == 0 and b.index(0.049) == 0 and b.index(0.05) == 1
    assert b.index(1.0) == 20 and b.edges(20) == pytest.approx((1.0, 1.05))
    assert b.index(5.99) == 119 and b.index(42.0) == 119  # beyond: the last bin
    assert b.index(-1.0) == 0
    over = Bins.over(2.0, 2.0, 4)  # an empty range widens to one unit
    assert (over.start, over.width) == (2.0, 0.25) and over.index(3.5) == 3


def test_the_selection_cut_in_words_and_where_it_is_a_score() -> None:
    top = {"methods": ["moore_lewis"], "top": 1500}
    assert cut_rule(top) == "the 1,500 best-ranked rows (top)"
    assert cut_is_a_score(top, "moore_lewis")
    both = {"methods": list(METHODS), "top_percent": 10.0}
    assert cut_rule(both) == "the best 10% of the scored rows (top_percent)"
    assert cut_is_a_score(both, COMBINED) and not cut_is_a_score(both, "moore_lewis")
    kmeans = {"methods": ["kmeans_domains"], "top": None, "top_percent": None}
    assert "KMeans" in cut_rule(kmeans) and not cut_is_a_score(kmeans, "kmeans_domains")
    fluency = {"methods": ["lm_fluency"], "lm_fluency": {"keep": ["head", "middle"]}}
    assert cut_rule(fluency) == "the rows in the fluency buckets head, middle (lm_fluency.keep)"
    assert cut_is_a_score(fluency, "lm_fluency")


def test_the_seed_is_what_the_run_recorded() -> None:
    def run(inputs: list, config: dict) -> Run:
        return Run("s1", "select", "succeeded", config, "h", inputs, {}, "t0", "t1", None)

    files = {"seed": {"files": ["dev.zh", "dev.en"], "table": None}}
    recorded = run([{"table": "sluice.bitext_clean", "seed": "dev", "seed_hash": "ab12"}], files)
    assert seed_facts(recorded, []) == {"name": "dev", "hash": "ab12", "source": "dev.zh, dev.en"}
    table = {"seed": {"table": "sluice.bitext_clean", "where": "corpus = 'x'", "files": []}}
    from_stats = run([{"seed": None}], table)
    assert seed_facts(from_stats, [{"seed_name": "t", "seed_hash": "cd"}]) == {
        "name": "t", "hash": "cd", "source": "table sluice.bitext_clean where corpus = 'x'"}
    assert seed_facts(run([{"seed": None}], {}), [{"seed_name": None}]) is None


def test_a_selection_histogram_shows_the_selected_alone_below() -> None:
    s = ScoreStats("zh-en", "moore_lewis", None, None, False, [
        {"bin_start": 0.0, "bin_end": 0.5, "group": SELECTED, "rows": 30},
        {"bin_start": 0.5, "bin_end": 1.0, "group": NOT_SELECTED, "rows": 120}])
    top, below = histogram_chart(s, SELECT_GROUPS, "selected rows")["vconcat"]
    assert top["encoding"]["color"]["scale"]["domain"] == [NOT_SELECTED, SELECTED]
    assert [v["group"] for v in below["data"]["values"]] == [SELECTED]  # the few, alone


def test_a_translation_page_escapes_the_lakes_text_and_tags_its_counts() -> None:
    run = Run("tr", "translate", "succeeded", {}, "h", [], {}, "t0", "t1", None)
    stream = {"stream": "bt", "direction": "en-zh", "role": "back", "method": "greedy",
              "model": "m1", "available": 90, "read": 12, "stats_selected": 12,
              "translated": 10, "kept": 8, "rejected": 4,
              "rejected_by": {"input_too_long": 2, "output_truncated": 2}, "copies": 1,
              "copy_rate": 0.125, "ratio_mean": 0.4, "ratio_min": 0.25, "ratio_max": 0.5,
              "ratio_p5": 0.25, "ratio_p50": 0.4, "ratio_p95": 0.5}
    sample = {"stream": "bt", "direction": "en-zh", "reject_reason": "input_too_long",
              "source_corpus": "c", "source_row_id": 7, "src": "<b>bold</b> & more",
              "hypothesis": None, "src_tokens": 30, "tgt_tokens": None, "score": None, "n": 1}
    ratio = ScoreStats("bt en-zh", "length_ratio", None, None, False, [
        {"bin_start": 0.25, "bin_end": 0.3, "group": "kept", "rows": 8}])
    page = render_translate(TranslateReport(run, [stream], [ratio], [sample]))
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; more" in page and "<b>bold" not in page
    shown = {a.get("data-field") or a["data-reason"]: text for a, text in cells(page, "streams")}
    assert (shown["read"], shown["kept"], shown["input_too_long"], shown["copy_rate"]) == (
        "12", "8", "2", "12.5%")
    assert 'data-reason="input_too_long"' in page and histograms(page) == {
        "length_ratio bt en-zh": slug("ratio", "bt en-zh")}


# -- the runs and their pages ----------------------------------------------------------------
def submit(*args: str, job: str) -> str:
    done = spark_submit(*args, job=job)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, data_dir: Path,
         request: pytest.FixtureRequest) -> dict:
    """The filter run (its lines into mono_clean) while the tiny model trains; then the
    selection and the translation of them (one job at a time: a local lake's metastore), then
    both reports."""
    root = tmp_path_factory.mktemp("report-runs")
    lake = root / "lake"
    pool = root / "pool.en"
    lines = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()
    pool.write_text("\n".join(lines[:POOL_LINES]) + "\n", encoding="utf-8")

    def filtered() -> str:
        return submit("--lang", "en", "--corpus", "tatoeba", "--input", str(pool),
                      "--lake", str(lake), "--run-id", "f1", job="filter")

    _, model = alongside(filtered, lambda: request.getfixturevalue("tiny_multi_ct2"))
    submit("--lang", "en", "--corpus", "tatoeba", "--seed", str(SELECT_DIR / "seed-medical.en"),
           *[x for m in METHODS for x in ("--method", m)], "--top", str(TOP),
           "--lake", str(lake), "--run-id", "sel1", job="select_data")
    submit("--model", str(model), "--direction", "en-zh", "--method", "greedy",
           "--limit", str(TRANSLATE_LIMIT), "--set", f"decoding.max_input_tokens={MAX_IN}",
           "--set", f"decoding.max_output_tokens={MAX_OUT}", "--lake", str(lake),
           "--run-id", "tr1", job="translate")
    pages = {}
    for run_id in ("sel1", "tr1"):
        out = root / f"{run_id}.html"
        submit("--lake", str(lake), "--run-id", run_id, "--out", str(out), job="report")
        pages[run_id] = out.read_text(encoding="utf-8")
    return {"lake": lake, "pages": pages}


def rows_of(lake: Path, name: str, run_id: str) -> list[dict]:
    return (ds.dataset(lake / "tables" / name, partitioning="hive")
            .to_table(filter=ds.field("run_id") == run_id).to_pylist())


class Cells(HTMLParser):
    """Every <td> with a data-field: (its table's class, the td's attributes, its text)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self.cells: list[tuple[dict, dict, str]] = []
        self._open: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self.tables.append(a)
        elif tag == "td" and ("data-field" in a or "data-reason" in a):
            self._open = {"attrs": a, "text": ""}

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._open is not None:
            self.cells.append((self.tables[-1], self._open["attrs"], self._open["text"]))
            self._open = None

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["text"] += data


def cells(page: str, table_class: str) -> list[tuple[dict, str]]:
    parser = Cells()
    parser.feed(page)
    return [(a, text) for t, a, text in parser.cells if t.get("class") == table_class]


def specs(page: str) -> dict[str, dict]:
    found = re.search(r'<script type="application/json" id="sluice-specs">(.*?)</script>',
                      page, re.S)
    assert found
    return json.loads(found.group(1))


def histograms(page: str) -> dict[str, str]:
    """data-score (and data-stream) of each histogram -> its chart id."""
    return {(m[1] + " " + m[2]).strip(): m[0] for m in re.findall(
        r'<div class="chart histogram" id="([^"]+)" data-score="([^"]+)"'
        r'(?: data-stream="([^"]+)")?', page)}


def top_values(spec: dict) -> list[dict]:
    """The rows of a histogram's first panel (a chart, or a chart layered with its cut)."""
    panel = spec["vconcat"][0]
    chart = panel["layer"][0] if "layer" in panel else panel
    return (chart.get("data") or spec["data"])["values"]  # one panel: Altair hoists its data


def number(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.integration
def test_the_selection_page_counts_the_lakes_rows(lake: dict) -> None:
    page = lake["pages"]["sel1"]
    rows = rows_of(lake["lake"], "selected", "sel1")
    [stats] = rows_of(lake["lake"], "select_stats", "sel1")
    shown = {a["data-field"]: number(text) for a, text in cells(page, "select-counts")}
    selected = sum(r["selected"] for r in rows)
    reasons = Counter(r["reason"] for r in rows if r["reason"] is not None)
    assert len(rows) > 100 and selected == TOP == stats["selected"]
    assert shown == {"pool rows": len(rows), "scored": len(rows) - sum(reasons.values()),
                     "selected": selected, "cut (not selected)": len(rows) - selected,
                     **{f"unscorable: {k}": v for k, v in reasons.items()}}
    # The seed as the run recorded it, and no metric the lake does not hold.
    assert f"seed-medical.en (sha256 {stats['seed_hash']})" in page
    markup = re.sub(r"(?s)<script\b[^>]*>.*?</script>", "", page)  # the page, not vega's code
    assert "precision" not in markup.lower()


@pytest.mark.integration
def test_the_selection_page_has_each_methods_histogram(lake: dict) -> None:
    page = lake["pages"]["sel1"]
    rows = rows_of(lake["lake"], "selected", "sel1")
    charts, drawn = histograms(page), specs(page)
    assert set(charts) == {*METHODS, COMBINED}
    for column, chart in charts.items():
        values = top_values(drawn[chart])
        by_group = Counter()
        for v in values:
            by_group[v["group"]] += v["rows"]
        scored = [r for r in rows if (r["score"] if column == COMBINED
                                      else dict(r["scores"]).get(column)) is not None]
        assert by_group == Counter({SELECTED: sum(r["selected"] for r in scored),
                                    NOT_SELECTED: sum(not r["selected"] for r in scored)}), column
    # Two methods: the cut is a value of the combined score only, drawn on it.
    assert "layer" in drawn[charts[COMBINED]]["vconcat"][0]
    assert all("layer" not in drawn[charts[m]]["vconcat"][0] for m in METHODS)


@pytest.mark.integration
def test_the_translation_page_counts_the_lakes_rows(lake: dict) -> None:
    page = lake["pages"]["tr1"]
    kept = rows_of(lake["lake"], "synthetic", "tr1")
    rejected = rows_of(lake["lake"], "synthetic_rejected", "tr1")
    [stats] = rows_of(lake["lake"], "translate_stats", "tr1")
    shown = {a.get("data-field") or "rejected: " + a["data-reason"]: text
             for a, text in cells(page, "streams")}
    reasons = Counter(r["reject_reason"] for r in rejected)
    assert reasons and kept, (reasons, len(kept))  # the limits reject some, keep others
    assert {k: number(shown[k]) for k in ("available", "read", "translated", "kept",
                                          "rejected", "copies")} == {
        "available": stats["available"], "read": TRANSLATE_LIMIT,
        "translated": sum(r["hypothesis"] is not None for r in kept + rejected),
        "kept": len(kept), "rejected": len(rejected),
        "copies": sum(is_copy(r["src"], r["tgt"]) for r in kept)}
    assert {k: number(v) for k, v in shown.items() if k.startswith("rejected: ")} == {
        f"rejected: {k}": v for k, v in reasons.items()}
    # A sample table per reason, of that reason's rows (the stream: role-method).
    assert set(re.findall(r'class="samples" data-stream="back-greedy" data-reason="([^"]+)"',
                          page)) == set(reasons)


@pytest.mark.integration
def test_the_translation_pages_length_ratios_are_the_synthetic_tables(lake: dict) -> None:
    page = lake["pages"]["tr1"]
    kept = rows_of(lake["lake"], "synthetic", "tr1")
    ratios = [length_ratio(r["src"], r["tgt"]) for r in kept]
    values = {a["data-field"]: float(a["data-value"])
              for a, _ in cells(page, "streams") if "data-value" in a}
    assert values["ratio_mean"] == pytest.approx(sum(ratios) / len(ratios), rel=1e-12)
    assert (values["ratio_min"], values["ratio_max"]) == (min(ratios), max(ratios))
    [(name, chart)] = histograms(page).items()
    assert name.startswith("length_ratio ") and name.endswith(" en-zh")
    bins = Counter()
    for v in top_values(specs(page)[chart]):
        assert v["group"] == "kept"
        bins[round(v["bin_start"] / RATIO_BINS.width)] += v["rows"]
    assert bins == Counter(RATIO_BINS.index(x) for x in ratios)
