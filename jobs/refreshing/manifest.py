"""What a refresh has to do: the source files as listed now, against the `input_files`
manifest (one row per file a refresh has committed: path, size, modification time, content
checksum, the filter config's hash, the run that committed its rows, status).

A file is processed when it is new, when its content changed (size or modification time
differ and so does its checksum: a file only touched is not), or when its rows were made
under another filter config. A file that is gone is `missing` (its rows kept) or dropped,
as `refresh.missing_files` says. The manifest changes only in a refresh's commit, with the
rows: it never says a file is done whose rows did not commit.
"""

from __future__ import annotations

import glob as globlib
import hashlib
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import astuple, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from jobs.kit.errors import InputError
from jobs.kit.ingest import matched_files, read_failure, shown, task_failures_muted
from jobs.kit.progress import log
from jobs.refreshing.config import RefreshConfig, SourceConf
from udfs.paths import is_local_path, local_path

MANIFEST = "input_files"
MANIFEST_SCHEMA = (
    "corpus string, path string, path_tgt string, format string, size long, "
    "modified_ms long, checksum string, config_hash string, run_id string, "
    "status string, rows long, file_id string, updated_at timestamp, key string"
)
MANIFEST_COLUMNS = [c.split()[0] for c in MANIFEST_SCHEMA.split(", ")]
COMPRESSED = re.compile(r"\.(gz|bz2|zst|deflate|lz4|snappy)$")
CHUNK = 1 << 20


@dataclass(frozen=True)
class SourceFile:
    """A file to refresh from (a Moses pair: the source-language file and its partner)."""

    corpus: str
    format: str  # tsv | moses | parquet | text
    path: str
    path_tgt: str | None
    size: int
    modified_ms: int
    checksum: str | None = None

    @property
    def file_id(self) -> str:
        """A short stable id of (corpus, path): names the Parquet files holding its rows."""
        return hashlib.sha256(f"{self.corpus}\t{self.path}".encode()).hexdigest()[:16]

    @property
    def paths(self) -> list[str]:
        return [self.path] if self.path_tgt is None else [self.path, self.path_tgt]


@dataclass(frozen=True)
class Entry:
    """A row of the manifest."""

    corpus: str
    path: str
    path_tgt: str | None
    format: str
    size: int
    modified_ms: int
    checksum: str
    config_hash: str
    run_id: str
    status: str  # done | missing
    rows: int
    file_id: str


ENTRY_FIELDS = [f.name for f in fields(Entry)]  # the manifest's columns but the last two


@dataclass
class Plan:
    """What this refresh does. `process`: files read and filtered now, with why (new,
    changed, config, full); `removed`: file ids whose committed rows go (changed, dropped);
    `entries`: the manifest after the refresh, less the rows counts of processed files."""

    process: list[SourceFile] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    dropped: list[Entry] = field(default_factory=list)
    kept: list[Entry] = field(default_factory=list)  # unchanged, touched or missing
    # Files that cannot be read whole (CorruptSource): not refreshed, their committed rows
    # (if any) kept, tried again by the next refresh.
    quarantined: list[tuple[SourceFile, str]] = field(default_factory=list)
    manifest_changed: bool = False

    @property
    def corpora(self) -> set[str]:
        """Corpora whose rows change."""
        return {f.corpus for f in self.process} | {e.corpus for e in self.dropped}

    @property
    def up_to_date(self) -> bool:
        return not self.process and not self.dropped and not self.manifest_changed

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for why in self.why.values():
            counts[why] = counts.get(why, 0) + 1
        parts = [f"{n} {why}" for why, n in sorted(counts.items())]
        missing = sum(e.status == "missing" for e in self.kept)
        if missing:
            parts.append(f"{missing} missing (rows kept)")
        if self.dropped:
            parts.append(f"{len(self.dropped)} dropped (gone, rows removed)")
        unchanged = len(self.kept) - missing
        quarantined = [f"{len(self.quarantined)} quarantined"] if self.quarantined else []
        return ", ".join(parts + [f"{unchanged} unchanged"] + quarantined)


# -- listing ---------------------------------------------------------------------------------
def source_format(source: SourceConf, name: str, mono: bool) -> str:
    if source.format != "auto":
        return source.format
    if name.endswith(".parquet"):
        return "parquet"
    return "text" if mono else "tsv"


def hadoop_files(spark: SparkSession, source: SourceConf,
                 follow_symlinks: bool = False) -> dict[str, tuple[int, int]]:
    """path -> (size, modification ms) of the files of one source, as Spark reads them: a
    directory's non-hidden files (recursively), or a glob's matches. A path that does not
    exist is an error (a glob matching nothing is not: the crawl may not have written its
    first file yet). Hidden names are skipped, also where a glob matches them, and so are
    symlinks in the directory or among the matches, unless `follow_symlinks`
    (jobs/kit/ingest.py `matched_files`)."""
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(source.path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    statuses = fs.globStatus(hpath)
    if statuses is None:
        raise InputError(f"{source.path}: no such file or directory (source {source.corpus})")
    return {
        file.getPath().toString(): (file.getLen(), file.getModificationTime())
        for file in matched_files(fs, source.path, statuses, follow_symlinks, [])
        if not hidden(file.getPath().getName())
    }


def hidden(name: str) -> bool:
    """A file still being written, by convention (`.x`, `_x`): not read until renamed."""
    return name.startswith(("_", "."))


def local_files(source: SourceConf,
                follow_symlinks: bool = False) -> dict[str, tuple[int, int]] | None:
    """`hadoop_files` for a local source, without Spark (the quick up-to-date check), or None
    where only Hadoop's listing would do (a remote path, a `{a,b}` glob)."""
    if not is_local_path(source.path) or "{" in source.path:
        return None
    path = local_path(source.path)
    if not globlib.has_magic(path) and not os.path.exists(path):
        return None  # Hadoop's listing says what is wrong
    matches = globlib.glob(path) if globlib.has_magic(path) else [path]
    found = {}
    for match in matches:
        if globlib.has_magic(path) and skipped_local_link(match, follow_symlinks):
            continue
        if os.path.isfile(match):
            if not hidden(os.path.basename(match)):
                found[match] = os.stat(match)
            continue
        for folder, folders, names in os.walk(match, followlinks=follow_symlinks):
            folders[:] = [f for f in folders
                          if not skipped_local_link(os.path.join(folder, f), follow_symlinks)]
            for name in names:
                file = os.path.join(folder, name)
                if not hidden(name) and not skipped_local_link(file, follow_symlinks):
                    found[file] = os.stat(file)
    return {f"file:{path}": (st.st_size, st.st_mtime_ns // 1_000_000)
            for path, st in found.items()}


def skipped_local_link(path: str, follow_symlinks: bool) -> bool:
    """`jobs.kit.ingest.skipped_link` for a local path: a symlink not to follow, said once."""
    if follow_symlinks or not os.path.islink(path):
        return False
    log(f"warning: {path} is a symbolic link: skipped (ingest.follow_symlinks: true reads it)")
    return True


def source_files(source: SourceConf, files: dict[str, tuple[int, int]],
                 langs: tuple[str, str], mono: bool) -> list[SourceFile]:
    """The source's files to refresh from: each file, or for Moses each source-language file
    with its target-language partner."""
    if not files:
        log(f"source {source.corpus}: {source.path} holds no file yet")
    found = []
    for path, (size, modified) in sorted(files.items()):
        fmt = source_format(source, path, mono)
        if fmt != "moses":
            found.append(SourceFile(source.corpus, fmt, path, None, size, modified))
            continue
        partner = moses_partner(path, langs)
        if partner is None:
            if moses_partner(path, langs[::-1]) is None:
                log(f"warning: source {source.corpus}: {shown(path)} is neither .{langs[0]} "
                    f"nor .{langs[1]}: not read")
            continue
        if partner not in files:
            log(f"warning: source {source.corpus}: {shown(path)} has no partner "
                f"{shown(partner)} yet: read once it is there")
            continue
        size_tgt, modified_tgt = files[partner]
        found.append(SourceFile(source.corpus, fmt, path, partner, size + size_tgt,
                                max(modified, modified_tgt)))
    return found


def moses_partner(path: str, langs: tuple[str, str]) -> str | None:
    """`x.zh.gz` -> `x.en.gz` for zh-en: the target file of a source-language file."""
    suffix = COMPRESSED.search(path)
    codec = suffix.group(0) if suffix else ""
    stem = path[: len(path) - len(codec)]
    src, tgt = langs
    if not stem.endswith(f".{src}"):
        return None
    return f"{stem[: -len(src)]}{tgt}{codec}"


def list_sources(spark: SparkSession | None, cfg: RefreshConfig) -> list[SourceFile] | None:
    """Every source's files, through Hadoop (`spark`) or, without it, listed here (None where
    that cannot be done the same way)."""
    found = []
    for source in cfg.sources:
        follow = cfg.ingest.follow_symlinks
        files = (hadoop_files(spark, source, follow) if spark is not None
                 else local_files(source, follow))
        if files is None:
            return None
        found += source_files(source, files, cfg.langs, cfg.mono)
    return found


# -- checksums --------------------------------------------------------------------------------
class CorruptSource(ValueError):
    """A source file that cannot be read whole (a truncated or corrupt gzip file)."""


class GzipCheck:
    """Decompresses a gzip stream fed in chunks (output dropped), to tell that it is whole:
    its last member ends (a file cut while being copied ends inside one) and each member's
    CRC checks (zlib checks it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.inflate = zlib.decompressobj(wbits=31)
        self.inside = False  # within a member that has not ended yet

    def feed(self, chunk: bytes) -> None:
        try:
            while chunk:
                self.inside = True
                self.inflate.decompress(chunk, CHUNK)
                chunk = self.inflate.unconsumed_tail
                if self.inflate.eof:  # a member ended: what follows starts the next one
                    chunk = self.inflate.unused_data
                    self.inflate = zlib.decompressobj(wbits=31)
                    self.inside = False
        except zlib.error as err:
            raise CorruptSource(f"{shown(self.path)}: corrupt gzip data ({err})") from None

    def finish(self) -> None:
        if self.inside:
            raise CorruptSource(f"{shown(self.path)}: truncated gzip file (it ends inside "
                                "its compressed data)")


def checksum(spark: SparkSession | None, file: SourceFile) -> str:
    """SHA-256 of the file's bytes (a Moses pair: both files'), read here on the driver; on
    a remote file system the file system's own checksum where it has one (HDFS). A `.gz`
    file read here is decompressed on the way (CorruptSource when it is not whole: Spark
    would fail the whole refresh halfway through it); one HDFS checksums is not."""
    digest = hashlib.sha256()
    for path in file.paths:
        if is_local_path(path):
            check = GzipCheck(path) if path.endswith(".gz") else None
            with open(local_path(path), "rb") as handle:
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
                    if check:
                        check.feed(chunk)
            if check:
                check.finish()
            continue
        jvm = spark.sparkContext._jvm
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        native = fs.getFileChecksum(hpath)
        if native is not None:
            digest.update(bytes(native.getBytes()))
            continue
        stream, check = fs.open(hpath), GzipCheck(path) if path.endswith(".gz") else None
        try:
            while chunk := bytes(stream.readNBytes(CHUNK)):
                digest.update(chunk)
                if check:
                    check.feed(chunk)
        finally:
            stream.close()
        if check:
            check.finish()
    return "sha256:" + digest.hexdigest()


# -- the manifest ----------------------------------------------------------------------------
def read_manifest(spark: SparkSession, database: str, key: str) -> dict[tuple[str, str], Entry]:
    name = f"{database}.{MANIFEST}"
    if not spark.catalog.tableExists(name):
        return {}
    spark.catalog.refreshTable(name)
    try:
        with task_failures_muted(spark):  # a corrupt file: one line below, not task traces
            rows = spark.table(name).where(f"key = '{key}'").select(*ENTRY_FIELDS).collect()
    except Exception as err:
        problem = read_failure(err)
        if problem is None:
            raise
        raise InputError(f"the {MANIFEST} manifest: {problem}") from None
    return {(r.corpus, r.path): Entry(*r) for r in rows}


def read_manifest_files(directory: str) -> dict[tuple[str, str], Entry] | None:
    """The manifest of one key read straight from its committed Parquet files (the quick
    up-to-date check, before Spark starts); None when there is none."""
    import pyarrow.parquet as pq

    if not os.path.isdir(directory):
        return None
    import pyarrow as pa

    names = sorted(n for n in os.listdir(directory) if not n.startswith(("_", ".")))
    entries = {}
    for name in names:  # one by one, to name a file that cannot be read
        path = os.path.join(directory, name)
        try:
            table = pq.read_table(path, columns=ENTRY_FIELDS)
        except (pa.ArrowException, OSError) as err:
            why = (str(err).splitlines() or [type(err).__name__])[0]
            raise InputError(
                f"{path}: not a readable {MANIFEST} manifest file ({why}); every refresh of "
                "this key needs it: restore it from a backup, or move it away to process "
                "every source file again"
            ) from None
        entries.update({(r["corpus"], r["path"]): Entry(**r) for r in table.to_pylist()})
    return entries


def plan_refresh(listed: list[SourceFile], manifest: dict[tuple[str, str], Entry],
                 config_hash: str, missing_files: str, checksum: Callable[[SourceFile], str],
                 full: bool = False) -> Plan:
    """Compare the files listed now with the manifest; `checksum` reads a file's content
    (only for files that are new or whose size or time changed)."""
    plan = Plan()
    seen = set()

    def whole(file: SourceFile, entry: Entry | None) -> str | None:
        """The file's checksum, or None when it is quarantined (its entry then kept)."""
        try:
            return checksum(file)
        except CorruptSource as err:
            plan.quarantined.append((file, str(err)))
            if entry is not None:
                plan.kept.append(entry)
            return None

    for file in listed:
        entry = manifest.get((file.corpus, file.path))
        seen.add((file.corpus, file.path))
        if entry is None or full or entry.config_hash != config_hash:
            if (digest := whole(file, entry)) is None:
                continue
            plan.process.append(replace(file, checksum=digest))
            why = "new" if entry is None else "full" if full else "config"
            plan.why[file.file_id] = why
            if entry is not None:
                plan.removed.add(entry.file_id)
            continue
        same_stat = (entry.size, entry.modified_ms) == (file.size, file.modified_ms)
        if same_stat and entry.path_tgt == file.path_tgt:
            if entry.status != "done":  # back again, as it was
                plan.manifest_changed = True
            plan.kept.append(replace(entry, status="done"))
            continue
        if (digest := whole(file, entry)) is None:
            continue
        if digest == entry.checksum and entry.path_tgt == file.path_tgt:
            plan.kept.append(replace(entry, size=file.size, modified_ms=file.modified_ms,
                                     status="done"))
            plan.manifest_changed = True  # touched only: remember the new time
            continue
        plan.process.append(replace(file, checksum=digest))
        plan.why[file.file_id] = "changed"
        plan.removed.add(entry.file_id)
    for where, entry in sorted(manifest.items()):
        if where in seen:
            continue
        if missing_files == "drop":
            plan.dropped.append(entry)
            plan.removed.add(entry.file_id)
        else:
            plan.manifest_changed |= entry.status != "missing"
            plan.kept.append(replace(entry, status="missing"))
    return plan


def manifest_rows(plan: Plan, rows_in: dict[str, int], config_hash: str, run_id: str,
                  key: str) -> list[tuple[Any, ...]]:
    """The manifest after this refresh: processed files (with their rows read), then the
    files kept as they were (or touched, or missing)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    entries = [
        Entry(f.corpus, f.path, f.path_tgt, f.format, f.size, f.modified_ms, f.checksum or "",
              config_hash, run_id, "done", rows_in.get(f.file_id, 0), f.file_id)
        for f in plan.process
    ] + plan.kept

    return [(*astuple(e), now, key) for e in entries]
