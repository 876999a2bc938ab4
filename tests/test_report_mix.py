"""The report of a mixture run (jobs/report.py with jobs/reporting/mix_data.py): the lake of
tests/data/mix/seed_lake.py (Tatoeba zh-en and ru-en, back-translated zh-en, a registered test set),
one small mixture made in the same job (temperature 3 over directions with a direction
weight, a capped swapped direction, a synthetic share, a fixed count, n-gram overlaps flagged, two
stages), its page made by the report job in the tests' warm driver, and what the page says checked
against `mixture_stats`, `mixture` and `eval_sets` read with pyarrow. The pure parts (the pooled
sources and temperature rows by the mixing job's own rules, the words and the counts) are tested
without Spark."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from integration_helpers import REPO, spark_submit, submit_script

from jobs.mixing import sampling
from jobs.mixing.config import load_mix_config
from jobs.reporting.data import Run
from jobs.reporting.mix_data import (
    SAMPLE_ROWS,
    MixReport,
    pooled,
    sized_by,
    stage_mismatches,
    tag_counts,
    tag_label,
    temperature_rows,
)
from jobs.reporting.mix_page import render_mix

DATA = REPO / "tests" / "data"
TOTAL, T = 600, 3.0
CONFIG = """extends: {repo}/conf/mix-defaults.yaml
name: small
lake: {{root: {lake}}}
total: {total}
temperature: {t}
direction_weights: {{ru-en: 1.5}}
synthetic_share_by_direction: {{zh-en: 0.25}}
sources:
  - {{name: zh-en, table: bitext_clean, direction: zh-en}}
  - {{name: ru-en, table: bitext_clean, direction: ru-en}}
  - {{name: en-zh, table: bitext_clean, direction: en-zh, swap: true, where: "line <= 100",
      cap: 60}}
  - {{name: bt, table: synthetic, direction: zh-en, swap: true}}
  - {{name: ru-fix, table: bitext_clean, direction: ru-en, where: "line <= 40", count: 80}}
decontaminate: {{ngram_action: flag}}
stages: {{column: embed_cosine, quantiles: [0.0, 0.5]}}
"""


def write_config(path: Path, lake: Path) -> Path:
    path.write_text(CONFIG.format(repo=REPO, lake=lake, total=TOTAL, t=T), encoding="utf-8")
    return path


def stats_row(source: str, direction: str, eligible: int, planned: int, sampled: int,
              synthetic: bool = False, **extra: object) -> dict:
    row = {"source": source, "direction": direction, "source_table": "sluice.bitext_clean",
           "synthetic": synthetic, "available": eligible, "decontaminated": 0,
           "decontaminated_by": {}, "flagged": 0, "eligible": eligible, "weight": 1.0,
           "planned": planned, "sampled": sampled, "distinct_rows": min(sampled, eligible),
           "effective_weight": 0.0, "epochs": sampled / eligible if eligible else 0.0,
           "stage_rows": {1: sampled}}
    return {**row, **extra}


# -- without Spark ---------------------------------------------------------------------------
def test_the_pooled_sources_are_the_mix_configs(tmp_path: Path) -> None:
    cfg = load_mix_config(write_config(tmp_path / "m.yaml", tmp_path / "lake"))
    config = cfg.resolved()  # as the run stores it in `runs`
    assert pooled(config) == [s.name for s in cfg.pooled()] == ["zh-en", "ru-en", "en-zh"]
    # no synthetic share: the synthetic source is pooled like the others
    text = (tmp_path / "m.yaml").read_text(encoding="utf-8")
    (tmp_path / "plain.yaml").write_text(text.replace("synthetic_share_by_direction", "#"),
                                         encoding="utf-8")
    plain = load_mix_config(tmp_path / "plain.yaml")
    assert pooled(plain.resolved()) == [s.name for s in plain.pooled()]
    assert "bt" in pooled(plain.resolved())
    by_source = load_mix_config(tmp_path / "m.yaml", ["temperature_over=source"])
    assert pooled(by_source.resolved()) == [s.name for s in by_source.pooled()]


def test_temperature_rows_against_the_mix_jobs_plan(tmp_path: Path) -> None:
    cfg = load_mix_config(write_config(tmp_path / "m.yaml", tmp_path / "lake"))
    eligible = {"zh-en": 1486, "ru-en": 495, "en-zh": 93, "bt": 1500, "ru-fix": 40}
    plans = sampling.plan(cfg, eligible)
    stats = [stats_row(n, s.direction, eligible[n], plans[n].planned, plans[n].count,
                       synthetic=n == "bt") for n, s in zip(eligible, cfg.sources, strict=True)]
    rows = {r["group"]: r for r in temperature_rows(cfg.resolved(), stats)}
    assert set(rows) == {"zh-en", "ru-en", "en-zh"}  # directions; bt and ru-fix come on top
    assert rows["zh-en"]["sources"] == ["zh-en"] and rows["ru-en"]["weight"] == 1.5
    assert sum(r["planned"] for r in rows.values()) == TOTAL
    for g, r in rows.items():
        assert abs(r["planned"] - TOTAL * r["formula"]) <= 1, g  # whole rows of the formula
    assert rows["en-zh"]["sampled"] == 60 < rows["en-zh"]["planned"]  # the cap
    assert sum(r["realized"] for r in rows.values()) == pytest.approx(1.0)
    assert rows["en-zh"]["realized"] == 60 / sum(r["sampled"] for r in rows.values())
    # over sources: each pooled source its own group, weighted by its weight
    by_source = load_mix_config(tmp_path / "m.yaml", ["temperature_over=source"])
    grouped = temperature_rows(by_source.resolved(), stats)
    assert [r["group"] for r in grouped] == ["en-zh", "ru-en", "zh-en"]
    assert all(r["weight"] == 1.0 for r in grouped)


def test_how_each_source_was_sized_in_words(tmp_path: Path) -> None:
    config = load_mix_config(write_config(tmp_path / "m.yaml", tmp_path / "lake")).resolved()
    assert [sized_by(config, n) for n in ("zh-en", "en-zh", "bt", "ru-fix", "nope")] == [
        "temperature", "temperature, cap 60", "synthetic share 0.25", "count 80", ""]
    assert tag_label(["<2en> ", "<BT> "]) == "<2en> <BT>" and tag_label([]) == "(no tags)"


def test_tag_counts_and_stage_checks() -> None:
    counted = [{"source": "a", "tags": ("<2en> ",), "stage": 1, "rows": 10},
               {"source": "a", "tags": ("<2en> ",), "stage": 2, "rows": 4},
               {"source": "b", "tags": ("<2en> ",), "stage": 1, "rows": 3},
               {"source": "c", "tags": ("<2en> ", "<BT> "), "stage": 1, "rows": 5}]
    assert tag_counts(counted) == [
        {"tags": ("<2en> ",), "sources": ["a", "b"], "rows": {1: 13, 2: 4}},
        {"tags": ("<2en> ", "<BT> "), "sources": ["c"], "rows": {1: 5}}]
    stats = [stats_row("a", "zh-en", 10, 10, 10, stage_rows={1: 10, 2: 4}),
             stats_row("b", "zh-en", 3, 3, 3, stage_rows={1: 3, 2: 0}),
             stats_row("c", "zh-en", 5, 5, 5, stage_rows={1: 6})]
    assert stage_mismatches(stats, counted) == [
        "source c: mixture_stats counts {1: 6} rows per stage, mixture holds {1: 5}."]


def test_a_mixture_page_escapes_the_lakes_text_and_tags_its_counts(tmp_path: Path) -> None:
    config = load_mix_config(write_config(tmp_path / "m.yaml", tmp_path / "lake")).resolved()
    run = Run("m1", "mix", "succeeded", config, "h", [], {}, "t0", "t1", None)
    stats = [stats_row("zh-en", "zh-en", 100, 60, 60, decontaminated=4,
                       decontaminated_by={"wmt<22>": 4}, effective_weight=0.75)]
    sample = {"source": "zh-en", "direction": "zh-en", "corpus": "c", "row_id": 7, "copy": 0,
              "tags": ["<2en> "], "src": "<2en> <b>bold</b> & more", "tgt": "x",
              "noised": False, "score": 0.5, "contamination": [], "n": 1}
    page = render_mix(MixReport(run, "small", stats, temperature_rows(config, stats), [], [],
                                [], [sample], ["a note"]))
    assert "&lt;2en&gt; &lt;b&gt;bold&lt;/b&gt; &amp; more" in page and "<b>bold" not in page
    assert "<h1>Mixture run m1</h1>" in page and "T = 3.0" in page
    shown = {a["data-field"]: (a, text) for a, text in table_cells(page, "sources")}
    assert shown["decontaminated_by"][1] == "wmt<22> 4" and shown["sampled"][1] == "60"
    assert float(shown["effective_weight"][0]["data-value"]) == 0.75
    [(group, cells)] = rows_by(page, "temperature", "data-group").items()
    assert group == "zh-en" and cells["realized"][0]["data-value"] == "1.0"


# -- reading the page ------------------------------------------------------------------------
class Tables(HTMLParser):
    """Every table's rows: (the table's attributes, [(a td's attributes, its text)])."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict, list[tuple[dict, str]]]] = []
        self._tables: list[dict] = []
        self._cell: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._tables.append(a)
        elif tag == "tr" and self._tables:
            self.rows.append((self._tables[-1], []))
        elif tag == "td":
            self._cell = {"attrs": a, "text": ""}

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1][1].append((self._cell["attrs"], self._cell["text"]))
            self._cell = None
        elif tag == "table" and self._tables:
            self._tables.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data


def table_rows(page: str, table_class: str) -> list[list[tuple[dict, str]]]:
    parser = Tables()
    parser.feed(page)
    return [cells for t, cells in parser.rows if t.get("class") == table_class and cells]


def table_cells(page: str, table_class: str) -> list[tuple[dict, str]]:
    return [c for row in table_rows(page, table_class) for c in row if "data-field" in c[0]]


def rows_by(page: str, table_class: str, key: str) -> dict[str, dict[str, tuple[dict, str]]]:
    """Rows whose first cell has the attribute `key`: its value -> {field: (attrs, text)}."""
    out = {}
    for row in table_rows(page, table_class):
        if key in row[0][0]:
            out[row[0][0][key]] = {a["data-field"]: (a, text) for a, text in row
                                   if "data-field" in a}
    return out


def samples_of(page: str, source: str) -> list[list[tuple[dict, str]]]:
    parser = Tables()
    parser.feed(page)
    return [cells for t, cells in parser.rows
            if t.get("class") == "samples" and t.get("data-source") == source and cells]


def number(text: str) -> int:
    return int(text.replace(",", ""))


def exact(cell: tuple[dict, str]) -> float:
    return float(cell[0]["data-value"])


# -- the run and its page --------------------------------------------------------------------
def read(lake: Path, name: str) -> list[dict]:
    return ds.dataset(str(lake / "tables" / name), format="parquet",
                      partitioning="hive").to_table().to_pylist()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The seeded lake, the test set registered and the mixture made in one spark-submit (as
    tests/test_mix_job.py does), then the report's own spark-submit."""
    root = tmp_path_factory.mktemp("report-mix")
    lake = root / "lake"
    config = write_config(root / "small.yaml", lake)
    register = ["--register-eval", "tatoeba-dev", "--pair", "zh-en", "--input",
                str(DATA / "train_dev_tatoeba.zh"), str(DATA / "train_dev_tatoeba.en"),
                "--lake", str(lake), "--run-id", "eval1"]
    mix = ["--config", str(config), "--run-id", "mx1"]
    seed = submit_script(DATA / "mix/seed_lake.py", str(lake), json.dumps(register),
                         json.dumps(mix), conf={"spark.sql.shuffle.partitions": "3"})
    assert seed.returncode == 0, seed.stdout[-3000:] + seed.stderr[-3000:]
    out = root / "mx1.html"
    done = spark_submit("--lake", str(lake), "--run-id", "mx1", "--out", str(out), job="report")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    stats = {r["source"]: {**r, "decontaminated_by": dict(r["decontaminated_by"]),
                           "stage_rows": dict(r["stage_rows"])}
             for r in read(lake, "mixture_stats") if r["run_id"] == "mx1"}
    rows = [r for r in read(lake, "mixture") if r["mixture"] == "small"]
    return {"page": out.read_text(encoding="utf-8"), "stats": stats, "rows": rows,
            "evals": read(lake, "eval_sets"), "config": config}


FIELDS = ("direction", "source_table", "synthetic", "available", "decontaminated", "flagged",
          "eligible", "weight", "planned", "sampled", "distinct_rows", "effective_weight",
          "epochs")


@pytest.mark.integration
def test_the_sources_are_mixture_stats(made: dict) -> None:
    stats, page = made["stats"], made["page"]
    shown = rows_by(page, "sources", "data-source")
    assert list(shown) == ["zh-en", "ru-en", "en-zh", "bt", "ru-fix"]  # the config's order
    for name, cells in shown.items():
        s = stats[name]
        for f in FIELDS:
            value = s[f]
            if isinstance(value, float):
                assert exact(cells[f]) == value, (name, f)
            elif isinstance(value, bool):
                assert cells[f][1] == str(value), (name, f)
            elif isinstance(value, int):
                assert number(cells[f][1]) == value, (name, f)
            else:
                assert cells[f][1] == value, (name, f)
        by = ", ".join(f"{k} {v:,}" for k, v in sorted(s["decontaminated_by"].items()))
        assert cells["decontaminated_by"][1] == (by or "–")
    # the run removed the test set's lines (exact) and flagged the planted overlap
    assert stats["zh-en"]["decontaminated_by"] == {"tatoeba-dev": stats["zh-en"]["decontaminated"]}
    assert stats["zh-en"]["decontaminated"] >= 14 and stats["zh-en"]["flagged"] >= 1
    removed = {(r[0][1], r[1][1]): number(r[2][1]) for r in table_rows(page, "decontaminated")}
    assert removed == {(n, k): v for n, s in stats.items()
                       for k, v in s["decontaminated_by"].items()}
    assert f"Flagged (kept) rows: {sum(s['flagged'] for s in stats.values()):,}." in page


@pytest.mark.integration
def test_realized_shares_against_the_temperature_formula(made: dict) -> None:
    stats, page = made["stats"], made["page"]
    cfg = load_mix_config(made["config"])
    groups = {"zh-en": ["zh-en"], "ru-en": ["ru-en"], "en-zh": ["en-zh"]}
    n = {g: sum(stats[s]["eligible"] for s in m) for g, m in groups.items()}
    q = {g: n[g] ** (1 / T) * cfg.direction_weights.get(g, 1.0) for g in groups}
    sampled = {g: sum(stats[s]["sampled"] for s in m) for g, m in groups.items()}
    shown = rows_by(page, "temperature", "data-group")
    assert f'data-temperature="{T}"' in page and f"Temperature: T = {T}" in page
    assert set(shown) == set(groups)
    for g, cells in shown.items():
        assert number(cells["eligible"][1]) == n[g]
        assert exact(cells["weight"]) == (1.5 if g == "ru-en" else 1.0)
        assert exact(cells["formula"]) == pytest.approx(q[g] / sum(q.values()), rel=1e-12)
        assert exact(cells["realized"]) == sampled[g] / sum(sampled.values())
        assert number(cells["planned"][1]) == stats[g]["planned"]
        assert abs(stats[g]["planned"] - TOTAL * q[g] / sum(q.values())) <= 1
    assert stats["en-zh"]["sampled"] == 60 < stats["en-zh"]["planned"]  # capped: below formula
    whole = {a["data-direction"]: number(row[1][1])
             for row in table_rows(page, "directions") for a, _ in row[:1]}
    assert whole == {d: sum(s["sampled"] for s in stats.values() if s["direction"] == d)
                     for d in {s["direction"] for s in stats.values()}}


@pytest.mark.integration
def test_the_tags_and_stages_are_the_mixture_tables(made: dict) -> None:
    rows, page, stats = made["rows"], made["page"], made["stats"]
    tags = Counter((tag_label(r["tags"]), r["stage"]) for r in rows)
    shown = rows_by(page, "tags", "data-tags")
    assert {(label, int(f.removeprefix("stage "))): number(c[1])
            for label, cells in shown.items() for f, c in cells.items()} == tags
    assert set(shown) == {"<2en>", "<2en> <BT>", "<2zh>"}
    # per stage and direction: rows, scored, and the lowest score = the quantile's cut
    table = {(int(r[0][0]["data-stage"]), r[0][0]["data-direction"]):
             {a["data-field"]: (a, t) for a, t in r if "data-field" in a}
             for r in table_rows(page, "stages")}
    for (stage, direction), cells in table.items():
        mine = [r for r in rows if r["stage"] == stage
                and direction in ("all", r["direction"])]
        scores = [r["score"] for r in mine if r["score"] is not None]
        assert number(cells["rows"][1]) == len(mine), (stage, direction)
        assert number(cells["scored"][1]) == len(scores)
        assert number(cells["copies"][1]) == sum(r["copy"] > 0 for r in mine)
        assert cells["lowest"][0]["data-value"] == repr(min(scores) if scores else None)
    for direction in {r["direction"] for r in rows}:
        distinct = sorted(r["score"] for r in rows if r["stage"] == 1 and r["copy"] == 0
                          and r["direction"] == direction and r["score"] is not None)
        if distinct:
            cut = distinct[math.floor(0.5 * len(distinct))]
            assert exact(table[(2, direction)]["lowest"]) == cut, direction
    assert "(threshold)" in table[(2, "zh-en")]["lowest"][1]
    per_source = rows_by(page, "stage-rows", "data-source")
    assert {n: {int(f.removeprefix("stage ")): number(c[1]) for f, c in cells.items()}
            for n, cells in per_source.items()} == {
        n: {k: s["stage_rows"].get(k, 0) for k in (1, 2)} for n, s in stats.items()}
    assert not re.search(r'<p class="note">', page)  # stats and rows agree


@pytest.mark.integration
def test_the_eval_sets_and_samples(made: dict) -> None:
    page, rows = made["page"], made["rows"]
    evals = {a["data-set"]: r for r in table_rows(page, "eval-sets") for a, _ in r[:1]}
    segments = len({r["line"] for r in made["evals"] if r["name"] == "tatoeba-dev"})
    assert set(evals) == {"tatoeba-dev"} and segments == 150
    cells = [t for _, t in evals["tatoeba-dev"]]
    assert cells[1:4] == ["zh-en", "test", "150"] and cells[5] == "yes"
    order = re.findall(r'class="samples" data-source="([^"]+)"', page)
    assert order == ["zh-en", "ru-en", "en-zh", "bt", "ru-fix"]  # the config's order
    drawn = {(r["source"], f"{r['corpus']}:{r['row_id']}", r["copy"]): r
             for r in rows if r["stage"] == 1}
    for source in made["stats"]:
        mine = samples_of(page, source)
        assert 0 < len(mine) <= SAMPLE_ROWS, source
        for row in mine:
            where, copy, tags, src, tgt = (t for _, t in row[:5])
            found = drawn[(source, where, int(copy))]
            assert (tags, src, tgt) == (tag_label(found["tags"]), found["src"], found["tgt"])
            assert src.startswith("".join(found["tags"]))
