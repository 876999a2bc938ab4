"""Read raw bitext (TSV, Moses file pairs, Parquet, a lake table) or monolingual text (one
sentence a line, Parquet, a lake table) into rows with provenance; plain or gzip.

Every input line becomes exactly one row. Lines that cannot be a pair are kept with an
`ingest_error` (malformed_line, invalid_utf8, nul_byte, line_too_long) and rejected later,
so they are counted and never silently dropped. Line numbers are 1-based, as `sed -n Np`.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import reduce
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.kit.config import InputConf
from jobs.kit.errors import InputError  # noqa: F401 - raised here, defined there
from jobs.kit.progress import log
from udfs.paths import is_local_path, local_path

RAW_COLUMNS = [
    "row_id",
    "pair",
    "corpus",
    "file",
    "file_tgt",
    "line",
    "src",
    "tgt",
    "src_url",
    "tgt_url",
    "host",
    "extra",
    "ingest_error",
]
# The page each side was crawled from (ParaCrawl/Bitextor TSV: `url1 url2 src tgt ...`),
# where the input names them (`columns:` of a TSV input; these columns of Parquet data);
# `host` is the registrable domain of src_url, else of tgt_url (udfs/hosts.py).
URL_COLUMNS = ("src_url", "tgt_url")
TSV_FIELDS = ("src", "tgt", *URL_COLUMNS)  # the fields a TSV input's `columns:` can name


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
    spark: SparkSession,
    inp: InputConf,
    key: str,
    max_line_chars: int,
    mono: bool = False,
    follow_symlinks: bool = False,
) -> DataFrame:
    """Rows of one configured input; `key` (the pair, or the language of monolingual text)
    goes into the `pair` column. Monolingual rows have their text in `src` and a null `tgt`.
    `follow_symlinks`: `ingest.follow_symlinks` (else links found in directories are skipped)."""
    fmt = detect_format(inp, mono)
    allowed = MONO_FORMATS if mono else BITEXT_FORMATS
    if fmt not in allowed:
        kind = "monolingual" if mono else "bitext"
        raise InputError(f"corpus {inp.corpus}: format {fmt!r} is not for {kind}; use {allowed}")
    if inp.side and not mono:
        raise InputError(f"corpus {inp.corpus}: `side: {inp.side}` reads monolingual text out "
                         "of bitext: use it in a monolingual run (--lang)")
    columns = (inp.side or "text",) if mono else ("src", "tgt")
    # A side of bitext keeps where it came from (pair, run, row), not the other side's columns.
    extra = ["pair", "corpus", "run_id", "row_id"] if inp.side else None
    reads: dict[str, str | list[str]] = {}
    if fmt in ("tsv", "moses", "text"):
        for path in inp.paths:  # every file of the corpus, before Spark reads any of them
            reads[path] = check_text_files(spark, path, follow_symlinks)
    urls = False  # whether the input has a page URL column (a host to compute)
    if fmt == "moses":
        if len(inp.paths) != 2:
            raise InputError(f"corpus {inp.corpus}: a Moses pair needs 2 paths, got {inp.paths}")
        rows = read_moses(spark, reads[inp.paths[0]], reads[inp.paths[1]], max_line_chars)
    elif fmt == "parquet":
        parquet = open_parquet(spark, inp.paths, follow_symlinks)
        url_of = url_sources(parquet, mono, inp.side)
        urls = any(url_of)
        rows = read_columns(parquet, columns, f"Parquet {inp.paths}", extra_columns=extra,
                            url_of=url_of)
    elif fmt == "table":
        table, provenance = open_table(spark, inp)
        url_of = url_sources(table, mono, inp.side)
        urls = any(url_of)
        rows = read_columns(table, columns, f"table {inp.paths[0]}", provenance, extra, url_of)
    elif fmt == "text":
        rows = union_all([read_text(spark, reads[p], max_line_chars) for p in inp.paths])
    else:
        fields = tuple(inp.columns or ("src", "tgt"))
        urls = any(c in URL_COLUMNS for c in fields)
        rows = union_all([read_tsv(spark, reads[p], max_line_chars, fields) for p in inp.paths])
    rows = rows.withColumn("pair", F.lit(key)).withColumn("corpus", F.lit(inp.corpus))
    rows = with_host(rows, urls)
    row_id = F.xxhash64("pair", "corpus", "file", "line")
    return rows.withColumn("row_id", row_id).select(*RAW_COLUMNS)


# A compressed file holds about this many times its size in text (gzip on news text 3-4x;
# Parquet's compressed columns about the same): the measure of an input's size that sets
# how many partitions it is spread over, so it errs towards more (`PACKED`: the files so
# counted).
COMPRESSION_RATIO = 4
MOST_FILES_SIZED = 512  # more files than this on a remote file system: the size is not asked


def input_bytes(spark: SparkSession, rows: DataFrame) -> int | None:
    """About how many bytes of text the files `rows` reads hold (compressed text and Parquet
    files counted `COMPRESSION_RATIO` times), or None where that is not known cheaply: a
    small input is spread over fewer partitions (jobs/filtering/run.py `partitions`)."""
    files = rows.inputFiles()
    remote = [f for f in files if not is_local_path(f)]
    if len(remote) > MOST_FILES_SIZED:
        return None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    total = 0
    try:
        for uri in files:
            if is_local_path(uri):
                size = os.path.getsize(unquote(local_path(uri)))
            else:
                path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(uri)
                size = path.getFileSystem(conf).getFileStatus(path).getLen()
            total += size * (COMPRESSION_RATIO if uri.endswith(PACKED) else 1)
    except Exception:  # a file gone or unreadable since: the read itself says so
        return None
    return total


def union_all(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


# -- checks before reading ------------------------------------------------------------------
GZIP_MAGIC = b"\x1f\x8b\x08"  # ID1 ID2 and CM = deflate (RFC 1952)
# Names Hadoop decompresses by (CompressionCodecFactory); other names are read as they are.
COMPRESSED = (".gz", ".bz2", ".deflate", ".zst", ".lz4", ".snappy")
# Files whose size understates their text (input_bytes): compressed text, Parquet, ORC.
PACKED = (*COMPRESSED, ".parquet", ".orc")
# Byte order marks, UTF-32 first: its LE mark starts with UTF-16 LE's.
BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32LE", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32BE", "UTF-32"),
    (b"\xff\xfe", "UTF-16LE", "UTF-16"),
    (b"\xfe\xff", "UTF-16BE", "UTF-16"),
)


def shown(uri: str) -> str:
    """A file as the user knows it: local files as plain paths, others as URIs."""
    parsed = urlparse(uri)
    return parsed.path if parsed.scheme == "file" else uri


def check_text_files(
    spark: SparkSession, path: str, follow_symlinks: bool = False
) -> str | list[str]:
    """What Spark is to read for `path` (a file, directory or glob): `path` itself, or, where
    symlinks in it were skipped (`input_files`), the files left. Refuses, before Spark reads
    them, a path that is not there and files it would turn into garbage rows or a crash
    halfway: gzip data that is not gzip (or is not named .gz) and UTF-16/UTF-32 text. Reads
    the first KB of each file, on the driver.

    A truncated or corrupt gzip stream cannot be found this cheaply: deflate cannot be entered
    in the middle (each block depends on the 32 KB before it) and the trailer is the CRC and
    size of the whole stream, so only inflating all of it tells. The pass that numbers lines
    inflates all of it anyway; `numbered_lines` turns its read failure into an InputError."""
    listed = input_files(spark, path, follow_symlinks)
    if listed is None:
        return path
    fs, files, skipped = listed
    for file in files:
        name = shown(file.getPath().toString())
        try:
            stream = fs.open(file.getPath())
            try:  # enough compressed bytes for the first KB of text
                head = bytes(stream.readNBytes(16384 if name.endswith(".gz") else 1024))
            finally:
                stream.close()
        except Exception as err:  # e.g. no permission
            message = str(getattr(err, "java_exception", err)).splitlines()[0]
            raise InputError(f"{name}: cannot be read ({message})") from None
        problem = text_problem(name, head)
        if problem:
            raise InputError(f"{name}: {problem}")
    return [file.getPath().toString() for file in files] if skipped else path


GLOB_CHARS = "*?[{"  # Hadoop's glob syntax


def relative_hint(path: str) -> str:
    """Where a relative path was looked for: every path in a config or a flag is relative to
    the working directory the job starts in (only `extends` is relative to its config file)."""
    if "://" in path or os.path.isabs(path):
        return ""
    return f" (a relative path is read from the working directory, {os.getcwd()})"


def input_files(
    spark: SparkSession, path: str, follow_symlinks: bool
) -> tuple[Any, list[Any], list[str]] | None:
    """(file system, the files of `path`, the symlinks skipped), or None for a path Hadoop
    cannot even parse (Spark's read says what is wrong). A path that is not there (or a glob
    matching nothing) is an InputError: said before Spark's read, which logs a long WARN
    trace about it first."""
    jvm = spark.sparkContext._jvm
    try:
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        statuses = fs.globStatus(hpath)
    except Exception:  # a bad path or scheme
        return None
    if not statuses:  # None: no such path; empty: a glob that matches nothing
        raise InputError(f"{path}: no such file or directory{relative_hint(path)}")
    skipped: list[str] = []
    files = list(matched_files(fs, path, statuses, follow_symlinks, skipped))
    if skipped and not files:
        raise InputError(f"{path}: nothing to read but symbolic links (skipped; "
                         "ingest.follow_symlinks: true reads them)")
    return fs, files, skipped


def matched_files(fs: Any, path: str, statuses: Any, follow_symlinks: bool,
                  skipped: list[str]) -> Iterator[Any]:
    """The files of `path`'s glob matches (`listed_files`). A path named as it is is read
    even if it is a symlink (the user named it); a glob's matches are listed, so a
    symlink among them is skipped like one in a directory."""
    globbed = any(c in path for c in GLOB_CHARS)
    for status in statuses:
        if globbed and skipped_link(status, follow_symlinks, skipped):
            continue
        yield from listed_files(fs, status, follow_symlinks, skipped)


def listed_files(fs: Any, status: Any, follow_symlinks: bool = False,
                 skipped: list[str] | None = None) -> Iterator[Any]:
    """The files Spark reads for one glob match: the file, or a directory's non-hidden files,
    recursively. A symlink below it (file or directory) is skipped with a warning, unless
    `follow_symlinks`: whoever can write into an input directory could link /etc/passwd."""
    if not status.isDirectory():
        yield status
        return
    for child in sorted(fs.listStatus(status.getPath()), key=lambda s: s.getPath().getName()):
        if not child.isDirectory() and child.getPath().getName().startswith(("_", ".")):
            continue
        if skipped_link(child, follow_symlinks, [] if skipped is None else skipped):
            continue
        yield from listed_files(fs, child, follow_symlinks, skipped)


def skipped_link(status: Any, follow_symlinks: bool, skipped: list[str]) -> bool:
    """Whether `status` is a symlink not to follow; if so it is logged and added to `skipped`."""
    if follow_symlinks or not is_symlink(status):
        return False
    name = shown(status.getPath().toString())
    log(f"warning: {name} is a symbolic link: skipped (ingest.follow_symlinks: true reads it)")
    skipped.append(name)
    return True


def is_symlink(status: Any) -> bool:
    """Whether a listed file or directory is a symlink. Hadoop's local file system lists a
    link as what it points to (isSymlink() false): there the OS is asked."""
    if status.isSymlink():
        return True
    uri = status.getPath().toUri()
    return uri.getScheme() == "file" and os.path.islink(uri.getPath())


def text_problem(name: str, head: bytes) -> str | None:
    """What is wrong with a text file, judged by its first bytes, or None."""
    if name.endswith(".gz") and head:
        if not head.startswith(GZIP_MAGIC):
            return f"not gzip data (named .gz, but it starts with bytes {head[:4].hex(' ')})"
        try:  # the first KB of text; a stream cut short here is found by the full read
            head = zlib.decompressobj(wbits=31).decompress(head, 1024)
        except zlib.error as err:
            return f"corrupt gzip data ({err})"
    elif head.startswith(GZIP_MAGIC) and not name.endswith(COMPRESSED):
        return "gzip data without a .gz name (Spark would read the compressed bytes): rename it"
    elif name.endswith(COMPRESSED):
        return None  # other codecs are not sniffed
    encoding = utf16_or_32(head[:1024])
    if encoding is None:
        return None
    found, iconv = encoding
    return (
        f"{found} text, sluice reads UTF-8: convert it first, e.g. "
        f"iconv -f {iconv} -t UTF-8 IN > OUT (through zcat/gzip for .gz)"
    )


def utf16_or_32(head: bytes) -> tuple[str, str] | None:
    """(what was found, iconv's name for it) for UTF-16/UTF-32 text, else None (UTF-8 with or
    without a BOM, or anything else: invalid bytes are rejected per line later)."""
    for bom, encoding, iconv in BOMS:
        if head.startswith(bom):
            return f"{encoding} (byte order mark {bom.hex(' ')})", iconv
    # No BOM: mostly-ASCII UTF-16 has a NUL in every other byte. A UTF-8 file has NULs only
    # in broken lines (rejected as nul_byte), never in a quarter of one byte position.
    if len(head) < 64:
        return None
    even, odd = head[0::2].count(0), head[1::2].count(0)
    for encoding, nuls, others in (("UTF-16LE", odd, even), ("UTF-16BE", even, odd)):
        if nuls >= len(head) // 8 and others <= nuls // 8:
            return f"{encoding} (no byte order mark, NUL bytes in every other byte)", encoding
    return None


# -- numbered lines ------------------------------------------------------------------------
def numbered_lines(
    spark: SparkSession, path: str | list[str]
) -> tuple[DataFrame, dict[str, int]]:
    """(file, line, value) for every line of the file(s) at `path` (or of a list of files:
    `check_text_files`), and lines per file.

    Spark's text source has no line numbers. Each file split (block) is read in order by one
    task, so a line's number is its position in its block plus the lines of earlier blocks.
    The per-block counts are one small aggregate; the rest stays in the JVM.

    Lines end at "\n", "\r\n" or a lone "\r" (old Mac files), as Python's and most tools'
    line reading: Hadoop's line reader does that when no `lineSep` is set, also across splits.
    """
    try:
        lines = spark.read.text(path)
    except Exception as err:  # AnalysisException: path does not exist
        raise InputError(f"cannot read {path}: {err}") from None
    lines = lines.select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
        F.monotonically_increasing_id().alias("mid"),
        # Checked before any string function: those replace invalid bytes with U+FFFD.
        F.is_valid_utf8("value").alias("utf8_ok"),
        "value",
    )
    counts = lines.groupBy("file", "block").agg(
        F.min("mid").alias("first_mid"), F.count("*").alias("n")
    )
    try:
        # This pass reads every byte: a truncated or corrupt compressed file fails it. Spark
        # would log the failed task's stack traces; the InputError below says it in one line.
        with task_failures_muted(spark):
            blocks = counts.collect()
    except Exception as err:
        problem = read_failure(err)
        if problem is None:
            raise
        raise InputError(problem) from None
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


# Loggers that print a failed task's stack trace (the executor's, in local mode this JVM).
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
)


@contextmanager
def task_failures_muted(spark: SparkSession) -> Iterator[None]:
    """Spark's task-failure logging off for a block whose failures are reported otherwise."""
    jvm = spark.sparkContext._jvm
    log4j, configurator = jvm.org.apache.logging.log4j, jvm.org.apache.logging.log4j.core.config
    before = {name: log4j.LogManager.getLogger(name).getLevel() for name in TASK_FAILURE_LOGGERS}
    for name in before:
        configurator.Configurator.setLevel(name, log4j.Level.OFF)
    try:
        yield
    finally:
        for name, level in before.items():
            configurator.Configurator.setLevel(name, level)


def read_failure(err: Exception) -> str | None:
    """`file: what is wrong` for Spark's failure to read an input file, or None for others."""
    java = getattr(err, "java_exception", None) or getattr(err, "_origin", None)
    path, cause = None, None
    while java is not None:
        spark_error = java.getClass().getName() == "org.apache.spark.SparkException"
        if path is None and spark_error and str(java.getCondition()).startswith("FAILED_READ"):
            path = unquote(str(java.getMessageParameters().get("path")))  # Spark URL-encodes
        cause, java = java, java.getCause()
    if path is None or cause is None:
        return None
    what = f"{cause.getClass().getSimpleName()}: {cause.getMessage()}"
    if path.endswith(".gz"):
        return f"{shown(path)}: truncated or corrupt gzip data ({what})"
    return f"{shown(path)}: cannot be read ({what})"


def line_problem(value: Column, utf8_ok: Column, max_line_chars: int) -> Column:
    """The ingest error of a raw line, or null. Checked before anything parses the line."""
    return (
        F.when(~utf8_ok, F.lit("invalid_utf8"))
        .when(F.instr(value, "\u0000") > 0, F.lit("nul_byte"))
        .when(F.length(value) > max_line_chars, F.lit("line_too_long"))
    )


def read_tsv(spark: SparkSession, path: str | list[str], max_line_chars: int,
             columns: tuple[str, ...] = ("src", "tgt")) -> DataFrame:
    """Tab-separated fields named by `columns` (an input's `columns:`; `src`, `tgt`, and
    `src_url`/`tgt_url` where the crawl has them): `src<TAB>tgt` unless told otherwise.
    Fields of other names, and fields past the named ones, are kept in `extra` in their
    order, as provenance. A line with fewer fields than named is a malformed_line, its whole
    text in src, so nothing is lost."""
    numbered, _ = numbered_lines(spark, path)
    value = F.make_valid_utf8("value")
    fields = F.split(value, "\t")
    short = F.size(fields) < len(columns)
    problem = line_problem(F.col("value"), F.col("utf8_ok"), max_line_chars)
    error = F.coalesce(problem, F.when(short, F.lit("malformed_line")))

    def field(name: str) -> Column:
        if name not in columns:
            return F.lit(None).cast("string")
        return F.when(~short, fields[columns.index(name)])

    kept = [fields[i] for i, name in enumerate(columns) if name not in TSV_FIELDS]
    past = F.slice(fields, len(columns) + 1, F.greatest(F.size(fields) - len(columns), F.lit(0)))
    extra = F.concat(F.array(*kept).cast("array<string>"), past) if kept else past
    return numbered.select(
        "file",
        F.lit(None).cast("string").alias("file_tgt"),
        "line",
        F.when(short, value).otherwise(fields[columns.index("src")]).alias("src"),
        field("tgt").alias("tgt"),
        *[field(name).alias(name) for name in URL_COLUMNS],
        F.when(short, F.array().cast("array<string>")).otherwise(extra).alias("extra"),
        error.alias("ingest_error"),
    )


def with_host(rows: DataFrame, has_urls: bool) -> DataFrame:
    """`host` of rows (`has_urls`: the input names a URL column; else null, no UDF)."""
    if not has_urls:
        return rows.withColumn("host", F.lit(None).cast("string"))
    from udfs.hosts import host_of

    return rows.withColumn("host", host_of(*[F.col(c) for c in URL_COLUMNS]))


def read_moses(
    spark: SparkSession, src_path: str | list[str], tgt_path: str | list[str], max_line_chars: int
) -> DataFrame:
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
        *[F.lit(None).cast("string").alias(c) for c in URL_COLUMNS],
        F.array().cast("array<string>").alias("extra"),
        problem.alias("ingest_error"),
    )


def read_text(spark: SparkSession, path: str | list[str], max_line_chars: int) -> DataFrame:
    """Monolingual text, one sentence a line: the whole line is `src`, `tgt` is null."""
    numbered, _ = numbered_lines(spark, path)
    return numbered.select(
        "file",
        F.lit(None).cast("string").alias("file_tgt"),
        "line",
        F.make_valid_utf8("value").alias("src"),
        *[F.lit(None).cast("string").alias(c) for c in ("tgt", *URL_COLUMNS)],
        F.array().cast("array<string>").alias("extra"),
        line_problem(F.col("value"), F.col("utf8_ok"), max_line_chars).alias("ingest_error"),
    )


def open_parquet(spark: SparkSession, paths: list[str], follow_symlinks: bool = False) -> DataFrame:
    """Parquet files, directories or globs; a missing path and symlinks as for text files."""
    files: list[str] = []
    skipped = False
    for path in paths:
        listed = input_files(spark, path, follow_symlinks)
        skipped |= listed is not None and bool(listed[2])
        files += [f.getPath().toString() for f in listed[1]] if listed else [path]
    reader = spark.read
    if skipped and len(paths) == 1 and not any(c in paths[0] for c in GLOB_CHARS):
        reader = reader.option("basePath", paths[0])  # keeps a directory's `k=v` columns
    try:
        return reader.parquet(*(files if skipped else paths))
    except Exception as err:
        raise InputError(f"cannot read Parquet {paths}: {err}") from None


def open_table(spark: SparkSession, inp: InputConf) -> tuple[DataFrame, tuple[Column, Column]]:
    """A catalog table (e.g. sluice.synthetic), optionally filtered by `where`, and the
    (file, line) of its rows: a table's file and row in it, or for a view (no files to
    name) the view's name and the row's place in an order of all its columns."""
    if len(inp.paths) != 1:
        raise InputError(f"corpus {inp.corpus}: format table takes one table name")
    name = inp.paths[0]
    if not spark.catalog.tableExists(name):
        raise InputError(f"corpus {inp.corpus}: no table {name} in the catalog")
    df = spark.table(name)
    try:
        df.select("_metadata.file_path", "_metadata.row_index")
        provenance = (F.col("_metadata.file_path"), F.col("_metadata.row_index") + 1)
    except Exception:  # AnalysisException: a view, whose rows have no file
        # The same rows get the same numbers in every run: ordered by their content (rows
        # equal in every column are interchangeable). One task numbers them all: fine for
        # the views one ingests (a selection, synthetic pairs), slow for a whole lake.
        order = [F.to_json(F.struct(*df.columns))]
        provenance = (F.lit(name), F.row_number().over(Window.orderBy(*order)).cast("long"))
    try:
        df = df.where(inp.where) if inp.where else df
    except Exception as err:  # AnalysisException: a bad filter
        raise InputError(f"corpus {inp.corpus}: bad `where` {inp.where!r}: {err}") from None
    if df.isEmpty():  # e.g. a mistyped run_id: say so rather than commit an empty corpus
        raise InputError(f"corpus {inp.corpus}: no rows in {name} where {inp.where}")
    return df, provenance


def url_sources(df: DataFrame, mono: bool, side: str | None) -> tuple[str | None, str | None]:
    """The columns of Parquet data or a table that hold (src_url, tgt_url), None where absent:
    a bitext's src_url/tgt_url, monolingual text's `url`, or a bitext side's URL."""
    wanted = (f"{side}_url", None) if side else ("url", None) if mono else URL_COLUMNS
    return tuple(c if c in df.columns else None for c in wanted)  # type: ignore[return-value]


def read_columns(df: DataFrame, columns: tuple[str, ...], what: str,
                 provenance: tuple[Column, Column] | None = None,
                 extra_columns: list[str] | None = None,
                 url_of: tuple[str | None, str | None] = (None, None)) -> DataFrame:
    """String columns `src`/`tgt` (bitext) or `text` (monolingual) of Parquet data, and the
    page URLs where `url_of` names their columns; the other columns are kept as one JSON
    object in `extra` (provenance, e.g. a synthetic pair's method and model; `extra_columns`:
    only those of them). `provenance`: the rows' (file, line), by default their Parquet file
    and row number in it."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what} lacks column(s) {missing}; has {df.columns}")
    others = [c for c in df.columns if c not in columns and c not in url_of
              and (extra_columns is None or c in extra_columns)]
    url_cols = [(F.col(c).cast("string") if c else F.lit(None).cast("string")).alias(name)
                for c, name in zip(url_of, URL_COLUMNS, strict=True)]
    extra = F.array(F.to_json(F.struct(*others))) if others else F.array().cast("array<string>")
    src, tgt = (columns[0], None) if len(columns) == 1 else columns
    file, line = provenance or (F.col("_metadata.file_path"), F.col("_metadata.row_index") + 1)
    sides = [F.col(c).cast("string") for c in (src, tgt) if c]
    # Parquet strings are bytes that nothing checked: bad UTF-8 is rejected as in a text file
    # (its text kept with U+FFFD), not silently changed by the first string function.
    utf8_ok = [F.coalesce(F.is_valid_utf8(side), F.lit(True)) for side in sides]
    valid = [F.make_valid_utf8(side) for side in sides]
    return df.select(
        file.alias("file"),
        F.lit(None).cast("string").alias("file_tgt"),
        line.alias("line"),
        valid[0].alias("src"),
        (valid[1] if tgt else F.lit(None).cast("string")).alias("tgt"),
        *url_cols,
        extra.alias("extra"),
        F.when(~reduce(Column.__and__, utf8_ok), F.lit("invalid_utf8")).alias("ingest_error"),
    )
