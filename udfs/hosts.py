"""The website a crawled pair came from: the registrable domain of its page URL.

`host` groups the pages of one site under whatever subdomains it serves its languages
(`en.example.com` and `de.example.com` are `example.com`): `www.example.co.uk` ->
`example.co.uk`, `ec.europa.eu` -> `europa.eu`, and a blog on a shared host
(`foo.blogspot.com`) is its own site. `example.de` and `example.com` stay two hosts.
The public suffix list is the snapshot the `publicsuffixlist` wheel bundles (no download at
run time; a newer wheel, a newer list). An IP address or a one-label name (`localhost`) is
its own host. A URL without a host name (`not a url`, `http://`) has a null host; the row
is kept.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import StringType

# scheme://[user[:pass]@]HOST[:port][/path...], or a URL written without a scheme
# (`www.example.com/page`, as some crawls store it: a dotted name first). The whole value
# must be a URL (no spaces), or there is no host name: Spark-native, one group each.
_NAME, _REST = r"([^/?#:@\s\[\]]+)", r"(?::\d*)?(?:[/?#]\S*)?$"
WITH_SCHEME = rf"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@\s]*@)?{_NAME}{_REST}"
WITHOUT_SCHEME = rf"^([^/?#:@\s\[\]]+\.[^/?#:@\s\[\]]+){_REST}"
# A host name: labels of letters (any script: IDN as written), digits and hyphens.
LABELS = re.compile(r"^(?:[^\W_](?:[\w-]*[^\W_])?\.)*[^\W_](?:[\w-]*[^\W_])?$")
IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def host_name(url: Column) -> Column:
    """The URL's host name, lower-cased without a trailing dot, or null where it has none."""
    url = F.trim(url)
    found = [F.regexp_extract(url, pattern, 1) for pattern in (WITH_SCHEME, WITHOUT_SCHEME)]
    name = F.regexp_replace(F.lower(F.coalesce(*[F.when(f != "", f) for f in found])),
                            r"\.$", "")
    return F.when(name != "", name)


@lru_cache(maxsize=1)
def _suffixes():  # noqa: ANN202 - publicsuffixlist has no type hints
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


@lru_cache(maxsize=1 << 16)
def registrable(name: str | None) -> str | None:
    """`www.example.co.uk` -> `example.co.uk`; an IP or one-label name as it is; None for
    what is not a host name."""
    if not name or not LABELS.match(name):
        return None
    if IPV4.match(name) or "." not in name:
        return name
    return _suffixes().privatesuffix(name) or name  # a public suffix itself: as it is


@pandas_udf(StringType())
def _registrable(names: pd.Series) -> pd.Series:
    return names.map(registrable, na_action="ignore")


def host_of(*urls: Column) -> Column:
    """The registrable domain of the first of `urls` (string columns) that has a host name;
    null where none has."""
    return _registrable(F.coalesce(*[host_name(url) for url in urls]))
