"""What the report of a translation run (jobs/translate.py) shows, read from the lake with
Spark, per stream and direction: `translate_stats`' facts (role, method, model, sentences
available and read), the counts in `synthetic` and `synthetic_rejected` (translated: decoded to
a hypothesis; kept; rejected by reason), the length ratio of the kept rows (target characters
over source characters: its summary and a histogram), the copy rate (kept rows whose target is
their source after whitespace normalisation) and sample rejected rows with their reason. Only
counts and the samples reach the driver."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.lake.store import Lake
from jobs.reporting.bins import Bins, binned_counts
from jobs.reporting.data import SAMPLES, Run, ScoreStats, table

# Python's whitespace (str.isspace, what str.split() splits on), spelled so that Java's regex
# (Spark's regexp_replace) and Python's re read it alike: tests/test_report_runs.py checks it
# against str.isspace for every code point.
WHITESPACE = (r"[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f"
              r"\u205f\u3000]+")
# The length-ratio histogram: fixed bins of 0.05 from 0 to 6 (a ratio beyond in the last).
RATIO_BINS = Bins(0.0, 0.05, 120)
RATIO = "length_ratio"  # the histogram's column name
KEPT = "kept"  # its one group
STREAM_KEYS = ["stream", "direction"]


def normalise_space(text: str) -> str:
    """Runs of whitespace as one space, none at the ends (= " ".join(text.split()))."""
    return re.sub(WHITESPACE, " ", text).strip(" ")


def is_copy(src: str | None, tgt: str | None) -> bool:
    """Whether the target is the source, whitespace aside (the reference of `copy_column`)."""
    return src is not None and tgt is not None and normalise_space(src) == normalise_space(tgt)


def length_ratio(src: str | None, tgt: str | None) -> float | None:
    """Target characters (code points) over source characters; None without a source."""
    if not src or tgt is None:
        return None
    return len(tgt) / len(src)


def normalised_column(col: Column) -> Column:
    return F.trim(F.regexp_replace(col, WHITESPACE, " "))


def copy_column(src: Column, tgt: Column) -> Column:
    return F.coalesce(normalised_column(src) == normalised_column(tgt), F.lit(False))


def ratio_column(src: Column, tgt: Column) -> Column:
    """`length_ratio` in Spark: length counts code points, as Python's len."""
    return F.when(F.length(src) > 0, F.length(tgt) / F.length(src))


@dataclass
class TranslateReport:
    run: Run
    streams: list[dict[str, Any]]  # per stream: facts, counts, copies, ratio summary
    ratios: list[ScoreStats]  # per stream: the kept rows' length-ratio histogram
    rejected_samples: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def kept_counts(kept: DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (stream, direction): kept rows, copies and the length ratio's summary."""
    ratio = ratio_column(F.col("src"), F.col("tgt"))
    found = kept.groupBy(*STREAM_KEYS).agg(
        F.count("*").alias("kept"),
        F.count_if(F.col("hypothesis").isNotNull()).alias("kept_decoded"),
        F.count_if(copy_column(F.col("src"), F.col("tgt"))).alias("copies"),
        F.avg(ratio).alias("ratio_mean"), F.min(ratio).alias("ratio_min"),
        F.max(ratio).alias("ratio_max"),
        F.percentile_approx(ratio, [0.05, 0.5, 0.95], 10000).alias("ratio_q"),
    ).collect()
    return {(r.stream, r.direction): r.asDict() for r in found}


def rejected_counts(rejected: DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (stream, direction): rejected rows by reason, and those decoded (a hypothesis)."""
    found = rejected.groupBy(*STREAM_KEYS, "reject_reason").agg(
        F.count("*").alias("n"), F.count_if(F.col("hypothesis").isNotNull()).alias("decoded"),
    ).collect()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in found:
        entry = out.setdefault((r.stream, r.direction), {"by_reason": {}, "decoded": 0})
        entry["by_reason"][r.reject_reason] = r.n
        entry["decoded"] += r.decoded
    return out


def stream_rows(stats: list[dict[str, Any]], kept: dict, rejected: dict) -> list[dict[str, Any]]:
    """One row per stream: translate_stats' facts with the tables' counts."""
    keys = sorted({(s["stream"], s["direction"]) for s in stats} | set(kept) | set(rejected))
    out = []
    for key in keys:
        facts = next((s for s in stats if (s["stream"], s["direction"]) == key), {})
        k, r = kept.get(key, {}), rejected.get(key, {"by_reason": {}, "decoded": 0})
        n_kept = k.get("kept", 0)
        n_rejected = sum(r["by_reason"].values())
        q = k.get("ratio_q") or [None, None, None]
        out.append({
            "stream": key[0], "direction": key[1], "role": facts.get("role"),
            "method": facts.get("method"), "model": facts.get("model"),
            "available": facts.get("available"), "read": n_kept + n_rejected,
            "stats_selected": facts.get("selected"),
            "translated": k.get("kept_decoded", 0) + r["decoded"], "kept": n_kept,
            "rejected": n_rejected, "rejected_by": dict(sorted(r["by_reason"].items())),
            "copies": k.get("copies", 0),
            "copy_rate": k.get("copies", 0) / n_kept if n_kept else None,
            "ratio_mean": k.get("ratio_mean"), "ratio_min": k.get("ratio_min"),
            "ratio_max": k.get("ratio_max"), "ratio_p5": q[0], "ratio_p50": q[1],
            "ratio_p95": q[2],
        })
    return out


def ratio_histograms(kept: DataFrame, streams: list[dict[str, Any]]) -> list[ScoreStats]:
    ratio = ratio_column(F.col("src"), F.col("tgt"))
    counted = binned_counts(kept, STREAM_KEYS, {RATIO: (ratio, F.lit(KEPT), RATIO_BINS)})
    return [ScoreStats(f"{s['stream']} {s['direction']}", RATIO, None, None, False,
                       counted.get((s["stream"], s["direction"], RATIO), []))
            for s in streams]


def rejected_samples(rejected: DataFrame) -> list[dict[str, Any]]:
    """SAMPLES rejected rows per stream and reason, picked by a hash of the row id (the same
    every time)."""
    pick = Window.partitionBy("stream", "reject_reason").orderBy(F.xxhash64("row_id"))
    rows = (rejected.withColumn("n", F.row_number().over(pick)).where(F.col("n") <= SAMPLES)
            .select(*STREAM_KEYS, "reject_reason", "source_corpus", "source_row_id", "src",
                    "hypothesis", "src_tokens", "tgt_tokens", "score", "n")
            .orderBy("stream", "reject_reason", "n").collect())
    return [r.asDict() for r in rows]


def collect_translate(spark: SparkSession, lake: Lake, run: Run) -> TranslateReport:
    notes: list[str] = []
    stats_table = table(spark, lake, "translate_stats")
    stats = ([r.asDict() for r in stats_table.where(F.col("run_id") == run.run_id)
              .orderBy("stream").collect()] if stats_table is not None else [])
    if not stats:
        notes.append(f"translate_stats holds no rows of run {run.run_id} "
                     f"(status {run.status}).")
    frames = {}
    for name in ("synthetic", "synthetic_rejected"):
        found = table(spark, lake, name)
        if found is None:
            notes.append(f"The lake has no {name} table.")
        frames[name] = found.where(F.col("run_id") == run.run_id) if found is not None else None
    kept_df, rejected_df = frames["synthetic"], frames["synthetic_rejected"]
    kept = kept_counts(kept_df) if kept_df is not None else {}
    rejected = rejected_counts(rejected_df) if rejected_df is not None else {}
    streams = stream_rows(stats, kept, rejected)
    for s in streams:
        if s["stats_selected"] is not None and s["stats_selected"] != s["read"]:
            notes.append(f"stream {s['stream']}: translate_stats counts {s['stats_selected']:,} "
                         f"read, the tables hold {s['read']:,} of its rows.")
    ratios = ratio_histograms(kept_df, streams) if kept_df is not None else []
    samples = rejected_samples(rejected_df) if rejected_df is not None else []
    return TranslateReport(run, streams, ratios, samples, notes)
