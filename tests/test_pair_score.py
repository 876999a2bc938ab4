"""The learned pair_score (issues 14, 39): negatives, training on real pairs and on human
labels, the filter applying it, the shipped model, the model store, and bad input. Run in the
test session's Spark (in-process `main`s); the zh-en features are the rule scores (the pair
scorers off, to stay fast). The jobs are `integration`: the fast tier keeps the units."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

from jobs.filtering.pair_score_model import NEGATIVE_KINDS, auc, negatives

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"


def anki_pairs(n: int) -> list[tuple[str, str]]:
    """Real zh-en pairs (Anki/Tatoeba), none of them in tatoeba-zh-en (the training set)."""
    train = set((DATA / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines())
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        pairs = [(z, e) for z, e, _ in (line.rstrip("\n").split("\t") for line in f)]
    return [p for p in pairs if p[0] not in train and len(p[1].split()) >= 5][:n]


def test_negatives_of_each_kind() -> None:
    pairs = [("我们明天见。", "See you tomorrow at the station."),
             ("他在看书。", "He is reading a book in the garden."),
             ("天气很好。", "The weather is very nice today.")]
    nexts = [pairs[1], pairs[2], None]  # the last line has no document neighbour
    made = negatives(pairs, "zh", "en", seed=1, neighbours=nexts)
    assert made == negatives(pairs, "zh", "en", seed=1, neighbours=nexts)  # deterministic
    assert len(made) == len(pairs) * len(NEGATIVE_KINDS)
    by_kind = {kind: [(s, t) for s, t, k in made if k == kind] for kind in NEGATIVE_KINDS}
    for (src, tgt), (neg_src, neg_tgt) in zip(pairs, by_kind["misaligned"], strict=True):
        assert neg_src == src and neg_tgt != tgt and neg_tgt in [t for _, t in pairs]
    for (_, tgt), (_, neg_tgt) in zip(pairs, by_kind["truncated"], strict=True):
        assert tgt.startswith(neg_tgt) and len(neg_tgt.split()) < len(tgt.split())
    for (src, _), (_, neg_tgt) in zip(pairs, by_kind["wrong_language"], strict=True):
        assert neg_tgt in [s for s, _ in pairs] and neg_tgt != src
    assert [t for _, t in by_kind["copied"]] == [s for s, _ in pairs]
    for (src, tgt), (_, neg_tgt) in zip(pairs, by_kind["half_translated"], strict=True):
        assert neg_tgt.startswith(" ".join(tgt.split()[:2])) and neg_tgt.endswith(src[-2:])
    for (_, tgt), (_, neg_tgt) in zip(pairs, by_kind["dropped_span"], strict=True):
        kept = neg_tgt.split()
        assert 0 < len(kept) < len(tgt.split()) and kept[0] == tgt.split()[0]
    # Near misses: the next line's target; a fuzzy match stands in where there is no next line.
    fuzzy = [t for _, t in by_kind["fuzzy"]]
    assert [t for _, t in by_kind["neighbour"]] == [pairs[1][1], pairs[2][1], fuzzy[2]]
    assert all(f != t for f, (_, t) in zip(fuzzy, pairs, strict=True))
    assert by_kind["extended"][0] == (pairs[0][0], f"{pairs[0][1]} {pairs[1][1]}")
    assert by_kind["src_extended"][1] == (pairs[1][0] + pairs[2][0], pairs[1][1])  # zh: no space


def test_a_fuzzy_negative_is_the_most_alike_other_target() -> None:
    """On real English targets: a sentence's fuzzy match shares its words, never its text."""
    from jobs.filtering.pair_score_model import nearest_targets

    targets = ["The weather is very nice today.", "Tom is reading a book in the garden.",
               "The weather was very nice yesterday.", "Tom is reading a book in the garden.",
               "Where is the station?"]
    found = nearest_targets(targets, block=2)  # blocks of two rows: the same as one block
    assert found == nearest_targets(targets)
    assert found[0] == 2 and found[2] == 0
    assert targets[found[1]] != targets[1] and targets[found[3]] != targets[3]
    assert nearest_targets(["same", "same"]) == [0, 1]  # no other text: itself


def test_document_neighbours_come_from_the_next_line() -> None:
    from jobs.scorer_training.pair_score import with_neighbours

    lines = [("a", "A"), ("b", "B"), ("", "C"), ("d", "D")]
    assert with_neighbours(lines) == [("a", "A", "b", "B"), ("b", "B", None, None),
                                      ("d", "D", None, None)]


def test_a_threshold_fitted_to_a_run_moves_down_only_and_not_past_the_floor() -> None:
    from jobs.filtering.pair_score_stage import fitted_threshold

    model = {"threshold": 0.8, "threshold_floor": 0.4, "clean_quantiles": {"0.5": 0.95}}
    assert fitted_threshold(model, 0.95) == pytest.approx(0.8)  # like the training data
    assert fitted_threshold(model, 0.99) == pytest.approx(0.8)  # better: never stricter
    # 0.95 -> 0.9 at the median is -0.75 in log-odds: 0.8 -> sigmoid(1.386 - 0.747)
    assert fitted_threshold(model, 0.9) == pytest.approx(0.6545, abs=1e-3)
    assert fitted_threshold(model, 0.2) == 0.4  # a run of mostly bad pairs: the floor
    # A threshold the log-odds round trip moves an ulp up (a model trained in a clean-clone
    # run had it): a run like the training data keeps the model's own, exactly.
    model = {"threshold": 0.3629952888289217, "threshold_floor": 0.2,
             "clean_quantiles": {"0.5": 0.7}}
    assert fitted_threshold(model, 0.76) == 0.3629952888289217
    assert fitted_threshold(model, 0.6999) <= 0.3629952888289217


def test_auc() -> None:
    assert auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5, 0.5], [0.5]) == 0.5


@pytest.fixture(scope="module")
def trained(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A pair_score model trained on the 1,500 real Tatoeba zh-en pairs, in its lake."""
    from jobs.scorer_training.pair_score import main

    lake = tmp_path_factory.mktemp("pair_score") / "lake"
    code = main(["--config", str(REPO / "conf/zh-en.yaml"), "--name", "tatoeba",
                 "--lake", str(lake), "--input", str(DATA / "tatoeba-zh-en.zh"),
                 str(DATA / "tatoeba-zh-en.en")])
    assert code == 0
    manifest = lake / "models/pair_score/zh-en/tatoeba/manifest.json"
    return lake, json.loads(manifest.read_text())


@pytest.mark.integration  # whole training and filter jobs, in this process
def test_the_model_ranks_clean_pairs_above_made_bad_ones(trained) -> None:
    """On the held-apart fifth (pairs and negatives the model never saw)."""
    _, model = trained
    held = model["held_apart"]
    assert held["clean_pairs"] >= 250
    assert held["kept_clean"] == pytest.approx(0.95, abs=0.01)
    # Measured 0.85: the near misses (neighbour, fuzzy, misaligned: 0.68-0.70) need the pair
    # scorers, off here; the rule scores see only their lengths.
    assert held["auc"] >= 0.8
    kinds = held["kinds"]
    assert set(kinds) == set(NEGATIVE_KINDS)
    # The rules take every copy and wrong language; the model is fitted on what they keep.
    for kind in ("copied", "wrong_language"):
        assert kinds[kind]["by_rules"] == 1.0 and kinds[kind]["auc"] is None, kind
    for kind in ("copied", "wrong_language", "truncated", "half_translated", "extended",
                 "src_extended"):
        assert kinds[kind]["rejected"] >= 0.9, kind  # measured 0.98-1.0
    for kind in ("truncated", "half_translated", "extended", "src_extended"):
        assert kinds[kind]["auc"] >= 0.95, kind  # measured 0.99-1.0
    # Without the pair scorers a sentence of the wrong pair is hard to tell: only its length.
    assert kinds["misaligned"]["auc"] >= 0.6  # measured 0.69
    quantiles = model["clean_quantiles"]
    assert 0 < model["threshold_floor"] < model["threshold"] < quantiles["0.5"] < quantiles["0.75"]
    assert model["source"].startswith("files ") and model["name"] == "tatoeba"
    assert len(model["weights"]) == len(model["features"]) == len(model["means"])
    assert "embed_cosine" not in model["features"]  # the scorers were off
    # No labelled pairs: checked against its best input on made negatives, and said so.
    assert model["check"]["by"] == "made negatives only: not checked on real pairs"
    assert model["check"]["not_worse"] and model["labels"] == "made"


@pytest.mark.integration  # whole training and filter jobs, in this process
def test_the_filter_scores_and_rejects_with_it(spark, trained, tmp_path: Path) -> None:
    """Real pairs the model never saw, and the same pairs with their target cut short: the
    filter stores `pair_score` on every row that reaches the scorers, equal to the model's
    own arithmetic, and rejects the cut ones far more often."""
    from jobs.filtering.job import main
    from jobs.filtering.pair_score_model import load
    from jobs.lake.store import Lake

    lake, model = trained
    pairs = anki_pairs(200)
    cut = [(z, " ".join(e.split()[: max(1, len(e.split()) * 2 // 5)])) for z, e in pairs]
    tsv = tmp_path / "mixed.tsv"
    tsv.write_text("".join(f"{z}\t{e}\n" for z, e in pairs + cut), encoding="utf-8")
    code = main(["--config", str(REPO / "conf/zh-en.yaml"), "--lake", str(lake),
                 "--corpus", "mixed", "--input", str(tsv),
                 "--set", "pair_score.enabled=true", "--set", "pair_score.model=latest"])
    assert code == 0
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table().to_pylist()
    assert len(rows) == 400
    first_half = {r["line"]: r for r in rows if r["line"] <= 200}
    second_half = {r["line"] - 200: r for r in rows if r["line"] > 200}
    reached = [r for r in rows if r["reject_stage"] in (None, "pair_score")]
    assert reached and all(r["pair_score"] is not None for r in reached)
    assert all(r["pair_score"] is None for r in rows if r not in reached)
    # English fluency (pair_score.english_lm, the LM make setup trains): the English target's
    # score on every row the model scored, as the LM scores that text alone.
    from udfs.ngram import load_lm
    from udfs.side_lm import logprob_per_token

    assert "english_fluency" in model["features"]
    assert model["english_lm"] == "models/lm/en-open.binlm"
    assert all(r["english_lm"] is not None for r in reached)
    en = load_lm(str(REPO / model["english_lm"]))
    for r in reached[:20]:
        assert r["english_lm"] == pytest.approx(logprob_per_token(en, r["tgt"], "en"))
    whole_rejected = sum(r["reject_rule"] == "pair_score" for r in first_half.values())
    cut_rejected = sum(r["reject_rule"] is not None for r in second_half.values())
    assert whole_rejected <= 0.15 * len(first_half)  # measured
    assert cut_rejected >= 0.6 * len(second_half)
    # The run's record names the model `latest` was when it ran, not `latest`.
    runs = ds.dataset(lake / "tables/runs", partitioning="hive").to_table().to_pylist()
    (run,) = [r for r in runs if r["job"] == "filter" and "mixed" in r["inputs"]]
    assert json.loads(run["config"])["pair_score"]["model"] == "tatoeba"
    stats = ds.dataset(lake / "tables/filter_stats", partitioning="hive").to_table().to_pylist()
    step = [s for s in stats if s["stage"] == "pair_score"]
    assert [s["rule"] for s in step] == ["pair_score"]
    assert step[0]["rows_rejected"] == sum(r["reject_rule"] == "pair_score" for r in rows)
    # The stored score is the model's arithmetic on the stored scores' features.
    from jobs.filtering.config import load_config
    from jobs.filtering.stages import rule_row
    from udfs.pair_features import feature_columns, score_python

    row = rule_row(load_config(REPO / "conf/zh-en.yaml"))
    table = spark.read.parquet(str(lake / "tables/bitext")).where("pair_score IS NOT NULL")
    checked = table.select("pair_score", *[c.alias(n) for n, c in feature_columns(
        model["features"], row).items()]).limit(50).collect()
    for r in checked:
        values = {n: r[f"f_{n}"] for n in model["features"]}
        assert r["pair_score"] == pytest.approx(score_python(model, values), abs=1e-9)
    assert load(Lake(spark, str(lake), "sluice"), "zh-en", "latest",
                "use-multilingual")["name"] == "tatoeba"


@pytest.mark.integration  # whole training and filter jobs, in this process
def test_errors_are_one_line(spark, trained, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    from jobs.filtering.job import main as filter_main
    from jobs.scorer_training.pair_score import main as train_main

    lake, _ = trained
    config = str(REPO / "conf/zh-en.yaml")
    moses = [str(DATA / "tatoeba-zh-en.zh"), str(DATA / "tatoeba-zh-en.en")]
    assert train_main(["--config", config, "--name", "tatoeba", "--lake", str(lake),
                       "--input", *moses]) == 2
    assert "pair_score model tatoeba of zh-en exists" in capsys.readouterr().err
    short = tmp_path / "short.en"
    short.write_text("one line\n", encoding="utf-8")
    assert train_main(["--config", config, "--name", "x", "--lake", str(lake),
                       "--input", moses[0], str(short)]) == 2
    assert "has 1500 lines" in capsys.readouterr().err.replace(f"{moses[0]} ", "")
    tsv = tmp_path / "a.tsv"
    tsv.write_text("我们明天见。\tSee you tomorrow.\n", encoding="utf-8")
    assert filter_main(["--config", config, "--lake", str(tmp_path / "empty"), "--corpus", "a",
                        "--input", str(tsv), "--set", "pair_score.enabled=true"]) == 2
    # No model of zh-en in that lake: the shipped one, which needs the embedding scorer on.
    err = capsys.readouterr().err
    assert "the lake having no model of zh-en) reads the embedding cosine" in err
    assert filter_main(["--config", config, "--lake", str(lake), "--corpus", "a",
                        "--input", str(tsv), "--set", "pair_score.enabled=true",
                        "--set", "pair_score.model=nope"]) == 2
    assert "pair_score.model nope: no such model" in capsys.readouterr().err
    # The model weighs English fluency under the LM it was trained with: another LM, or
    # none, is refused, and the same LM's name not found is said, each on one line, exit 2.
    for lm, says in (("null", "this run's pair_score.english_lm is None"),
                     ("other.binlm", "weighs English fluency under the LM "
                                     "models/lm/en-open.binlm"),
                     ("nowhere/en-open.binlm", "pair_score.english_lm: nowhere/en-open.binlm "
                                               "not found")):
        assert filter_main(["--config", config, "--lake", str(lake), "--corpus", "a",
                            "--input", str(tsv), "--set", "pair_score.enabled=true",
                            "--set", f"pair_score.english_lm={lm}"]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err


def test_number_and_sentence_features_on_real_pairs(spark) -> None:
    """A pair and its document neighbour's target, from the bundled newstest-like pairs: the
    numbers and sentence ends a translation keeps, and a neighbour does not."""
    from pyspark.sql import functions as F

    from udfs.pair_features import number_mismatch, sentence_ends

    rows = [("他1998年出生于北京。", "He was born in Beijing in 1998."),  # same numbers
            ("他1998年出生于北京。", "He moved to Shanghai in 2004."),  # a neighbour's
            ("我们明天见。", "See you tomorrow. Bring the tickets!"),  # a sentence more
            ("价格是3.5元，不是35元。", "The price is 3.5 yuan, not 35 yuan."),
            ("你好", "Hello")]  # no numbers, no sentence ends
    got = spark.createDataFrame(rows, "src string, tgt string").select(
        number_mismatch(F.col("src"), F.col("tgt")).alias("numbers"),
        sentence_ends(F.col("src")).alias("src_ends"),
        sentence_ends(F.col("tgt")).alias("tgt_ends")).collect()
    assert [r.numbers for r in got] == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert [(r.src_ends, r.tgt_ends) for r in got] == [(1, 1), (1, 1), (1, 2), (1, 1), (0, 0)]


def test_capitals_gap_on_real_crawl_pairs(spark) -> None:
    """ParaCrawl release 7 en-fr pairs (tests/data/crawl/labelled/en-fr.tsv): valid ones keep
    their names (Memosens; Monica); a misaligned one does not (Judge Agius, this Chamber:
    half of it). A side of a caseless script has no capitals to count, and the gap is the
    same both ways round."""
    from pyspark.sql import functions as F

    from udfs.pair_features import capitalised_words, capitals_gap

    rows = {line.split("\t")[0]: line.split("\t") for line in
            (DATA / "crawl/labelled/en-fr.tsv").read_text(encoding="utf-8").splitlines()}
    memosens, monica, judge = (next(r for en, r in rows.items() if en.startswith(start))
                               for start in ("Minimum maintenance", "Everybody's sitting",
                                             "18 At the time Judge Agius"))
    assert [memosens[2], monica[2], judge[2]] == ["V", "V", "A"]
    pairs = [memosens[:2], monica[:2], judge[:2],
             ["他1998年出生于北京。", "He was born in Beijing."],
             ["O'Brien visited NASA and McDonald's.", "O'Brien a visité la NASA et McDonald's."]]
    df = spark.createDataFrame(pairs, "src string, tgt string")
    got = df.select(capitalised_words(F.col("src")).alias("src_caps"),
                    capitalised_words(F.col("tgt")).alias("tgt_caps"),
                    capitals_gap(F.col("src"), F.col("tgt")).alias("gap"),
                    capitals_gap(F.col("tgt"), F.col("src")).alias("swapped")).collect()
    # The first word's capital is the sentence's, not a name's: "18" starts the judge's line.
    assert [(r.src_caps, r.tgt_caps) for r in got] == [(1, 1), (1, 1), (4, 2), (None, 1), (3, 3)]
    assert [r.gap for r in got] == [0.0, 0.0, 2 / 5, None, 0.0]
    assert [r.swapped for r in got] == [r.gap for r in got]


def test_tokenization_artifacts_on_real_tokenized_and_clean_text(spark) -> None:
    """OpenNMT's Moses-tokenized toy en-de lines (tests/data/ende-toy-escaped.txt), put
    through the filter's normalization as a run would, keep the tokenizer's marks (`word ,
    word`, `end .`); Tatoeba's edited English has none; glued sentences and Moses hyphens
    count, a French space before `:` (its typography) does not."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from udfs.moses_punct import moses_punct_normalize
    from udfs.normalize import unescape_entities
    from udfs.tokenization_artifacts import tokenization_artifacts

    toy = [line.split("\t", 1)[1] for line in
           (DATA / "ende-toy-escaped.txt").read_text(encoding="utf-8").splitlines()]
    toy_en = [t for t in toy if " , " in t or t.endswith(" .")]
    clean = (DATA / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:400]
    made = ["Welcome to our shop.Our prices are the lowest in town.",
            "A state @-@ of @-@ the @-@ art design.", "Il a dit : oui, bien sûr.", None]
    df = spark.createDataFrame([(t,) for t in toy_en + clean + made], "text string")
    unescaped = [r.t for r in df.select(unescape_entities(F.col("text")).alias("t")).collect()]
    normalized = moses_punct_normalize(pa.array(unescaped, pa.string()), "en").to_pylist()
    counts = [r.n for r in spark.createDataFrame([(t,) for t in normalized], "t string").select(
        tokenization_artifacts(F.col("t")).alias("n")).collect()]
    assert len(toy_en) >= 20 and all(n >= 1 for n in counts[:len(toy_en)])
    assert sum(n > 0 for n in counts[len(toy_en):-len(made)]) <= 2  # of 400 edited lines
    assert counts[-len(made):] == [1, 3, 0, None]


@pytest.mark.integration  # whole training and filter jobs, in this process
def test_thresholds_fitted_per_corpus_are_stored_and_re_decided_from(spark, trained,
                                                                     tmp_path: Path) -> None:
    """Three corpora in one run: real pairs, the same pairs with targets cut, and a handful of
    pairs under pair_score.fit_min_rows. Each corpus gets one threshold, stored on its scored
    rows: fitted (between the model's floor and its own threshold) where it has the rows, the
    model's where not. A re-decide reads them back (same fates), and a min_score overrides."""
    from jobs.filtering.job import main

    lake, model = trained
    pairs = anki_pairs(330)
    whole, few = pairs[:150], pairs[300:330]
    cut = [(z, " ".join(e.split()[: max(1, len(e.split()) * 2 // 5)])) for z, e in pairs[150:300]]
    inputs = []
    for corpus, rows in (("whole", whole), ("cut", cut), ("few", few)):
        tsv = tmp_path / f"{corpus}.tsv"
        tsv.write_text("".join(f"{z}\t{e}\n" for z, e in rows), encoding="utf-8")
        inputs.append(f"  - {{corpus: {corpus}, paths: [{tsv}]}}\n")
    conf = tmp_path / "job.yaml"
    conf.write_text(f"pair: zh-en\nlake: {{root: {lake}}}\ninputs:\n{''.join(inputs)}"
                    "pair_score: {enabled: true, model: tatoeba, fit_min_rows: 50}\n")
    assert main(["--config", str(conf), "--run-id", "fit-1"]) == 0

    def fates(run_id: str) -> dict[int, tuple]:
        query = ("SELECT row_id, corpus, reject_rule, pair_score, pair_score_threshold "
                 f"FROM sluice.bitext WHERE run_id = '{run_id}'")
        return {r.row_id: r for r in spark.sql(query).collect()}

    first = fates("fit-1")
    by_corpus: dict[str, set] = {}
    for r in first.values():
        assert (r.pair_score is None) == (r.pair_score_threshold is None)
        if r.pair_score is not None:
            by_corpus.setdefault(r.corpus, set()).add(r.pair_score_threshold)
            assert (r.reject_rule == "pair_score") == (r.pair_score < r.pair_score_threshold)
    assert all(len(values) == 1 for values in by_corpus.values())
    fitted = {c: values.pop() for c, values in by_corpus.items()}
    assert fitted["few"] == pytest.approx(model["threshold"])  # 30 rows: the model's own
    for corpus in ("whole", "cut"):
        assert model["threshold_floor"] <= fitted[corpus] <= model["threshold"]
    assert fitted["cut"] < fitted["whole"]  # the cut corpus scores lower: moved further
    # A re-decide with nothing changed keeps every fate, by the stored thresholds.
    assert main(["--redecide", "fit-1", "--lake", str(lake), "--run-id", "fit-2"]) == 0
    again = fates("fit-2")
    assert {k: (r.reject_rule, r.pair_score_threshold) for k, r in again.items()} == \
        {k: (r.reject_rule, r.pair_score_threshold) for k, r in first.items()}
    # A min_score overrides the fitted thresholds, and is stored as the one applied.
    assert main(["--redecide", "fit-2", "--lake", str(lake), "--run-id", "fit-3",
                 "--set", "pair_score.min_score=0.9"]) == 0
    for r in fates("fit-3").values():
        if r.pair_score is not None:
            assert r.pair_score_threshold == 0.9
            assert (r.reject_rule == "pair_score") == (r.pair_score < 0.9)


@pytest.mark.integration  # whole training and filter jobs, in this process
def test_trained_from_the_lakes_clean_rows_with_their_document_neighbours(spark,
                                                                          tmp_path: Path) -> None:
    """`--where` on the lake's clean rows: the positives and their next clean line of the same
    file come from `bitext_clean`, and every negative kind is made and measured."""
    from jobs.filtering.job import main as filter_main
    from jobs.scorer_training.pair_score import main as train_main

    lake = tmp_path / "lake"
    assert filter_main(["--config", str(REPO / "conf/zh-en.yaml"), "--lake", str(lake),
                        "--corpus", "tatoeba", "--input", str(DATA / "tatoeba-zh-en.zh"),
                        str(DATA / "tatoeba-zh-en.en")]) == 0
    assert train_main(["--config", str(REPO / "conf/zh-en.yaml"), "--name", "from-lake",
                       "--lake", str(lake), "--where", "corpus = 'tatoeba'"]) == 0
    model = json.loads((lake / "models/pair_score/zh-en/from-lake/manifest.json").read_text())
    assert model["source"] == "`sluice`.`bitext_clean` pair zh-en where corpus = 'tatoeba'"
    assert set(model["held_apart"]["kinds"]) == set(NEGATIVE_KINDS)
    assert model["train_pairs"] >= 900  # four fifths of the ~1,300 clean Tatoeba pairs
    # The neighbours: each sampled pair's is the next clean line of its file.
    import argparse

    from jobs.filtering.config import load_config
    from jobs.scorer_training.pair_score import positives

    cfg = load_config(REPO / "conf/zh-en.yaml", [], {"lake": {"root": str(lake)}})
    args = argparse.Namespace(input=None, where="corpus = 'tatoeba'", max_pairs=300)
    sample, _ = positives(spark, cfg, args, "sluice")
    clean = sorted((r.line, r.src, r.tgt) for r in spark.table("sluice.bitext_clean")
                   .where("corpus = 'tatoeba'").collect())
    following = {(s, t): (ns, nt)
                 for (_, s, t), (_, ns, nt) in zip(clean, clean[1:], strict=False)}
    assert len(sample) == 300
    assert all((ns, nt) == following.get((s, t), (None, None)) for s, t, ns, nt in sample)
    assert sum(ns is not None for _, _, ns, _ in sample) >= 295  # all but the last line's


def crawl_config(tmp_path: Path, pair: str) -> Path:
    config = tmp_path / f"{pair}.yaml"
    config.write_text(f"pair: {pair}\nembedding: {{enabled: true}}\n", encoding="utf-8")
    return config


def labels_of(path: Path) -> list[str]:
    return [line.split("\t")[2] for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.integration  # whole training and filter jobs, in this process
def test_trained_on_human_labels_and_checked_against_its_inputs(spark, tmp_path: Path) -> None:
    """`--labelled` (real ParaCrawl en-pl labels): no made negatives, the model monotone and
    checked on fifths it was not fitted on against its best input, and a filter run with it
    keeps the valid pairs far more often than the misaligned ones."""
    from jobs.filtering.job import main as filter_main
    from jobs.filtering.pair_score_model import against_meaning
    from jobs.scorer_training.pair_score import main as train_main

    labelled = DATA / "crawl/labelled/en-pl.tsv"
    config, lake = str(crawl_config(tmp_path, "en-pl")), tmp_path / "lake"
    assert train_main(["--config", config, "--name", "crawl", "--lake", str(lake),
                       "--labelled", str(labelled)]) == 0
    model = json.loads((lake / "models/pair_score/en-pl/crawl/manifest.json").read_text())
    assert model["labels"] == "human" and model["negatives"] == []
    assert model["source"] == f"labelled {labelled}"
    checked = model["check"]
    assert checked["by"] == "leave one group out" and "embed_cosine" in checked["inputs"]
    assert checked["not_worse"] or model["features"] == [checked["best_input"]]
    # Both learners tried on the held-out fifths; the one kept weighs nothing against its
    # meaning (150 pairs: too few for the additive one's steps, measured linear).
    assert set(checked["learners"]) == {"linear", "additive"}
    assert against_meaning(model) == []
    assert filter_main(["--config", config, "--lake", str(lake), "--corpus", "crawl",
                        "--input", str(labelled), "--set", "pair_score.enabled=true",
                        "--set", "pair_score.model=crawl"]) == 0
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table().to_pylist()
    label = labels_of(labelled)
    kept = {x: [r["reject_rule"] is None for r in rows if label[r["line"] - 1] == x]
            for x in ("V", "A")}
    scored = {x: [r["pair_score"] for r in rows if label[r["line"] - 1] == x
                  and r["pair_score"] is not None] for x in ("V", "A")}
    # Measured: 89% of the valid pairs kept, 45% of the misaligned; AUC 0.83 (on the pairs it
    # was trained on: bench/crawl/pair_score.py measures it on languages it never saw).
    assert np.mean(kept["V"]) >= 0.8 and np.mean(kept["A"]) <= 0.6
    assert auc(scored["V"], scored["A"]) >= 0.75


@pytest.mark.integration  # whole training and filter jobs, in this process
def test_the_shipped_model_judges_a_run_with_the_bundled_encoder(spark, tmp_path: Path) -> None:
    """No model of en-fr in the lake: `latest` is the shipped paracrawl-use, trained on other
    ParaCrawl pairs (release 6.2; these are release 7's). It ranks the valid pairs above the
    misaligned ones."""
    from jobs.filtering.job import main as filter_main

    labelled = DATA / "crawl/labelled/en-fr.tsv"
    lake = tmp_path / "lake"
    assert filter_main(["--config", str(crawl_config(tmp_path, "en-fr")), "--lake", str(lake),
                        "--corpus", "crawl", "--input", str(labelled),
                        "--set", "pair_score.enabled=true"]) == 0
    rows = ds.dataset(lake / "tables/bitext", partitioning="hive").to_table().to_pylist()
    label = labels_of(labelled)
    scored = {x: [r["pair_score"] for r in rows if label[r["line"] - 1] == x
                  and r["pair_score"] is not None] for x in ("V", "A")}
    assert len(scored["V"]) >= 50 and len(scored["A"]) >= 15
    assert auc(scored["V"], scored["A"]) >= 0.7  # measured 0.76 (bench, all of en-fr: 0.81)


@pytest.mark.integration  # whole training and filter jobs, in this process
def test_made_negatives_checked_on_labelled_pairs(spark, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`--check`: the model of made negatives is checked on labelled pairs held apart (here
    Anki pairs it never saw, valid, and the same sources with another pair's target, A), and
    the manifest says which."""
    from jobs.scorer_training.pair_score import main as train_main

    pairs = anki_pairs(120)
    labelled = tmp_path / "check.tsv"
    labelled.write_text("".join(f"{z}\t{e}\tV\n" for z, e in pairs[:60]) + "".join(
        f"{z}\t{pairs[(i + 7) % 60][1]}\tA\n" for i, (z, _) in enumerate(pairs[60:])),
        encoding="utf-8")
    lake = tmp_path / "lake"
    assert train_main(["--config", str(REPO / "conf/zh-en.yaml"), "--name", "checked",
                       "--lake", str(lake), "--max-pairs", "400", "--check", str(labelled),
                       "--input", str(DATA / "tatoeba-zh-en.zh"),
                       str(DATA / "tatoeba-zh-en.en")]) == 0
    model = json.loads((lake / "models/pair_score/zh-en/checked/manifest.json").read_text())
    checked = model["check"]
    assert checked["by"] == "labelled pairs (--check)"
    assert checked["pairs"] <= 120 and 0 < checked["valid"] <= 60
    assert set(checked["inputs"]) == set(model["features"]) or len(model["features"]) == 1
    # A check whose bad pairs the rules all reject (copies) cannot rank: one line naming it,
    # exit 2, said before a model is fitted (no "training" line, no model saved).
    copies = tmp_path / "copies.tsv"
    copies.write_text("".join(f"{z}\t{e}\tV\n" for z, e in pairs[:30]) + "".join(
        f"{e}\t{e}\tA\n" for _, e in pairs[30:40]), encoding="utf-8")
    capsys.readouterr()
    assert train_main(["--config", str(REPO / "conf/zh-en.yaml"), "--name", "unchecked",
                       "--lake", str(lake), "--max-pairs", "400", "--check", str(copies),
                       "--input", str(DATA / "tatoeba-zh-en.zh"),
                       str(DATA / "tatoeba-zh-en.en")]) == 2
    err = capsys.readouterr().err
    assert f"--check {copies}: the pairs the rules keep are all valid" in err, err
    assert not (lake / "models/pair_score/zh-en/unchecked").exists()


@pytest.mark.parametrize("option,labels,said", [
    ("--check", "VV", "every pair is valid"), ("--labelled", "AA", "every pair is bad"),
    ("--check", "", "no labelled pairs")])
def test_labelled_pairs_of_one_class_are_one_line_before_spark(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, labels: str,
        said: str) -> None:
    """Refused as the file is read, before a session starts or a model is fitted."""
    from jobs.scorer_training.pair_score import main as train_main

    path = tmp_path / "labels.tsv"
    path.write_text("".join(f"{z}\t{e}\t{lab}\n" for (z, e), lab in zip(
        anki_pairs(len(labels)), labels, strict=True)), encoding="utf-8")
    source = ["--input", str(DATA / "tatoeba-zh-en.zh"),
              str(DATA / "tatoeba-zh-en.en")] if option == "--check" else []
    assert train_main(["--config", str(REPO / "conf/zh-en.yaml"), "--name", "x", "--lake",
                       str(tmp_path / "lake"), option, str(path), *source]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"{option} {path}: {said}" + (
        "" if not labels else ": labelled pairs need both valid and bad ones")), err
    assert len(err.splitlines()) == 1 and not (tmp_path / "lake").exists()


@pytest.mark.integration  # a refresh in this process
@pytest.mark.parametrize("case,settings,said", [
    ("missing", "{enabled: true, model: no-such-model}",
     "pair_score.model no-such-model: no such model"),
    # the model shipped for the bundled encoder reads the embedding cosine, off here
    ("no_embedding", "{enabled: true}", "reads the embedding cosine: set embedding.enabled=true"),
])
def test_a_refresh_whose_pair_score_model_cannot_run_fails_before_reading_a_file(
        spark, tmp_path: Path, case: str, settings: str, said: str) -> None:
    """As a filter run does (jobs/filtering/job.py): the one-line config error at once, not
    after the refresh has ingested, normalized and scored its new files."""
    from jobs.kit.errors import ConfigError
    from jobs.lake.store import Lake
    from jobs.refreshing.config import load_refresh_config
    from jobs.refreshing.job import refresh

    sources = tmp_path / "incoming"
    sources.mkdir()
    (sources / "a.tsv").write_text("".join(f"{z}\t{e}\n" for z, e in anki_pairs(20)),
                                   encoding="utf-8")
    lake_root = tmp_path / "lake"
    path = tmp_path / "refresh.yaml"
    path.write_text(f"extends: {REPO}/conf/zh-en.yaml\n"
                    f"lake: {{root: {lake_root}, database: ps_refresh_{case}}}\n"
                    f"pair_score: {settings}\n"
                    f"sources:\n  - {{corpus: crawl, path: {sources}, format: tsv}}\n",
                    encoding="utf-8")
    cfg = load_refresh_config(str(path))
    with pytest.raises(ConfigError, match=said):
        refresh(spark, Lake(spark, cfg.lake.root, cfg.lake.database), cfg, "ps-1", False)
    assert not (lake_root / "runs").exists() and not (lake_root / "tables").exists()
