"""`filter.py --redecide RUN`: a run re-decided with new thresholds equals a full run with
them (clean and rejected rows, rules, dup_of), without recomputing a score; bad requests are
one line and exit 2. Jobs run as spark-submit runs them (the warm driver, docs/testing.md) on
the Tatoeba zh-en pairs plus constructed pairs."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from integration_helpers import query_lake, spark_submit

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

DATA = Path(__file__).resolve().parent / "data"
TATOEBA = [str(DATA / "tatoeba-zh-en.zh"), str(DATA / "tatoeba-zh-en.en")]
# Thresholds B against the defaults (A): punctuation loosened 0.3 -> 0.5 (re-admits rows),
# tokens tightened 120 -> 20 (rejects rows A kept).
LOOSER_TIGHTER = ("--set", "rules.max_punct_share=0.5", "--set", "rules.max_tokens=20")
WALK_ZH, WALK_EN = "我们明天去公园散步吧", "Let's go for a walk in the park tomorrow"
RUN_ZH = "他每天早上六点起床，然后去河边跑步一个小时。"
RUN_EN = "He gets up at six every morning and then runs along the river for an hour"
# Two duplicate pairs (same dedup key: punctuation and case ignored), by line:
CONSTRUCTED = [
    # 1: punct share 0.35: rejected by punct_share under A, kept under B ...
    f"{WALK_ZH}！！！！！\t{WALK_EN}" + "!" * 16,
    # 2: ... so this copy is clean under A and a duplicate of line 1 under B.
    f"{WALK_ZH}。\t{WALK_EN}.",
    # 3: 26 English tokens: clean under A, too_many_tokens under B ...
    f"{RUN_ZH}\t{RUN_EN}" + " -" * 10,
    # 4: ... so this copy, a duplicate of line 3 under A, survives under B.
    f"{RUN_ZH}\t{RUN_EN}.",
    "no tab on this line: rejected at ingest, whatever the thresholds",
]
ROWS = "SELECT corpus, line, row_id, reject_rule, dup_of, run_id FROM sluice.bitext"
# The constructed pairs as a crawl has them (`url1 url2 src tgt`, the input's `columns:`):
# their URLs and website survive the re-decide; the Moses pair's are null.
CRAWLED = [f"https://zh.walk.example.com.cn/{i}\thttp://www.walk.example.com.cn/en/{i}\t{line}"
           for i, line in enumerate(CONSTRUCTED[:-1], 1)] + CONSTRUCTED[-1:]
URLS = "SELECT corpus, line, src_url, tgt_url, host FROM sluice.bitext ORDER BY corpus, line"


def no_scoring_python(work: Path) -> Path:
    """A Python for Spark's workers in which the scoring libraries fail to import."""
    poison = work / "no-scoring"
    poison.mkdir()
    for module in ("fasttext", "rjieba", "opencc"):
        (poison / f"{module}.py").write_text(
            f"raise ImportError('{module} imported in a worker: the re-decide recomputed')\n")
    wrapper = work / "python-no-scoring"
    wrapper.write_text(f'#!/bin/sh\nexport PYTHONPATH="{poison}:$PYTHONPATH"\n'
                       f'exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def submit(*args: str) -> tuple[float, str]:
    started = time.monotonic()
    done = spark_submit(*args)
    assert done.returncode == 0, done.stderr[-4000:]
    return time.monotonic() - started, done.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("redecide")
    tsv = work / "constructed.tsv"
    tsv.write_text("\n".join(CRAWLED) + "\n", encoding="utf-8")
    lake, full_lake = work / "lake", work / "lake-full"

    def inputs(lake: Path, run_id: str, *sets: str) -> tuple[str, ...]:
        conf = work / f"{run_id}.yaml"
        conf.write_text(
            f"pair: zh-en\nlake: {{root: {lake}}}\ninputs:\n"
            f"  - {{corpus: constructed, paths: [{tsv}], "
            "columns: [src_url, tgt_url, src, tgt]}\n"
            f"  - {{corpus: tatoeba, paths: [{TATOEBA[0]}, {TATOEBA[1]}]}}\n")
        return ("--config", str(conf), "--run-id", run_id, *sets)

    full_a, out_a = submit(*inputs(lake, "a1"))
    # The re-decide's Python workers cannot import fastText, jieba or OpenCC: it must not
    # score (the side analysis runs them in Python workers), only compare stored scores.
    # B as a re-decide: one threshold from --config's own keys, the other from --set.
    looser = work / "looser.yaml"
    looser.write_text("rules: {max_punct_share: 0.5}\n")
    started = time.monotonic()
    done = spark_submit("--redecide", "a1", "--lake", str(lake), "--run-id", "b1", "--config",
                        str(looser), *LOOSER_TIGHTER[2:],
                        env={"PYSPARK_PYTHON": str(no_scoring_python(work))})
    redecide_s = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-4000:]
    full_b, _ = submit(*inputs(full_lake, "b-full", *LOOSER_TIGHTER))
    print(f"\nfull run A {full_a:.1f} s, full run B {full_b:.1f} s, re-decide A->B "
          f"{redecide_s:.1f} s: re-decide/full B = {redecide_s / full_b:.2f}")
    queries = {
        "rows": ROWS,
        "raw": "SELECT count(*) FROM sluice.bitext_raw",
        "runs": "SELECT run_id, job, status, inputs, config FROM sluice.runs ORDER BY run_id",
        "stats": "SELECT run_id, corpus, max(rows_in), sum(rows_rejected) FROM "
                 "sluice.filter_stats GROUP BY 1, 2 ORDER BY 1, 2",
        "clean_view": "SELECT count(*) FROM sluice.bitext_clean",
        "urls": URLS,
    }
    return dict(redecided=query_lake(lake, queries), full=query_lake(full_lake, {"rows": ROWS}),
                stdout=done.stdout, lake=lake, out_a=out_a)


def outcomes(rows: list[list]) -> dict[int, tuple]:
    """row_id -> (reject_rule, dup_of)."""
    return {row_id: (rule, dup_of) for _, _, row_id, rule, dup_of, _ in rows}


def test_redecide_equals_a_full_run_with_the_new_thresholds(runs) -> None:
    redecided, full = outcomes(runs["redecided"]["rows"]), outcomes(runs["full"]["rows"])
    assert len(redecided) == len(full) == 1500 + len(CONSTRUCTED)
    assert redecided == full
    rules = {rule for rule, _ in redecided.values()}
    assert {"too_many_tokens", "duplicate", "malformed_line", None} <= rules


def test_dedup_follows_the_new_decisions(runs) -> None:
    by_line = {line: (row_id, rule, dup_of) for corpus, line, row_id, rule, dup_of, _
               in runs["redecided"]["rows"] if corpus == "constructed"}
    (walk, *_), (walk_copy, *_) = by_line[1], by_line[2]
    (run_id, *_), (run_copy, *_) = by_line[3], by_line[4]
    # Under B: line 1 re-admitted, its copy now its duplicate; line 3 rejected, its copy kept.
    assert by_line[1][1:] == (None, None)
    assert by_line[2][1:] == ("duplicate", walk)
    assert by_line[3][1] == "too_many_tokens"
    assert by_line[4][1:] == (None, None)
    assert by_line[5][1] == "malformed_line"
    assert walk_copy != walk and run_copy != run_id


def test_the_crawl_urls_and_host_survive_the_redecide(runs) -> None:
    urls = runs["redecided"]["urls"]
    crawled = [row for row in urls if row[0] == "constructed"]
    assert [tuple(row[2:]) for row in crawled[:4]] == [
        (f"https://zh.walk.example.com.cn/{i}", f"http://www.walk.example.com.cn/en/{i}",
         "example.com.cn") for i in range(1, 5)]
    assert tuple(crawled[4][2:]) == (None, None, None)  # the malformed line: kept, no URL
    assert {tuple(row[2:]) for row in urls if row[0] == "tatoeba"} == {(None, None, None)}


def test_redecide_is_a_new_committed_run(runs) -> None:
    answers = runs["redecided"]
    assert {run for *_, run in answers["rows"]} == {"b1"}  # replaced a1's partitions
    assert answers["raw"] == [[1500 + len(CONSTRUCTED)]]  # raw rows untouched
    by_run = {run_id: (job, status, inputs) for run_id, job, status, inputs, _ in answers["runs"]}
    assert by_run["a1"][:2] == ("filter", "succeeded")
    assert by_run["b1"] == ("redecide", "succeeded", '[{"redecide_of": "a1"}]')
    config = next(c for run_id, *_, c in answers["runs"] if run_id == "b1")
    assert '"max_punct_share": 0.5' in config and '"max_tokens": 20' in config
    stats = {(run_id, corpus): (rows_in, rejected)
             for run_id, corpus, rows_in, rejected in answers["stats"]}
    for corpus in ("constructed", "tatoeba"):  # every input row of a1, once
        assert stats[("b1", corpus)][0] == stats[("a1", corpus)][0]
    clean = sum(rows_in - rejected for (run_id, _), (rows_in, rejected) in stats.items()
                if run_id == "b1")
    assert answers["clean_view"] == [[clean]]
    assert "re-deciding run a1" in runs["stdout"] and "kept" in runs["stdout"]


def error_line(done) -> str:
    said = done.stdout + done.stderr  # spark-submit merges the Python driver's stderr
    errors = [line for line in said.splitlines() if line.startswith("sluice: error:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in said, said[-3000:]
    return errors[0]


def test_a_bad_request_through_spark_submit_is_one_line_and_exit_2(runs) -> None:
    unknown = spark_submit("--redecide", "no-such-run", "--lake", str(runs["lake"]))
    assert "no-such-run" in error_line(unknown)  # the other bad requests: in-process, below


# -- the pair scorers, in this session's JVM (jobs.filtering.job.main, as
# tests/test_pair_scorers_job.py)
SCORED_DB = "redecide_scored"


@pytest.fixture(scope="module")
def aligned(spark, lake_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The constructed pairs and the Tatoeba pairs through the filter with word alignment
    (an aligner trained in the run on 400 of its clean pairs), run ra-1; its rows as stored."""
    from jobs.filtering.job import main

    work = tmp_path_factory.mktemp("redecide-aligned")
    tsv = work / "constructed.tsv"
    tsv.write_text("\n".join(CRAWLED) + "\n", encoding="utf-8")
    lake = lake_root / SCORED_DB
    conf = work / "job.yaml"
    conf.write_text(
        f"pair: zh-en\nlake: {{root: {lake}, database: {SCORED_DB}}}\ninputs:\n"
        f"  - {{corpus: constructed, paths: [{tsv}]}}\n"
        f"  - {{corpus: tatoeba, paths: [{TATOEBA[0]}, {TATOEBA[1]}]}}\n"
        "align: {enabled: true, sample_pairs: 400, min_train_pairs: 200}\n")
    assert main(["--config", str(conf), "--run-id", "ra-1"]) == 0
    query = f"SELECT row_id, reject_rule, dup_of, align_coverage FROM {SCORED_DB}.bitext"
    return {"lake": lake, "spark": spark, "main": main, "query": query,
            "before": {r.row_id: r for r in spark.sql(query).collect()}}


def redecide_aligned(aligned: dict, source: str, *sets: str, run_id: str) -> int:
    flags = [x for s in (f"lake.database={SCORED_DB}", *sets) for x in ("--set", s)]
    return aligned["main"](["--redecide", source, "--lake", str(aligned["lake"]),
                            "--run-id", run_id, *flags])


def test_a_tighter_alignment_threshold_rejects_by_the_stored_coverage(aligned) -> None:
    before = aligned["before"]
    assert redecide_aligned(aligned, "ra-1", "align.min_coverage_by_pair.zh-en=0.8",
                            run_id="ra-2") == 0
    after = {r.row_id: r for r in aligned["spark"].sql(aligned["query"]).collect()}
    assert set(after) == set(before)
    reached = [i for i, r in before.items() if r.reject_rule in (None, "align_coverage")]
    assert len(reached) > 1000
    for row_id, r in before.items():
        got = after[row_id]
        assert got.align_coverage == r.align_coverage  # kept, not recomputed
        if row_id in reached:
            want = "align_coverage" if r.align_coverage < 0.8 else None
            assert got.reject_rule == want, row_id
        else:
            assert (got.reject_rule, got.dup_of) == (r.reject_rule, r.dup_of), row_id
    assert sum(after[i].reject_rule == "align_coverage" for i in reached) > sum(
        before[i].reject_rule == "align_coverage" for i in reached)


def test_a_row_readmitted_before_the_aligner_is_one_line_and_exit_2(aligned, capsys) -> None:
    def error(source: str, *sets: str) -> str:
        code = redecide_aligned(aligned, source, *sets, run_id="ra-3")
        err = capsys.readouterr().err.splitlines()
        errors = [x for x in err if x.startswith("sluice: error")]
        assert code == 2 and len(errors) == 1, err[-20:]
        return errors[0]

    if not aligned["spark"].sql(f"SELECT 1 FROM {SCORED_DB}.runs WHERE run_id = 'ra-2'").take(1):
        assert redecide_aligned(aligned, "ra-1", run_id="ra-2") == 0  # this test alone
    # Punctuation loosened: constructed line 1 comes alive, but no run aligned it.
    said = error("ra-2", "rules.max_punct_share=0.5")
    assert "never reached the align scorer in run ra-2" in said
    assert "a later run replaced run ra-1's rows" in error("ra-1")


def test_bad_requests_are_one_line_and_exit_2(aligned, capsys) -> None:
    """What a re-decide cannot do from stored scores: a scorer the run did not run, a rule it
    did not compute, a normalization it did not apply (the job's main in this JVM; the same
    frame as a spark-submit, whose one line test_redecide.py's first runs check)."""
    if not aligned["spark"].sql(f"SELECT 1 FROM {SCORED_DB}.runs WHERE run_id = 'ra-2'").take(1):
        assert redecide_aligned(aligned, "ra-1", run_id="ra-2") == 0  # this test alone

    def error(*sets: str) -> str:  # ra-2: the run whose rows the lake holds now
        code = redecide_aligned(aligned, "ra-2", *sets, run_id="ra-bad")
        err = capsys.readouterr().err.splitlines()
        errors = [x for x in err if x.startswith("sluice: error")]
        assert code == 2 and len(errors) == 1, err[-20:]
        return errors[0]

    assert "did not run embedding" in error("embedding.enabled=true")
    assert "src_digit_share" in error("rules.disabled=[]")
    assert "normalize.strip_html" in error("normalize.strip_html=false")


def test_a_monolingual_run_is_re_decided_in_its_own_tables(spark, lake_root: Path,
                                                          tmp_path: Path) -> None:
    from jobs.filtering.job import main

    lines = (DATA / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:200]
    text = tmp_path / "mono.en"
    text.write_text("\n".join([*lines, "Wait... what?!! Really?!!", lines[0]]) + "\n", "utf-8")
    lake, db = lake_root / "redecide_mono", "redecide_mono"
    common = ["--lake", str(lake), "--set", f"lake.database={db}"]
    assert main(["--lang", "en", "--corpus", "m", "--input", str(text), *common,
                 "--run-id", "m-1"]) == 0
    assert main(["--redecide", "m-1", *common, "--run-id", "m-2",
                 "--set", "rules.max_punct_share=0.1"]) == 0
    rows = {r.line: r for r in spark.sql(
        f"SELECT line, reject_rule, dup_of, run_id, text FROM {db}.mono").collect()}
    assert len(rows) == 202 and {r.run_id for r in rows.values()} == {"m-2"}
    assert rows[201].reject_rule == "punct_share"
    assert rows[202].reject_rule == "duplicate"  # of line 1, as before
    [stats] = spark.sql(f"SELECT max(rows_in) AS n FROM {db}.filter_stats "
                        "WHERE run_id = 'm-2'").collect()
    assert stats.n == 202
