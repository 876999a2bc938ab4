"""The report page of a selection run (jobs/reporting/select_data.py's SelectReport): the
frame, header, histograms and config of jobs/reporting/page.py."""

from __future__ import annotations

from jobs.reporting.page import (
    document,
    esc,
    histogram_chart,
    number,
    run_config_section,
    run_header,
    share,
    slug,
    table_html,
    td,
)
from jobs.reporting.select_data import COMBINED, NOT_SELECTED, SELECTED, SelectReport

# Stacked in this order; the selected (often a few per cent) also drawn alone below.
SELECT_GROUPS = ((NOT_SELECTED, "#bab0ac"), (SELECTED, "#4c78a8"))
NAV = ('<p><a href="#counts">counts</a> · <a href="#scores">scores</a> · '
       '<a href="#config">config</a></p>')


def header(d: SelectReport) -> str:
    facts = [("key", ", ".join(c["key"] for c in d.counts)),
             ("method", ", ".join(sorted({s["method"] for s in d.stats})) or "–"),
             ("cut", d.cut)]
    if d.seed:
        facts.append(("seed", f"{d.seed['name']} (sha256 {d.seed['hash']})"
                      + (f", from {d.seed['source']}" if d.seed["source"] else "")))
    else:
        facts.append(("seed", "none recorded (no seed method, or reused models)"))
    models = sorted({s["models"] for s in d.stats if s.get("models")})
    if models:
        facts.append(("models", ", ".join(models)))
    return run_header(d.run, facts, d.notes, NAV)


def counts_section(d: SelectReport) -> str:
    out = ['<h2 id="counts">Counts</h2><p>From <code>selected</code>: every row of the pool, '
           "scored or not; the cut are the rows not selected (the unscorable among them).</p>"]
    for c in d.counts:
        stats = next((s for s in d.stats if s["key"] == c["key"]), {})
        rows = [("pool rows", c["pool"]), ("scored", c["scored"]),
                ("selected", c["selected"]), ("cut (not selected)", c["not_selected"])]
        rows += [(f"unscorable: {reason}", n) for reason, n in c["unscorable"].items()]
        cells = [[f"<th>{esc(k)}</th>", td(n, True, f' data-field="{esc(k)}"'),
                  td(share(n, c["pool"]), True)] for k, n in rows]
        if stats.get("cut_score") is not None:
            cells.append(["<th>cut score</th>", td(stats["cut_score"], True), td("")])
        out.append(f"<h3>{esc(c['key'])}: {c['selected']:,} of {c['pool']:,} selected "
                   f"({share(c['selected'], c['pool'])})</h3>"
                   + table_html(["", "rows", "share"], cells,
                                f' class="select-counts" data-key="{esc(c["key"])}"'))
    for what, rows, column in (("KMeans clusters", d.clusters, "domain_cluster"),
                               ("Fluency buckets", d.buckets, "fluency_bucket")):
        if rows:
            cells = [[td(r["key"]), td(r[column]), td(r["rows"], True), td(r["selected"], True),
                      td(share(r["selected"], r["rows"]), True)] for r in rows]
            out.append(f"<h3>{what}: size and rows selected</h3>"
                       + table_html(["key", column, "rows", "selected", "selected share"],
                                    cells, f' class="{esc(column)}"'))
    return "".join(out)


def scores_section(d: SelectReport, specs: dict[str, dict]) -> str:
    out = ['<h2 id="scores">Scores</h2><p>Each method\'s score of the scored rows (and the '
           "combined score the run ranked by, with several methods), split into the selected "
           "and the not-selected rows; values beyond the 0.5th–99.5th percentiles are counted "
           "in the edge bins. The dashed line is the score of the last selected row, where the "
           "cut is a score.</p>"]
    for key in dict.fromkeys(s.pair for s in d.histograms):
        out.append(f'<h3>{esc(key)}</h3><div class="scores">')
        for s in (s for s in d.histograms if s.pair == key):
            chart_id = slug("select", key, s.column)
            name = f"{s.column} (combined: mean rank share)" if s.column == COMBINED else s.column
            if s.bins:
                specs[chart_id] = histogram_chart(s, SELECT_GROUPS, "selected rows")
                body = (f'<div class="chart histogram" id="{chart_id}" '
                        f'data-score="{esc(s.column)}"></div>')
            else:
                body = "<p>no row has this score</p>"
            caption = (f"cut score {number(s.threshold.value)}" if s.threshold
                       else "the cut is not a value of this score")
            out.append(f'<div class="score"><b>{esc(name)}</b><br><small>{esc(caption)}'
                       f"</small>{body}</div>")
        out.append("</div>")
    return "".join(out)


def render_select(d: SelectReport) -> str:
    specs: dict[str, dict] = {}
    body = "".join([header(d), counts_section(d), scores_section(d, specs),
                    run_config_section(d.run)])
    return document(d.run.run_id, body, specs)
