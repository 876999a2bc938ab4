"""Filter statistics (per run x pair x corpus x stage x rule; a monolingual run's language
stands in the `pair` column), the conservation check and the funnel printed at the end."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pyspark.sql import DataFrame

from jobs.kit.errors import ConservationError  # noqa: F401 - raised here, defined there

STATS_SCHEMA = (
    "run_id string, pair string, corpus string, step int, stage string, rule string, "
    "rows_in long, rows_rejected long"
)


@dataclass(frozen=True)
class Counts:
    rows_in: dict[tuple[str, str], int]  # (pair, corpus) -> raw rows
    rejected: dict[tuple[str, str], dict[tuple[str, str], int]]  # -> (stage, rule) -> rows
    clean: dict[tuple[str, str], int]


def count_outcomes(raw: DataFrame, decided: DataFrame, key: str = "pair") -> Counts:
    """Rows in per (key, corpus), and where they went; `key` is the column naming the pair
    (or a monolingual run's language) in `decided`."""
    rows_in = {
        (r.pair, r.corpus): r["count"] for r in raw.groupBy("pair", "corpus").count().collect()
    }
    rejected: dict = defaultdict(dict)
    clean: dict = defaultdict(int)
    grouped = decided.groupBy(key, "corpus", "reject_stage", "reject_rule").count().collect()
    for r in grouped:
        key_value = (r[key], r.corpus)
        if r.reject_rule is None:
            clean[key_value] += r["count"]
        else:
            rejected[key_value][(r.reject_stage, r.reject_rule)] = r["count"]
    return Counts(rows_in, dict(rejected), dict(clean))


def check_conservation(counts: Counts) -> None:
    problems = []
    for key in sorted(set(counts.rows_in) | set(counts.clean) | set(counts.rejected)):
        n_in = counts.rows_in.get(key, 0)
        n_clean = counts.clean.get(key, 0)
        n_rej = sum(counts.rejected.get(key, {}).values())
        if n_in != n_clean + n_rej:
            problems.append(f"{key[0]}/{key[1]}: in {n_in} != clean {n_clean} + rejected {n_rej}")
    if problems:
        raise ConservationError("rows were lost or duplicated: " + "; ".join(problems))


def stats_rows(run_id: str, counts: Counts, sequence: list[tuple[str, str]]) -> list[tuple]:
    """One row per (pair, corpus, stage, rule) in `sequence` order: rows that reached the rule
    and rows it rejected."""
    rows = []
    for (pair, corpus), n_in in sorted(counts.rows_in.items()):
        remaining = n_in
        by_rule = counts.rejected.get((pair, corpus), {})
        unknown = set(by_rule) - set(sequence)
        if unknown:
            raise ConservationError(f"{pair}/{corpus}: rejections by unlisted rules {unknown}")
        for step, (stage, rule) in enumerate(sequence, start=1):
            n_rej = by_rule.get((stage, rule), 0)
            rows.append((run_id, pair, corpus, step, stage, rule, remaining, n_rej))
            remaining -= n_rej
    return rows


# A langid rule that rejects more than this share of the rows reaching it most likely checks
# the wrong language (a swapped pair, a mistyped code): the funnel and the report say so.
SUSPECT_LANGID_SHARE = 0.5


def langid_warning(pair: str, corpus: str, rule: str, rows_in: int, rejected: int) -> str | None:
    """A plain-words warning when `rule` (langid_src/_tgt) rejected over half its rows."""
    if not rule.startswith("langid_") or not rows_in or rejected / rows_in <= SUSPECT_LANGID_SHARE:
        return None
    return (f"{rule} rejected {rejected / rows_in:.0%} of {pair}/{corpus}: is the language code "
            "right?")


def funnel(counts: Counts, sequence: list[tuple[str, str]]) -> str:
    """Per (pair, corpus): rows in, each rule's rejections, kept; then any langid warning."""
    lines = []
    for (pair, corpus), n_in in sorted(counts.rows_in.items()):
        by_rule = counts.rejected.get((pair, corpus), {})
        kept = counts.clean.get((pair, corpus), 0)
        lines.append(f"{pair} {corpus}: {n_in:,} in")
        warnings, remaining = [], n_in
        for stage, rule in sequence:
            n = by_rule.get((stage, rule), 0)
            if n:
                lines.append(f"  - {rule:<20} {n:>12,}  ({stage})")
            warning = langid_warning(pair, corpus, rule, remaining, n)
            warnings += [f"  ! {warning}"] if warning else []
            remaining -= n
        share = kept / n_in if n_in else 0.0
        lines.append(f"  = kept {kept:>17,}  ({share:.1%})")
        lines += warnings
    return "\n".join(lines)
