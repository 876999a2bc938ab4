"""Typed job configuration: conf/defaults.yaml, then a pair/demo file (`extends` chains),
then command-line flags and `--set a.b=c` overrides. Unknown keys are errors.

Defaults live in the YAML. A field whose default is also written here must agree with it
(tests/test_rules.py checks); the rules' settings (`rules:`, `langid:`) have no default
here at all: their fields come from the rule registry, udfs/rules.py."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from jobs.kit.config_files import (  # noqa: F401 - the file kit, re-exported
    deep_merge,
    load_chain,
    parse_override,
    read_yaml,
    validated,
)
from jobs.kit.errors import ConfigError  # noqa: F401 - raised here, defined there
from udfs.scripts import scripts_of

CONF_DIR = Path(__file__).resolve().parent.parent.parent / "conf"
M = TypeVar("M", bound=BaseModel)


def known_language(code: str, what: str, scripts: Mapping[str, list[str]] | None = None) -> str:
    """`code` when its scripts are known (ICU's CLDR data, or `scripts`: a config's
    `langid.scripts`), else a ValueError naming `what`: a code without a script is a typo or
    a language sluice cannot check (udfs/scripts.py)."""
    if not scripts_of(code, scripts):
        raise ValueError(
            f"{what}: unknown language code {code!r}: ICU's CLDR data knows no script for it "
            f"(use an ISO 639 code such as en, zh, bn; or name its scripts in langid.scripts, "
            f"e.g. {{{code}: [Latn]}})"
        )
    return code


def pair_form(pair: str | None) -> str | None:
    """A `pair` setting's form: None, or two codes, source-target."""
    if pair is not None and (pair.count("-") != 1 or not all(pair.split("-"))):
        raise ValueError(f"pair {pair!r} must look like 'zh-en' (source-target)")
    return pair


def known_pair(pair: str | None) -> str | None:
    """A `pair` setting: None, or two known language codes, source-target."""
    if pair_form(pair) is None:
        return None
    for code in pair.split("-"):
        known_language(code, f"pair {pair!r}")
    return pair


def known_lang(lang: str | None) -> str | None:
    """A `lang` setting: None, or a known language code."""
    return None if lang is None else known_language(lang, f"lang {lang!r}")


# What Spark's partition writer escapes as %XX (ExternalCatalogUtils.charToEscape): the
# rest, non-ASCII included, goes into the directory name as UTF-8.
SPARK_ESCAPED = frozenset([chr(c) for c in range(0x20)] + list('"#%\'*/:=?\\\x7f{[]^'))
MAX_DIR_BYTES = 255  # a file name's limit (ext4, XFS, HDFS): longer fails deep in Spark's write


def partition_dir_bytes(column: str, value: str) -> int:
    """Bytes of the partition directory `column=value` as Spark's writer names it."""
    escaped = "".join(f"%{ord(c):02X}" if c in SPARK_ESCAPED else c for c in value)
    return len(f"{column}={escaped}".encode())


def safe_name(value: str, what: str) -> str:
    """A name that becomes a partition value and a directory: anything printable except what
    breaks a path or a `k=v` partition (the lake escapes the rest, e.g. `:` `#` spaces), and
    short enough for a directory name (`corpus=<escaped value>`)."""
    bad = any(c in "/\\=" or unicodedata.category(c) == "Cc" for c in value)
    if not value or value[0] in "._" or bad:
        raise ValueError(
            f"{what} {value!r}: use any characters but / \\ = and control characters, "
            "not starting with . or _ (e.g. wmt19, news:2019#1, 新闻)"
        )
    size = partition_dir_bytes("corpus", value)
    if size > MAX_DIR_BYTES:
        raise ValueError(
            f"{what} {value[:20]!r}... is too long: its directory corpus=... would be {size} "
            f"bytes, over the file-name limit of {MAX_DIR_BYTES} (a Chinese character is 3)"
        )
    return value


# A name that becomes a directory (a run, a model, an aligner): no path tricks.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_name(kind: str, value: str) -> str:
    """A name that becomes a directory in a store (`kind` says which): letters, digits, `.`,
    `_`, `-`, without `..`, so `../x` or `a/b` cannot reach outside the store."""
    if not SAFE_NAME.fullmatch(value) or ".." in value:
        raise ConfigError(
            f"{kind} {value!r}: use up to 128 letters, digits, '.', '_' or '-', starting with "
            "a letter or digit, without '..'"
        )
    return value


def check_run_id(run_id: str) -> str:
    """A run id names a directory under `<lake>/runs/`."""
    return check_name("run id", run_id)


def path_name(kind: str, value: str | None) -> str | None:
    """None, or a name that becomes a directory in a store (`check_name`)."""
    return None if value is None else check_name(kind, value)


# A Spark SQL identifier the jobs can splice into SQL unquoted (`db.table`).
DATABASE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LakeConf(Strict):
    root: str = "./lake"
    database: str = "sluice"
    metastore: str = "embedded"  # embedded | thrift://HOST:PORT | jdbc:postgresql://HOST:PORT/DB

    @field_validator("metastore")
    @classmethod
    def metastore_kind(cls, value: str) -> str:
        if value != "embedded" and not value.startswith(("thrift://", "jdbc:postgresql://")):
            raise ValueError("lake.metastore is embedded, thrift://HOST:PORT or "
                             f"jdbc:postgresql://HOST:PORT/DB, not {value!r}")
        return value

    @field_validator("database")
    @classmethod
    def identifier(cls, value: str) -> str:
        # Spliced into SQL statements (CREATE DATABASE, db.table): only a plain identifier.
        if not DATABASE.fullmatch(value):
            raise ValueError(
                f"lake.database {value!r}: use up to 128 letters, digits or '_', not starting "
                "with a digit"
            )
        return value


class SparkConf(Strict):
    """Spark settings a job fills in where the user gave Spark none (jobs/lake/session.py)."""

    conf: dict[str, str]
    partitions_per_core: int = Field(3, ge=1)  # rows spread over cores x this after ingest
    min_partition_bytes: int = Field(1_048_576, ge=0)  # but no fewer input bytes a partition

    @model_validator(mode="before")
    @classmethod
    def no_master(cls, data: Any) -> Any:
        if isinstance(data, dict) and "master" in data:
            raise ValueError(
                "spark.master is not a sluice setting: pass --master to spark-submit "
                "(or set it in spark-defaults.conf); without one Spark runs local[*]"
            )
        return data


class InputConf(Strict):
    corpus: str
    # Files, or for format `table` one table: db.table, or a table of the lake (bitext_clean).
    paths: list[str]
    # text: one sentence a line (monolingual); table: a lake table with src/tgt columns
    format: Literal["auto", "tsv", "moses", "parquet", "text", "table"] = "auto"
    where: str | None = None  # format `table`: a SQL filter, e.g. "run_id = '2026...'"
    # Monolingual text out of a bitext table or Parquet data: the side whose column is read
    # as the text (HW-TSC WMT21 takes monolingual text from the bitext's target side).
    side: Literal["src", "tgt"] | None = None
    # A TSV's fields in order, where they are not `src tgt`: e.g. ParaCrawl's and Bitextor's
    # `[src_url, tgt_url, src, tgt]`. src_url/tgt_url are stored with the pair, and its
    # website as `host`; fields of other names are kept in `extra` (jobs/kit/ingest.py).
    columns: list[str] | None = None

    @model_validator(mode="after")
    def columns_name_both_sides(self) -> InputConf:
        check_tsv_columns(self.corpus, self.format, self.columns)
        return self

    @model_validator(mode="after")
    def where_needs_a_table(self) -> InputConf:
        if self.where is not None and self.format != "table":
            raise ValueError(f"corpus {self.corpus}: `where` filters a table (format: table)")
        if self.side is not None and self.format not in ("table", "parquet"):
            raise ValueError(f"corpus {self.corpus}: `side` reads one column of a table or "
                             "Parquet data (format: table or parquet)")
        return self

    @field_validator("corpus")
    @classmethod
    def safe_corpus(cls, value: str) -> str:
        return safe_name(value, "corpus name")


def check_tsv_columns(corpus: str, fmt: str, columns: list[str] | None) -> None:
    """An input's `columns:` names a TSV's fields, each once, both sides among them."""
    if columns is None:
        return
    if fmt not in ("auto", "tsv"):
        raise ValueError(f"corpus {corpus}: `columns` names the fields of a TSV file, not of "
                         f"format {fmt}")
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise ValueError(f"corpus {corpus}: column {twice[0]!r} is named twice")
    missing = [c for c in ("src", "tgt") if c not in columns]
    if missing:
        raise ValueError(f"corpus {corpus}: `columns` lacks {missing}: name the fields that "
                         "hold the two sides (e.g. [src_url, tgt_url, src, tgt])")


class IngestConf(Strict):
    max_line_chars: int = 100_000
    # A symlink found in an input directory (or by a glob) is skipped, with a warning:
    # anyone who can write into the directory could point it at /etc/passwd.
    follow_symlinks: bool = False


class JobConfig(Strict):
    """A job's whole configuration: stored resolved in the `runs` table, hashed into run ids.
    Every job has a lake and a Spark session."""

    lake: LakeConf = LakeConf()
    spark: SparkConf

    def resolved(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def hash(self) -> str:
        blob = json.dumps(self.resolved(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def load_validated(
    model: type[M],
    defaults: Path,
    path: str | Path | None,
    overrides: list[str] | None,
    extra: dict | None,
    sections: tuple[str, ...] | None = None,
) -> M:
    """`defaults` (itself a chain: a job's defaults may extend defaults.yaml) <- config file
    chain <- `extra` <- `--set` overrides, validated as `model`."""
    data = load_chain(defaults)
    if path is not None:
        chain = load_chain(Path(path))
        if sections is not None:  # another job's config: only the parts this one reads
            chain = {key: value for key, value in chain.items() if key in sections}
        data = deep_merge(data, chain)
    if extra:
        data = deep_merge(data, extra)
    for text in overrides or []:
        data = deep_merge(data, parse_override(text))
    return validated(model, data, path)


LAKE_DEFAULTS = CONF_DIR / "lake.yaml"


def load_lake_config(path: str | Path | None, overrides: list[str] | None,
                     extra: dict | None) -> JobConfig:
    """The `lake` and `spark` sections of any job's config, over conf/lake.yaml: the report
    and gc read a lake with the config of the job that wrote it (its other sections unread)."""
    return load_validated(JobConfig, LAKE_DEFAULTS, path, overrides, extra,
                          sections=("lake", "spark"))
