"""Incremental refreshes through the real `spark-submit jobs/refresh.py`, on real text
(Anki/Tatoeba zh-en), one lake taken through a refresh's life:

1. two sources (a crawl TSV, a Moses release) -> both filtered; a second refresh started
   meanwhile is refused (exit 75, names the holder);
2. nothing new -> "up to date", before Spark starts;
3. a new dump repeating committed pairs, killed in the middle of its commit (SIGKILL) ->
   readers see the old or the new rows of each corpus, never a mix; the next refresh rolls
   it forward; only the new file was filtered; its repeats are `duplicate` of the committed
   rows (`dup_of`); nothing else was rewritten (same Parquet files, same inodes);
4. the dump changes (and another file is only touched), killed before its commit -> nothing
   visible; rerun -> only that file's rows replaced;
5. a filter setting changes and the release disappears (`missing_files: drop`) -> every
   file reprocessed, the release's rows gone.
A second lake takes steps 1 and 3 without kills: its tables equal the killed lake's.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from integration_helpers import BIN, REPO, alongside, query_lake, spark_env, spark_submit

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

ROWS = ["row_id", "corpus", "file", "line", "outcome", "reject_rule", "dup_of", "src", "tgt"]


def refresh(config: Path, *args: str, env: dict | None = None, cold: bool = False
            ) -> subprocess.CompletedProcess:
    """The refresh job: in the warm driver (spark_submit), or a spark-submit of its own for an
    environment of its own or when it must run beside another job (`cold`)."""
    if env is None and not cold:
        return spark_submit("--config", str(config), *args, job="refresh")
    cmd = [str(BIN / "spark-submit"), "--master", "local[2]", str(REPO / "jobs/refresh.py"),
           "--config", str(config), *args]
    return subprocess.run(cmd, cwd=REPO, env=env or spark_env(), capture_output=True,
                          text=True, timeout=900)


def ok(done: subprocess.CompletedProcess) -> str:
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    return out


def table(lake: Path, name: str, columns: list[str] | None = None) -> list[dict]:
    path = lake / "tables" / name
    if not path.exists():
        return []
    data = ds.dataset(path, format="parquet", partitioning="hive")
    return data.to_table(columns=columns).to_pylist()


def bitext(lake: Path) -> dict[int, tuple]:
    return {r["row_id"]: tuple(r[c] for c in ROWS) for r in table(lake, "bitext", ROWS)}


def manifest(lake: Path) -> dict[str, dict]:
    return {Path(r["path"]).name: r for r in table(lake, "input_files")}


def inodes(lake: Path, corpus: str) -> dict[str, int]:
    unit = lake / "tables" / "bitext" / "pair=zh-en" / f"corpus={corpus}"
    return {str(p.relative_to(unit)): p.stat().st_ino for p in unit.rglob("*.parquet")}


def stats(lake: Path, run_id: str) -> Counter:
    """Rows read per corpus by one run (its filter_stats)."""
    rows = table(lake, "filter_stats")
    seen = {(r["corpus"], r["rows_in"]) for r in rows if r["run_id"] == run_id and r["step"] == 1}
    return Counter(dict(seen))


def run_ids(lake: Path, job: str = "refresh") -> list[str]:
    return sorted(r["run_id"] for r in table(lake, "runs") if r["job"] == job
                  and r["status"] == "succeeded")


@pytest.fixture(scope="module")
def text(data_dir: Path) -> dict[str, list[str]]:
    with gzip.open(data_dir / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        anki = ["\t".join(line.rstrip("\n").split("\t")[:2]) for line in f]
    zh = (data_dir / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()
    en = (data_dir / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()
    return {"anki": anki, "zh": zh, "en": en}


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def write_crawl(path: Path, lines: list[str], site: str) -> None:
    """Pairs as a crawl's TSV has them, `url1 url2 src tgt` (the source's `columns:`)."""
    write(path, [f"https://zh.{site}/p/{i}\thttps://www.{site}/en/p/{i}\t{line}"
                 for i, line in enumerate(lines)])


def config(root: Path, sources: Path, name: str) -> Path:
    path = root / f"{name}.yaml"
    path.write_text(
        f"extends: {REPO}/conf/zh-en.yaml\n"
        f"lake: {{root: {root / name}}}\n"
        "sources:\n"
        f"  - {{corpus: 'crawl:web', path: {sources}/crawl, format: tsv, "
        "columns: [src_url, tgt_url, src, tgt]}\n"
        f"  - {{corpus: wmt, path: {sources}/wmt, format: moses}}\n",
        encoding="utf-8")
    return path


def wait_for_lock(lake: Path, process: subprocess.Popen, timeout: float = 120) -> None:
    lock = lake / "locks" / "refresh.lock"
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        if lock.exists() and lock.stat().st_size > 0:
            return
        time.sleep(0.2)
    raise AssertionError("the first refresh never took the lake lock")


def test_a_refresh_life(tmp_path: Path, text: dict[str, list[str]]) -> None:
    sources = tmp_path / "sources"
    anki = text["anki"]
    write_crawl(sources / "crawl" / "a.tsv", anki[:600], "site-a.com")
    write(sources / "wmt" / "rel.zh", text["zh"][:400])
    write(sources / "wmt" / "rel.en", text["en"][:400])
    killed, plain = config(tmp_path, sources, "lake"), config(tmp_path, sources, "reference")
    lake, reference = tmp_path / "lake", tmp_path / "reference"

    # 1. First refresh; a second one started while it holds the lock is refused.
    first = subprocess.Popen(
        [str(BIN / "spark-submit"), "--master", "local[2]", str(REPO / "jobs/refresh.py"),
         "--config", str(killed)], cwd=REPO, env=spark_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)

    def refused() -> subprocess.CompletedProcess:
        wait_for_lock(lake, first)
        return refresh(killed, cold=True)  # at once, while `first` holds the lake

    _, second = alongside(lambda: ok(refresh(plain)), refused)
    out, _ = first.communicate(timeout=900)
    assert first.returncode == 0, out[-4000:]
    assert second.returncode == 75, second.stdout + second.stderr
    assert "the lake is being refreshed by run" in second.stdout + second.stderr
    [r1] = run_ids(lake)
    assert stats(lake, r1) == Counter({"crawl:web": 600, "wmt": 400})
    files = manifest(lake)
    assert {n: (f["status"], f["rows"], f["run_id"]) for n, f in files.items()} == {
        "a.tsv": ("done", 600, r1), "rel.zh": ("done", 400, r1)}
    assert files["rel.zh"]["path_tgt"].endswith("rel.en")
    rows = bitext(lake)
    assert Counter((r[1], r[4]) for r in rows.values())[("crawl:web", "clean")] > 500
    assert len(rows) == 1000

    # 2. Nothing new: answered from the manifest's files, before Spark starts.
    quiet = ok(refresh(killed))
    assert "up to date: 2 source files of zh-en" in quiet and "starting Spark" not in quiet

    # 3. A new dump: 300 new pairs, 40 pairs of a.tsv again, 10 of its own lines twice.
    clean_a = [r for r in rows.values() if r[2].endswith("a.tsv") and r[4] == "clean"]
    repeats = {r[3]: r[0] for r in sorted(clean_a, key=lambda r: r[3])[:40]}  # line -> id
    b_lines = anki[600:900] + [anki[line - 1] for line in repeats] + anki[600:610]
    write_crawl(sources / "crawl" / "b.tsv", b_lines, "site-b.co.uk")
    before_a, before_wmt = inodes(lake, "crawl%3Aweb"), inodes(lake, "wmt")
    kill = dict(spark_env(), SLUICE_KILL_AT="published bitext")
    _, done = alongside(lambda: ok(refresh(plain)), lambda: refresh(killed, env=kill))
    assert done.returncode != 0
    now = bitext(lake)  # a fresh reader, before anything recovers
    in_crawl = sum(r[1] == "crawl:web" for r in now.values())
    assert in_crawl in (600, 600 + len(b_lines)), in_crawl  # all old or all new
    assert manifest(lake).keys() == {"a.tsv", "rel.zh"}  # not done until it all committed
    again = ok(refresh(killed))
    assert "rolled forward the interrupted commit" in again and "up to date" in again
    r3 = run_ids(lake)[-1]
    assert stats(lake, r3) == Counter({"crawl:web": len(b_lines)})  # only the new file
    # Its report: what was new, per file, and each duplicate with the row it duplicates (a.tsv's,
    # committed by the first refresh, or b.tsv's own).
    page = tmp_path / "r3.html"
    ok(spark_submit("--lake", str(lake), "--run-id", r3, "--out", str(page), job="report"))
    report = page.read_text(encoding="utf-8")
    assert f"Refresh run {r3}" in report and 'class="files"' in report
    assert "/b.tsv</td><td>new" in report  # the file, and why it was read
    assert "duplicate of crawl:web:" in report
    rows = bitext(lake)
    assert len(rows) == 1000 + len(b_lines)
    new = {r[3]: r for r in rows.values() if r[2].endswith("b.tsv")}
    for k, row_id in enumerate(repeats.values()):
        assert new[301 + k][5:7] == ("duplicate", row_id)  # the committed row survives
    for k in range(10):
        first_copy = new[1 + k]
        if first_copy[4] == "clean":
            assert new[341 + k][5:7] == ("duplicate", first_copy[0])
    kept_a = {k: v for k, v in inodes(lake, "crawl%3Aweb").items() if k in before_a}
    assert kept_a == before_a and inodes(lake, "wmt") == before_wmt  # nothing rewritten
    assert bitext(reference) == rows  # killed + rerun == uninterrupted
    strip = ("run_id", "updated_at", "modified_ms", "config_hash")
    assert ({n: {k: v for k, v in f.items() if k not in strip} for n, f in
             manifest(reference).items()} ==
            {n: {k: v for k, v in f.items() if k not in strip} for n, f in
             manifest(lake).items()})

    # 4. b.tsv changes (a.tsv is only touched), killed before its commit, then rerun.
    changed = b_lines[:200] + ["新的句子。\tA new sentence."]
    write_crawl(sources / "crawl" / "b.tsv", changed, "site-b.co.uk")
    os.utime(sources / "crawl" / "a.tsv")
    stopped = refresh(killed, env=dict(spark_env(), SLUICE_KILL_AT="units assembled"))
    assert stopped.returncode != 0
    assert bitext(lake) == rows  # nothing of it visible
    select = tmp_path / "select.yaml"  # chained: selection on the rows the refresh adds
    seed = REPO / "tests/data/select"
    select.write_text(f"pair: zh-en\nseed: {{name: medical, files: [{seed}/seed-medical.zh, "
                      f"{seed}/seed-medical.en]}}\nmethods: [fasttext_domain]\ntop: 10\n")
    ok(refresh(killed, "--set", f"refresh.select={select}"))
    r4 = run_ids(lake)[-1]
    chosen = table(lake, "selected", ["row_id", "selected"])
    new_clean = {r[0] for r in bitext(lake).values() if r[4] == "clean" and r[2].endswith("b.tsv")}
    assert {r["row_id"] for r in chosen} == new_clean  # exactly the refreshed file's rows
    assert sum(r["selected"] for r in chosen) == 10
    assert stats(lake, r4) == Counter({"crawl:web": len(changed)})
    rows = bitext(lake)
    per_file = Counter(Path(r[2]).name for r in rows.values())
    assert per_file == Counter({"a.tsv": 600, "rel.zh": 400, "b.tsv": len(changed)})
    files = manifest(lake)
    assert files["a.tsv"]["run_id"] == r1 and files["b.tsv"]["run_id"] == r4
    assert files["a.tsv"]["modified_ms"] == int((sources / "crawl" / "a.tsv").stat().st_mtime_ns
                                                // 1_000_000)

    # 5. Another filter setting, and the release gone with missing_files: drop.
    for name in ("rel.zh", "rel.en"):
        (sources / "wmt" / name).unlink()
    ok(refresh(killed, "--set", "rules.max_tokens=6", "--set", "refresh.missing_files=drop"))
    r5 = run_ids(lake)[-1]
    assert stats(lake, r5) == Counter({"crawl:web": 600 + len(changed)})
    rows = bitext(lake)
    assert {r[1] for r in rows.values()} == {"crawl:web"} and len(rows) == 600 + len(changed)
    assert Counter(r[5] for r in rows.values())["too_many_tokens"] > 50
    assert set(manifest(lake)) == {"a.tsv", "b.tsv"}

    # The catalog agrees with the files.
    got = query_lake(lake, {
        "clean": "SELECT count(*) FROM sluice.bitext_clean",
        "files": "SELECT count(*), sum(rows) FROM sluice.input_files WHERE status = 'done'",
        "runs": "SELECT run_id FROM sluice.runs WHERE job = 'refresh' AND status = 'running'",
        "hosts": "SELECT host, count(*), count(src_url), count(tgt_url) FROM sluice.bitext "
                 "GROUP BY host ORDER BY host",
    })
    # Every crawled pair has its URLs and website, through every refresh's re-decisions.
    assert got["hosts"] == [["site-a.com", 600, 600, 600],
                            ["site-b.co.uk", len(changed), len(changed), len(changed)]]
    assert got["clean"] == [[sum(r[4] == "clean" for r in rows.values())]]
    assert got["files"] == [[2, 600 + len(changed)]] and got["runs"] == []
    assert not list((lake / "runs").iterdir())  # no staged data left behind
