"""Model paths as executors see them, decided on the driver (DESIGN §6: models are files).

A configured model path is, in this order:
- a lake or Hadoop URI (`hdfs://`, `s3a://`...): shipped to every executor with
  `SparkContext.addFile` (directories too) and found there by its base name;
- a path present here: made absolute. A file is also shipped with `addFile`, so it reaches
  executors on other machines; a directory must be at that absolute path on every node (the
  image or a shared file system) — Spark ships local directories only in local mode;
- the alias of something shipped with `--archives`/`--files` (`m.tgz#tiny-ct2` -> `tiny-ct2`,
  or a path inside it: `tiny-ct2/spm.model`): kept relative, since executors unpack archives
  into their working directory (client and cluster deploy mode alike).
Anything else fails here, on the driver, with one line naming what was looked for and where.
Executors resolve the result with `udfs.paths.on_this_worker`.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from jobs.config import ConfigError
from udfs.paths import is_local_path

SHIPPING_KEYS = (
    "spark.archives",
    "spark.yarn.dist.archives",
    "spark.files",
    "spark.yarn.dist.files",
)


def shipped_aliases(spark: SparkSession) -> set[str]:
    """Names things shipped with --archives/--files get in an executor's working directory."""
    conf = spark.sparkContext.getConf()
    names = set()
    for key in SHIPPING_KEYS:
        for entry in filter(None, (conf.get(key) or "").split(",")):
            uri, _, alias = entry.strip().partition("#")
            names.add(alias or os.path.basename(urlparse(uri).path.rstrip("/")))
    return names


def for_executors(spark: SparkSession, path: str, what: str) -> str:
    """The path executors load `what` (e.g. 'translate model of stream bt') from."""
    if not is_local_path(path):
        spark.sparkContext.addFile(path, recursive=True)
        return path.rstrip("/")
    local = path.removeprefix("file://") if path.startswith("file://") else path
    if os.path.exists(local):
        absolute = os.path.abspath(local)
        if os.path.isfile(absolute):
            spark.sparkContext.addFile(absolute)
        return absolute
    aliases = shipped_aliases(spark)
    if not os.path.isabs(local) and local.split("/", 1)[0] in aliases:
        return local
    shipped = ", ".join(sorted(aliases)) or "nothing"
    raise ConfigError(
        f"{what}: {path} not found (looked at {os.path.abspath(local)} on the driver and among "
        f"--archives/--files aliases: {shipped}); put it in the image at an absolute path, "
        "ship it with --archives/--files, or give a lake URI"
    )
