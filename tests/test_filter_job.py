"""End to end: the filter job, run as spark-submit runs it (the tests' warm driver,
docs/testing.md), on real Tatoeba/Anki text with injected noise, then the
tables queried in a new Spark session (and once through the spark-sql shell, as the README
shows)."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
from pathlib import Path

import pytest
from integration_helpers import BIN, query_lake, spark_env, spark_submit

from udfs.chinese import to_simplified

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

DATA = Path(__file__).resolve().parent / "data"
CONF = Path(__file__).resolve().parent.parent / "conf"
RUSSIAN = (DATA / "tatoeba-ru-en.ru").read_text(encoding="utf-8").splitlines()
LONG_RU = next(line for line in RUSSIAN if len(line) > 40)
HANT_LINES = [
    i + 1
    for i, label in enumerate((DATA / "tatoeba-zh-en.zh.labels").read_text().split())
    if label == "cmn_Hant"
][:30]


def real_pairs(n: int) -> list[tuple[str, str]]:
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    return [(zh.lstrip("\ufeff"), en) for zh, en, _ in rows[1 : n + 1]]


def tsv(s: str, t: str) -> bytes:
    return f"{s}\t{t}".encode()


def noisy_corpus(pairs: list[tuple[str, str]]) -> tuple[dict[int, str], list[bytes]]:
    """Real pairs with one injected fault per line; returns {line number: expected rule}."""
    (zh, en), p = pairs[0], pairs
    url = p[1][1] + " See https://tatoeba.org/en/sentences"
    injected = [
        (b"no tab on this line at all", "malformed_line"),
        (b"\xff\xfe broken bytes\t" + en.encode(), "invalid_utf8"),
        (tsv(zh, en).replace(b" ", b"\x00", 1), "nul_byte"),
        (tsv("x" * 1_000_000, en), "line_too_long"),
        (tsv(p[1][0], url), "url_email_html"),
        (tsv(p[2][0], ""), "empty"),
        (tsv(p[3][1], p[3][1]), "identical"),
        (tsv(p[4][0] * 70, p[4][1]), "too_many_tokens"),
        (tsv(p[5][0], p[5][1] + " Pneumonoultramicroscopicsilicovolcanoconiosis"), "long_word"),
        (tsv(p[6][0], LONG_RU), "langid_tgt"),
        (tsv(p[7][0], "(" + p[7][1]), "unbalanced_brackets"),
        (tsv(zh, en), "duplicate"),  # the same pair as line 1
        (tsv(zh.replace("。", "！"), en.lower()), "duplicate"),  # differs in case/punctuation
    ]
    good = [tsv(s, t) for s, t in pairs[8:]]
    lines, expected = [tsv(zh, en), *good[:50]], {}
    for raw, rule in injected:
        lines.append(raw)
        expected[len(lines)] = rule
    return expected, lines + good[50:]


QUERIES = {
    "stats": """SELECT corpus, min_by(rows_in, step), sum(rows_rejected)
                FROM sluice.filter_stats WHERE run_id = 'it-1' GROUP BY corpus ORDER BY corpus""",
    "tables": """SELECT corpus, sum(c), sum(r) FROM (
                   SELECT corpus, 1 AS c, 0 AS r FROM sluice.bitext_clean
                   UNION ALL SELECT corpus, 0, 1 FROM sluice.bitext_rejected)
                 GROUP BY corpus ORDER BY corpus""",
    "rejected": """SELECT line, reject_rule, reject_stage, dup_of IS NOT NULL
                   FROM sluice.bitext_rejected WHERE corpus = 'noisy'""",
    "dup_targets": """SELECT r.line, c.line FROM sluice.bitext_rejected r
                      JOIN sluice.bitext_clean c ON r.dup_of = c.row_id
                      WHERE r.corpus = 'noisy' AND r.reject_rule = 'duplicate'""",
    "first_line": "SELECT src, tgt FROM sluice.bitext_clean WHERE corpus = 'noisy' AND line = 1",
    "hant": "SELECT src FROM sluice.bitext_clean WHERE corpus = 'tatoeba' "
    f"AND line IN ({', '.join(map(str, HANT_LINES))})",
    "clean_count": "SELECT count(*) FROM sluice.bitext_clean",
    "stats_total": "SELECT count(*), sum(rows_rejected) FROM sluice.filter_stats "
                   "WHERE run_id = 'it-1'",
}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("job")
    expected, lines = noisy_corpus(real_pairs(300))
    noisy = work / "noisy.tsv"
    # A BOM on the first line and CRLF line ends: both must be handled.
    noisy.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
    lake, config = work / "lake", work / "job.yaml"
    tatoeba = f"[{DATA / 'tatoeba-zh-en.zh'}, {DATA / 'tatoeba-zh-en.en'}]"
    config.write_text(
        f"extends: {CONF / 'zh-en.yaml'}\nlake: {{root: {lake}}}\ninputs:\n"
        f"  - {{corpus: noisy, paths: [{noisy}]}}\n  - {{corpus: tatoeba, paths: {tatoeba}}}\n"
    )
    done = spark_submit("--config", str(config), "--run-id", "it-1")
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(
        lake=lake,
        config=config,
        expected=expected,
        n_lines=len(lines),
        stdout=done.stdout,
        answers=query_lake(lake, QUERIES),
    )


def test_funnel_printed(job) -> None:
    assert f"zh-en noisy: {job['n_lines']:,} in" in job["stdout"]
    assert "kept" in job["stdout"] and str(job["lake"]) in job["stdout"]


def test_stats_conserve_rows(job) -> None:
    (_, noisy_in, noisy_rej), (_, tat_in, tat_rej) = job["answers"]["stats"]
    assert (noisy_in, tat_in) == (job["n_lines"], 1500)
    tables = {c: (clean, rej) for c, clean, rej in job["answers"]["tables"]}
    assert tables == {
        "noisy": (noisy_in - noisy_rej, noisy_rej),
        "tatoeba": (tat_in - tat_rej, tat_rej),
    }


def test_each_injected_fault_rejected_by_its_rule(job) -> None:
    got = {
        line: (rule, stage, has_dup) for line, rule, stage, has_dup in job["answers"]["rejected"]
    }
    for line, rule in job["expected"].items():
        assert got.get(line, (None,))[0] == rule, f"line {line}: {got.get(line)} != {rule}"
        if rule == "duplicate":
            assert got[line][1:] == ("dedup", True)


def test_duplicates_point_to_the_kept_first_line(job) -> None:
    assert sorted(job["answers"]["dup_targets"]) == [[63, 1], [64, 1]]


def test_clean_text_is_normalized(job) -> None:
    [[src, tgt]] = job["answers"]["first_line"]
    assert not src.startswith("\ufeff") and not tgt.endswith("\r")
    # Traditional lines of the Tatoeba sample (cmn_Hant) are stored simplified.
    stored = [src for (src,) in job["answers"]["hant"]]
    assert len(stored) >= 25 and all(to_simplified(s) == s for s in stored)


def test_printed_query_command_pastes_into_a_shell(job) -> None:
    """The command the job prints at its end, run by bash exactly as printed."""
    (line,) = [x for x in job["stdout"].splitlines() if "] query: " in x]
    command = line.split("] query: ", 1)[1]
    env = dict(spark_env(), PATH=f"{BIN}:{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", f"{command} -S"], cwd=job["lake"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    header, *table = [row.split("\t") for row in done.stdout.splitlines() if "\t" in row]
    rows = [dict(zip(header, row, strict=True)) for row in table]  # `sluice sql` names them
    assert {"duplicate", "url_email_html"} <= {r["rule"] for r in rows}, done.stdout[-2000:]
    dedup = [r["rows_rejected"] for r in rows
             if (r["corpus"], r["stage"], r["rule"]) == ("noisy", "dedup", "duplicate")]
    assert dedup == ["2"]
    assert not (job["lake"] / "metastore_db" / "metastore_db").exists()


def test_printed_duckdb_query_answers_what_spark_sql_does(job) -> None:
    """The job's second query line (`sluice query`: duckdb over tables/, no JVM), pasted into a
    bare shell, answers the same rows as the catalog's."""
    (line,) = [x for x in job["stdout"].splitlines() if "] query without Spark" in x]
    command = line.split("): ", 1)[1]
    bare = {"HOME": os.environ.get("HOME", "/tmp"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["bash", "-c", command.replace("SELECT *", "SELECT count(*) AS n, "
                           "sum(rows_rejected) AS r")], cwd="/", env=bare, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    [[n, rejected]] = job["answers"]["stats_total"]  # the catalog's answer
    assert n > 0 and re.search(rf"│\s+{n}\s+│\s+{rejected}\s+│", done.stdout), done.stdout


def test_progress_names_each_stage(job) -> None:
    for name in ("ingest into bitext_raw", "normalize+rules+langid+dedup"):
        assert f"{name} zh-en/noisy,tatoeba: done in" in job["stdout"]
    assert " INFO " not in job["stdout"]  # Spark's INFO noise is off


def test_rerun_is_idempotent(job) -> None:
    done = spark_submit("--config", str(job["config"]), "--run-id", "it-2")
    assert done.returncode == 0, done.stderr[-4000:]
    again = query_lake(
        job["lake"],
        {
            "clean": "SELECT count(*), count(DISTINCT run_id) FROM sluice.bitext_clean",
            "runs": "SELECT run_id, status FROM sluice.runs ORDER BY run_id",
        },
    )
    assert again["clean"] == [[job["answers"]["clean_count"][0][0], 1]]
    assert again["runs"] == [["it-1", "succeeded"], ["it-2", "succeeded"]]


def test_moses_line_count_mismatch_fails_before_writing(tmp_path: Path) -> None:
    zh, en = tmp_path / "c.zh", tmp_path / "c.en"
    zh.write_text("你好。\n谢谢。\n再见。\n", encoding="utf-8")
    en.write_text("Hello.\nThanks.\n", encoding="utf-8")
    lake = tmp_path / "lake"
    done = spark_submit(
        "--pair", "zh-en", "--corpus", "c", "--input", str(zh), str(en), "--lake", str(lake)
    )
    assert done.returncode == 2
    said = done.stdout + done.stderr  # spark-submit merges the Python driver's stderr
    assert f"{zh} has 3 lines" in said and f"{en} has 2 lines" in said
    assert not (lake / "runs").exists()
