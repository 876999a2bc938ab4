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
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from udfs.rules import BY_NAME, RULE_NAMES, Rule, settings

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
DEFAULTS = CONF_DIR / "defaults.yaml"
M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration problem, worded for the user (names the file or key)."""


# The languages fastText lid.176 (langid.model) tells apart, as its labels (__label__xx): the
# langid rules can only pass a side whose language is one of them, so `pair`/`lang` must be.
# tests/test_bad_input.py checks this list against the shipped model's labels.
LID176_LABELS = """
    af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk
    ce ceb ckb co cs cv cy da de diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga
    gd gl gn gom gu gv he hi hif hr hsb ht hu hy ia id ie ilo io is it ja jbo jv ka kk
    km kn ko krc ku kv kw ky la lb lez li lmo lo lrc lt lv mai mg mhr min mk ml mn mr
    mrj ms mt mwl my myv mzn nah nap nds ne new nl nn no oc or os pa pam pfl pl pms pnb
    ps pt qu rm ro ru rue sa sah sc scn sco sd sh si sk sl so sq sr su sv sw ta te tg th
    tk tl tr tt tyv ug uk ur uz vec vep vi vls vo wa war wuu xal xmf yi yo yue zh
"""
LANGUAGES = frozenset(LID176_LABELS.split())


def known_language(code: str, what: str) -> str:
    """`code` when lid.176 knows it, else a ValueError naming `what` and listing the known."""
    if code not in LANGUAGES:
        raise ValueError(
            f"{what}: unknown language code {code!r}; known (fastText lid.176): "
            + " ".join(sorted(LANGUAGES))
        )
    return code


def known_pair(pair: str | None) -> str | None:
    """A `pair` setting: None, or two known language codes, source-target."""
    if pair is None:
        return None
    if pair.count("-") != 1 or not all(pair.split("-")):
        raise ValueError(f"pair {pair!r} must look like 'zh-en' (source-target)")
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
    """Spark settings a job fills in where the user gave Spark none (jobs/session.py)."""

    conf: dict[str, str]
    partitions_per_core: int = Field(3, ge=1)  # rows spread over cores x this after ingest

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
    paths: list[str]  # files, or for format `table` one catalog table (db.table)
    # text: one sentence a line (monolingual); table: a lake table with src/tgt columns
    format: Literal["auto", "tsv", "moses", "parquet", "text", "table"] = "auto"
    where: str | None = None  # format `table`: a SQL filter, e.g. "run_id = '2026...'"

    @model_validator(mode="after")
    def where_needs_a_table(self) -> InputConf:
        if self.where is not None and self.format != "table":
            raise ValueError(f"corpus {self.corpus}: `where` filters a table (format: table)")
        return self

    @field_validator("corpus")
    @classmethod
    def safe_corpus(cls, value: str) -> str:
        return safe_name(value, "corpus name")


class IngestConf(Strict):
    max_line_chars: int = 100_000
    # A symlink found in an input directory (or by a glob) is skipped, with a warning:
    # anyone who can write into the directory could point it at /etc/passwd.
    follow_symlinks: bool = False


class NormalizeConf(Strict):
    unescape_entities: bool = True
    strip_html: bool = True
    remove_invisible: bool = True
    collapse_whitespace: bool = True
    moses_punct: bool = True
    traditional_to_simplified: bool = True
    fullwidth_to_halfwidth: bool = True


class DedupConf(Strict):
    enabled: bool = True
    ignore_case: bool = True
    ignore_whitespace: bool = True
    ignore_punctuation: bool = True
    ignore_digits: bool = False
    source_side: bool = False
    target_side: bool = False


def with_rule_settings(base: type[M], section: str) -> type[M]:
    """`base` plus a field for each setting the rules read from `section:` (udfs/rules.py),
    without a default: conf/defaults.yaml holds every one."""
    fields: dict[str, Any] = {
        s.name: (s.type, Field(description=s.doc)) for s in settings(section).values()
    }
    return create_model(base.__name__.removesuffix("Base"), __base__=base, **fields)


class RulesConfBase(Strict):
    """`rules:`: which rules run, in what order, then each rule's settings (derived)."""

    order: list[str]  # the rules that run, in this order: the first failing one rejects a row
    disabled: list[str]  # rules that do not run (wherever `order` lists them)

    @model_validator(mode="after")
    def every_rule_placed(self) -> RulesConfBase:
        for name in (*self.order, *self.disabled):
            if name not in BY_NAME:
                raise ValueError(f"unknown rule {name!r}; known: {', '.join(RULE_NAMES)}")
        twice = sorted({name for name in self.order if self.order.count(name) > 1})
        if twice:
            raise ValueError(f"rules.order lists {', '.join(twice)} twice")
        missing = [name for name in RULE_NAMES if name not in (*self.order, *self.disabled)]
        if missing:
            raise ValueError(
                f"rules.order leaves out {', '.join(missing)} (and rules.disabled does not "
                "list it): list each rule in `order` where it should run, or in `disabled`"
            )
        return self


class LangidConfBase(Strict):
    """`langid:`: the model, then the langid rules' settings (derived)."""

    model: str  # fastText lid.176 (udfs/langid.py), used by the side pass (udfs/sides.py)


RulesConf = with_rule_settings(RulesConfBase, "rules")
LangidConf = with_rule_settings(LangidConfBase, "langid")


class AlignConf(Strict):
    """Word-alignment scoring (udfs/align.py): an aligner saved in the lake's model store
    (`reference`), else one trained on a sample of the run's clean pairs (jobs/pair_scores.py
    `choose_aligner`)."""

    enabled: bool = False
    min_coverage: float = Field(0.6, ge=0, le=1)  # ZengHuiMT WMT: coverage below 0.6 dropped
    min_coverage_by_pair: dict[str, float]  # per pair, over min_coverage (YAML only)
    sample_pairs: int = Field(200_000, gt=0)  # clean pairs the aligner is trained on
    min_train_pairs: int = Field(gt=0)  # fewer: no training (a saved aligner, or no scores)
    reference: str | None = None  # a saved aligner's name, or `latest` for the pair's newest
    model_dir: str | None = None  # a model directory (a lake path); overrides `reference`

    _reference = field_validator("reference")(
        classmethod(lambda cls, v: path_name("align.reference", v)))

    @field_validator("min_coverage_by_pair")
    @classmethod
    def _thresholds(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {pair: t for pair, t in v.items() if not 0 <= t <= 1}
        if bad:
            raise ValueError(f"align.min_coverage_by_pair: coverage is 0..1, got {bad}")
        return v

    def min_coverage_for(self, pair: str) -> float:
        return self.min_coverage_by_pair.get(pair, self.min_coverage)


class EncoderConf(Strict):
    backend: Literal["use", "sentence-transformers"]
    model: str  # a file/directory path (or a name already in the local Hugging Face cache)
    batch_size: int = Field(256, gt=0)
    min_cosine: float
    min_cosine_by_pair: dict[str, float] = Field(default_factory=dict)
    min_margin: float | None = None  # only used when embedding.margin_k > 0

    def min_cosine_for(self, pair: str) -> float:
        return self.min_cosine_by_pair.get(pair, self.min_cosine)


class EmbeddingConf(Strict):
    """Sentence-embedding similarity of the two sides (udfs/embed.py)."""

    enabled: bool = False
    encoder: str = "use-multilingual"  # a key of `encoders`
    encoders: dict[str, EncoderConf]
    device: Literal["auto", "cpu", "cuda"] = "auto"
    margin_k: int = Field(0, ge=0)  # >0: also a ratio-margin score over k nearest neighbours

    @model_validator(mode="before")
    @classmethod
    def thresholds_of_the_chosen_encoder(cls, data: Any) -> Any:
        """`embedding.min_cosine` / `embedding.min_margin` (e.g. `--set
        embedding.min_margin=1.02`) are shorthand for the chosen encoder's: thresholds belong
        to an encoder, and the resolved config stores them there. A `min_cosine` given so is
        this run's cosine threshold for every pair (it replaces `min_cosine_by_pair`)."""
        if not isinstance(data, dict) or not {"min_cosine", "min_margin"} & data.keys():
            return data
        data = dict(data)
        encoders = {name: dict(enc) for name, enc in data.get("encoders", {}).items()}
        chosen = encoders.setdefault(data.get("encoder", "use-multilingual"), {})
        if "min_margin" in data:
            chosen["min_margin"] = data.pop("min_margin")
        if "min_cosine" in data:
            chosen["min_cosine"] = data.pop("min_cosine")
            chosen["min_cosine_by_pair"] = {}
        return {**data, "encoders": encoders}

    @model_validator(mode="after")
    def known_encoder(self) -> EmbeddingConf:
        if self.enabled and self.encoder not in self.encoders:
            raise ValueError(
                f"embedding.encoder {self.encoder!r} is not one of {sorted(self.encoders)}"
            )
        if self.enabled and self.device == "cuda" and self.chosen.backend == "use":
            raise ValueError("the 'use' encoder runs on the CPU only: set embedding.device auto")
        return self

    @property
    def chosen(self) -> EncoderConf:
        return self.encoders[self.encoder]


class PairScoreConf(Strict):
    """The learned pair_score (udfs/pair_features.py, jobs/pair_score_model.py)."""

    enabled: bool
    model: str  # a name in <lake>/models/pair_score/<pair>/, or `latest`
    min_score: float | None = Field(None, ge=0, le=1)  # None: the model's calibrated threshold
    decides_alone: bool  # align/embedding score but do not reject: the model weighs them
    fit_to_run: bool  # move the model's threshold to each corpus's scores (pair_score_stage)
    fit_min_rows: int = Field(ge=1)  # a corpus with fewer scored rows keeps the model's

    _model = field_validator("model")(classmethod(lambda cls, v: path_name("pair_score.model", v)))


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


class FilterConfig(JobConfig):
    pair: str | None = None  # bitext: source-target
    lang: str | None = None  # monolingual text instead of bitext (mono_raw/_clean/_rejected)
    inputs: list[InputConf] = Field(default_factory=list)
    ingest: IngestConf = IngestConf()
    normalize: NormalizeConf = NormalizeConf()
    dedup: DedupConf = DedupConf()
    rules: RulesConf
    langid: LangidConf
    align: AlignConf  # no code default: min_train_pairs comes from conf/defaults.yaml
    embedding: EmbeddingConf
    pair_score: PairScoreConf

    _pair = field_validator("pair")(classmethod(lambda cls, v: known_pair(v)))
    _lang = field_validator("lang")(classmethod(lambda cls, v: known_lang(v)))

    @model_validator(mode="after")
    def pair_or_lang(self) -> FilterConfig:
        if self.pair and self.lang:
            raise ValueError("set `pair` (bitext) or `lang` (monolingual), not both")
        if self.lang and (self.align.enabled or self.embedding.enabled
                          or self.pair_score.enabled):
            raise ValueError("align/embedding/pair_score score pairs: turn them off for a "
                             "monolingual run")
        return self

    @property
    def mono(self) -> bool:
        return self.lang is not None

    @property
    def langs(self) -> tuple[str, str]:
        """(source, target) languages; a monolingual run has its one language on both."""
        if self.lang:
            return self.lang, self.lang
        if not self.pair:
            raise ConfigError(
                "no language: set `pair:` (or `lang:` for monolingual text) in the config, "
                "or pass --pair / --lang"
            )
        src, tgt = self.pair.split("-")
        return src, tgt

    @property
    def key(self) -> str:
        """What the run's rows are partitioned by: the pair, or the monolingual language."""
        self.langs  # noqa: B018 - raises ConfigError when neither is set
        return self.lang or self.pair or ""

    @property
    def sides(self) -> list[tuple[str, str]]:
        """(column, language) of each side the run has."""
        src, tgt = self.langs
        return [("src", src)] if self.mono else [("src", src), ("tgt", tgt)]

    @property
    def rules_run(self) -> list[Rule]:
        """The rules that run, in `rules.order`: not those in `rules.disabled`, nor on
        monolingual text the pair-only ones."""
        on = [BY_NAME[name] for name in self.rules.order if name not in self.rules.disabled]
        return [rule for rule in on if not (self.mono and rule.pair_only)]

    @property
    def rule_order(self) -> list[str]:
        return [rule.name for rule in self.rules_run]

    @property
    def rule_settings(self) -> dict[str, Any]:
        """Every rule setting by name (from `rules:` and `langid:`), as the rules read them."""
        sections = {"rules": self.rules, "langid": self.langid}
        return {
            name: getattr(conf, name)
            for section, conf in sections.items()
            for name in settings(section)
        }

def deep_merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


# Settings a run stored before they existed, as that version behaved: a run's stored config
# is read with these filled in where it lacks them (report, re-decide), not today's defaults.
BEFORE_THEY_EXISTED: dict = {
    "pair_score": {"decides_alone": False, "fit_to_run": False, "fit_min_rows": 200},
}


def stored_filter_config(data: dict) -> dict:
    """A `runs` row's resolved filter config, completed for settings added since it ran."""
    return deep_merge(BEFORE_THEY_EXISTED, data) if "pair_score" in data else data


def read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_chain(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A config file merged over the file it `extends` (relative to itself), recursively."""
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"{path}: `extends` loops back to itself")
    data = read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    return deep_merge(load_chain(path.parent / parent, (*seen, path)), data)


def parse_override(text: str) -> dict:
    """`a.b.c=value` -> {"a": {"b": {"c": value}}}, the value parsed as YAML (1.5, true, [a, b])."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key.path=value")
    dotted, raw = text.split("=", 1)
    if not all(dotted.split(".")):
        raise ConfigError(f"--set {text!r}: expected key.path=value")
    try:
        value: Any = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as err:  # e.g. `[1,`: one line naming the --set, not a traceback
        why = getattr(err, "problem", None) or " ".join(str(err).split())
        raise ConfigError(f"--set {text!r}: the value is not valid YAML ({why})") from None
    for key in reversed(dotted.split(".")):
        value = {key: value}
    return value


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    extra: dict | None = None,
) -> FilterConfig:
    """defaults.yaml <- config file chain <- `extra` (from flags) <- `--set` overrides."""
    return load_validated(FilterConfig, DEFAULTS, path, overrides, extra)


def load_validated(
    model: type[M],
    defaults: Path,
    path: str | Path | None,
    overrides: list[str] | None,
    extra: dict | None,
) -> M:
    """`defaults` (itself a chain: a job's defaults may extend defaults.yaml) <- config file
    chain <- `extra` <- `--set` overrides, validated as `model`."""
    data = load_chain(defaults)
    if path is not None:
        data = deep_merge(data, load_chain(Path(path)))
    if extra:
        data = deep_merge(data, extra)
    for text in overrides or []:
        data = deep_merge(data, parse_override(text))
    try:
        return model.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in err.errors()
        )
        where = f" (from {path})" if path else ""
        raise ConfigError(f"invalid config{where}: {problems}") from None
