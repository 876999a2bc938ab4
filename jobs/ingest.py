"""Read raw bitext (TSV, Moses file pairs, Parquet, a lake table) or monolingual text (one
sentence a line, Parquet, a lake table) into rows with provenance; plain or gzip.

Every input line becomes exactly one row. Lines that cannot be a pair are kept with an
`ingest_error` (malformed_line, invalid_utf8, nul_byte, line_too_long) and rejected later,
so they are counted and never silently dropped. Line numbers are 1-based, as `sed -n Np`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import InputConf

RAW_COLUMNS = [
    "row_id",
    "pair",
    "corpus",
    "file",
    "file_tgt",
    "line",
    "src",
    "tgt",
    "extra",
    "ingest_error",
]


class InputError(ValueError):
    """Input that cannot be read at all (missing file, mismatched Moses pair, empty file)."""


BITEXT_FORMATS = ("tsv", "moses", "parquet", "table")
MONO_FORMATS = ("text", "parquet", "table")


def detect_format(inp: InputConf, mono: bool = False) -> str:
    if inp.format != "auto":
        return inp.format
    if all(p.rstrip("/").endswith(".parquet") for p in inp.paths):
        return "parquet"
    if mono:
        return "text"
    return {1: "tsv", 2: "moses"}.get(len(inp.paths), "tsv")


def read_input(
    spark: SparkSession, inp: InputConf, key: str, max_line_chars: int, mono: bool = False
) -> DataFrame:
    """Rows of one configured input; `key` (the pair, or the language of monolingual text)
    goes into the `pair` column. Monolingual rows have their text in `src` and a null `tgt`."""
    fmt = detect_format(inp, mono)
    allowed = MONO_FORMATS if mono else BITEXT_FORMATS
    if fmt not in allowed:
        kind = "monolingual" if mono else "bitext"
        raise InputError(f"corpus {inp.corpus}: format {fmt!r} is not for {kind}; use {allowed}")
    columns = ("text",) if mono else ("src", "tgt")
    if fmt == "moses":
        if len(inp.paths) != 2:
            raise InputError(f"corpus {inp.corpus}: a Moses pair needs 2 paths, got {inp.paths}")
        rows = read_moses(spark, inp.paths[0], inp.paths[1], max_line_chars)
    elif fmt == "parquet":
        rows = read_columns(open_parquet(spark, inp.paths), columns, f"Parquet {inp.paths}")
    elif fmt == "table":
        rows = read_columns(open_table(spark, inp), columns, f"table {inp.paths[0]}")
    elif fmt == "text":
        rows = union_all([read_text(spark, p, max_line_chars) for p in inp.paths])
    else:
        rows = union_all([read_tsv(spark, p, max_line_chars) for p in inp.paths])
    rows = rows.withColumn("pair", F.lit(key)).withColumn("corpus", F.lit(inp.corpus))
    row_id = F.xxhash64("pair", "corpus", "file", "line")
    return rows.withColumn("row_id", row_id).select(*RAW_COLUMNS)


def union_all(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


# -- numbered lines ------------------------------------------------------------------------
def numbered_lines(spark: SparkSession, path: str) -> tuple[DataFrame, dict[str, int]]:
    """(file, line, value) for every line of the file(s) at `path`, and lines per file.

    Spark's text source has no line numbers. Each file split (block) is read in order by one
    task, so a line's number is its position in its block plus the lines of earlier blocks.
    The per-block counts are one small aggregate; the rest stays in the JVM.
    """
    try:
        lines = spark.read.option("lineSep", "\n").text(path)
    except Exception as err:  # AnalysisException: path does not exist
        raise InputError(f"cannot read {path}: {err}") from None
    lines = lines.select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
        F.monotonically_increasing_id().alias("mid"),
        # Checked before any string function: those replace invalid bytes with U+FFFD.
        F.is_valid_utf8("value").alias("utf8_ok"),
        # CRLF files: drop the CR the "\n" separator leaves behind.
        F.regexp_replace("value", "\r$", "").alias("value"),
    )
    blocks = (
        lines.groupBy("file", "block")
        .agg(F.min("mid").alias("first_mid"), F.count("*").alias("n"))
        .collect()
    )
    offsets, per_file = [], {}
    for blk in sorted(blocks, key=lambda b: (b.file, b.block)):
        offsets.append((blk.file, blk.block, blk.first_mid, per_file.get(blk.file, 0)))
        per_file[blk.file] = per_file.get(blk.file, 0) + blk.n
    if not per_file:
        raise InputError(f"{path}: no lines (empty input)")
    offset_df = spark.createDataFrame(
        offsets, "file string, block long, first_mid long, offset long"
    )
    numbered = lines.join(F.broadcast(offset_df), ["file", "block"]).select(
        "file",
        (F.col("mid") - F.col("first_mid") + F.col("offset") + 1).alias("line"),
        "value",
        "utf8_ok",
    )
    return numbered, per_file


def line_problem(value: Column, utf8_ok: Column, max_line_chars: int) -> Column:
    """The ingest error of a raw line, or null. Checked before anything parses the line."""
    return (
        F.when(~utf8_ok, F.lit("invalid_utf8"))
        .when(F.instr(value, "\u0000") > 0, F.lit("nul_byte"))
        .when(F.length(value) > max_line_chars, F.lit("line_too_long"))
    )


def read_tsv(spark: SparkSession, path: str, max_line_chars: int) -> DataFrame:
    """`src<TAB>tgt[<TAB>extra...]`; extra columns are kept in `extra` as provenance."""
    numbered, _ = numbered_lines(spark, path)
    value = F.make_valid_utf8("value")
    fields = F.split(value, "\t")
    problem = line_problem(F.col("value"), F.col("utf8_ok"), max_line_chars)
    error = F.coalesce(problem, F.when(F.size(fields) < 2, F.lit("malformed_line")))
    return numbered.select(
        "file",
        F.lit(None).cast("string").alias("file_tgt"),
        "line",
        # A line that is not a pair keeps its whole text in src, so nothing is lost.
        F.when(F.size(fields) < 2, value).otherwise(fields[0]).alias("src"),
        F.when(F.size(fields) >= 2, fields[1]).alias("tgt"),
        F.when(F.size(fields) > 2, F.slice(fields, 3, F.size(fields) - 2))
        .otherwise(F.array().cast("array<string>"))
        .alias("extra"),
        error.alias("ingest_error"),
    )


def read_moses(spark: SparkSession, src_path: str, tgt_path: str, max_line_chars: int) -> DataFrame:
    """Two files, same line = same pair. Differing line counts fail before anything is written."""
    src, src_counts = numbered_lines(spark, src_path)
    tgt, tgt_counts = numbered_lines(spark, tgt_path)
    n_src, n_tgt = sum(src_counts.values()), sum(tgt_counts.values())
    if len(src_counts) != 1 or len(tgt_counts) != 1:
        raise InputError(
            f"a Moses pair is two single files: {src_path} ({len(src_counts)} "
            f"files), {tgt_path} ({len(tgt_counts)} files)"
        )
    if n_src != n_tgt:
        raise InputError(
            f"Moses pair line counts differ: {src_path} has {n_src} lines, "
            f"{tgt_path} has {n_tgt} lines"
        )
    s = src.select("file", "line", F.col("value").alias("s"), F.col("utf8_ok").alias("s_ok"))
    t = tgt.select(F.col("file").alias("file_tgt"), "line", F.col("value").alias("t"),
                   F.col("utf8_ok").alias("t_ok"))
    joined = s.join(t, "line")
    problem = F.coalesce(
        line_problem(F.col("s"), F.col("s_ok"), max_line_chars),
        line_problem(F.col("t"), F.col("t_ok"), max_line_chars),
    )
    return joined.select(
        "file",
        "file_tgt",
        "line",
        F.make_valid_utf8("s").alias("src"),
        F.make_valid_utf8("t").alias("tgt"),
        F.array().cast("array<string>").alias("extra"),
        problem.alias("ingest_error"),
    )


def read_text(spark: SparkSession, path: str, max_line_chars: int) -> DataFrame:
    """Monolingual text, one sentence a line: the whole line is `src`, `tgt` is null."""
    numbered, _ = numbered_lines(spark, path)
    return numbered.select(
        "file",
        F.lit(None).cast("string").alias("file_tgt"),
        "line",
        F.make_valid_utf8("value").alias("src"),
        F.lit(None).cast("string").alias("tgt"),
        F.array().cast("array<string>").alias("extra"),
        line_problem(F.col("value"), F.col("utf8_ok"), max_line_chars).alias("ingest_error"),
    )


def open_parquet(spark: SparkSession, paths: list[str]) -> DataFrame:
    try:
        return spark.read.parquet(*paths)
    except Exception as err:
        raise InputError(f"cannot read Parquet {paths}: {err}") from None


def open_table(spark: SparkSession, inp: InputConf) -> DataFrame:
    """A catalog table (e.g. sluice.synthetic), optionally filtered by `where`."""
    if len(inp.paths) != 1:
        raise InputError(f"corpus {inp.corpus}: format table takes one table name")
    name = inp.paths[0]
    if not spark.catalog.tableExists(name):
        raise InputError(f"corpus {inp.corpus}: no table {name} in the catalog")
    df = spark.table(name)
    try:
        df = df.where(inp.where) if inp.where else df
    except Exception as err:  # AnalysisException: a bad filter
        raise InputError(f"corpus {inp.corpus}: bad `where` {inp.where!r}: {err}") from None
    if df.isEmpty():  # e.g. a mistyped run_id: say so rather than commit an empty corpus
        raise InputError(f"corpus {inp.corpus}: no rows in {name} where {inp.where}")
    return df


def read_columns(df: DataFrame, columns: tuple[str, ...], what: str) -> DataFrame:
    """String columns `src`/`tgt` (bitext) or `text` (monolingual) of Parquet data; the other
    columns are kept as one JSON object in `extra` (provenance, e.g. a synthetic pair's
    method and model)."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what} lacks column(s) {missing}; has {df.columns}")
    others = [c for c in df.columns if c not in columns]
    extra = F.array(F.to_json(F.struct(*others))) if others else F.array().cast("array<string>")
    src, tgt = (columns[0], None) if len(columns) == 1 else columns
    return df.select(
        F.col("_metadata.file_path").alias("file"),
        F.lit(None).cast("string").alias("file_tgt"),
        (F.col("_metadata.row_index") + 1).alias("line"),
        F.col(src).cast("string").alias("src"),
        (F.col(tgt) if tgt else F.lit(None)).cast("string").alias("tgt"),
        extra.alias("extra"),
        F.lit(None).cast("string").alias("ingest_error"),
    )
