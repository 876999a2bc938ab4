"""What a tokenizer leaves in text it should not have touched: a side of a crawled pair that
went through one (a Moses-tokenized corpus re-crawled, a scraper that split words) is not the
page's own text, and often not a human translation either. ParaCrawl's annotators label such
pairs T ("wrong tokenization"); the shipped pair_score ranked them above valid ones (issue 67).

Counted after normalization (udfs/normalize.py), on what it leaves: it unescapes entities and
Moses' punctuation step drops a space before `:;?!` (and before `%`), but keeps one before `,`
and `.`, and never splits glued sentences. On ParaCrawl release 7's labels (25 languages),
a space before `,`/`.` is on 3.6% of T sides against 1.2% of V sides, a glued sentence end
on 2.2% against 0.2%; most T pairs have none, so alone it ranks V above T at AUC 0.53
(bench/crawl/tokenization_artifacts.py): weak evidence, one pair_score input among many.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

ARTIFACTS = (
    r"(?<=\S) [,.](?= |$)",             # `word , word` / `end .`: Moses-tokenized punctuation
    r"\p{Ll}{2}[.!?]\p{Lu}\p{Ll}",       # `end.Next`: two sentences glued, a space lost
    r" @[-,.]@ ",                        # Moses' aggressive hyphen and number splits
    r"&(?:amp|apos|quot|lt|gt|#\d+);",   # an escape left (double-escaped, unescaped once)
)
PATTERN = "|".join(f"(?:{p})" for p in ARTIFACTS)


def tokenization_artifacts(text: Column) -> Column:
    """How many tokenization artifacts the side holds (0 for none; null for a null side)."""
    return F.regexp_count(text, F.lit(PATTERN))
