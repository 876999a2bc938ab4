"""The in-domain seed of a selection run: read, checked and named on the driver.

A seed is small (a dev or test set, or a translated test set): it is read whole. Files are
plain text (monolingual), a Moses pair (two files in the pair's order) or one TSV
`src<TAB>tgt` (bitext); a lake table is read with its `where`. Blank lines are skipped (dev
sets end with them); everything else wrong is an InputError naming the file and line.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass

from pyspark.sql import SparkSession

from jobs.filtering.config import load_config as filter_config
from jobs.kit.errors import InputError
from jobs.lake.models import on_this_machine
from jobs.selection.config import SelectConfig
from udfs.langid_backends import backend_for, identify_all
from udfs.paths import is_local_path

LANG_CHECK_LINES = 2000  # lines per side whose language is checked


@dataclass(frozen=True)
class Seed:
    name: str
    digest: str  # sha256 of the lines, 16 hex digits
    sides: tuple[list[str], ...]  # per side of the pool: the seed's lines, aligned

    def __len__(self) -> int:
        return len(self.sides[0])


def read_lines(spark: SparkSession, path: str) -> list[str]:
    """A file's lines (local, or any Hadoop file system), decoded strictly."""
    if is_local_path(path):
        if not os.path.isfile(path):
            raise InputError(f"seed file {path}: not found")
        with open(path, "rb") as fh:
            data = fh.read()
    else:
        rows = spark.sparkContext.binaryFiles(path).collect()
        if not rows:
            raise InputError(f"seed file {path}: not found")
        data = rows[0][1]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InputError(f"seed file {path}: line {line}: not UTF-8") from None
    return text.removeprefix("\ufeff").splitlines()


def from_files(spark: SparkSession, cfg: SelectConfig) -> tuple[list[str], ...]:
    files = cfg.seed.files
    if cfg.mono:
        return ([line for f in files for line in read_lines(spark, f)],)
    if len(files) == 2:
        src, tgt = (read_lines(spark, f) for f in files)
        if len(src) != len(tgt):
            raise InputError(f"seed files {files[0]} ({len(src)} lines) and {files[1]} "
                             f"({len(tgt)} lines) differ in length: not a Moses pair")
        pairs = list(zip(src, tgt, strict=True))
    elif len(files) == 1:
        pairs = []
        for n, line in enumerate(read_lines(spark, files[0]), 1):
            fields = line.split("\t")
            if line.strip() and len(fields) < 2:
                raise InputError(f"seed file {files[0]}: line {n}: not `src<TAB>tgt`")
            pairs.append((fields[0], fields[1]) if line.strip() else ("", ""))
    else:
        raise InputError(f"a bitext seed is one TSV file or a Moses pair (two files), "
                         f"not {len(files)} files")
    kept = [(s, t) for s, t in pairs if s.strip() or t.strip()]
    half = [n for n, (s, t) in enumerate(kept, 1) if not (s.strip() and t.strip())]
    if half:
        raise InputError(f"seed {' '.join(files)}: pair {half[0]} has an empty side")
    return [s for s, _ in kept], [t for _, t in kept]


def from_table(spark: SparkSession, cfg: SelectConfig) -> tuple[list[str], ...]:
    table, where = cfg.seed.table or "", cfg.seed.where
    if not spark.catalog.tableExists(table):
        raise InputError(f"seed table {table}: not in the catalog")
    df = spark.table(table)
    columns = ["text"] if cfg.mono and "text" in df.columns else cfg.sides
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"seed table {table} has no column(s) {missing}")
    if where:
        try:
            df = df.where(where)
        except Exception as err:  # AnalysisException: a bad filter
            raise InputError(f"seed table {table}: bad where {where!r}: {err}") from None
    order = [c for c in ("row_id", *columns) if c in df.columns]
    rows = df.select(*columns).orderBy(*order).limit(cfg.seed.max_lines + 1).collect()
    return tuple([r[i] or "" for r in rows] for i in range(len(columns)))


def check_language(cfg: SelectConfig, sides: tuple[list[str], ...], where: str) -> None:
    """Each side's top language (by the backend, and with the accepted relatives, that the
    filter's defaults give the language) is the expected one on enough lines."""
    langid = filter_config().langid  # conf/defaults.yaml's backends and accept-lists
    for lang, lines in zip(cfg.langs, sides, strict=True):
        backend = backend_for(lang, langid.backends, langid.backend_by_lang,
                              langid.accept.get(lang))
        if backend is None:  # no backend knows it: the seed's language cannot be checked
            continue
        sample = lines[:LANG_CHECK_LINES]
        found, _, _ = identify_all(backend, on_this_machine(cfg.langid_model), sample)
        counts = Counter(found)
        share = sum(counts[label] for label in langid.accept.get(lang, [lang])) / len(sample)
        if share < cfg.seed.min_lang_share:
            common = ", ".join(f"{k or 'none'} {v / len(sample):.0%}"
                               for k, v in counts.most_common(3))
            raise InputError(
                f"seed {where}: only {share:.0%} of its {lang} lines are identified as {lang} "
                f"({common}); wrong file or language order? (seed.min_lang_share "
                f"{cfg.seed.min_lang_share})"
            )


def read_seed(spark: SparkSession, cfg: SelectConfig) -> Seed:
    """The configured seed, checked: not empty, not too long, in the expected language(s)."""
    where = cfg.seed.table or " ".join(cfg.seed.files)
    sides = from_table(spark, cfg) if cfg.seed.table else from_files(spark, cfg)
    if cfg.mono:
        sides = ([line for line in sides[0] if line.strip()],)
    if not sides[0]:
        raise InputError(f"seed {where}: no lines (an empty seed selects nothing)")
    if len(sides[0]) > cfg.seed.max_lines:
        raise InputError(f"seed {where}: over seed.max_lines ({cfg.seed.max_lines:,}) lines; "
                         "a seed is an in-domain sample (raise the limit if you mean it)")
    if not os.path.exists(on_this_machine(cfg.langid_model)):
        raise InputError(f"langid_model {cfg.langid_model}: not found (make setup fetches it)")
    check_language(cfg, sides, where)
    digest = hashlib.sha256()
    for lines in sides:
        for line in lines:
            digest.update(line.encode() + b"\n")
        digest.update(b"\0")
    name = cfg.seed.name or (cfg.seed.table or ",".join(os.path.basename(f)
                                                        for f in cfg.seed.files))
    return Seed(name, digest.hexdigest()[:16], tuple(sides))

