"""The report page of a mixture run (jobs/reporting/mix_data.py's MixReport): the frame,
header, tables and config of jobs/reporting/page.py. Every count cell carries its field
(`data-field`, and `data-value` with the exact value of a float) for tests and scripts."""

from __future__ import annotations

from typing import Any

import altair as alt

from jobs.reporting.mix_data import MixReport, sized_by, stage_thresholds, tag_label
from jobs.reporting.page import (
    CHART_WIDTH,
    data,
    document,
    esc,
    number,
    run_config_section,
    run_header,
    share,
    slug,
    table_html,
    td,
)

NAV = ('<p><a href="#sources">sources</a> · <a href="#temperature">temperature</a> · '
       '<a href="#decontamination">decontamination</a> · <a href="#tags">tags</a> · '
       '<a href="#stages">stages</a> · <a href="#samples">samples</a> · '
       '<a href="#config">config</a></p>')
# The columns of the sources' table: (header, mixture_stats field).
SOURCE_FIELDS = (("direction", "direction"), ("table", "source_table"),
                 ("synthetic", "synthetic"), ("available", "available"),
                 ("decontaminated", "decontaminated"), ("flagged", "flagged"),
                 ("eligible", "eligible"), ("weight", "weight"), ("planned", "planned"),
                 ("sampled", "sampled"), ("distinct rows", "distinct_rows"),
                 ("effective weight", "effective_weight"), ("epochs", "epochs"))
SHARE_COLORS = (("formula", "#bab0ac"), ("realized", "#4c78a8"))


def cell(value: Any, name: str) -> str:
    """A value's cell tagged with its field (a float's exact value too)."""
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    exact = f' data-value="{value!r}"' if isinstance(value, float) else ""
    return td(value, numeric, f' data-field="{esc(name)}"{exact}')


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.2%}"


def share_cell(value: float, name: str) -> str:
    return f'<td class="n" data-field="{esc(name)}" data-value="{value!r}">{percent(value)}</td>'


def header(d: MixReport) -> str:
    c = d.run.config
    over = "sources" if c.get("temperature_over") == "source" else "directions"
    total = c.get("total")
    dc = c.get("decontaminate") or {}
    column, quantiles, per = stage_thresholds(c)
    facts = [("mixture", d.name),
             ("sources", ", ".join(s["source"] for s in d.sources)),
             ("rows drawn", f"{sum(s['sampled'] for s in d.sources):,}"),
             ("sizing", f"temperature T = {c.get('temperature')} over {over}; "
              + (f"{total:,} rows by temperature" if total is not None
                 else "as many rows by temperature as the pooled sources hold")
              + f"; seed {c.get('seed')}"),
             ("decontamination", (f"{dc.get('ngram')}-gram containment >= "
                                  f"{dc.get('min_containment')}: {dc.get('ngram_action')}; "
                                  "exact matches excluded; sets: "
                                  + (", ".join(dc["sets"]) if dc.get("sets") is not None
                                     else "every registered test set"))
              if dc.get("enabled") else "off"),
             ("stages", (f"{len(quantiles)} on {column} at quantiles "
                         f"{', '.join(f'{q:g}' for q in quantiles)} (per {per}; unscored rows: "
                         f"{(c.get('stages') or {}).get('unscored')})") if quantiles
              else "one stage, every row")]
    return run_header(d.run, facts, d.notes, NAV)


def sources_section(d: MixReport) -> str:
    out = ['<h2 id="sources">Sources</h2><p>From <code>mixture_stats</code>, per source: rows '
           "available in its table for its direction and filter, removed as contaminated "
           "(by eval set) and flagged (kept, with the sets in <code>contamination</code>), "
           "eligible (available less removed), the configured weight, the rows planned "
           "(before <code>cap</code> and <code>max_epochs</code>) and sampled (copies "
           "included), the distinct rows among them, the effective weight (its share of the "
           "mixture's rows) and epochs (sampled over eligible).</p>"]
    headers = ["source", "sized by", *[h for h, _ in SOURCE_FIELDS[:5]], "decontaminated by",
               *[h for h, _ in SOURCE_FIELDS[5:]]]
    rows = []
    for s in d.sources:
        by = ", ".join(f"{k} {v:,}" for k, v in sorted(s["decontaminated_by"].items()))
        rows.append([f'<td data-source="{esc(s["source"])}">{esc(s["source"])}</td>',
                     td(sized_by(d.run.config, s["source"])),
                     *[cell(s[f], f) for _, f in SOURCE_FIELDS[:5]],
                     td(by or "–", False, ' data-field="decontaminated_by"'),
                     *[cell(s[f], f) for _, f in SOURCE_FIELDS[5:]]])
    sums = ("available", "decontaminated", "flagged", "eligible", "planned", "sampled",
            "distinct_rows")
    if d.sources:
        total = [td("all"), td("")]
        for header_, f in SOURCE_FIELDS:
            total.append(td(sum(s[f] for s in d.sources), True) if f in sums
                         else td(""))
            if header_ == "decontaminated":
                total.append(td(""))
        rows.append(total)
    out.append('<div style="overflow-x: auto">'
               + table_html(headers, rows, ' class="sources"') + "</div>")
    return "".join(out)


def share_chart(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """Each group's share by the formula and realized, side by side."""
    bars = [{"group": g["group"], "what": what, "share": g[key]}
            for g in groups for what, key in (("formula", "formula"), ("realized", "realized"))]
    return alt.Chart(data(bars)).mark_bar().encode(
        y=alt.Y("group:N", title=None), yOffset=alt.YOffset("what:N"),
        x=alt.X("share:Q", title="share of the rows sized by temperature",
                axis=alt.Axis(format="%")),
        color=alt.Color("what:N", scale=alt.Scale(domain=[w for w, _ in SHARE_COLORS],
                                                  range=[c for _, c in SHARE_COLORS]),
                        legend=alt.Legend(orient="top", title=None)),
        tooltip=["group:N", "what:N", alt.Tooltip("share:Q", format=".2%")],
    ).properties(width=CHART_WIDTH, height=alt.Step(14)).to_dict()


def temperature_section(d: MixReport, specs: dict[str, dict]) -> str:
    c = d.run.config
    t = c.get("temperature")
    by_source = c.get("temperature_over") == "source"
    what = "source" if by_source else "direction"
    weight = ("the source's <code>weight</code>" if by_source
              else "its <code>direction_weights</code> entry (1 if none)")
    out = [f'<h2 id="temperature">Temperature: T = {esc(t)}</h2><p>The sources sized by '
           f"temperature, per {what}: the formula's share p = n<sup>1/T</sup> · w / Σ "
           f"(n: eligible rows, w: {weight}, T = {esc(t)} from the run's config), the rows "
           "planned by it (whole rows that add up to the total) and the rows sampled after "
           "<code>cap</code> and <code>max_epochs</code>, each as a share of those sources' "
           "rows. Synthetic sources sized by a synthetic share, and fixed counts and shares, "
           "come on top and are not in it.</p>"]
    if not d.temperature:
        out.append("<p>No source was sized by temperature.</p>")
    else:
        chart_id = slug("temperature")
        specs[chart_id] = share_chart(d.temperature)
        rows = []
        for g in d.temperature:
            rows.append([f'<td data-group="{esc(g["group"])}">{esc(g["group"])}</td>',
                         td(", ".join(g["sources"])), cell(g["eligible"], "eligible"),
                         cell(g["weight"], "weight"), share_cell(g["formula"], "formula"),
                         cell(g["planned"], "planned"),
                         share_cell(g["planned_share"], "planned_share"),
                         cell(g["sampled"], "sampled"), share_cell(g["realized"], "realized"),
                         td(f"{(g['realized'] - g['formula']) * 100:+.2f} pp", True)])
        out.append(f'<div class="chart" id="{chart_id}"></div>'
                   + table_html([what, "sources", "eligible n", "weight w", "formula p",
                                 "planned", "planned share", "sampled", "realized share",
                                 "realized - formula"], rows,
                                f' class="temperature" data-temperature="{esc(t)}"'))
    whole = sum(s["sampled"] for s in d.sources)
    directions: dict[str, int] = {}
    for s in d.sources:
        directions[s["direction"]] = directions.get(s["direction"], 0) + s["sampled"]
    rows = [[f'<td data-direction="{esc(k)}">{esc(k)}</td>', cell(v, "sampled"),
             td(share(v, whole), True)] for k, v in sorted(directions.items())]
    out.append("<h3>The whole mixture per direction</h3><p>Every source's rows (synthetic "
               "and fixed ones too).</p>"
               + table_html(["direction", "sampled", "share"], rows, ' class="directions"'))
    return "".join(out)


def decontamination_section(d: MixReport) -> str:
    out = ['<h2 id="decontamination">Decontamination</h2><p>The eval sets registered in '
           "<code>eval_sets</code> (as the lake holds them now: a set registered again "
           "replaces it), and whether this run checked its pool against them.</p>"]
    if d.eval_sets:
        rows = [[f'<td data-set="{esc(e["name"])}">{esc(e["name"])}</td>', td(e["pair"]),
                 td(e["role"]), cell(e["segments"], "segments"),
                 td(e["run_id"] + (" (this run)" if e["run_id"] == d.run.run_id else "")),
                 td("yes" if e["checked"] else "no", False, ' data-field="checked"')]
                for e in d.eval_sets]
        out.append(table_html(["eval set", "pair", "role", "segments", "registered by run",
                               "checked"], rows, ' class="eval-sets"'))
    else:
        out.append("<p>No eval set is registered in the lake.</p>")
    removed = [(s["source"], k, v) for s in d.sources
               for k, v in sorted(s["decontaminated_by"].items())]
    if removed:
        rows = [[td(src), td(name), td(n, True, ' data-field="rows"')]
                for src, name, n in removed]
        out.append("<h3>Rows removed, per source and eval set</h3><p>A row that matches "
                   "several sets is counted under each.</p>"
                   + table_html(["source", "eval set", "rows"], rows,
                                ' class="decontaminated"'))
    else:
        out.append("<p>No row was removed as contaminated.</p>")
    flagged = sum(s["flagged"] for s in d.sources)
    out.append(f"<p>Flagged (kept) rows: {flagged:,}.</p>")
    return "".join(out)


def tags_section(d: MixReport) -> str:
    stages = sorted({k for t in d.tags for k in t["rows"]})
    out = ['<h2 id="tags">Tags</h2><p>Rows of <code>mixture</code> per tag combination '
           "(prepended to the source side in this order) and stage.</p>"]
    if not d.tags:
        out.append("<p>No rows.</p>")
        return "".join(out)
    rows = [[f'<td data-tags="{esc(tag_label(t["tags"]))}">'
             f"<code>{esc(''.join(t['tags']) or '(no tags)')}</code></td>",
             td(", ".join(t["sources"])),
             *[td(t["rows"].get(k, 0), True, f' data-field="stage {k}"') for k in stages]]
            for t in d.tags]
    out.append(table_html(["tags", "sources", *[f"stage {k}" for k in stages]], rows,
                          ' class="tags"'))
    return "".join(out)


def stages_section(d: MixReport) -> str:
    column, quantiles, per = stage_thresholds(d.run.config)
    if quantiles:
        how = (f"Stage k keeps the drawn rows whose <code>{esc(column)}</code> is at or above "
               f"quantile k of it (taken per {esc(per)}, over the distinct drawn rows). The "
               "thresholds are not stored: the lowest score a stage kept is its threshold in "
               "the group the quantiles were taken over (marked); the job cut at a score of "
               "one of the rows.")
    else:
        how = "No quantiles: one stage holds every drawn row."
    out = [f'<h2 id="stages">Stages</h2><p>From <code>mixture</code>, per stage and '
           f"direction: rows (copies included), those with a score, copies, and the lowest "
           f"score kept. {how}</p>"]
    rows = []
    for r in d.stages:
        low = number(r["lowest"]) + (" (threshold)" if r["threshold"] else "")
        attrs = f' data-stage="{r["stage"]}" data-direction="{esc(r["direction"])}"'
        rows.append([f"<td{attrs}>{r['stage']}</td>",
                     td("–" if r["quantile"] is None else f"{r['quantile']:g}"),
                     td(r["direction"]), cell(r["rows"], "rows"), cell(r["scored"], "scored"),
                     cell(r["rows"] - r["scored"], "unscored"), cell(r["copies"], "copies"),
                     f'<td class="n" data-field="lowest" data-value="{r["lowest"]!r}">'
                     f"{esc(low)}</td>"])
    if rows:
        out.append(table_html(["stage", "quantile", "direction", "rows", "scored", "unscored",
                               "copies", f"lowest {column or 'score'}"], rows,
                              ' class="stages"'))
    numbers = sorted({k for s in d.sources for k in s["stage_rows"]})
    if numbers:
        rows = [[f'<td data-source="{esc(s["source"])}">{esc(s["source"])}</td>',
                 *[td(s["stage_rows"].get(k, 0), True, f' data-field="stage {k}"')
                   for k in numbers]] for s in d.sources]
        out.append("<h3>Rows per source and stage</h3><p>From <code>mixture_stats</code>."
                   "</p>" + table_html(["source", *[f"stage {k}" for k in numbers]], rows,
                                       ' class="stage-rows"'))
    return "".join(out)


def samples_section(d: MixReport) -> str:
    out = ['<h2 id="samples">Samples</h2><p>A few rows of stage 1 per source, as training '
           "reads them (tags on the source side, target noise where configured).</p>"]
    for source in dict.fromkeys(r["source"] for r in d.samples):
        rows = [r for r in d.samples if r["source"] == source]
        cells = [[td(f"{r['corpus']}:{r['row_id']}"), td(r["copy"], True),
                  td(tag_label(r["tags"])),
                  f'<td class="pair-text">{esc(r["src"])}</td>',
                  f'<td class="pair-text">{esc(r["tgt"])}</td>', td(r["score"], True),
                  td("yes" if r["noised"] else ""),
                  td(", ".join(r["contamination"] or []))] for r in rows]
        out.append(f"<h4>{esc(source)} ({esc(rows[0]['direction'])})</h4>"
                   + table_html(["corpus:row", "copy", "tags", "source", "target", "score",
                                 "noised", "flagged by"], cells,
                                f' class="samples" data-source="{esc(source)}"'))
    return "".join(out)


def render_mix(d: MixReport) -> str:
    specs: dict[str, dict] = {}
    body = "".join([header(d), sources_section(d), temperature_section(d, specs),
                    decontamination_section(d), tags_section(d), stages_section(d),
                    samples_section(d), run_config_section(d.run)])
    return document(d.run.run_id, body, specs)
