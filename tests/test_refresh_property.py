"""A refresh after any sequence of file operations leaves the lake a `--full` refresh of the
sources as they are now would leave (issue 22): seeded random sequences of adds, rewrites,
renames, drops and touches over two corpora of real Anki zh-en pairs, drawn from a small pool
so that duplicates across files and corpora are common, each refresh run in this process.

With `missing_files: drop` the lake is compared with a fresh lake refreshed once from the
final sources; with `keep` (a gone file's rows stay) with the same lake after `--full`. Equal
means every row (row_id, corpus, file, line) with the same outcome, rule and `dup_of`, and no
duplicate's `dup_of` pointing anywhere but at a clean row of the lake with the same text.
With near_dup on (issue 40), the pool holds near copies of its longer pairs too, and each
near-duplicate's `dup_of` must be a clean row and its Jaccard the same as a full refresh's.
"""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from conftest import REPO

from jobs.lake.store import Lake
from jobs.refreshing.config import load_refresh_config
from jobs.refreshing.job import refresh

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

COLUMNS = ["row_id", "corpus", "file", "line", "outcome", "reject_rule", "dup_of", "src", "tgt"]
NEAR = "near_dup: {enabled: true, side: tgt, threshold: 0.5}\n"  # as test_near_dup.py
CORPORA = ("crawl", "news")
LAKES = itertools.count()  # a database each: the tests share one metastore


class Sources:
    """Source files on disk, changed by seeded random operations."""

    def __init__(self, root: Path, pool: list[str], rng: random.Random) -> None:
        self.root, self.pool, self.rng = root, pool, rng
        for corpus in CORPORA:
            (root / corpus).mkdir(parents=True, exist_ok=True)
        self.made = 0
        self.clock = 1_700_000_000  # every write gets a later modification time

    def files(self) -> list[Path]:
        return sorted(p for c in CORPORA for p in (self.root / c).glob("*.tsv"))

    def write(self, path: Path, lines: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        self.touch(path)

    def touch(self, path: Path) -> None:
        self.clock += 10
        os.utime(path, (self.clock, self.clock))

    def draw(self) -> list[str]:
        return [self.rng.choice(self.pool) for _ in range(self.rng.randint(8, 20))]

    def add(self) -> str:
        self.made += 1
        path = self.root / self.rng.choice(CORPORA) / f"f{self.made:02d}.tsv"
        self.write(path, self.draw())
        return f"add {path.parent.name}/{path.name}"

    def step(self) -> str:
        files = self.files()
        op = self.rng.choice(["add", "add", "rewrite", "edit", "edit", "rename", "rename",
                              "drop", "touch"])
        if op == "add" or len(files) < 2:
            return self.add()
        path = self.rng.choice(files)
        name = f"{path.parent.name}/{path.name}"
        if op == "rewrite":
            self.write(path, self.draw())
        elif op == "edit":  # its first lines replaced: same line numbers, other pairs
            lines = path.read_text(encoding="utf-8").splitlines()
            k = self.rng.randint(1, len(lines))
            self.write(path, self.draw()[:k] + lines[k:])
        elif op == "rename":
            self.made += 1
            target = self.root / self.rng.choice(CORPORA) / f"f{self.made:02d}.tsv"
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
            name += f" -> {target.parent.name}/{target.name}"
        elif op == "drop":
            path.unlink()
        else:
            self.touch(path)
        return f"{op} {name}"


def config(tmp: Path, sources: Path, name: str, missing: str, near: bool = False) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"extends: {REPO}/conf/zh-en.yaml\n"
        f"lake: {{root: {tmp / name}, database: prop_{name}_{next(LAKES)}}}\n"
        f"refresh: {{missing_files: {missing}}}\n" + (NEAR if near else "") +
        "sources:\n" + "".join(
            f"  - {{corpus: {c}, path: {sources / c}, format: tsv}}\n" for c in CORPORA),
        encoding="utf-8")
    return path


def run_refresh(spark, path: Path, run: str, full: bool = False) -> None:
    cfg = load_refresh_config(str(path))
    lake = Lake(spark, cfg.lake.root, cfg.lake.database)
    assert refresh(spark, lake, cfg, run, full) == 0


def rows(lake: Path, near: bool = False) -> dict[int, tuple]:
    data = ds.dataset(lake / "tables" / "bitext", format="parquet", partitioning="hive")
    columns = COLUMNS + ["near_dup_jaccard"] * near
    found = data.to_table(columns=columns).to_pylist()
    by_id = {r["row_id"]: tuple(r[c] for c in columns) for r in found}
    assert len(by_id) == len(found), "a row is stored twice"
    return by_id


def check_survivors(lake: dict[int, tuple]) -> None:
    """Each duplicate points at a row of the lake holding the same pair: a clean one, or
    (with near_dup on) a near-duplicate of a clean one, as exact dedup's survivor can be."""
    for row_id, (_, _, _, _, _, rule, dup_of, src, tgt, *_) in lake.items():
        if rule == "near_dup":
            assert lake[dup_of][4] == "clean", f"{row_id}: near_dup of {lake[dup_of]}"
        if rule == "duplicate":
            survivor = lake.get(dup_of)
            assert survivor is not None, f"{row_id}: dup_of {dup_of} is no row of the lake"
            assert survivor[4] == "clean" or survivor[5] == "near_dup", \
                f"{row_id}: dup_of {dup_of} is {survivor[5]}"
            assert survivor[7].lower() == src.lower() or survivor[8].lower() == tgt.lower()


def source_lines(sources: Sources) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in sources.files())


def near_copies(pool: list[str]) -> list[str]:
    """The pool's longer pairs again with what a crawl changes in the English: a word and a
    year more (Jaccard about 0.5 to 0.7 to the original's word 3-grams)."""
    pairs = [line.split("\t") for line in pool]
    return [f"{zh}\t{en.rstrip('.!?')} again, 2024!" for zh, en in pairs if len(en.split()) >= 6]


@pytest.mark.parametrize("seed,missing,near", [(1, "drop", False), (4, "keep", False),
                                               (2, "drop", True)])
def test_a_refresh_after_any_file_operations_equals_a_full_one(
        spark, tmp_path: Path, anki_pool: list[str], seed: int, missing: str,
        near: bool) -> None:
    pool = anki_pool + near_copies(anki_pool) * near
    sources = Sources(tmp_path / "src", pool, random.Random(seed))
    lake_cfg = config(tmp_path, sources.root, "lake", missing, near)
    history = [sources.add() for _ in range(4)]
    run_refresh(spark, lake_cfg, f"s{seed}-0")
    for step in range(1, 5):  # two operations between refreshes
        history += [sources.step(), sources.step()]
        run_refresh(spark, lake_cfg, f"s{seed}-{step}")
    got = rows(tmp_path / "lake", near)
    check_survivors(got)
    if near:  # the near copies met their originals
        assert sum(r[5] == "near_dup" for r in got.values()) >= 3, history
    if missing == "drop":
        assert len(got) == source_lines(sources), history
        fresh = config(tmp_path, sources.root, "fresh", missing, near)
        run_refresh(spark, fresh, f"s{seed}-fresh")
        want = rows(tmp_path / "fresh", near)
    else:
        run_refresh(spark, lake_cfg, f"s{seed}-full", full=True)
        want = rows(tmp_path / "lake", near)
    assert got == want, history


def test_the_issue_sequence_loses_no_clean_pair(spark, tmp_path: Path,
                                                anki_pool: list[str]) -> None:
    """The issue's reproduction: y.tsv repeats a.tsv's first lines; a.tsv's first lines are
    rewritten; y's pairs must come back clean (they were `duplicate` of a.tsv's rows)."""
    sources = Sources(tmp_path / "src", anki_pool, random.Random(0))
    a = sources.root / "crawl" / "a.tsv"
    sources.write(a, anki_pool[:40])
    lake_cfg = config(tmp_path, sources.root, "lake", "keep")
    run_refresh(spark, lake_cfg, "i-1")
    first = {(r[7], r[8]) for r in rows(tmp_path / "lake").values() if r[3] <= 10
             and r[4] == "clean"}
    assert len(first) >= 8
    sources.write(sources.root / "crawl" / "y.tsv", anki_pool[:10])
    run_refresh(spark, lake_cfg, "i-2")
    ys = [r for r in rows(tmp_path / "lake").values() if r[2].endswith("y.tsv")]
    assert {r[5] for r in ys if (r[7], r[8]) in first} == {"duplicate"}
    sources.write(a, anki_pool[40:50] + anki_pool[10:40])
    run_refresh(spark, lake_cfg, "i-3")
    lake = rows(tmp_path / "lake")
    check_survivors(lake)
    assert first <= {(r[7], r[8]) for r in lake.values() if r[4] == "clean"}
    ys = [r for r in lake.values() if r[2].endswith("y.tsv") and (r[7], r[8]) in first]
    assert {r[4] for r in ys} == {"clean"}  # carried: re-decided with the refresh


def test_monolingual_duplicates_come_back_when_their_survivor_is_rewritten(
        spark, tmp_path: Path, anki_pool: list[str]) -> None:
    """The same for monolingual text (the `mono` table, score columns by their monolingual
    names): y.txt repeats a.txt's first sentences, a.txt is rewritten, y's come back clean."""
    english = [line.split("\t")[1] for line in anki_pool]
    sources = Sources(tmp_path / "src", anki_pool, random.Random(0))
    a = sources.root / "crawl" / "a.txt"
    sources.write(a, english[:30])
    path = tmp_path / "mono.yaml"
    path.write_text(f"lang: en\nlake: {{root: {tmp_path / 'mono'}, database: prop_mono_"
                    f"{next(LAKES)}}}\nsources:\n  - {{corpus: crawl, path: {a.parent}, "
                    "format: text}\n", encoding="utf-8")
    run_refresh(spark, path, "m-1")
    sources.write(a.parent / "y.txt", english[:10])
    run_refresh(spark, path, "m-2")
    sources.write(a, english[40:50] + english[10:30])
    run_refresh(spark, path, "m-3")
    table = ds.dataset(tmp_path / "mono" / "tables" / "mono", partitioning="hive").to_table(
        columns=["row_id", "file", "text", "outcome", "reject_rule", "dup_of"]).to_pylist()
    by_id = {r["row_id"]: r for r in table}
    assert len(by_id) == 10 + 30
    ys = [r for r in table if r["file"].endswith("y.txt")]
    assert sum(r["outcome"] == "clean" for r in ys) >= 8  # they were all `duplicate`
    for r in table:
        if r["reject_rule"] == "duplicate":
            assert by_id[r["dup_of"]]["outcome"] == "clean"
