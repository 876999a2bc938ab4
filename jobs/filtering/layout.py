"""Which tables a filter run writes, and the shape of their rows: bitext (pairs) or
monolingual text. The stages work on one internal shape (`pair`, `src`, `tgt`, `src_*`
scores; a monolingual run has a null `tgt` and only the source side's scores); its rows are
renamed to their own shape only when written, score columns as udfs/rules.py names them."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from udfs.rules import monolingual_names

TARGET_COLUMNS = ("tgt", "file_tgt", "tgt_url")  # a monolingual table has no target side
MONO_RENAMES = {"pair": "lang", "src": "text", "src_url": "url"}  # and udfs/rules.py's
# Columns a lake written before they existed lacks (null there): the crawl's page URLs.
LATER_COLUMNS = ("src_url", "tgt_url", "host")


@dataclass(frozen=True)
class Layout:
    mono: bool

    @property
    def prefix(self) -> str:
        return "mono" if self.mono else "bitext"

    @property
    def raw(self) -> str:
        return f"{self.prefix}_raw"

    @property
    def clean(self) -> str:
        return f"{self.prefix}_clean"

    @property
    def rejected(self) -> str:
        return f"{self.prefix}_rejected"

    @property
    def key(self) -> str:
        """The partition column that names what the rows are: the pair, or the language."""
        return "lang" if self.mono else "pair"

    def outward(self, df: DataFrame) -> DataFrame:
        """Rows as the tables hold them. Monolingual: no target side, `text` for `src`,
        `lang` for `pair`, score columns by their monolingual names (udfs/rules.py)."""
        if not self.mono:
            return df
        names = MONO_RENAMES | monolingual_names()
        kept = [c for c in df.columns if c not in TARGET_COLUMNS]
        return df.select(*[F.col(c).alias(names.get(c, c)) for c in kept])

    def inward(self, df: DataFrame) -> DataFrame:
        """Rows read back from the lake (raw or decided), in the stages' shape."""
        none = F.lit(None).cast("string")
        if self.mono:
            back = {v: k for k, v in (MONO_RENAMES | monolingual_names()).items()}
            df = df.select(*[F.col(c).alias(back.get(c, c)) for c in df.columns],
                           *[none.alias(c) for c in TARGET_COLUMNS])
        missing = [c for c in LATER_COLUMNS if c not in df.columns]
        return df.select(*df.columns, *[none.alias(c) for c in missing]) if missing else df
