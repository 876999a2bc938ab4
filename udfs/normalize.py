"""Language-independent text normalization.

Entities and HTML tags are Spark Column expressions (JVM; `jobs.filtering.stages.jvm_steps`
lists the enabled ones): few lines hold `&` or `<`, and a line without one skips them for the
cost of a `contains`. Invisible characters and whitespace touch every line, so they run in the
per-side Arrow pass (udfs/sides.py) as RE2 kernels over a whole batch (pyarrow.compute): in the
JVM they cost a java.util.regex scan and a UTF-8 -> UTF-16 -> UTF-8 round trip per line each.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

# Tags we strip. A closed list, so "if a<b then c>d" is left alone.
HTML_TAG_WORDS = (
    "a abbr address article aside b big blockquote body br caption center cite code col dd del "
    "dfn div dl dt em font footer form h1 h2 h3 h4 h5 h6 head header hr html i iframe img input "
    "ins kbd label li link main mark meta nav nobr noscript ol option p pre q s samp script "
    "section select small source span strike strong style sub sup table tbody td textarea tfoot "
    "th thead title tr tt u ul var video wbr"
)
HTML_TAGS = HTML_TAG_WORDS.split()
# Block-level tags separate words; inline tags (<b>, <span>) do not.
BLOCK_TAG_WORDS = "br p div li tr td th h1 h2 h3 h4 h5 h6 hr blockquote table ul ol dd dt"
BLOCK_TAGS = BLOCK_TAG_WORDS.split()


# Attributes must look like name=value, so prose such as "a<b then c>d" is not a tag.
ATTRIBUTES = r"""(?:\s+[\w:-]+\s*=\s*(?:"[^"<>]*"|'[^'<>]*'|[^\s"'<>]+))*\s*"""


def _tag_regex(names: list[str]) -> str:
    return rf"(?i)</?(?:{'|'.join(names)}){ATTRIBUTES}/?>"


HTML_COMMENT = r"<!--.*?-->"
BLOCK_TAG = _tag_regex(BLOCK_TAGS)
ANY_TAG = _tag_regex(HTML_TAGS)

# Zero-width and format characters, soft hyphen, BOM, bidi marks/embeddings/isolates,
# C0 and C1 controls (the line and page breaks tab, LF, VT, FF, CR and NEL separate words:
# they become spaces in the whitespace step instead). RE2 syntax.
INVISIBLE = (
    r"[\x{AD}\x{180E}\x{200B}-\x{200F}\x{202A}-\x{202E}\x{2060}-\x{2064}\x{2066}-\x{206F}"
    r"\x{FEFF}\x00-\x08\x0E-\x1F\x7F-\x84\x86-\x9F]"
)
# ASCII whitespace (tab, LF, VT, FF, CR, space: RE2's \s lacks VT), NEL and the Unicode spaces
# (NBSP, ideographic space, ...); and the same without the plain space.
SPACES_BUT_SPACE = (
    r"\t\n\x0B\f\r\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}"
    r"\x{205F}\x{3000}"
)
# What collapse_whitespace rewrites: runs of two or more, or one that is not a plain space.
# A lone " " is left unmatched, so a line that is already clean costs a scan, not a rewrite.
WHITESPACE = rf"[ {SPACES_BUT_SPACE}]{{2,}}|[{SPACES_BUT_SPACE}]"


def unescape_entities(col: Column) -> Column:
    """XML/HTML entities, named and numeric, also double-escaped (`&amp;lt;` -> `<`).

    Uses commons-text's StringEscapeUtils (shipped with Spark) through `reflect`, so it stays
    in the JVM; `&apos;` is XML-only, so it is replaced first. Rows without `&` skip the call.
    A numeric entity beyond U+10FFFF (`&#99999999;`) makes commons-text throw; `try_reflect`
    turns that into null and the row keeps its entities (the url_email_html rule then sees them)
    instead of failing the whole job.
    """

    def once(c: Column) -> Column:
        c = F.replace(c, F.lit("&apos;"), F.lit("'"))
        unescaped = F.call_function(
            "try_reflect",
            F.lit("org.apache.commons.text.StringEscapeUtils"),
            F.lit("unescapeHtml4"),
            c,
        )
        return F.coalesce(unescaped, c)

    return F.when(col.contains("&"), once(once(col))).otherwise(col)


def strip_html(col: Column) -> Column:
    stripped = F.regexp_replace(col, HTML_COMMENT, " ")
    stripped = F.regexp_replace(stripped, BLOCK_TAG, " ")
    stripped = F.regexp_replace(stripped, ANY_TAG, "")
    # Every pattern starts with "<": a line without one skips the three regex passes.
    return F.when(col.contains("<"), stripped).otherwise(col)


def remove_invisible(texts: pa.Array) -> pa.Array:
    return pc.replace_substring_regex(texts, INVISIBLE, "")


def collapse_whitespace(texts: pa.Array) -> pa.Array:
    """Whitespace runs -> one space; then plain spaces trimmed from both ends."""
    return pc.utf8_trim(pc.replace_substring_regex(texts, WHITESPACE, " "), " ")
