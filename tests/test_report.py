"""The run report (jobs/report.py): a filter run of the 1,500 Tatoeba zh-en pairs with both pair
scorers, its report made by the report job (the tests' warm driver, docs/testing.md) and opened in
headless Chromium (installed by scripts/install_chromium.sh): the charts draw offline without a
script error, one histogram per stored score, and the funnel in the page is filter_stats as the lake
holds it."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from integration_helpers import REPO, spark_submit

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

RUN_ID = "report-1"
# Columns of `bitext` that are not scores.
NOT_SCORES = {"row_id", "line", "dup_of", "dup_key", "dup_key_src", "dup_key_tgt"}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    root = tmp_path_factory.mktemp("report") / "lake"
    config = root.parent / "job.yaml"
    paths = f"[{data_dir / 'tatoeba-zh-en.zh'}, {data_dir / 'tatoeba-zh-en.en'}]"
    config.write_text(
        f"extends: {REPO / 'conf/zh-en.yaml'}\n"
        f"lake: {{root: {root}}}\n"
        f"inputs:\n  - {{corpus: tatoeba, paths: {paths}}}\n"
        "align: {enabled: true, sample_pairs: 500, min_train_pairs: 500}\n"
        "embedding: {enabled: true, margin_k: 4}\n"
    )
    done = spark_submit("--config", str(config), "--run-id", RUN_ID)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def report(lake: Path) -> Path:
    out = lake.parent / "report.html"
    # as docs/lake.md "Seeing a run" has it:
    # spark-submit jobs/report.py --lake L --run-id ID --out F
    done = spark_submit("--lake", str(lake), "--run-id", RUN_ID, "--out", str(out), job="report")
    assert done.returncode == 0, done.stderr[-3000:]
    return out


class Page(HTMLParser):
    """What the test reads off the rendered DOM: <body>'s attributes, which chart containers
    hold a drawn <svg>/<canvas>, the histograms' scores and the funnel tables' cells."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.charts: dict[str, bool] = {}  # id -> drawn
        self.histograms: dict[str, str] = {}  # score column -> chart id
        self.funnels: list[dict] = []  # pair, corpus, rows: [[cells]], fields: [(field, text)]
        self._divs: list[str | None] = []
        self._cell: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "body":
            self.body = a
        elif tag == "div":
            chart = a.get("id") if "chart" in classes else None
            if chart:
                self.charts[chart] = False
                if "histogram" in classes:
                    self.histograms[a["data-score"] or ""] = chart
            self._divs.append(chart)
        elif tag in ("svg", "canvas"):
            for chart in filter(None, self._divs):
                self.charts[chart] = True
        elif tag == "table" and "funnel" in classes:
            self.funnels.append({"pair": a["data-pair"], "corpus": a["data-corpus"],
                                 "rows": []})
        elif tag == "td" and self.funnels and self.funnels[-1].get("open", True):
            self._cell = {"field": a.get("data-field"), "text": ""}

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._divs:
            self._divs.pop()
        elif tag == "td" and self._cell is not None:
            if self._cell["field"] and self.funnels:
                self.funnels[-1]["rows"].append((self._cell["field"], self._cell["text"]))
            self._cell = None
        elif tag == "table" and self.funnels:
            self.funnels[-1]["open"] = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    assert exe, "no chromium: scripts/install_chromium.sh installs it (make test runs it)"
    # The virtual time budget lets the page's scripts (every vega-embed promise) finish before
    # the DOM is dumped or the screenshot taken.
    cmd = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
           "--v=0", "--virtual-time-budget=20000", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=180)


def test_the_report_draws_offline_every_score_and_the_lakes_funnel(lake: Path, report: Path,
                                                                    tmp_path: Path) -> None:
    page_html = report.read_text(encoding="utf-8")
    # Opens offline: no script, stylesheet or image is fetched from anywhere (outside the
    # inlined scripts, whose code writes such tags for its export menu, switched off here).
    assert not [tag for tag in re.findall(r"<script\b[^>]*>", page_html) if "src=" in tag]
    markup = re.sub(r"(?s)<script\b[^>]*>.*?</script>", "", page_html)
    assert not re.search(r"<(link|img|iframe)\b", markup)

    dumped = chromium("--dump-dom", report.as_uri(), cwd=tmp_path)
    assert dumped.returncode == 0, dumped.stderr[-3000:]
    console = [x for x in dumped.stderr.splitlines() if ":CONSOLE" in x]
    assert not [x for x in console if "Uncaught" in x or "rror" in x], console
    page = Page()
    page.feed(dumped.stdout)
    assert page.body.get("data-rendered") == "true", (page.body, console)
    assert "data-render-error" not in page.body

    # One histogram per stored numeric score, the pair scorers' included, each drawn.
    schema = ds.dataset(lake / "tables/bitext", partitioning="hive").schema
    numeric = {f.name for f in schema if pa.types.is_integer(f.type)
               or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type)}
    scores = numeric - NOT_SCORES
    assert {"src_tokens", "token_ratio", "align_coverage", "embed_cosine", "embed_margin"} <= scores
    assert set(page.histograms) == scores
    undrawn = sorted(chart for chart, drawn in page.charts.items() if not drawn)
    assert undrawn == [], undrawn
    assert len(page.charts) >= len(scores) + 2  # the funnel's and the runs' charts too

    # The funnel as the page shows it is filter_stats as the lake holds it.
    stats = (ds.dataset(lake / "tables/filter_stats", partitioning="hive")
             .to_table(filter=ds.field("run_id") == RUN_ID).to_pandas().sort_values("step"))
    assert len(page.funnels) == 1
    funnel = page.funnels[0]
    assert (funnel["pair"], funnel["corpus"]) == ("zh-en", "tatoeba")
    number = {field: [] for field in ("rows_in", "rows_rejected", "kept")}
    for field, text in funnel["rows"]:
        number[field].append(int(text.replace(",", "")))
    assert number["rows_in"] == stats["rows_in"].tolist()
    assert number["rows_rejected"] == stats["rows_rejected"].tolist()
    assert number["kept"] == [1500 - int(stats["rows_rejected"].sum())]
    kept = ds.dataset(lake / "tables/bitext", partitioning="hive").count_rows(
        filter=ds.field("outcome") == "clean")
    assert number["kept"] == [kept]

    shot = tmp_path / "report.png"
    done = chromium("--screenshot=" + str(shot), "--window-size=1400,4000", report.as_uri(),
                    cwd=tmp_path)
    assert done.returncode == 0 and shot.stat().st_size > 50_000, done.stderr[-2000:]


def test_what_if_at_the_current_threshold_is_the_funnel(lake: Path, report: Path) -> None:
    """Counted from the stored scores, the rows alive at a rule and those its threshold keeps
    are filter_stats' rows in and rows in less rejected, for every rule whose threshold is its
    only condition on the scores the what-if varies."""
    page_html = report.read_text(encoding="utf-8")
    tables = re.findall(r'<table class="what-if" data-pair="zh-en" data-rule="([^"]+)" '
                        r'data-alive="(\d+)" data-kept-now="(\d+)"', page_html)
    what_if = {rule: (int(alive), int(kept)) for rule, alive, kept in tables}
    stats = (ds.dataset(lake / "tables/filter_stats", partitioning="hive")
             .to_table(filter=ds.field("run_id") == RUN_ID).to_pandas().set_index("rule"))
    for rule in ("too_many_tokens", "long_word", "token_ratio", "punct_share", "align_coverage",
                 "embed_cosine", "embed_margin"):
        rows_in, rejected = stats.loc[rule, "rows_in"], stats.loc[rule, "rows_rejected"]
        assert what_if[rule] == (rows_in, rows_in - rejected), rule
    assert stats.loc["align_coverage", "rows_rejected"] > 0  # a threshold that cuts
    # Every other value carries the command that applies it: a re-decide of this run.
    applies = [html.unescape(c) for c in re.findall(r'<code class="apply">([^<]+)</code>',
                                                    page_html)]
    assert applies and all(f" filter --redecide {RUN_ID} --lake file://{lake} --set " in c
                           for c in applies), applies[:3]
    assert any("--set rules.max_tokens=" in c for c in applies)


def test_text_from_the_lake_is_escaped(report: Path) -> None:
    page_html = report.read_text(encoding="utf-8")
    assert "Filter run report-1" in page_html
    # The samples hold the lake's text escaped: no tag in them but the tables' own.
    samples = page_html[page_html.index('<h2 id="samples">'):page_html.index('<h2 id="config">')]
    tags = set(re.findall(r"</?([a-zA-Z0-9]+)", samples))
    assert tags <= {"h2", "h3", "h4", "table", "thead", "tbody", "tr", "th", "td"}, tags


def one_error_line(done: subprocess.CompletedProcess) -> str:
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    errors = [line for line in said.splitlines() if line.startswith("sluice: error: ")]
    assert len(errors) == 1, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    return errors[0]


def test_bad_input_is_one_line_and_exit_2(lake: Path, report: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    done = spark_submit("--lake", str(lake), "--run-id", "no-such-run", "--out", str(out),
                        job="report")
    assert "unknown run id no-such-run" in one_error_line(done)
    missing = tmp_path / "no-lake"
    done = spark_submit("--lake", str(missing), "--out", str(out), job="report")
    assert f"no lake at {missing}" in one_error_line(done)
    done = spark_submit("--lake", str(lake), "--pair", "de-en", "--out", str(out), job="report")
    assert "no succeeded filter run of pair de-en" in one_error_line(done)
    assert not out.exists() and not missing.exists()
