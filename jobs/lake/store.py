"""The lake: Parquet tables in the Spark SQL catalog whose files live under `<root>/tables/`.

Each table is a directory `<root>/tables/<table>/`, each partition a fixed directory under it
(`pair=zh-en/corpus=news`, values escaped as Spark escapes them), registered in the catalog at
that location. So the catalog and any Parquet reader pointed at a table's directory (pyarrow,
duckdb, polars, pandas) see the same, committed rows and nothing else.

A run writes under `<root>/runs/<run_id>/`, where no table points. Its commit publishes
units: a unit is one staged directory that replaces one partition directory (or, for the
`bitext`/`mono` tables, one (pair, corpus) directory holding both outcomes, so that clean and
rejected rows change together). Commit:
1. write a marker `_sluice_run` (the commit id) into every staged unit, then a journal
   `<root>/journal/<commit id>.json` listing the units;
2. per unit, in the order given: register its partitions in the catalog (fixed locations),
   then swap the staged directory with the published one in one step —
   `renameat2(RENAME_EXCHANGE)` on a local lake, so a reader sees all old or all new files;
   on HDFS the old directory is renamed away and the new one into place, a short gap (the
   unit reads empty) but never a mix; on S3A a rename copies file by file, so no guarantee;
3. move what was swapped out to `<root>/trash/`; delete the journal; empty the trash.
Units are published one after another, not all at once: while a journal is there (a commit
in flight, or killed and waiting for the next job) the units it lists may be part old, part
new, each unit whole (`Lake.in_flight`). A unit whose published marker already names the
commit is done, so re-applying a journal is harmless: a job killed during its commit is
rolled forward by the next job (`recover`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import StructType

from jobs.kit.config import check_name, check_run_id  # noqa: F401 - re-exported
from jobs.kit.progress import log
from jobs.lake.beside import Beside
from jobs.lake.lock import CommitLock, RemoteLock, run_alive, wait_for
from jobs.lake.rereading import read_through_commits
from jobs.lake.session import lake_uri
from udfs.paths import is_local_path, local_path

MARKER = "_sluice_run"
COMMIT_WAIT_S = 600  # the longest a commit waits for another job's to finish
# A remote lake's commit lock: rewritten this often, taken over when not rewritten for this long.
COMMIT_HEARTBEAT_S, COMMIT_STALE_S = 5.0, 60.0


@dataclass(frozen=True)
class Flip:
    """Publish the staged directory `location` as `table`'s `partition` directory. `inner`
    lists the partitions below it (e.g. each `outcome`) that it holds, for the catalog."""

    table: str
    partition: dict[str, str]
    location: str
    inner: list[dict[str, str]] = field(default_factory=list)


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_spec(partition: dict[str, str]) -> str:
    return ", ".join(f"`{k}` = {sql_string(v)}" for k, v in partition.items())


class Lake:
    def __init__(self, spark: SparkSession, root: str, database: str,
                 open_catalog: bool = True) -> None:
        """`open_catalog=False`: the caller opens it, now or beside its own work
        (`open_beside`)."""
        self.spark = spark
        self.root = lake_uri(root)
        self.database = database
        jvm = spark.sparkContext._jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._hconf = spark.sparkContext._jsc.hadoopConfiguration()
        self._escape = jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
        self.torn: list[str] = []  # runs whose journals recover() quarantined
        self._exclusive_depth = 0  # commit() inside recover() takes the lock once
        self._beside = Beside()
        if open_catalog:
            self.open_catalog()

    def open_catalog(self) -> None:
        # Every catalog write of a job holds the commit lock: a shared metastore made by
        # scripts/metastore.sh has no unique constraints (DataNucleus cannot add them to
        # PostgreSQL), so two jobs adding the same database or partition at once would leave
        # it twice in the catalog.
        with self.exclusive("database"):
            self.spark.sql(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")

    # -- work beside the job's own (jobs/lake/beside.py) --------------------------------------
    def open_beside(self, then: Callable[[], None]) -> None:
        """Open the catalog, then run `then`, in a thread beside the caller's work, from the
        lake's first use on (`when_ready`, `ready`): the job's first Spark work (numbering its
        input, a cold JVM's slowest query) has the cores to itself. Every catalog call of this
        lake waits for both (`ready`)."""
        self._beside.hold(lambda: (self.open_catalog(), then()))

    def when_ready(self, work: Callable[[], None]) -> None:
        """Run `work` beside, queued behind the opening, on a lake opened `beside` (even when
        the opening is done: a run's registration is seconds of catalog work that the job's
        first rows need not wait for); now on any other lake."""
        if self._beside.used():
            self._beside.submit(work)
        else:
            work()

    def ready(self) -> None:
        """Wait for the work beside; its error, if it failed, is raised here (each time)."""
        if (error := self._beside.failure()) is not None:
            raise error

    def check(self) -> None:
        """Raise the error of the work beside if it has already failed (a run id that has
        committed): a job checks between its steps rather than find out at its commit."""
        if (error := self._beside.failed_so_far()) is not None:
            raise error

    def failure(self) -> BaseException | None:
        """The error of the work beside, once it is done; None if it succeeded."""
        return self._beside.failure()

    # -- paths ---------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> str:
        return f"{self.root}/runs/{check_run_id(run_id)}"

    def table_dir(self, table: str) -> str:
        return f"{self.root}/tables/{table}"

    def partition_path(self, partition: dict[str, str]) -> str:
        """`k=v/k2=v2` with values escaped exactly as Spark's writer escapes them (`wmt#21` ->
        `wmt%2321`), so the commit finds what `partitionBy` wrote."""
        return "/".join(
            f"{self._escape.escapePathName(k)}={self._escape.escapePathName(v)}"
            for k, v in partition.items()
        )

    def qualified(self, table: str) -> str:
        self.ready()  # a name of the catalog: it must be open to be used
        return f"`{self.database}`.`{table}`"

    def _fs(self, path: str):
        return self._Path(path).getFileSystem(self._hconf)

    def exists(self, path: str) -> bool:
        return self._fs(path).exists(self._Path(path))

    def delete(self, path: str) -> None:
        self._fs(path).delete(self._Path(path), True)

    def mkdirs(self, path: str) -> None:
        self._fs(path).mkdirs(self._Path(path))

    def rename(self, src: str, dst: str) -> None:
        self.mkdirs(dst.rsplit("/", 1)[0])
        if not self._fs(src).rename(self._Path(src), self._Path(dst)):
            raise OSError(f"could not rename {src} to {dst}")

    def put(self, local: str, path: str) -> None:
        """Copy a local file (a model trained on the driver) to `path` in the lake."""
        self._fs(path).copyFromLocalFile(False, True, self._Path(local), self._Path(path))

    def write_text(self, path: str, text: str) -> None:
        out = self._fs(path).create(self._Path(path), True)
        out.write(bytearray(text.encode()))
        out.close()

    def read_text(self, path: str) -> str | None:
        if not self.exists(path):
            return None
        stream = self._fs(path).open(self._Path(path))
        reader = self.spark.sparkContext._jvm.java.io.BufferedReader(
            self.spark.sparkContext._jvm.java.io.InputStreamReader(stream, "UTF-8")
        )
        lines = []
        while (line := reader.readLine()) is not None:
            lines.append(line)
        reader.close()
        return "\n".join(lines)

    def list_dir(self, path: str) -> list[str]:
        return list(self.list_modified(path))

    def list_modified(self, path: str) -> dict[str, float]:
        """What `path` holds -> when each was last modified (seconds since the epoch), read
        in one listing."""
        if not self.exists(path):
            return {}
        return {s.getPath().toString(): s.getModificationTime() / 1000
                for s in self._fs(path).listStatus(self._Path(path))}

    # -- tables --------------------------------------------------------------------------
    def ensure_table(self, table: str, schema: StructType, partition_cols: list[str]) -> None:
        """Create the table if missing; add columns a newer version of the job produces.
        Under the commit lock: two jobs on a shared metastore would both find it missing."""
        self.ready()
        with self.exclusive(f"schema of {table}"):
            self._ensure_table(table, schema, partition_cols)

    def _ensure_table(self, table: str, schema: StructType, partition_cols: list[str]) -> None:
        name = self.qualified(table)
        data_cols = [f for f in schema.fields if f.name not in partition_cols]
        part_cols = [schema[c] for c in partition_cols]
        if not self.spark.catalog.tableExists(f"{self.database}.{table}"):
            self.mkdirs(self.table_dir(table))
            cols = ", ".join(
                f"`{f.name}` {f.dataType.simpleString()}" for f in data_cols + part_cols
            )
            self.spark.sql(
                f"CREATE TABLE {name} ({cols}) USING parquet "
                f"PARTITIONED BY ({', '.join(partition_cols)}) "
                f"LOCATION {sql_string(self.table_dir(table))}"
            )
            return
        existing = {f.name: f.dataType for f in self.spark.table(name).schema.fields}
        for column in data_cols:
            if column.name not in existing:
                typed = f"`{column.name}` {column.dataType.simpleString()}"
                self.spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({typed})")
            elif existing[column.name] != column.dataType:
                raise RuntimeError(
                    f"{name}.{column.name} is {existing[column.name].simpleString()} in the "
                    f"lake but the job writes {column.dataType.simpleString()}: migrate it first"
                )

    def ensure_view(self, view: str, table: str, columns: list[str], where: str) -> None:
        """A view over part of a table (e.g. `bitext_clean`: the clean rows of `bitext`),
        written only when it is missing or its query changed (a column added): reading the
        definition costs a third of replacing it (0.05 s against 0.16 on the embedded
        metastore), and every run asks for its two views."""
        cols = ", ".join(f"`{c}`" for c in columns)
        query = f"SELECT {cols} FROM {self.qualified(table)} WHERE {where}"
        with self.exclusive(f"view {view}"):
            if self.view_query(view) != query:
                self.spark.sql(f"CREATE OR REPLACE VIEW {self.qualified(view)} AS {query}")

    def view_query(self, view: str) -> str | None:
        """The query a view of the lake was made with; None where there is no such view."""
        if not self.spark.catalog.tableExists(f"{self.database}.{view}"):
            return None
        described = self.spark.sql(f"DESCRIBE TABLE EXTENDED {self.qualified(view)}").collect()
        return next((r.data_type for r in described if r.col_name == "View Text"), None)

    def succeeded(self, run_id: str) -> bool:
        """Whether a run with this id has committed (its id is then taken for good)."""
        return self.committed_run(run_id) is not None

    def committed_run(self, run_id: str) -> Row | None:
        """The `runs` row of the committed run of this id, or None."""
        self.ready()
        if not self.spark.catalog.tableExists(f"{self.database}.runs"):
            return None
        self.spark.catalog.refreshTable(f"{self.database}.runs")
        found = self.spark.table(self.qualified("runs")).where(
            f"run_id = {sql_string(run_id)} AND status = 'succeeded'"
        ).limit(1).collect()
        return found[0] if found else None

    # -- commit --------------------------------------------------------------------------
    @contextmanager
    def exclusive(self, run_id: str) -> Iterator[None]:
        """Hold the lake's commit lock: commits and roll-forwards of jobs sharing the lake
        (on a shared metastore) apply one after another, each whole, and no job rolls forward
        a journal whose owner is still applying it (jobs/lake/lock.py CommitLock)."""
        if self._exclusive_depth:
            self._exclusive_depth += 1
            try:
                yield
            finally:
                self._exclusive_depth -= 1
            return
        lock: CommitLock | RemoteLock
        if is_local_path(self.root):
            lock = CommitLock(self.root)
            lock.wait(run_id, COMMIT_WAIT_S)
        else:
            lock = RemoteLock(self, COMMIT_HEARTBEAT_S, COMMIT_STALE_S, name="commit")
            wait_for(lambda: lock.acquire(run_id), lock.path, COMMIT_WAIT_S, poll_s=1.0)
        self._exclusive_depth = 1
        try:
            yield
        finally:
            self._exclusive_depth = 0
            lock.release()

    def commit(self, run_id: str, flips: list[Flip]) -> None:
        self.ready()
        with self.exclusive(run_id):
            self._commit(run_id, flips)

    def _commit(self, run_id: str, flips: list[Flip]) -> None:
        # A journal found here, with the lock ours, is a job's that died mid-commit since we
        # opened the lake: it committed first, so it is applied first, or its roll-forward
        # by a later job would put its older rows over ours.
        for dead in self._recover():
            log(f"rolled forward the interrupted commit of run {dead}")
        for flip in flips:
            if self.exists(flip.location):  # a flip already applied has no staged dir left
                self.write_text(f"{flip.location}/{MARKER}", run_id)
        journal = self.journal_path(run_id)
        self.write_text(journal, json.dumps([asdict(f) for f in flips]))
        self._hook("journal written")
        self._apply(run_id, flips)
        self.delete(journal)
        self._hook("journal deleted")
        self.empty_trash()

    def journal_path(self, run_id: str) -> str:
        return f"{self.root}/journal/{run_id}.json"

    def in_flight(self) -> list[str]:
        """Commit ids whose journals are there: commits under way, or killed and waiting for
        the next job to roll them forward. Until then the units a journal lists may be part
        old, part new (each unit whole); the rest of the lake is settled."""
        return sorted(p.rsplit("/", 1)[-1].removesuffix(".json")
                      for p in self.list_dir(f"{self.root}/journal") if p.endswith(".json"))

    def committing(self, run_id: str) -> bool:
        """Whether the commit of `run_id` got past writing its journal: it is then in flight
        (the next job rolls it forward) or done, and must not be recorded as failed."""
        return self.exists(self.journal_path(run_id)) or self.succeeded(run_id)

    def recover(self) -> list[str]:
        """Roll forward commits a killed run left half-done; a journal that cannot be read
        (torn by a crash while written: then no unit was published yet) is quarantined and
        its run marked failed. Returns the run ids rolled forward. Under the commit lock: a
        journal still there once it is ours belongs to a job that died."""
        self.ready()
        with self.exclusive("recover"):
            return self._recover()

    def _recover(self) -> list[str]:
        recovered = []
        for path in sorted(self.list_dir(f"{self.root}/journal")):
            if not path.endswith(".json"):
                continue
            run_id = path.rsplit("/", 1)[-1].removesuffix(".json")
            try:
                flips = [Flip(**f) for f in json.loads(self.read_text(path) or "")]
            except (ValueError, TypeError) as err:
                quarantine = f"{self.root}/journal-quarantine/{run_id}-{uuid.uuid4().hex[:8]}.json"
                self.rename(path, quarantine)
                log(f"warning: the commit journal of run {run_id} is unreadable ({err}); "
                    f"moved to {quarantine}, the run is marked failed")
                self.torn.append(run_id)
                continue
            self._apply(run_id, flips)
            self.delete(path)
            recovered.append(run_id)
        self.empty_trash()
        return recovered

    def _apply(self, run_id: str, flips: list[Flip]) -> None:
        for flip in flips:
            self._register(flip)
            self._hook(f"registered {flip.table}")
            target = f"{self.table_dir(flip.table)}/{self.partition_path(flip.partition)}"
            published = self.read_text(f"{target}/{MARKER}") == run_id
            if not published and self.exists(flip.location):
                self._publish(flip.location, target)
                self._hook(f"published {flip.table}")
            if self.exists(flip.location):  # what the swap moved out: superseded data
                self.rename(flip.location, f"{self.root}/trash/{uuid.uuid4().hex}")
            self.spark.catalog.refreshTable(f"{self.database}.{flip.table}")

    def _register(self, flip: Flip) -> None:
        """Add the unit's partitions to the catalog at their fixed locations (once), in one
        statement: one metastore call for the unit, not one per inner partition (~0.2 s
        each on the embedded metastore, a round trip each on a shared one)."""
        base = f"{self.table_dir(flip.table)}/{self.partition_path(flip.partition)}"
        parts = []
        for inner in flip.inner or [{}]:
            spec = partition_spec({**flip.partition, **inner})
            location = f"{base}/{self.partition_path(inner)}" if inner else base
            parts.append(f"PARTITION ({spec}) LOCATION {sql_string(location)}")
        self.spark.sql(f"ALTER TABLE {self.qualified(flip.table)} ADD IF NOT EXISTS "
                       + " ".join(parts))

    def _publish(self, staged: str, target: str) -> None:
        """Put `staged` at `target`; whatever was at `target` ends up at `staged`."""
        local = is_local_path(target) and self.exists(target)
        if local and exchange(local_path(staged), local_path(target)):
            return
        if self.exists(target):
            self.rename(target, f"{self.root}/trash/{uuid.uuid4().hex}")
            self._hook("old moved away")
        self.rename(staged, target)

    def empty_trash(self) -> None:
        self.delete(f"{self.root}/trash")

    def _hook(self, step: str) -> None:
        """A named point of the commit. Kill tests stop the process here: in-process by
        replacing this method, a real job by SLUICE_KILL_AT=<step> (SIGKILL, as a crash)."""
        if os.environ.get("SLUICE_KILL_AT") == step:
            os.kill(os.getpid(), signal.SIGKILL)


def exchange(a: str, b: str) -> bool:
    """Swap two local paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the
    kernel or file system cannot, so the caller falls back to two renames."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    done = renameat2(at_fdcwd, a.encode(), at_fdcwd, b.encode(), rename_exchange)
    return done == 0


def write_staged(df: DataFrame, path: str, partition_cols: list[str]) -> None:
    """Write a run's data where no table points yet (overwrite: a retried run starts clean)."""
    df.write.mode("overwrite").partitionBy(*partition_cols).parquet(path)


def gc(lake: Lake) -> list[str]:
    """Remove what no table points at: the trash, and staged data of runs that are not
    running (failed, killed, or committed: a committed run's units were moved into the
    tables). A run whose job holds its lease is running even before its `running` row is in
    (the filter job registers beside its staging). Returns what was removed."""
    removed = []
    live = set()
    if lake.spark.catalog.tableExists(f"{lake.database}.runs"):
        lake.spark.catalog.refreshTable(f"{lake.database}.runs")
        rows = read_through_commits(lake, lambda: lake.spark.table(lake.qualified("runs")).where(
            "status = 'running'").collect())  # another job may be flipping its run's row
        live = {r.run_id for r in rows}
    # A journal pending (`<run>`, `<run>-running`, ...) still needs its run's staged units.
    commits = lake.in_flight()
    pending = {*commits, *(re.sub(r"-(running|failed)$", "", c) for c in commits)}
    for path in lake.list_dir(f"{lake.root}/runs"):
        run_id = path.rstrip("/").rsplit("/", 1)[-1]
        if run_id not in live and run_id not in pending and not run_alive(lake.root, run_id):
            lake.delete(path)
            removed.append(path)
    if lake.exists(f"{lake.root}/trash"):
        removed.append(f"{lake.root}/trash")
        lake.empty_trash()
    return removed
