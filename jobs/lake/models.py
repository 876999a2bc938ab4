"""Model paths as executors see them, decided on the driver (DESIGN §6: models are files).

A configured model path is, in this order:
- a lake or Hadoop URI (`hdfs://`, `s3a://`...): shipped to every executor with
  `SparkContext.addFile` (directories too) and found there by its base name;
- a path present here: made absolute. A file is also shipped with `addFile`, so it reaches
  executors on other machines; a directory must be at that absolute path on every node (the
  image or a shared file system) — Spark ships local directories only in local mode;
- a relative path not present here but in sluice's installation: the models the shipped
  defaults name (`models/lid.176.ftz`, `models/use-multilingual-v3`), so a job started from
  another directory (cron, Airflow, a config's own directory) finds them; then as above;
- the alias of something shipped with `--archives`/`--files` (`m.tgz#tiny-ct2` -> `tiny-ct2`,
  or a path inside it: `tiny-ct2/spm.model`): kept relative, since executors unpack archives
  into their working directory (client and cluster deploy mode alike).
Anything else fails here, on the driver, with one line naming what was looked for and where.
Executors resolve the result with `udfs.paths.on_this_worker`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from jobs.kit.config import CONF_DIR, check_name
from jobs.kit.errors import ConfigError
from jobs.lake.store import Lake
from udfs.paths import is_local_path

INSTALLATION = CONF_DIR.parent  # where `make setup` (or the image) put models/
# A model's staging directory (`.staging-<name>-<attempt>`) untouched this long belongs to a
# save that died (killed while training): the next save of any model of the pair removes it.
# Training a model takes minutes; a day leaves any live one alone.
STAGING_STALE_S = 24 * 3600
STAGING = ".staging-"
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


def on_this_machine(path: str) -> str:
    """A local model path as this process finds it: as given when it exists (relative to the
    working directory), else in sluice's installation when it is there (the models the shipped
    defaults name), else as given (the caller says it is missing)."""
    installed = INSTALLATION / path
    if not os.path.exists(path) and not os.path.isabs(path) and installed.exists():
        return str(installed)
    return path


def for_executors(spark: SparkSession, path: str, what: str) -> str:
    """The path executors load `what` (e.g. 'translate model of stream bt') from."""
    if not is_local_path(path):
        spark.sparkContext.addFile(path, recursive=True)
        return path.rstrip("/")
    local = on_this_machine(path.removeprefix("file://") if path.startswith("file://") else path)
    installed = INSTALLATION / local
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
        f"{what}: {path} not found (looked at {os.path.abspath(local)} on the driver, "
        f"{installed} in sluice's installation and among "
        f"--archives/--files aliases: {shipped}); put it in the image at an absolute path, "
        "ship it with --archives/--files, or give a lake URI"
    )


class ModelStore:
    """Models saved in the lake, one directory per name: `<lake>/models/<kind>/<pair>/<name>/`
    with the model's files and `manifest.json` (written last; it also says what the model was
    trained on and when). A new model is written into a staging directory and renamed into
    place, so a name only ever shows a whole model. One store for every kind the jobs save:
    word aligners (`AlignerStore`) and pair_score models (`PairScoreStore`)."""

    LATEST = "latest"  # the pair's most recently created model
    kind = ""  # the directory under models/
    what = "model"  # how an error names one
    setting = ""  # the config key that names one
    how_to_train = ""  # what an error says to run when there is none

    def __init__(self, lake: Lake, pair: str) -> None:
        self.lake, self.pair = lake, pair
        self.root = f"{lake.root}/models/{self.kind}/{pair}"

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def manifest(self, name: str) -> dict | None:
        text = self.lake.read_text(f"{self.path(name)}/manifest.json")
        return json.loads(text) if text else None

    def names(self) -> list[str]:
        """Saved models (complete ones: with a manifest), sorted by name."""
        listed = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.lake.list_dir(self.root))
        return [n for n in listed if not n.startswith(".") and self.manifest(n) is not None]

    def latest(self) -> str | None:
        """The most recently created saved model of the pair (ties: the last name)."""
        created = {name: self.manifest(name).get("created", "") for name in self.names()}
        return max(created, key=lambda n: (created[n], n)) if created else None

    def resolve(self, reference: str) -> str:
        """The saved model `reference` names (`latest`: the newest); ConfigError if none."""
        name = self.latest() if reference == self.LATEST else check_name(self.what, reference)
        if name is None or self.manifest(name) is None:
            saved = ", ".join(self.names()) or "none"
            raise ConfigError(
                f"{self.setting} {reference!r}: no {self.pair} {self.what} of that name under "
                f"{self.root} (saved: {saved}); {self.how_to_train}"
            )
        return name

    def exists(self, name: str) -> bool:
        return self.manifest(name) is not None

    def save(self, name: str, write: Callable[[str], object], replace: bool = False) -> str:
        """`write(directory)` writes a model (its manifest last) into a staging directory of
        this attempt's own, renamed to `name` under the lake's commit lock; `replace`: a model
        of that name is replaced (a failed run's, retried), else a ConfigError, also when
        another save of that name finished while this one was writing."""
        check_name(f"{self.what} name", name)  # a directory under the store, not outside it
        self.lake.ready()  # the catalog work beside the job done: the lock below is this one's
        self.remove_dead_staging()
        final = self.path(name)
        if self.exists(name) and not replace:
            raise ConfigError(f"{self.what} {name!r} already exists under {self.root}: pick a "
                              "new name")
        staging = f"{self.root}/{STAGING}{name}-{uuid.uuid4().hex[:12]}"
        try:
            write(staging)
            with self.lake.exclusive(f"{self.what} {name}"):
                if self.exists(name) and not replace:
                    raise ConfigError(f"{self.what} {name!r} was saved under {self.root} by "
                                      "another run while this one trained: pick a new name")
                self.lake.delete(final)  # an incomplete one (no manifest), or replaced
                self.lake.rename(staging, final)
        finally:
            self.lake.delete(staging)  # a failed attempt's; nothing once renamed
        return final

    def remove_dead_staging(self) -> None:
        """Staging directories of the pair's models untouched for STAGING_STALE_S: saves that
        were killed (a live one is writing into its own, newer)."""
        for path, modified in self.lake.list_modified(self.root).items():
            if path.rstrip("/").rsplit("/", 1)[-1].startswith(STAGING) \
                    and time.time() - modified > STAGING_STALE_S:
                self.lake.delete(path)


class AlignerStore(ModelStore):
    """Word aligners (udfs/align_model.py's files), trained by jobs/align_reference.py or by a
    filter run on its own pairs; `align.reference` names one."""

    kind, what, setting = "align", "aligner", "align.reference"
    how_to_train = ("train one with `python -m jobs.align_reference` or set align.reference "
                    "null")


class PairScoreStore(ModelStore):
    """pair_score models (jobs/filtering/pair_score_model.py: a manifest of weights),
    trained by jobs/train_pair_score.py; `pair_score.model` names one."""

    kind, what, setting = "pair_score", "pair_score model", "pair_score.model"
    how_to_train = "train one with `python jobs/train_pair_score.py`"

    def save_manifest(self, name: str, manifest: dict) -> str:
        """A model that is its manifest alone, saved as a whole (staged, then renamed)."""
        manifest = {**manifest, "name": name, "pair": self.pair,
                    "created": datetime.now(UTC).isoformat(timespec="seconds")}

        def write(staging: str) -> None:
            self.lake.mkdirs(staging)
            self.lake.write_text(f"{staging}/manifest.json", json.dumps(manifest, indent=1))

        return self.save(name, write)
