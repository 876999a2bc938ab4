"""Tags prepended to a mixture row's source side: the target language for a multilingual
model (`<2zh> `, Johnson et al. 2017) and a mark on back/forward-translated rows (`<BT> `,
Caswell et al. 2019, "Tagged Back-Translation"), so the model can tell synthetic input apart.
Both strings come from config; a source's tags are the same for all its rows, so they are
worked out once per source and applied as one map lookup."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.mixing.config import TagsConf


def source_tags(tags: TagsConf, tgt_lang: str, synthetic: bool) -> list[str]:
    """The tags of one source's rows, in the order they are prepended (target first)."""
    out = []
    if tags.target:
        out.append(tags.target.replace("{tgt}", tgt_lang))
    if synthetic and tags.synthetic:
        out.append(tags.synthetic)
    return out


def tagged(text: str, applied: list[str]) -> str:
    """`text` with its tags in front (the Python twin of `tag_columns`)."""
    return "".join(applied) + text


def tag_columns(by_source: Mapping[str, list[str]]) -> tuple[Column, Column]:
    """(the tagged `src`, the `tags` applied) for rows with a `source` column."""
    if not by_source:
        return F.col("src"), F.array().cast("array<string>")
    lookup = F.create_map(*[x for name, applied in by_source.items()
                            for x in (F.lit(name), F.array(*[F.lit(t) for t in applied])
                                      .cast("array<string>"))])
    applied = F.coalesce(lookup[F.col("source")], F.array().cast("array<string>"))
    return F.concat(F.array_join(applied, ""), F.col("src")), applied
