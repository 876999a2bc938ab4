"""The run report as one HTML file that opens offline (jobs/report.py): charts are Vega-Lite
specs built with Altair and drawn in the browser by vega-embed, whose JavaScript (Vega,
Vega-Lite, vega-embed) vl-convert-python ships and is inlined here: no CDN, no network.

Every text from the lake is HTML-escaped. When every chart has drawn, the page sets
`data-rendered="true"` on <body> (`data-render-error` if one failed): a headless browser
shows whether the page works."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import altair as alt
import vl_convert

from jobs.filtering.scorer_rules import SCORER_RULES
from jobs.filtering.stats import langid_warning
from jobs.kit.launcher import sluice_path
from jobs.reporting.data import (
    KEPT,
    REJECTED_ELSEWHERE,
    REJECTED_HERE,
    TOP_VALUES,
    ReportData,
    Run,
    ScoreStats,
    WhatIf,
)
from jobs.reporting.thresholds import redecide_command, rule_score_names
from udfs.rules import BY_NAME

GROUP_COLORS = {KEPT: "#4c78a8", REJECTED_HERE: "#e45756", REJECTED_ELSEWHERE: "#bab0ac"}
# The scores a rejected sample shows, for the rules outside udfs/rules.py: each scorer unit's
# score (jobs/filtering/scorer_rules.py), with its companions; a cut's (`cut_<score>`) its own.
SCORER_RULE_COLUMNS = {u.rule: (u.score,) for u in SCORER_RULES} | {
    "align_coverage": ("align_coverage", "align_fwd_logprob", "align_rev_logprob"),
    "embed_margin": ("embed_cosine", "embed_margin"),
}
CHART_WIDTH = 560
NAV = ('<p><a href="#funnel">funnel</a> · <a href="#scores">scores</a> · '
       '<a href="#what-if">what if</a> · <a href="#samples">samples</a> · '
       '<a href="#config">config</a></p>')
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1300px; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.current { font-weight: bold; background: #ffd; }
.scores { display: flex; flex-wrap: wrap; gap: 1em; }
.score { border: 1px solid #ddd; padding: .5em; width: 600px; }
pre { background: #f6f6f6; padding: .5em; overflow: auto; max-height: 40em; }
.note { color: #a33; }
.pair-text { max-width: 500px; overflow-wrap: anywhere; }
"""
# Draws every chart, then marks the page as rendered (or the error), for people and tests.
EMBED_SCRIPT = """
const sluiceCharts = JSON.parse(document.getElementById("sluice-specs").textContent);
Promise.all(Object.entries(sluiceCharts).map(([id, spec]) =>
    vegaEmbed("#" + id, spec, {actions: false, renderer: "svg"})))
  .then(() => document.body.setAttribute("data-rendered", "true"))
  .catch((err) => {
    document.body.setAttribute("data-render-error", String(err));
    console.error(err);
  });
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return esc(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return esc(value)


def share(part: int | None, whole: int | None) -> str:
    return f"{part / whole:.1%}" if part is not None and whole else "–"


def slug(*parts: str) -> str:
    """An element id from lake names (any characters): hex keeps it valid and unique."""
    return "c-" + "-".join(p.encode().hex() for p in parts)


def table_html(headers: Sequence[str], rows: Iterable[Sequence[str]], attrs: str = "") -> str:
    """A table; cells are given as HTML (escape them first)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(f"<tr>{''.join(row)}</tr>" for row in rows)
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def td(value: Any, numeric: bool = False, attrs: str = "") -> str:
    cls = ' class="n"' if numeric else ""
    return f"<td{cls}{attrs}>{number(value) if numeric else esc(value)}</td>"


def data(rows: list[dict[str, Any]]) -> alt.Data:
    return alt.Data(values=rows)


# --- Charts --------------------------------------------------------------------------------


def funnel_chart(steps: list[dict[str, Any]], kept: int) -> dict[str, Any]:
    """Rows rejected by each rule that rejected any (in funnel order), then kept."""
    bars = [{"label": f"{r['step']:02d} {r['rule']}", "rows": r["rows_rejected"],
             "what": "rejected"} for r in steps if r["rows_rejected"]]
    bars.append({"label": "kept", "rows": kept, "what": "kept"})
    order = [b["label"] for b in bars]
    return alt.Chart(data(bars)).mark_bar().encode(
        y=alt.Y("label:N", sort=order, title=None),
        x=alt.X("rows:Q", title="rows"),
        color=alt.Color("what:N", scale=alt.Scale(domain=["rejected", "kept"],
                                                  range=["#e45756", "#4c78a8"]), legend=None),
        tooltip=["label:N", "rows:Q"],
    ).properties(width=CHART_WIDTH, height=alt.Step(16)).to_dict()


def history_chart(history: list[dict[str, Any]]) -> dict[str, Any]:
    # One point per run, labelled by its start to the second: an ordinal axis (a time axis
    # over one run's single instant labelled its ticks in milliseconds, ".911").
    runs = [{**h, "run": h["started_at"][:19]} for h in history]
    return alt.Chart(data(runs)).mark_line(point=True).encode(
        x=alt.X("run:O", title="run started", sort=None, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("kept_share:Q", title="kept share", axis=alt.Axis(format="%")),
        color=alt.Color("corpus:N"),
        tooltip=["run_id:N", "corpus:N", "rows_in:Q", "kept:Q",
                 alt.Tooltip("kept_share:Q", format=".1%")],
    ).properties(width=CHART_WIDTH, height=160).to_dict()


def is_discrete(s: ScoreStats) -> bool:
    """A score of a few whole values (a flag, a count): one bin per value."""
    return bool(s.bins) and all(b["bin_end"] - b["bin_start"] == 1
                                and float(b["bin_start"]).is_integer() for b in s.bins)


# The filter's histogram groups, stacked in this order, and their colours.
FILTER_GROUPS = tuple((g, GROUP_COLORS[g]) for g in (KEPT, REJECTED_HERE, REJECTED_ELSEWHERE))


def histogram_chart(s: ScoreStats, groups: Sequence[tuple[str, str]] = FILTER_GROUPS,
                    alone: str = "rejected rows") -> dict[str, Any]:
    """The score's rows by value, split into `groups` ((name, colour), stacked in that order:
    the filter's kept / rejected here / rejected elsewhere by default), with its threshold;
    below, the rows of every group but the first alone (`alone` titles them: the rejected,
    whose slivers a linear axis over all rows hides). A flag or a count gets a bar per value
    (a binned axis drew it as one wide bar)."""
    names = [g for g, _ in groups]
    color = alt.Color("group:N", scale=alt.Scale(domain=names, range=[c for _, c in groups]),
                      legend=alt.Legend(orient="top", title=None))
    discrete = is_discrete(s)
    title = s.column + (f" ({s.threshold.label()})" if discrete and s.threshold else "")
    rows = [{**b, "value": int(b["bin_start"])} for b in s.bins] if discrete else s.bins

    def bars(values: list[dict[str, Any]], y_title: str) -> alt.Chart:
        if discrete:
            x: dict[str, Any] = {"x": alt.X("value:O", title=title, axis=alt.Axis(labelAngle=0))}
            tip = ["group:N", "value:O", "rows:Q"]
        else:
            x = {"x": alt.X("bin_start:Q", bin="binned", title=title), "x2": "bin_end:Q"}
            tip = ["group:N", "bin_start:Q", "bin_end:Q", "rows:Q"]
        return alt.Chart(data(values)).mark_bar().encode(
            **x, y=alt.Y("sum(rows):Q", stack="zero", title=y_title), color=color, tooltip=tip)

    def with_threshold(chart: alt.Chart) -> alt.Chart | alt.LayerChart:
        if s.threshold is None or discrete:  # a discrete score's threshold is in its title
            return chart
        marks = [{"at": b, "label": s.threshold.label()} for b in s.threshold.bounds()]
        rule = alt.Chart(data(marks)).mark_rule(color="black", strokeDash=[5, 3], strokeWidth=2)
        return alt.layer(chart, rule.encode(x="at:Q", tooltip=["label:N"]))

    panels = [with_threshold(bars(rows, "rows")).properties(width=CHART_WIDTH - 60, height=150)]
    others = [r for r in rows if r["group"] != names[0]]
    if others and len(names) > 1:
        panels.append(with_threshold(bars(others, alone))
                      .properties(width=CHART_WIDTH - 60, height=70))
    return alt.vconcat(*panels).to_dict()


# --- Sections ------------------------------------------------------------------------------


def run_header(r: Run, facts: Sequence[tuple[str, Any]], notes: Sequence[str],
               nav: str = NAV) -> str:
    """The page's title, the run's record (with `facts` of its kind after its job) and notes."""
    rows = [("run", r.run_id), ("status", r.status), ("job", r.job), *facts,
            ("started", r.started_at), ("finished", r.finished_at),
            ("config hash", r.config_hash)]
    if r.error:
        rows.append(("error", r.error))
    notes_html = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    title = RUN_TITLES.get(r.job, f"{r.job} run")
    return (f"<h1>{esc(title)} {esc(r.run_id)}</h1>{nav}"
            + table_html(["", ""], [[f"<th>{esc(k)}</th>", td(v)] for k, v in rows])
            + notes_html)


def header(d: ReportData) -> str:
    corpora = sorted({(f["pair"], f["corpus"]) for f in d.funnel})
    facts = [("pairs / corpora", ", ".join(f"{p}/{c}" for p, c in corpora))]
    return run_header(d.run, facts, d.notes) + files_section(d.run)


RUN_TITLES = {"filter": "Filter run", "redecide": "Re-decided run", "refresh": "Refresh run",
              "select": "Selection run", "translate": "Translation run", "mix": "Mixture run"}


def files_section(r: Run) -> str:
    """A refresh's files: what was new or changed (and why), dropped or quarantined."""
    if r.job != "refresh":
        return ""
    rows = [[td(i.get("corpus", "")), td(" ".join(i.get("paths", []))),
             td(i.get("why", ""))] for i in r.inputs]
    if not rows:
        return "<p>Nothing new: no file was added, changed or dropped.</p>"
    return ("<h2 id=\"files\">What was new, per file</h2>"
            + table_html(["corpus", "file", "why"], rows, ' class="files"'))


def hosts_section(d: ReportData) -> str:
    """A crawl's biggest websites in the run: a site that is mostly rejected, or whose
    pairs score low, is worth a look (or a rule)."""
    if not d.hosts:
        return ""
    scored = "mean_pair_score" in d.hosts[0]
    rows = [[td(h["host"]), td(h["key"]), td(h["pairs"], True),
             td(share(h["kept"], h["pairs"]), True)]
            + ([td(h["mean_pair_score"], True)] if scored else []) for h in d.hosts]
    headers = ["website (host)", "pair or language", "pairs", "kept"]
    headers += ["mean pair_score"] if scored else []
    return ('<h2 id="hosts">Websites</h2><p>The run\'s websites with the most pairs '
            "(<code>host</code>: the registrable domain of a crawl's page URL).</p>"
            + table_html(headers, rows, ' class="hosts"'))


def funnel_section(d: ReportData, specs: dict[str, dict]) -> str:
    out = ['<h2 id="funnel">Funnel</h2><p>From <code>filter_stats</code>: rows that reached '
           "each rule (in the order rows meet them) and the rows it rejected.</p>"]
    corpora = sorted({(f["pair"], f["corpus"]) for f in d.funnel})
    for pair, corpus in corpora:
        steps = [f for f in d.funnel if (f["pair"], f["corpus"]) == (pair, corpus)]
        rows_in = steps[0]["rows_in"]
        kept = rows_in - sum(f["rows_rejected"] for f in steps)
        chart_id = slug("funnel", pair, corpus)
        specs[chart_id] = funnel_chart(steps, kept)
        rows = [[td(f["step"], True), td(f["stage"]), td(f["rule"]),
                 td(f["rows_in"], True, ' data-field="rows_in"'),
                 td(f["rows_rejected"], True, ' data-field="rows_rejected"'),
                 td(share(f["rows_rejected"], f["rows_in"]), True)] for f in steps]
        rows.append([td(""), td(""), td("kept"), td(""),
                     td(kept, True, ' data-field="kept"'), td(share(kept, rows_in), True)])
        attrs = (f' class="funnel" data-pair="{esc(pair)}" data-corpus="{esc(corpus)}"'
                 f' data-rows-in="{rows_in}"')
        warnings = [w for f in steps if (w := langid_warning(
            pair, corpus, f["rule"], f["rows_in"], f["rows_rejected"]))]
        out.append(f"<h3>{esc(pair)} / {esc(corpus)}: {rows_in:,} in, {kept:,} kept "
                   f"({share(kept, rows_in)})</h3>"
                   + "".join(f'<p class="note warning">{esc(w)}</p>' for w in warnings)
                   + f'<div class="chart" id="{chart_id}"></div>'
                   + table_html(["step", "stage", "rule", "rows in", "rejected", "share"],
                                rows, attrs))
    if d.history:
        chart_id = slug("history")
        specs[chart_id] = history_chart(d.history)
        rows = [[td(h["run_id"] + (" (this run)" if h["run_id"] == d.run.run_id else "")),
                 td(f"{h['pair']}/{h['corpus']}"), td(h["started_at"]),
                 td(h["rows_in"], True), td(h["kept"], True),
                 td(share(h["kept"], h["rows_in"]), True)] for h in d.history]
        out.append("<h3>Kept share across the corpora's runs</h3>"
                   f'<div class="chart" id="{chart_id}"></div>'
                   + table_html(["run", "corpus", "started", "rows in", "kept", "kept share"],
                                rows))
    return "".join(out)


def scores_section(d: ReportData, specs: dict[str, dict]) -> str:
    out = ['<h2 id="scores">Scores</h2><p>Every stored score of the run\'s rows: kept '
           "rows, rows rejected by the rule that cuts the score, rows rejected by another "
           "rule. The dashed line is the configured threshold; values beyond the 0.5th–99.5th "
           "percentiles are counted in the edge bins. <i>Kept at threshold</i>: of the rows "
           "still alive when the score's rule ran, those whose score passes the threshold "
           "(other conditions of the rule, e.g. char_word_min_tokens, are not applied).</p>"]
    for pair in sorted({s.pair for s in d.scores}):
        out.append(f"<h3>{esc(pair)}</h3><div class=\"scores\">")
        for s in (s for s in d.scores if s.pair == pair):
            chart_id = slug("hist", pair, s.column)
            if s.bins:
                specs[chart_id] = histogram_chart(s)
            if s.threshold is not None:
                caption = (f"{esc(s.threshold.label())} (rule {esc(s.rule)}): kept at threshold "
                           f"{number(s.kept_at_threshold)} of {number(s.alive)} alive rows "
                           f"({share(s.kept_at_threshold, s.alive)})")
            else:
                caption = "no single configured threshold"
            body = (f'<div class="chart histogram" id="{chart_id}" data-score="{esc(s.column)}">'
                    "</div>" if s.bins else "<p>no row has this score</p>")
            out.append(f'<div class="score"><b>{esc(s.column)}</b><br><small>{caption}</small>'
                       f"{body}</div>")
        out.append("</div>")
    if d.text_scores:
        rows = [[td(t["pair"]), td(t["column"]), td(t["value"]), td(t["outcome"]),
                 td(t["rows"], True)] for t in d.text_scores]
        out.append(f"<h3>Text scores: most frequent values (top {TOP_VALUES})</h3>"
                   + table_html(["pair", "score", "value", "outcome", "rows"], rows))
    return "".join(out)


def what_if_section(what_ifs: list[WhatIf], run_id: str, lake_root: str) -> str:
    out = ['<h2 id="what-if">What if</h2><p>Rows kept at other values of each threshold, '
           "counted in Spark from the stored scores among the rows alive when its rule ran (a "
           "threshold over several scores keeps a row only when all pass). Each row's command "
           "applies it: a re-decide, a new run from the stored scores (nothing recomputed; it "
           "re-runs dedup, so its counts can differ slightly from these).</p>"]
    sluice = sluice_path()
    for w in what_ifs:
        now = next(r["kept"] for r in w.rows if r["current"])
        body = "".join(
            ('<tr class="current">' if r["current"] else "<tr>")
            + td(r["label"]) + td(r["kept"], True) + td(share(r["kept"], w.alive), True)
            + td(f"{r['kept'] - now:+,}", True)
            + ("<td>(the run's)</td>" if r["current"] else
               f'<td><code class="apply">'
               f"{esc(redecide_command(sluice, run_id, lake_root, w.threshold, r['value']))}"
               "</code></td>")
            + "</tr>"
            for r in w.rows)
        out.append(f"<h3>{esc(w.pair)}: {esc(w.threshold.label())} (rule {esc(w.threshold.rule)}"
                   f"; {esc(', '.join(w.threshold.columns))}; {w.alive:,} alive rows)</h3>"
                   f'<table class="what-if" data-pair="{esc(w.pair)}" '
                   f'data-rule="{esc(w.threshold.rule)}" data-alive="{w.alive}" '
                   f'data-kept-now="{now}"><thead><tr><th>value</th><th>kept</th><th>share</th>'
                   f"<th>vs current</th><th>apply</th></tr></thead><tbody>{body}</tbody></table>")
    return "".join(out)


def rule_columns(rule: str, mono: bool,
                 cuts: Sequence[dict[str, Any]] = ()) -> tuple[str, ...]:
    """The score columns a rejected sample of `rule` shows; `cuts`: the run's (a named cut,
    `cut_<name>`, shows its score)."""
    if rule in BY_NAME:
        return tuple(rule_score_names(BY_NAME[rule], mono))
    if rule.startswith("cut_"):
        named = {f"cut_{c.get('name') or c['score']}": c["score"] for c in cuts}
        return (named.get(rule, rule.removeprefix("cut_")),)
    return SCORER_RULE_COLUMNS.get(rule, ())


def pair_cells(row: dict[str, Any]) -> list[str]:
    if "text" in row:
        return [f'<td class="pair-text">{esc(row["text"])}</td>']
    return [f'<td class="pair-text">{esc(row["src"])}</td>',
            f'<td class="pair-text">{esc(row["tgt"])}</td>']


def duplicated(row: dict[str, Any]) -> str:
    """What a duplicate duplicates: the surviving row's place and text (its id where the row
    is gone from the lake)."""
    dup = row.get("dup")
    if not dup:
        return f"duplicate of row {row['dup_of']} (no longer in the lake)"
    text = dup.get("text") or " ||| ".join(x for x in (dup.get("src"), dup.get("tgt")) if x)
    near = row.get("near_dup_jaccard")  # a near-duplicate (jobs/filtering/near_dup.py)
    similar = f" (Jaccard {near:.2f})" if near is not None else ""
    return f"duplicate of {dup['corpus']}:{dup['line']}{similar}: {text}"


def samples_section(d: ReportData) -> str:
    mono = bool(d.run.config.get("lang"))
    text_headers = ["text"] if mono else ["source", "target"]
    key = "lang" if mono else "pair"
    out = ['<h2 id="samples">Samples</h2><h3>Rejected pairs, ten per rule</h3>']
    step = {f["rule"]: f["step"] for f in d.funnel}
    rules = sorted(dict.fromkeys(r["reject_rule"] for r in d.rejected_samples),
                   key=lambda rule: (step.get(rule, len(step)), rule))  # in funnel order
    for rule in rules:
        rows = [r for r in d.rejected_samples if r["reject_rule"] == rule]
        columns = [c for c in rule_columns(rule, mono, d.run.config.get("cuts") or [])
                   if c in rows[0]]
        cells = []
        for r in rows:
            scores = ", ".join(f"{c}={number(r[c])}" for c in columns)
            if r.get("dup_of") is not None:
                scores = duplicated(r)
            cells.append([td(f"{r[key]} {r['corpus']}:{r['line']}"), *pair_cells(r),
                          td(scores)])
        out.append(f"<h4>{esc(rule)} ({esc(rows[0]['reject_stage'])})</h4>"
                   + table_html(["where", *text_headers, "scores"], cells,
                                f' class="samples" data-rule="{esc(rule)}"'))
    out.append("<h3>Kept pairs nearest each threshold</h3>")
    for score in dict.fromkeys(r["score"] for r in d.near_samples):
        rows = [r for r in d.near_samples if r["score"] == score]
        cells = [[td(f"{r[key]} {r['corpus']}:{r['line']}"), *pair_cells(r),
                  td(r["value"], True)] for r in rows]
        out.append(f"<h4>{esc(score)}</h4>"
                   + table_html(["where", *text_headers, score], cells))
    return "".join(out)


def pretty(value: Any) -> str:
    return esc(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def config_section(d: ReportData) -> str:
    return run_config_section(d.run)


def run_config_section(r: Run) -> str:
    return ('<h2 id="config">Configuration</h2>'
            f"<p>Resolved config of the run (hash <code>{esc(r.config_hash)}</code>), as stored "
            "in <code>runs</code>.</p>"
            f"<h3>Inputs</h3><pre>{pretty(r.inputs)}</pre>"
            f"<h3>Spark</h3><pre>{pretty(r.spark)}</pre>"
            f"<h3>Config</h3><pre>{pretty(r.config)}</pre>")


def script_text(text: str) -> str:
    """Script text safe inside a <script> element: `</script` would end it early, `<\\/script`
    means the same in a JavaScript string or regular expression (and in JSON)."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)


def json_text(value: Any) -> str:
    """JSON safe inside a <script> element: every `</` written `<\\/` (the same string)."""
    return json.dumps(value).replace("</", "<\\/")


def vega_bundle() -> str:
    """Vega, Vega-Lite (the version Altair writes specs for) and vega-embed, as one script."""
    vl_version = "_".join(alt.SCHEMA_VERSION.split(".")[:2])  # v6.4.1 -> v6_4
    return vl_convert.javascript_bundle(vl_version=vl_version)


def document(run_id: str, body: str, specs: dict[str, dict]) -> str:
    """The whole page: `body` (HTML) and its charts' specs, drawn by the inlined vega-embed."""
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>sluice run {esc(run_id)}</title><style>{STYLE}</style>"
        f"<script>{script_text(vega_bundle())}</script></head>\n"
        f"<body>{body}\n"
        f'<script type="application/json" id="sluice-specs">{json_text(specs)}'
        f"</script>\n<script>{EMBED_SCRIPT}</script></body></html>\n"
    )


def render(d: ReportData) -> str:
    specs: dict[str, dict] = {}
    body = "".join([header(d), funnel_section(d, specs), hosts_section(d),
                    scores_section(d, specs),
                    what_if_section(d.what_ifs, d.run.run_id, d.lake_root), samples_section(d),
                    config_section(d)])
    return document(d.run.run_id, body, specs)
