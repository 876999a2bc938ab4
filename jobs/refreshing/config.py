"""Typed configuration of jobs/refresh.py: a filter config (conf/defaults.yaml and the pair
file it extends) plus `sources:` that grow over time and the `refresh:` settings
(conf/refresh-defaults.yaml)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from jobs.filtering.config import FilterConfig
from jobs.kit.config import CONF_DIR, Strict, check_tsv_columns, load_validated, safe_name

DEFAULTS = CONF_DIR / "refresh-defaults.yaml"
# Sections that change how rows are filtered: a file processed under other values of these
# is processed again. Where the lake is, Spark settings and the refresh's own settings do not
# change a row's outcome.
NOT_FILTERING = ("lake", "spark", "inputs", "sources", "refresh")


class SourceConf(Strict):
    corpus: str
    path: str  # a directory (every non-hidden file under it) or a glob
    format: Literal["auto", "tsv", "moses", "parquet", "text"] = "auto"
    columns: list[str] | None = None  # a TSV's fields, as an input's (jobs/kit/config.py)

    @model_validator(mode="after")
    def columns_name_both_sides(self) -> SourceConf:
        check_tsv_columns(self.corpus, self.format, self.columns)
        return self

    _corpus = field_validator("corpus")(classmethod(lambda cls, v: safe_name(v, "corpus name")))


class RefreshConf(Strict):
    missing_files: Literal["keep", "drop"] = "keep"
    lake_dedup: bool = True
    heartbeat_s: float = Field(30, gt=0)
    stale_after_s: float = Field(600, gt=0)
    select: str | None = None  # a jobs/select_data.py config run on the refresh's new rows


class RefreshConfig(FilterConfig):
    sources: list[SourceConf] = Field(default_factory=list)
    refresh: RefreshConf = RefreshConf()

    @model_validator(mode="after")
    def sources_not_inputs(self) -> RefreshConfig:
        if self.inputs:
            raise ValueError("a refresh reads `sources:` (paths that grow), not `inputs:`")
        if not self.sources:
            raise ValueError("no `sources:` to refresh (corpus, path, format)")
        names = [s.corpus for s in self.sources]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"corpus {twice[0]!r} is named by two sources: one path each")
        if self.hosts.enabled and not self.refresh.lake_dedup:
            raise ValueError("hosts.enabled needs refresh.lake_dedup: the committed files "
                             "sharing a website with new rows are re-decided with the dedup")
        if self.stale_after_s_too_short():
            raise ValueError("refresh.stale_after_s must be over twice refresh.heartbeat_s")
        return self

    def stale_after_s_too_short(self) -> bool:
        return self.refresh.stale_after_s <= 2 * self.refresh.heartbeat_s

    def filter_hash(self) -> str:
        """The hash of what decides a row's outcome: the filter sections of the config."""
        kept: dict[str, Any] = {
            k: v for k, v in self.resolved().items() if k not in NOT_FILTERING
        }
        blob = json.dumps(kept, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def load_refresh_config(
    path: str | Path | None, overrides: list[str] | None = None, extra: dict | None = None
) -> RefreshConfig:
    """refresh-defaults.yaml (over defaults.yaml) <- the config chain <- flags <- `--set`."""
    return load_validated(RefreshConfig, DEFAULTS, path, overrides, extra)
