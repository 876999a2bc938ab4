"""Languages as data (issue 35), without Spark: each language's scripts from ICU's CLDR data,
the language-ID backend chosen per language, CLD3 on real lines of the languages lid.176
lacks, and the plain-words warning when langid rejects most of a corpus."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from jobs.filtering.config import load_config
from jobs.filtering.stats import Counts, funnel, langid_warning
from jobs.reporting.page import funnel_section
from udfs import langid_cld3
from udfs.langid_backends import backend_for, identify_all
from udfs.scripts import known_script, script_class, scripts_of, unspaced

LANGS = Path(__file__).resolve().parent / "data" / "langs"


def side(pair: str, column: int) -> list[str]:
    lines = (LANGS / f"{pair}.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t")[column] for line in lines]


@pytest.mark.parametrize(("lang", "scripts"), [
    ("bn", ("Beng",)), ("ta", ("Taml",)), ("hi", ("Deva",)), ("ja", ("Kana", "Hira", "Hani")),
    ("ko", ("Hang", "Hani")), ("zh", ("Hani",)), ("ha", ("Latn",)), ("mk", ("Cyrl",)),
    ("am", ("Ethi",)), ("ka", ("Geor",)), ("si", ("Sinh",)), ("my", ("Mymr",)),
])
def test_scripts_come_from_cldr(lang: str, scripts: tuple[str, ...]) -> None:
    """The old hand table had 14 languages and called the rest Latin."""
    assert scripts_of(lang) == scripts


def test_a_config_list_replaces_icus_and_unknown_codes_have_none() -> None:
    cfg = load_config(extra={"pair": "sr-en"})
    assert cfg.langid.scripts_of("sr") == ("Cyrl", "Latn")  # conf/defaults.yaml
    assert scripts_of("sr") == ("Cyrl",)
    assert scripts_of("xx") == ()
    assert script_class(("Beng", "Latn")) == r"\p{IsBeng}\p{IsLatn}"
    assert known_script("Beng") and not known_script("Qwer") and not known_script("en")


def test_unspaced_is_the_main_script() -> None:
    assert all(unspaced(lang) for lang in ("zh", "ja", "th", "lo", "km", "my", "yue"))
    assert not any(unspaced(lang) for lang in ("ko", "en", "bn", "ru"))  # ko: Hangul first


def test_a_bad_script_override_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"langid.scripts.sr: \['Qwer'\] is not a list of ISO"):
        load_config(extra={"pair": "sr-en", "langid": {"scripts": {"sr": ["Qwer"]}}})


def test_each_language_takes_the_first_backend_that_knows_it() -> None:
    assert backend_for("en") == "lid176" and backend_for("bn") == "lid176"
    assert backend_for("ha") == backend_for("xh") == backend_for("zu") == "cld3"
    assert backend_for("ff") is None
    assert backend_for("en", by_lang={"en": "cld3"}) == "cld3"
    with pytest.raises(ValueError, match="langid.backend_by_lang.ha: lid176 does not know 'ha'"):
        load_config(extra={"pair": "ha-en", "langid": {"backend_by_lang": {"ha": "lid176"}}})


@pytest.mark.parametrize("lang", ["ha", "xh", "zu"])
def test_cld3_reads_the_languages_lid176_lacks(lang: str) -> None:
    """Real Tatoeba lines of 15+ characters (shorter ones are checked by script only)."""
    texts = [t for t in side(f"{lang}-en", 0) if len(t) >= 15]
    labels, probs, all_probs = identify_all("cld3", "", texts)
    accepted = {"xh": {"xh", "zu"}, "zu": {"zu", "xh"}}.get(lang, {lang})
    assert sum(label in accepted for label in labels) / len(texts) >= 0.75
    assert all(0.0 <= p <= 1.0 for p in probs)
    assert all(0.0 < sum(found.values()) <= 1.0 for found in all_probs)
    assert identify_all("cld3", "", [""]) == ([""], [0.0], [{}])


def test_cld3_labels_use_sluices_codes() -> None:
    assert {"he", "tl"} <= langid_cld3.LABELS and not {"iw", "fil"} & langid_cld3.LABELS
    assert len(langid_cld3.LABELS) == 107


def test_the_guard_speaks_only_past_half() -> None:
    assert langid_warning("bn-hi", "c", "langid_src", 200, 196) == (
        "langid_src rejected 98% of bn-hi/c: is the language code right?")
    assert langid_warning("bn-hi", "c", "langid_src", 200, 100) is None
    assert langid_warning("bn-hi", "c", "token_ratio", 200, 200) is None
    assert langid_warning("bn-hi", "c", "langid_tgt", 0, 0) is None


def test_the_funnel_and_the_report_say_it() -> None:
    sequence = [("rules", "empty"), ("langid", "langid_src"), ("langid", "langid_tgt")]
    counts = Counts({("bn-hi", "c"): 100},
                    {("bn-hi", "c"): {("rules", "empty"): 20, ("langid", "langid_src"): 70}},
                    {("bn-hi", "c"): 10})
    text = funnel(counts, sequence)
    # 70 of the 80 rows that reached langid_src
    assert text.endswith("  ! langid_src rejected 88% of bn-hi/c: is the language code right?")
    steps = [{"pair": "bn-hi", "corpus": "c", "step": i + 1, "stage": stage, "rule": rule,
              "rows_in": rows_in, "rows_rejected": rejected}
             for i, ((stage, rule), rows_in, rejected)
             in enumerate(zip(sequence, (100, 80, 10), (20, 70, 0), strict=True))]
    html = funnel_section(SimpleNamespace(funnel=steps, history=[]), {})
    assert ('<p class="note warning">langid_src rejected 88% of bn-hi/c: is the language code '
            "right?</p>") in html


def test_every_job_takes_the_seed_languages_and_refuses_a_code_without_a_script() -> None:
    """Mixing and translation directions (and select's pair) were checked against lid.176's
    labels: `ha-en` or `xh-zu` could not be mixed."""
    from pydantic import ValidationError

    from jobs.kit.config import known_pair
    from jobs.translation.config import StreamConf

    for pair in ("ha-en", "xh-zu", "bn-hi", "ta-en", "jv-en"):
        assert known_pair(pair) == pair
        assert StreamConf(name="bt", model="m", direction=pair).langs == tuple(pair.split("-"))
    with pytest.raises(ValueError, match="unknown language code 'xx'"):
        known_pair("xx-en")
    with pytest.raises(ValidationError, match="direction 'en-xx': unknown language code 'xx'"):
        StreamConf(name="bt", model="m", direction="en-xx")
