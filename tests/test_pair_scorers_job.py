"""The filter job with its pair scorers on: word alignment (trained in the run on its clean
pairs) and embedding similarity (the bundled USE encoder), on real Tatoeba/Anki pairs plus a
corpus of the same kind of pairs shifted by one line (every pair a mistranslation).

Runs `jobs.filtering.job.main` in the test session's JVM (same code path as spark-submit, without a
second JVM start); the tables live in their own database.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from jobs.filtering.job import main

pytestmark = pytest.mark.integration  # whole jobs, real processes: not in the fast tier

DATA = Path(__file__).resolve().parent / "data"
CONF = Path(__file__).resolve().parent.parent / "conf"
DB = "scorers_it"


def anki_pairs() -> list[tuple[str, str]]:
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    return [(zh.lstrip("\ufeff"), en) for zh, en, _ in rows[1:]]


@pytest.fixture(scope="module")
def run(spark, lake_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("scorers")
    pairs = anki_pairs()
    # Longer Anki pairs (short ones are mostly caught by the rules already), shifted by one.
    longer = [p for p in pairs if len(p[1]) > 30][:301]
    shifted = [(zh, longer[i + 1][1]) for i, (zh, _) in enumerate(longer[:300])]
    (work / "shifted.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in shifted), "utf-8")
    lake = lake_root / "scorers"
    config = work / "job.yaml"
    tatoeba = f"[{DATA / 'tatoeba-zh-en.zh'}, {DATA / 'tatoeba-zh-en.en'}]"
    config.write_text(
        f"extends: {CONF / 'zh-en.yaml'}\nlake: {{root: {lake}, database: {DB}}}\n"
        f"inputs:\n  - {{corpus: tatoeba, paths: {tatoeba}}}\n"
        f"  - {{corpus: shifted, paths: [{work / 'shifted.tsv'}]}}\n"
        # ~1,600 pairs reach the aligner: under the default align.min_train_pairs, lowered
        # so that the run trains one (tests/test_align_store.py covers the fallbacks).
        "align: {enabled: true, min_train_pairs: 1000}\nembedding: {enabled: true, margin_k: 4}\n"
    )
    assert main(["--config", str(config), "--run-id", "sc-1"]) == 0
    return {"lake": lake, "config": config, "spark": spark}


def rows(run: dict, query: str) -> list:
    return run["spark"].sql(query).collect()


def rejected_by_scorers(run: dict, corpus: str) -> float:
    [r] = rows(
        run,
        "SELECT avg(CAST(coalesce(reject_stage IN ('align', 'embed'), false) AS INT)) AS share"
        " FROM ("
        f"  SELECT reject_stage FROM {DB}.bitext_rejected WHERE corpus = '{corpus}'"
        f"  UNION ALL SELECT NULL FROM {DB}.bitext_clean WHERE corpus = '{corpus}')"
        f" WHERE coalesce(reject_stage, '') NOT IN ('ingest', 'rules', 'langid', 'dedup')",
    )
    return r.share


# Measured: all 291 shifted pairs that reach the scorers are rejected (8 by align_coverage, the
# rest by embed_cosine), 7% of the 1,302 Tatoeba pairs that reach them.
def test_scores_are_stored_on_every_row_that_reached_them(run) -> None:
    [r] = rows(
        run,
        f"SELECT count(*) AS n, count(align_coverage) AS a, count(embed_cosine) AS e, "
        f"count(embed_margin) AS m, min(align_coverage) AS lo FROM {DB}.bitext_clean",
    )
    assert r.n > 1000 and r.a == r.e == r.m == r.n
    assert r.lo >= 0.6
    [r] = rows(
        run,
        f"SELECT count(*) AS n, count(embed_cosine) AS e FROM {DB}.bitext_rejected "
        "WHERE reject_stage IN ('rules', 'langid', 'dedup')",
    )
    assert r.n > 0 and r.e == 0  # rows rejected before the scorers are not scored


def test_shifted_pairs_are_rejected_and_real_ones_kept(run) -> None:
    assert rejected_by_scorers(run, "shifted") >= 0.9
    assert rejected_by_scorers(run, "tatoeba") <= 0.15


def test_stats_list_the_scorer_rules(run) -> None:
    got = {
        (r.stage, r.rule): r.rows_rejected
        for r in rows(
            run,
            f"SELECT stage, rule, sum(rows_rejected) AS rows_rejected FROM {DB}.filter_stats "
            "WHERE run_id = 'sc-1' AND stage IN ('align', 'embed') GROUP BY 1, 2",
        )
    }
    assert set(got) == {
        ("align", "align_coverage"),
        ("embed", "embed_cosine"),
        ("embed", "embed_margin"),  # the USE encoder has a min_margin, and margin_k is 4
    }
    assert got[("embed", "embed_cosine")] > 0


def test_the_trained_aligner_is_in_the_lake_and_reused(run) -> None:
    model_dir = run["lake"] / "models/align/zh-en/sc-1"
    manifest = json.loads((model_dir / "manifest.json").read_text())
    assert (manifest["name"], manifest["run_id"], manifest["pair"]) == ("sc-1", "sc-1", "zh-en")
    assert manifest["source"] == "filter run sc-1: shifted, tatoeba"
    before = {r.row_id: r.align_coverage for r in rows(run, f"SELECT * FROM {DB}.bitext_clean")}
    argv = ["--config", str(run["config"]), "--run-id", "sc-2"]
    assert main([*argv, "--set", "align.reference=sc-1"]) == 0
    assert not (run["lake"] / "models/align/zh-en/sc-2").exists()  # nothing trained
    after = {r.row_id: r.align_coverage for r in rows(run, f"SELECT * FROM {DB}.bitext_clean")}
    assert after == before  # same model, same input: same scores and survivors


def test_a_missing_reference_fails_before_the_run(run, capsys) -> None:
    argv = ["--config", str(run["config"]), "--run-id", "sc-3", "--set", "align.reference=nope"]
    assert main(argv) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("sluice: error")]
    assert "align.reference 'nope': no zh-en aligner" in line and "saved: sc-1" in line
    assert not rows(run, f"SELECT * FROM {DB}.runs WHERE run_id = 'sc-3'")  # never started


def test_a_run_with_no_row_left_for_the_scorers_still_commits(spark, lake_root: Path, tmp_path):
    junk = tmp_path / "junk.tsv"  # every pair is source = target: all rejected by `identical`
    junk.write_text("".join(f"{en}\t{en}\n" for _, en in anki_pairs()[:50]), "utf-8")
    lake = lake_root / "scorers_none"
    argv = ["--pair", "zh-en", "--corpus", "junk", "--input", str(junk), "--lake", str(lake)]
    sets = ["align.enabled=true", "embedding.enabled=true", "lake.database=scorers_none"]
    assert main([*argv, "--run-id", "none-1", *[x for s in sets for x in ("--set", s)]]) == 0
    [r] = rows(
        {"spark": spark},
        "SELECT count(*) AS n, count(align_coverage) AS a, count(embed_cosine) AS e, "
        "min(reject_rule) AS rule FROM scorers_none.bitext_rejected",
    )
    assert (r.n, r.a, r.e, r.rule) == (50, 0, 0, "identical")
    assert not (lake / "models").exists()  # nothing to train on: no aligner written
