"""Language-independent text normalization as Spark Column expressions (JVM, no Python).

Each function takes and returns a Column; `jobs.filtering.stages.jvm_steps` lists the enabled ones.
"""

from __future__ import annotations

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
# they become spaces in the whitespace step instead).
INVISIBLE = (
    r"[\u00AD\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF"
    r"\x00-\x08\x0E-\x1F\x7F-\x84\x86-\x9F]"
)
# Java's \s is ASCII-only; add NEL and the Unicode spaces (NBSP, ideographic space, ...).
SPACE_CLASS = r"\s\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
# What collapse_whitespace rewrites: runs of two or more, or one that is not a plain space.
# A lone " " is left unmatched, so a line that is already clean costs a scan, not a rewrite.
WHITESPACE = rf"[{SPACE_CLASS}]{{2,}}|[{SPACE_CLASS}&&[^ ]]"


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


def remove_invisible(col: Column) -> Column:
    return F.regexp_replace(col, INVISIBLE, "")


def collapse_whitespace(col: Column) -> Column:
    return F.trim(F.regexp_replace(col, WHITESPACE, " "))
