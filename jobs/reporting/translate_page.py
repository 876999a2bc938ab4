"""The report page of a translation run (jobs/reporting/translate_data.py's TranslateReport):
the frame, header, histograms and config of jobs/reporting/page.py."""

from __future__ import annotations

from typing import Any

from jobs.reporting.page import (
    document,
    esc,
    histogram_chart,
    run_config_section,
    run_header,
    share,
    slug,
    table_html,
    td,
)
from jobs.reporting.translate_data import KEPT, RATIO_BINS, TranslateReport

RATIO_GROUPS = ((KEPT, "#4c78a8"),)
NAV = ('<p><a href="#streams">streams</a> · <a href="#ratios">length ratio</a> · '
       '<a href="#samples">samples</a> · <a href="#config">config</a></p>')
# The counts of a stream's table, each cell tagged with its field (tests read them).
COUNTS = (("available", "available"), ("read", "read"), ("translated", "translated"),
          ("kept", "kept"), ("rejected", "rejected"), ("copies", "copies"))


def header(d: TranslateReport) -> str:
    facts = [("streams", ", ".join(f"{s['stream']} ({s['direction']}, {s['method']})"
                                   for s in d.streams))]
    return run_header(d.run, facts, d.notes, NAV)


def cell(s: dict[str, Any], field: str) -> str:
    return td(s[field], True, f' data-field="{field}"')


def streams_section(d: TranslateReport) -> str:
    out = ['<h2 id="streams">Streams</h2><p>Per stream and direction: sentences available in '
           "its input and read (translated or rejected), those decoded to a hypothesis, kept "
           "in <code>synthetic</code> and rejected to <code>synthetic_rejected</code> by "
           "reason; copies are kept rows whose target is their source after whitespace "
           "normalisation; the length ratio is target characters over source characters of "
           "the kept rows.</p>"]
    reasons = sorted({r for s in d.streams for r in s["rejected_by"]})
    headers = ["stream", "direction", "role", "method", "model",
               *[h for h, _ in COUNTS], *[f"rejected: {r}" for r in reasons], "copy rate",
               "ratio mean", "min", "p5", "median", "p95", "max"]
    rows = []
    for s in d.streams:
        attrs = f' data-stream="{esc(s["stream"])}" data-direction="{esc(s["direction"])}"'
        rows.append(
            f"<td{attrs}>{esc(s['stream'])}</td>"
            + "".join(td(s[k]) for k in ("direction", "role", "method", "model"))
            + "".join(cell(s, f) for _, f in COUNTS)
            + "".join(td(s["rejected_by"].get(r, 0), True, f' data-reason="{esc(r)}"')
                      for r in reasons)
            + td(share(s["copies"], s["kept"]), True, ' data-field="copy_rate"')
            + "".join(td(s[f], True, f' data-field="{f}" data-value="{s[f]!r}"')
                      for f in ("ratio_mean", "ratio_min", "ratio_p5", "ratio_p50",
                                "ratio_p95", "ratio_max")))
    out.append('<div style="overflow-x: auto">'
               + table_html(headers, [[r] for r in rows], ' class="streams"') + "</div>")
    return "".join(out)


def ratios_section(d: TranslateReport, specs: dict[str, dict]) -> str:
    last = RATIO_BINS.start + RATIO_BINS.width * RATIO_BINS.count
    out = ['<h2 id="ratios">Length ratio of the kept rows</h2><p>Target characters over '
           f"source characters, in bins of {RATIO_BINS.width:g} (a ratio over {last:g} is "
           'counted in the last).</p><div class="scores">']
    for s in d.ratios:
        chart_id = slug("ratio", s.pair)
        if s.bins:
            specs[chart_id] = histogram_chart(s, RATIO_GROUPS)
            body = (f'<div class="chart histogram" id="{chart_id}" data-score="{esc(s.column)}"'
                    f' data-stream="{esc(s.pair)}"></div>')
        else:
            body = "<p>no kept row</p>"
        out.append(f'<div class="score"><b>{esc(s.pair)}</b>{body}</div>')
    out.append("</div>")
    return "".join(out)


def samples_section(d: TranslateReport) -> str:
    out = ['<h2 id="samples">Rejected rows, ten per stream and reason</h2>']
    for key in dict.fromkeys((r["stream"], r["reject_reason"]) for r in d.rejected_samples):
        rows = [r for r in d.rejected_samples if (r["stream"], r["reject_reason"]) == key]
        cells = [[td(f"{r['source_corpus']}:{r['source_row_id']}"),
                  f'<td class="pair-text">{esc(r["src"])}</td>',
                  f'<td class="pair-text">{esc(r["hypothesis"])}</td>',
                  td(r["src_tokens"], True), td(r["tgt_tokens"], True),
                  td(r["score"], True)]
                 for r in rows]
        out.append(f"<h4>{esc(key[0])} ({esc(rows[0]['direction'])}): {esc(key[1])}</h4>"
                   + table_html(["source row id", "source", "hypothesis", "source tokens",
                                 "target tokens", "score"], cells,
                                f' class="samples" data-stream="{esc(key[0])}" '
                                f'data-reason="{esc(key[1])}"'))
    return "".join(out)


def render_translate(d: TranslateReport) -> str:
    specs: dict[str, dict] = {}
    body = "".join([header(d), streams_section(d), ratios_section(d, specs), samples_section(d),
                    run_config_section(d.run)])
    return document(d.run.run_id, body, specs)
