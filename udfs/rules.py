"""The heuristic rules, each one small declarative unit (`Rule`) in one registry (`RULES`).

Score, then decide (DESIGN §4): a rule stores score columns, Spark Column expressions the JVM
computes, and fails a row by comparing those stored scores with its settings, so a threshold
can be re-tuned later in SQL. A `Rule` is all there is to a rule: its name, its stage, whether
it needs both sides (`pair_only`: skipped on monolingual text), its scores (per side, or of
the row), its failure predicate and its settings (the keys it reads from the config, with
what they mean; their values, with where each comes from, live only in conf/defaults.yaml).

Derived from `RULES`: the rule names, the `rules:` and `langid:` config models
(jobs/kit/config.py), each rule's stage in filter_stats and the funnel (jobs/filtering/stages.py)
and the
monolingual tables' column names (jobs/filtering/layout.py). `RULES` is also the order score columns
are stored in; the order rules run in is the config's `rules.order`.

Adding a rule: a `Rule` in `RULES`; in conf/defaults.yaml its name in `rules.order` (where
it runs; also in `rules.disabled` to ship it off) and its settings' defaults; a test on real
text in tests/test_rules.py.

Scores read the normalized `src`/`tgt` and the per-side analysis structs `src_a`/`tgt_a`
(udfs/sides.py), never each other (they are computed side by side); predicates read scores.
This module imports nothing from jobs/: rules see their settings as a plain mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import reduce
from operator import or_
from typing import Any, ClassVar, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F

from udfs.brackets import PROFILE_SIZE
from udfs.normalize import ATTRIBUTES
from udfs.scripts import common_letters, script_class

URL_EMAIL_HTML = (
    r"(?i)(?:\b(?:https?|ftp)://|\bwww\.)\S+"
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}"
    rf"|</?[a-z][a-z0-9]*{ATTRIBUTES}/?>"
    r"|&(?:[a-z]+|#\d+|#x[0-9a-f]+);"
)
URL_EMAIL_HTML_GUARD = r"[:@<&]|(?i:www\.)"  # every match of URL_EMAIL_HTML has one of these


def script_share(col: Column, scripts: tuple[str, ...]) -> Column:
    """Letters in the side's scripts (udfs/scripts.py) over those letters plus the runs (words)
    of other letters, so a Chinese line with two English names ("Tom 不想让Mary走") still
    scores 4/6. No scripts (a language nothing knows): null, which the config refuses first."""
    if not scripts:
        return F.lit(None).cast("double")
    script, common = script_class(scripts), common_letters(scripts)
    # Non-letters are dropped by the cheap \p{L}\p{Nl} test before any script lookup.
    in_script = F.length(F.regexp_replace(col, f"[^{common}[\\p{{L}}\\p{{Nl}}&&[{script}]]]+", ""))
    foreign_runs = F.regexp_count(col, F.lit(f"[^{common}\\P{{L}}{script}]+"))  # other letters
    share = F.when(in_script + foreign_runs > 0, in_script / (in_script + foreign_runs))
    # An ASCII-only line (most English) has only Latin letters: 1 for Latin, else 0.
    ascii_share = F.when(col.rlike("[a-zA-Z]"), F.lit(1.0 if "Latn" in scripts else 0.0))
    return F.when(~col.rlike("[^\\x00-\\x7F]"), ascii_share).otherwise(share)


def bracket_mismatch(src_profile: Column, tgt_profile: Column) -> Column:
    """Unmatched brackets and quotes (udfs/brackets.py profiles). A bracket opened and never
    closed (or closed and never opened) counts on each side by itself, as the seed systems
    filter sentences: a sentence holds its brackets whole. Double quotation marks are
    compared across the sides: a quotation split at a sentence boundary, cut the same way in
    both languages, matches; one side unbalanced alone does not. Monolingual text (no target)
    is compared with a balanced profile."""
    total = F.lit(0)
    for i in range(PROFILE_SIZE):
        a, b = (F.coalesce(p[i], F.lit(0)) for p in (src_profile, tgt_profile))
        quotes = i == PROFILE_SIZE - 1
        total = total + (F.abs(a - b) if quotes else F.abs(a) + F.abs(b))
    return total


def punct_share(punct_chars: Column, nonspace: Column) -> Column:
    return F.when(nonspace > 0, punct_chars / nonspace)


def first_match(src: Column, tgt: Column, pattern: str, guard: str) -> Column:
    """The first text matching `pattern` on the source side, else the target side, else null.
    `guard` (a cheap regex every match contains) spares most lines the full pattern."""

    def extract(col: Column) -> Column:
        found = F.regexp_extract(col, f"({pattern})", 1)
        # Nested, not `guard & found`: Spark would evaluate a `found` used twice up front.
        return F.when(col.rlike(guard), F.when(found != "", found))

    return F.coalesce(extract(src), extract(tgt))


def special_match(src: Column, tgt: Column, patterns: dict[str, str]) -> Column:
    """Name of the first configured special-character pattern found on either side."""
    hits = [F.when(src.rlike(rx) | tgt.rlike(rx), F.lit(name)) for name, rx in patterns.items()]
    return F.coalesce(*hits) if hits else F.lit(None).cast("string")


def digit_share(col: Column, nonspace: Column) -> Column:
    """Digits (any script's) over the non-space characters."""
    digits = F.length(col) - F.length(F.regexp_replace(col, r"\p{Nd}", ""))
    return F.when(nonspace > 0, digits / nonspace)


# A word an untranslated span carries: a lowercase letter then two or more letters. Names
# (capitalized), numbers and Han text (no case) are left out: they are rightly the same on
# both sides, an untranslated run of ordinary words is not.
COPYABLE_WORD = r"(?<![\p{L}\p{N}])\p{Ll}\p{L}{2,}"
# Every COPYABLE_WORD match holds one: a side without it has no word to share, and finding it
# costs a fraction of extracting every word (in zh-en, most Chinese sides have none).
COPYABLE_GUARD = r"\p{Ll}\p{L}{2}"


def copied_words(src: Column, tgt: Column) -> Column:
    """The distinct ordinary words found on both sides (case-sensitive)."""
    def words(col: Column) -> Column:
        return F.array_distinct(F.regexp_extract_all(col, F.lit(COPYABLE_WORD), 0))

    both = src.rlike(COPYABLE_GUARD) & tgt.rlike(COPYABLE_GUARD)
    return F.when(both, F.array_intersect(words(src), words(tgt))).otherwise(
        F.array().cast("array<string>"))


def copy_share(src: Column, tgt: Column, src_nonspace: Column, tgt_nonspace: Column) -> Column:
    """The larger of the two sides' share of non-space characters in words found on both
    sides: a target left half in the source language scores about one half, a translation
    sharing a few names or numbers about zero. Monolingual text (no target) scores 0."""
    shared = copied_words(src, tgt)
    copied = F.aggregate(shared, F.lit(0), lambda total, word: total + F.length(word))
    # The larger share is the one of the shorter side (a side with no characters has no words:
    # nothing is copied, and the share is 0).
    shorter = F.least(src_nonspace, tgt_nonspace)
    return F.coalesce(F.when(shorter > 0, copied / shorter), F.lit(0.0))


# --- What a rule is ------------------------------------------------------------------------

Settings = Mapping[str, Any]  # a setting's name -> its configured value


@dataclass(frozen=True)
class Range:
    """A closed interval for a score: `{min: 0.3, max: 3.0}` in YAML."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}  # no stray keys
    min: float
    max: float

    def __post_init__(self) -> None:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")

    def outside(self, col: Column) -> Column:
        return (col < self.min) | (col > self.max)


@dataclass(frozen=True)
class Setting:
    """A key a rule reads from `section:` of the config, its type (validated by pydantic) and
    what it means. Its default, and where that comes from, is in conf/defaults.yaml.

    A threshold names the score it cuts (`cuts`, the score's name without its side) and how
    (`bound`: a `max`, a `min`, or a `range` the score must lie in): the run report draws it
    and asks what-ifs of it. A setting without `cuts` is a condition (where a rule applies) or
    an input (a pattern, a label list)."""

    name: str
    type: Any
    doc: str
    section: str = "rules"
    cuts: str | None = None
    bound: Literal["max", "min", "range"] | None = None

@dataclass(frozen=True)
class Side:
    """One side of a row, `src` or `tgt`, its language and the scripts that language is
    written in (udfs/scripts.py, with the config's `langid.scripts`)."""

    name: str
    lang: str
    scripts: tuple[str, ...] = ()

    @property
    def text(self) -> Column:
        return F.col(self.name)

    def analysis(self, key: str) -> Column:
        """A field of the side's analysis struct (udfs/sides.py SIDE_SCHEMA)."""
        return F.col(f"{self.name}_a.{key}")

    def score(self, name: str) -> Column:
        """This side's stored score `name` (a `SideScores` column)."""
        return F.col(f"{self.name}_{name}")


@dataclass(frozen=True)
class Row:
    """What scores and predicates see: both sides (a monolingual run's `tgt` is null), whether
    the run is monolingual, and every rule setting by name."""

    src: Side
    tgt: Side
    mono: bool
    settings: Settings

    @property
    def sides(self) -> tuple[Side, ...]:
        """The sides the run has."""
        return (self.src,) if self.mono else (self.src, self.tgt)

    def largest(self, score: str) -> Column:
        """The largest of the sides' score `score` (nulls ignored)."""
        cols = [side.score(score) for side in self.sides]
        return F.greatest(*cols) if len(cols) > 1 else cols[0]

    def any_side(self, fails: Callable[[Side], Column]) -> Column:
        return reduce(or_, [fails(side) for side in self.sides])


@dataclass(frozen=True)
class SideScores:
    """Scores of each side the run has (of those in `sides`): `exprs` maps a name to its
    expression over one side, stored as `src_<name>` ... then `tgt_<name>` .... A monolingual
    table stores the source's under `mono_names` (by default the bare name)."""

    exprs: Mapping[str, Callable[[Side], Column]]
    mono_names: Mapping[str, str] = field(default_factory=dict)
    sides: tuple[str, ...] = ("src", "tgt")

    def columns(self, row: Row) -> dict[str, Column]:
        return {
            f"{side.name}_{name}": expr(side)
            for side in row.sides
            if side.name in self.sides
            for name, expr in self.exprs.items()
        }

    def monolingual(self) -> dict[str, str]:
        if "src" not in self.sides:
            return {}
        return {f"src_{name}": self.mono_names.get(name, name) for name in self.exprs}


@dataclass(frozen=True)
class RowScore:
    """A score of the row as a whole, one column under its name (on monolingual text the
    expression sees a null `tgt`)."""

    name: str
    expr: Callable[[Row], Column]

    def columns(self, row: Row) -> dict[str, Column]:
        return {self.name: self.expr(row)}

    def monolingual(self) -> dict[str, str]:
        return {}  # kept as it is


@dataclass(frozen=True)
class Rule:
    """One heuristic rule. `fails` is true where a row fails it (null counts as passing)."""

    name: str
    doc: str
    scores: tuple[SideScores | RowScore, ...]
    fails: Callable[[Row], Column]
    settings: tuple[Setting, ...] = ()
    stage: str = "rules"  # filter_stats' and reject_stage's name for where it rejects
    pair_only: bool = False  # needs both sides: skipped on monolingual text


def pair_setting(row: Row, name: str) -> Any:
    """Setting `name`, or its value for this row's pair in `<name>_by_pair` (keyed `xx-yy`,
    in either order: the settings it holds are symmetric)."""
    by_pair = row.settings[f"{name}_by_pair"]
    a, b = row.src.lang, row.tgt.lang
    return by_pair.get(f"{a}-{b}", by_pair.get(f"{b}-{a}", row.settings[name]))


# --- The rules -----------------------------------------------------------------------------
# Scores used by more than one rule are declared once and listed by each.

CHARS = SideScores({"chars": lambda s: s.analysis("chars")})
TOKENS = SideScores({"tokens": lambda s: s.analysis("n_tokens")})
SCRIPT_SHARE = SideScores({"script_share": lambda s: script_share(s.text, s.scripts)})
LANG = SideScores(  # the side's language-ID backend (udfs/langid.py): the top label, its
    # probability, and every likely label's probability (the rules sum the accepted ones)
    {
        "lang": lambda s: s.analysis("lang"),
        "lang_prob": lambda s: s.analysis("lang_prob"),
        "lang_probs": lambda s: s.analysis("lang_probs"),
    },
    mono_names={"lang": "lid_lang", "lang_prob": "lid_prob", "lang_probs": "lid_probs"},
)

LANGID_SETTINGS = (
    Setting("min_prob", float, "p(expected language) needed from long_chars on", "langid"),
    Setting("min_prob_by_lang", dict[str, float], "min_prob per language", "langid"),
    Setting("min_prob_short", float, "p(expected language) needed at min_chars", "langid"),
    Setting("min_prob_short_by_lang", dict[str, float], "min_prob_short per language", "langid"),
    Setting("min_chars", int, "below this many characters only the script is checked", "langid"),
    Setting("min_chars_by_lang", dict[str, int], "min_chars per language", "langid"),
    Setting("long_chars", int, "from this many characters min_prob applies", "langid"),
    Setting("long_chars_by_lang", dict[str, int], "long_chars per language", "langid"),
    Setting("min_script_share", float, "least share of letters in the script", "langid",
            cuts="script_share", bound="min"),
    Setting("accept", dict[str, list[str]], "language-ID labels accepted per language",
            "langid"),
    Setting("skip", list[str], "languages checked by their script only (no backend knows them)",
            "langid"),
)


def expected_lang_threshold(chars: Any, lang: str, settings: dict[str, Any]) -> Any:
    """The probability of the expected language a side of `chars` characters needs: none
    below min_chars (fastText guesses on a few characters; the script is still checked),
    min_prob_short at min_chars rising linearly to min_prob at long_chars. `chars` is a
    Column (the rule) or an int (benchmarks, tests); None / null means not checked."""
    low = settings["min_chars_by_lang"].get(lang, settings["min_chars"])
    high = max(settings["long_chars_by_lang"].get(lang, settings["long_chars"]), low + 1)
    short_prob = settings["min_prob_short_by_lang"].get(lang, settings["min_prob_short"])
    long_prob = settings["min_prob_by_lang"].get(lang, settings["min_prob"])
    if isinstance(chars, Column):
        share = F.least(F.greatest((chars - low) / (high - low), F.lit(0.0)), F.lit(1.0))
        return F.when(chars >= low, short_prob + (long_prob - short_prob) * share)
    if chars < low:
        return None
    share = min(max((chars - low) / (high - low), 0.0), 1.0)
    return short_prob + (long_prob - short_prob) * share


def expected_lang_prob(row: Row, side: Side) -> Column:
    """The probability that the side is in its language: its accepted labels' summed."""
    accepted = row.settings["accept"].get(side.lang, [side.lang])
    probs = F.map_filter(side.score("lang_probs"), lambda lang, _: lang.isin(accepted))
    return F.aggregate(F.map_values(probs), F.lit(0.0), lambda total, p: total + p)


def wrong_language(row: Row, side: Side) -> Column:
    """Wrong script, or (from min_chars on) too low a probability of the expected language
    for the side's length."""
    wrong_script = side.score("script_share") < row.settings["min_script_share"]
    if side.lang in row.settings["skip"]:  # no backend knows it: the script alone decides
        return wrong_script
    threshold = expected_lang_threshold(side.score("chars"), side.lang, row.settings)
    unsure = F.coalesce(expected_lang_prob(row, side) < threshold, F.lit(False))
    return wrong_script | unsure


def char_word_range(row: Row, side: Side) -> Range:
    """The side's language's range, else its main script's, else the default."""
    by_lang = row.settings["char_word_ratio_by_lang"]
    by_script = row.settings["char_word_ratio_by_script"]
    if side.lang in by_lang:
        return by_lang[side.lang]
    main = side.scripts[0] if side.scripts else None
    return by_script.get(main, row.settings["char_word_ratio"])


# In the order their scores are stored (the run order is `rules.order`).
RULES: tuple[Rule, ...] = (
    Rule(
        "empty",
        "A side is empty (a null side too: it cannot pass as clean).",
        scores=(CHARS,),
        fails=lambda row: row.any_side(lambda s: F.coalesce(s.score("chars"), F.lit(0)) == 0),
    ),
    Rule(
        "identical",
        "Both sides are the same text, ignoring case.",
        # Lowercasing keeps a line's length (outside a few letters such as U+0130), so the
        # length test spares nearly every row the two lower() calls.
        scores=(
            RowScore(
                "identical",
                lambda row: (
                    (row.src.analysis("chars") == row.tgt.analysis("chars"))
                    & (F.lower(row.src.text) == F.lower(row.tgt.text))
                ),
            ),
        ),
        fails=lambda row: F.col("identical"),
        pair_only=True,
    ),
    Rule(
        "too_many_tokens",
        "A side has more than max_tokens tokens (udfs/tokens.py).",
        scores=(TOKENS,),
        fails=lambda row: row.largest("tokens") > row.settings["max_tokens"],
        settings=(Setting("max_tokens", int, "most tokens on either side", cuts="tokens",
                          bound="max"),),
    ),
    Rule(
        "long_word",
        "A side has a token longer than max_word_chars characters.",
        scores=(SideScores({"max_word_chars": lambda s: s.analysis("max_token_chars")}),),
        fails=lambda row: row.largest("max_word_chars") > row.settings["max_word_chars"],
        settings=(Setting("max_word_chars", int, "most characters in one token",
                          cuts="max_word_chars", bound="max"),),
    ),
    Rule(
        "token_ratio",
        "Source over target tokens outside token_ratio.",
        scores=(
            RowScore(
                "token_ratio",
                lambda row: F.when(
                    row.tgt.analysis("n_tokens") > 0,
                    row.src.analysis("n_tokens") / row.tgt.analysis("n_tokens"),
                ),
            ),
        ),
        fails=lambda row: row.settings["token_ratio"].outside(F.col("token_ratio")),
        settings=(Setting("token_ratio", Range, "source/target token ratio range",
                          cuts="token_ratio", bound="range"),),
        pair_only=True,
    ),
    Rule(
        "char_word_ratio",
        "A side of at least char_word_min_tokens tokens has its non-space characters per token "
        "outside its language's range.",
        scores=(
            TOKENS,  # shared with too_many_tokens: stored once
            SideScores(
                {
                    "char_word_ratio": lambda s: F.when(
                        s.analysis("n_tokens") > 0,
                        s.analysis("nonspace_chars") / s.analysis("n_tokens"),
                    )
                }
            ),
        ),
        fails=lambda row: row.any_side(
            lambda s: (s.score("tokens") >= row.settings["char_word_min_tokens"])
            & char_word_range(row, s).outside(s.score("char_word_ratio"))
        ),
        settings=(
            Setting("char_word_ratio", Range, "characters per token range", cuts="char_word_ratio",
                    bound="range"),
            Setting("char_word_ratio_by_lang", dict[str, Range], "char_word_ratio per language"),
            Setting("char_word_ratio_by_script", dict[str, Range],
                    "char_word_ratio per main script (ISO 15924), for languages without their own"),
            Setting("char_word_min_tokens", int, "sides with fewer tokens are not checked"),
        ),
    ),
    Rule(
        "punct_share",
        "A side's punctuation/symbols over its non-space characters above max_punct_share.",
        scores=(SideScores({"punct_share": lambda s: punct_share(
            s.analysis("punct_chars"), s.analysis("nonspace_chars"))}),),
        fails=lambda row: row.largest("punct_share") > row.settings["max_punct_share"],
        settings=(Setting("max_punct_share", float, "most punctuation share on either side",
                          cuts="punct_share", bound="max"),),
    ),
    Rule(
        "src_digit_share",
        "The source side's digits over its non-space characters above max_src_digit_share.",
        scores=(SideScores({"digit_share": lambda s: digit_share(
            s.text, s.analysis("nonspace_chars"))}, sides=("src",)),),
        fails=lambda row: row.src.score("digit_share") > row.settings["max_src_digit_share"],
        settings=(Setting("max_src_digit_share", float, "most digit share on the source side",
                          cuts="digit_share", bound="max"),),
    ),
    Rule(
        "unbalanced_brackets",
        "A side has an unmatched bracket, or the sides' double quotes differ in parity (the "
        "same split quotation on both sides passes).",
        scores=(
            RowScore(
                "bracket_mismatch",
                lambda row: bracket_mismatch(
                    row.src.analysis("brackets"), row.tgt.analysis("brackets")
                ),
            ),
        ),
        fails=lambda row: F.col("bracket_mismatch") > 0,
    ),
    Rule(
        "copied_text",
        "At least min_copied_words ordinary words shared by the sides make up more than "
        "max_copy_share of either side (an untranslated or half-translated pair).",
        scores=(
            RowScore("copied_words", lambda row: F.size(copied_words(row.src.text,
                                                                       row.tgt.text))),
            RowScore("copy_share", lambda row: copy_share(
                row.src.text, row.tgt.text, row.src.analysis("nonspace_chars"),
                row.tgt.analysis("nonspace_chars"))),
        ),
        fails=lambda row: (F.col("copied_words") >= row.settings["min_copied_words"])
        & (F.col("copy_share") > pair_setting(row, "max_copy_share")),
        settings=(
            Setting("max_copy_share", float, "most share of a side in words copied across",
                    cuts="copy_share", bound="max"),
            # Related languages share words their human translations keep (Croatian and
            # Serbian, Indonesian and Malay): a higher bar for such a pair, either order.
            Setting("max_copy_share_by_pair", dict[str, float],
                    "max_copy_share for a pair of related languages"),
            Setting("min_copied_words", int, "fewer shared words never fail"),
        ),
        pair_only=True,
    ),
    Rule(
        "url_email_html",
        "A URL, e-mail address, HTML tag or entity on either side (the first one is stored).",
        scores=(
            RowScore(
                "url_email_html",
                lambda row: first_match(
                    row.src.text, row.tgt.text, URL_EMAIL_HTML, URL_EMAIL_HTML_GUARD
                ),
            ),
        ),
        fails=lambda row: F.col("url_email_html").isNotNull(),
    ),
    Rule(
        "special_chars",
        "A configured special-character pattern on either side (its name is stored).",
        scores=(
            RowScore(
                "special_chars",
                lambda row: special_match(
                    row.src.text, row.tgt.text, row.settings["special_patterns"]
                ),
            ),
        ),
        fails=lambda row: F.col("special_chars").isNotNull(),
        settings=(Setting("special_patterns", dict[str, str], "name: Java regex"),),
    ),
    Rule(
        "langid_src",
        "The source side is not in the source language (script, then language ID).",
        scores=(CHARS, SCRIPT_SHARE, LANG),
        fails=lambda row: wrong_language(row, row.src),
        settings=LANGID_SETTINGS,
        stage="langid",
    ),
    Rule(
        "langid_tgt",
        "The target side is not in the target language (script, then language ID).",
        scores=(CHARS, SCRIPT_SHARE, LANG),
        fails=lambda row: wrong_language(row, row.tgt),
        settings=LANGID_SETTINGS,
        stage="langid",
        pair_only=True,
    ),
)

RULE_NAMES: tuple[str, ...] = tuple(rule.name for rule in RULES)
BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}
if len(BY_NAME) != len(RULES):
    raise ValueError("two rules in RULES share a name")


# --- What the rest derives from RULES ------------------------------------------------------


def settings(section: str) -> dict[str, Setting]:
    """The settings rules read from `section:` of the config (`rules` or `langid`), by name."""
    found: dict[str, Setting] = {}
    for rule in RULES:
        for s in rule.settings:
            if found.setdefault(s.name, s) != s:
                raise ValueError(f"setting {s.name!r} is declared twice, differently")
    return {name: s for name, s in found.items() if s.section == section}


def score_columns(rules: Iterable[Rule], row: Row) -> dict[str, Column]:
    """The score columns of `rules`, in the order of RULES (a shared score once)."""
    wanted = {rule.name for rule in rules}
    columns: dict[str, Column] = {}
    for rule in RULES:
        if rule.name in wanted:
            for score in rule.scores:
                for name, expr in score.columns(row).items():
                    columns.setdefault(name, expr)
    return columns


def rule_failures(rules: Iterable[Rule], row: Row) -> dict[str, Column]:
    """Rule name -> Column that is true when the row fails it (null counts as passing)."""
    return {rule.name: rule.fails(row) for rule in rules}


def first_failure(rules: Iterable[Rule], row: Row) -> Column:
    """Name of the first of `rules` the row fails (they run in the order given), or null."""
    failing = [
        F.when(F.coalesce(fails, F.lit(False)), F.lit(name))
        for name, fails in rule_failures(rules, row).items()
    ]
    return F.coalesce(*failing, F.lit(None).cast("string"))


def monolingual_names() -> dict[str, str]:
    """A stored source-side score column -> its name in the monolingual tables."""
    return {old: new for rule in RULES for s in rule.scores for old, new in s.monolingual().items()}
