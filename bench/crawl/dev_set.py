"""How well sluice's pair judgements separate valid from bad pairs on our own labelled dev set,
tests/data/labelled/opennmt-toy-ende-400.tsv (issue 23): 400 real en-de Europarl / News
Commentary / CommonCrawl pairs judged valid (336), misaligned (50), mt (8), wrong_language (4)
or other (2); see its README.

The real filter job (jobs/filter.py `main`, in this process, a lake in a temporary directory)
runs on the 400 pairs as one en-de TSV input (text as in the file: Moses-tokenized, `&apos;`
escapes left to sluice's normalize), once per configuration:

- default: the rules, language ID and dedup (conf/defaults.yaml)
- embed: + embedding similarity, USE multilingual (the default encoder), margin_k 4
- align: + word alignment as configured: an aligner trained on the run's clean pairs, which
  needs align.min_train_pairs (10,000) of them; with 400 none is trained and the scores are null
- align_ref: + word alignment by a reference aligner trained on newstest en-de 2014-2020
  (the way `python -m jobs.align_reference` trains one; the dev set's sources are not news)
- pair_score: + embedding (margin_k 0) and the learned pair_score, trained as
  bench/crawl/made_negatives.py trains it for en-de (newstest 2017-2019, --train-pairs spread
  evenly, rules + embedding cosine) with jobs/train_pair_score.py's `train` (held-apart fifth, the
  threshold keeping 95% of its clean pairs); the embedding cosine threshold still applies
- pair_score_only: the same with the cosine threshold off (embedding.min_cosine=-1), so that
  pair_score decides alone and is computed on every pair the rules keep
- shipped: embedding on and the pair_score sluice ships (conf/pair_score/paracrawl-use.json,
  trained on ParaCrawl's human labels of 25 other languages), as a new lake's `latest` gives it

The decided rows are read back from the bitext table with pyarrow. Per run: the share of each
label the funnel keeps, and for each score the ROC AUC of valid vs the rest and of valid vs
misaligned, over the pairs that score was computed for (the pair scorers only see the rows the
rules and dedup kept; the counts are printed). Every score is oriented by its meaning so that
higher = more valid: cosine, margin, coverage, alignment log-probabilities, pair_score and
language probabilities as stored; token and character length ratios as -|log ratio|;
punctuation shares as -|src - tgt|; copy share, copied words and bracket mismatch negated.
Per-side scores with no better-or-worse direction (chars, tokens, characters per word,
longest word, digit share, script share) are left out. With each AUC, one operating point: the
share of misaligned (and of all bad) pairs below the score's 5th percentile over valid pairs,
i.e. rejected by a threshold that keeps 95% of the valid pairs it scores.

The dev set is small and one judge's reading: 50 misaligned and 4 wrong-language pairs, so an
AUC has a wide error. Each AUC comes with a bootstrap 95% interval (1000 resamples of the
valid and the other pairs separately, seeded). The hardest pairs of each scorer (misaligned
scored highest, valid lowest) are listed by the dev set's line number.

    python -m bench.crawl.dev_set [--runs default,embed,align,align_ref,pair_score,pair_score_only]
        [--train-pairs 3000] [--work DIR] [--out f.json]

All six runs take about 3 minutes on local[2] (the pair_score's training included).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.kit import REPO, SHARED, write_json

DEV = REPO / "tests/data/labelled/opennmt-toy-ende-400.tsv"
PAIR, DB = "en-de", "crawl_dev"
# The order they run in (align before align_ref: align would fall back to a saved aligner).
RUNS = ("default", "embed", "align", "align_ref", "pair_score", "pair_score_only", "shipped",
        "full", "full_model_threshold", "full_gated")
LABELS = ("valid", "wrong_language", "misaligned", "mt", "other")
BAD = LABELS[1:]
ALIGNER, MODEL, FULL_MODEL = "newstest-en-de", "newstest-en-de", "newstest-en-de-full"
# The scorers of the evaluation: a reference aligner, embeddings with margin_k 4.
FULL_SETS = ["align.enabled=true", f"align.reference={ALIGNER}", "embedding.enabled=true",
             "embedding.margin_k=4"]
SCORER_COLUMNS = ("embed_cosine", "embed_margin", "align_coverage", "align_fwd_logprob",
                  "align_rev_logprob", "pair_score")
RESAMPLES, SEED = 1000, 23


def load_dev(path: Path = DEV) -> list[dict[str, Any]]:
    """The labelled rows, split on tabs as the README says (no quoting, no stripping)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[0] == "line\tlabel\tnote\ten\tde", lines[0]
    rows = []
    for text in lines[1:]:
        if not text:
            continue
        fields = text.split("\t")
        assert len(fields) == 5 and "\r" not in text, text
        line, label, note, en, de = fields
        assert label in LABELS, label
        rows.append({"line": int(line), "label": label, "note": note, "en": en, "de": de})
    return rows


# -- scores, oriented so that higher = more valid ------------------------------------------
def neg_abs_log_ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else -abs(math.log((a + 1.0) / (b + 1.0)))


def lang_prob(probs: Any, accepted: list[str]) -> float | None:
    """The summed probability of the accepted labels (pyarrow gives a map as (key, value)s)."""
    return None if probs is None else sum(p for lang, p in probs if lang in accepted)


def negated(x: float | None) -> float | None:
    return None if x is None else -float(x)


def oriented(row: dict[str, Any], accept: dict[str, list[str]]) -> dict[str, float | None]:
    src, tgt = PAIR.split("-")
    out: dict[str, float | None] = {
        "-|log token_ratio|": (None if not row.get("token_ratio") else
                               -abs(math.log(row["token_ratio"]))),
        "-|log char ratio|": neg_abs_log_ratio(row.get("src_chars"), row.get("tgt_chars")),
        "-|punct_share diff|": (None if row.get("src_punct_share") is None
                                or row.get("tgt_punct_share") is None else
                                -abs(row["src_punct_share"] - row["tgt_punct_share"])),
        "-bracket_mismatch": negated(row.get("bracket_mismatch")),
        "-copy_share": negated(row.get("copy_share")),
        "-copied_words": negated(row.get("copied_words")),
        "src_lang_prob (en)": lang_prob(row.get("src_lang_probs"), accept.get(src, [src])),
        "tgt_lang_prob (de)": lang_prob(row.get("tgt_lang_probs"), accept.get(tgt, [tgt])),
    }
    for name in SCORER_COLUMNS:
        if name in row:
            out[name] = None if row[name] is None else float(row[name])
    return out


# -- AUC and its bootstrap interval --------------------------------------------------------
def auc(pos: Any, neg: Any) -> float:
    """P(a valid pair outscores a bad one), ties half (Mann-Whitney)."""
    from scipy.stats import rankdata

    ranks = rankdata(list(pos) + list(neg))
    n_pos, n_neg = len(pos), len(neg)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auc_ci(pos: list[float], neg: list[float], seed: int = SEED) -> dict[str, Any]:
    """AUC with a percentile bootstrap 95% interval (valid and bad resampled separately)."""
    import numpy as np

    if not pos or not neg:
        return {"auc": None, "ci95": None}
    rng = np.random.default_rng(seed)
    p, n = np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)
    boot = [auc(rng.choice(p, len(p)), rng.choice(n, len(n))) for _ in range(RESAMPLES)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"auc": round(auc(p, n), 4), "ci95": [round(float(lo), 3), round(float(hi), 3)]}


# -- the runs ------------------------------------------------------------------------------
def write_input(rows: list[dict[str, Any]], path: Path) -> None:
    """`en<TAB>de<TAB>dev line`: the TSV's line i is dev row i (the third field is provenance)."""
    path.write_text("".join(f"{r['en']}\t{r['de']}\t{r['line']}\n" for r in rows), "utf-8")


def train_aligner(spark: Any, root: Path, data: Path) -> str:
    """A reference aligner on distinct newstest en-de 2014-2020 pairs, saved in the lake."""
    from jobs.filtering.config import load_config
    from jobs.lake.models import AlignerStore
    from jobs.lake.store import Lake
    from udfs.align import train_alignment

    folder = data / "bitext/newstest" / PAIR
    pairs: list[tuple[str, str]] = []
    for en in sorted(folder.glob("newstest*.en")):
        de = en.with_suffix(".de")
        pairs += zip(en.read_text("utf-8").splitlines(), de.read_text("utf-8").splitlines(),
                     strict=True)
    pairs = list(dict.fromkeys((s, t) for s, t in pairs if s.strip() and t.strip()))
    store = AlignerStore(Lake(spark, str(root), DB), PAIR)
    if ALIGNER in store.names():  # a kept --work: trained before
        return f"{ALIGNER}, trained before in this --work"
    cfg = load_config(None, [], {"pair": PAIR})
    about = {"name": ALIGNER, "run_id": None, "source": f"{folder}/newstest*, distinct"}
    store.save(ALIGNER, lambda out: train_alignment(pairs, *cfg.langs, out, about))
    return f"{len(pairs)} distinct pairs of newstest {PAIR} 2014-2020"


def train_pair_score(spark: Any, root: Path, data: Path, n_pairs: int) -> dict[str, Any]:
    """The pair_score of bench/crawl/made_negatives.py's en-de training set, saved in the lake."""
    from bench.crawl.made_negatives import newstest, spread
    from jobs.filtering.config import load_config
    from jobs.lake.models import PairScoreStore
    from jobs.lake.store import Lake
    from jobs.scorer_training.pair_score import train

    cfg = load_config(None, ["embedding.enabled=true"], {"pair": PAIR})
    pairs = spread(newstest(data, PAIR, range(2017, 2020)), n_pairs)
    model = train(spark, cfg, [(s, t, None, None) for s, t in pairs])
    PairScoreStore(Lake(spark, str(root), DB), PAIR).save_manifest(
        MODEL, {**model, "source": f"newstest {PAIR} 2017-2019, {len(pairs)} pairs"})
    return {"train_pairs": len(pairs), "features": model["features"],
            "threshold": model["threshold"], "held_apart": model["held_apart"]}


def train_full_model(root: Path, data: Path, work: Path) -> dict[str, Any]:
    """The issue's evaluation set-up: `jobs/train_pair_score.py --input` on newstest en-de
    2014-2019 (the years' files one after another, so each line's neighbour is its
    document's next sentence), the reference aligner and embeddings (margin_k 4) on."""
    from jobs.scorer_training.pair_score import main

    src, tgt = PAIR.split("-")
    folder = data / "bitext/newstest" / PAIR
    for lang in (src, tgt):
        text = "".join((folder / f"newstest{y}.{lang}").read_text("utf-8") for y in
                       range(2014, 2020))
        (work / f"newstest-2014-2019.{lang}").write_text(text, "utf-8")
    argv = ["--config", str(REPO / "conf/defaults.yaml"), "--name", FULL_MODEL,
            "--lake", str(root), "--input", str(work / f"newstest-2014-2019.{src}"),
            str(work / f"newstest-2014-2019.{tgt}"), "--set", f"pair={PAIR}",
            "--set", f"lake.database={DB}"]
    for s in FULL_SETS:
        argv += ["--set", s]
    manifest = root / f"models/pair_score/{PAIR}/{FULL_MODEL}/manifest.json"
    if not manifest.exists() and main(argv) != 0:  # exists: a kept --work trained it before
        raise SystemExit("training the full pair_score failed")
    model = json.loads(manifest.read_text())
    return {k: model[k] for k in ("train_pairs", "features", "weights", "threshold",
                                  "threshold_floor", "clean_quantiles", "held_apart")}


def run_sets(run: str) -> list[str]:
    return {
        "default": [],
        "embed": ["embedding.enabled=true", "embedding.margin_k=4"],
        "align": ["align.enabled=true"],
        "align_ref": ["align.enabled=true", f"align.reference={ALIGNER}"],
        "pair_score": ["embedding.enabled=true", "pair_score.enabled=true",
                       f"pair_score.model={MODEL}"],
        # The cosine gate off: pair_score decides alone and is computed on every rule survivor.
        "pair_score_only": ["embedding.enabled=true", "embedding.min_cosine=-1",
                            "pair_score.enabled=true", f"pair_score.model={MODEL}"],
        # The model sluice ships (conf/pair_score/paracrawl-use.json: human-labelled ParaCrawl
        # pairs of 25 languages, German not among them): what `latest` is in a new lake.
        "shipped": ["embedding.enabled=true", "pair_score.enabled=true",
                    "pair_score.model=paracrawl-use"],
        # The evaluation: align + embedding (margin_k 4) + pair_score, defaults.
        "full": [*FULL_SETS, "pair_score.enabled=true", f"pair_score.model={FULL_MODEL}"],
        "full_model_threshold": [*FULL_SETS, "pair_score.enabled=true",
                                 f"pair_score.model={FULL_MODEL}", "pair_score.fit_to_run=false"],
        # align's and embedding's own cut-offs applied too, as before pair_score.decides_alone
        "full_gated": [*FULL_SETS, "pair_score.enabled=true", f"pair_score.model={FULL_MODEL}",
                       "pair_score.decides_alone=false"],
    }[run]


def filter_run(run: str, tsv: Path, root: Path) -> int:
    from jobs.filtering.job import main

    argv = ["--pair", PAIR, "--corpus", run, "--input", str(tsv), "--format", "tsv",
            "--lake", str(root), "--run-id", f"crawl-dev-{run}-{time.time_ns()}",
            "--set", f"lake.database={DB}"]
    for s in run_sets(run):
        argv += ["--set", s]
    return main(argv)


def decided_rows(root: Path, run: str) -> dict[int, dict[str, Any]]:
    """The run's rows of the bitext table (clean and rejected), by input line."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    # The run's own partition, its files' schemas unified: a dataset over the whole table
    # would take one file's columns, and runs with other scorers store other columns.
    path = root / f"tables/bitext/pair={PAIR}/corpus={run}"
    found = ds.dataset(path, format="parquet", partitioning="hive")
    schema = pa.unify_schemas([f.physical_schema for f in found.get_fragments()]
                              + [pa.schema([("outcome", pa.string())])])
    table = ds.dataset(path, schema=schema, format="parquet", partitioning="hive").to_table()
    return {r["line"]: r for r in table.to_pylist()}


# -- measuring a run -----------------------------------------------------------------------
def below(xs: list[float], cut: float) -> float:
    return sum(x < cut for x in xs) / len(xs) if xs else 0.0


def measure(dev: list[dict[str, Any]], rows: dict[int, dict[str, Any]],
            accept: dict[str, list[str]]) -> dict[str, Any]:
    import numpy as np

    assert len(rows) == len(dev), f"{len(rows)} rows back for {len(dev)} pairs"
    kept: dict[str, Any] = {}
    reasons: dict[str, Counter] = {label: Counter() for label in LABELS}
    scored: list[tuple[dict[str, Any], dict[str, float | None]]] = []
    for i, d in enumerate(dev, start=1):
        r = rows[i]
        assert r["extra"] == [str(d["line"])], (i, r["extra"])  # the row is this dev pair
        reasons[d["label"]][r["reject_rule"] or "kept"] += 1
        scored.append(({**d, "outcome": r["outcome"], "reject_rule": r["reject_rule"]},
                       oriented(r, accept)))
    for label in LABELS:
        n = sum(reasons[label].values())
        kept[label] = {"n": n, "kept": reasons[label]["kept"] / n if n else None}
    scores: dict[str, Any] = {}
    for name in scored[0][1]:
        have = [(d, s[name]) for d, s in scored if s[name] is not None]
        pos = [x for d, x in have if d["label"] == "valid"]
        rest = [x for d, x in have if d["label"] != "valid"]
        mis = [x for d, x in have if d["label"] == "misaligned"]
        entry: dict[str, Any] = {"n_valid": len(pos), "n_rest": len(rest), "n_misaligned": len(mis),
                                 "valid_vs_rest": auc_ci(pos, rest),
                                 "valid_vs_misaligned": auc_ci(pos, mis)}
        if pos:  # an operating point: the threshold that keeps 95% of the valid pairs scored
            cut = float(np.quantile(pos, 0.05))
            entry["at_95_valid"] = {"threshold": round(cut, 4),
                                    "rest_rejected": below(rest, cut),
                                    "misaligned_rejected": below(mis, cut)}
        if name in SCORER_COLUMNS and have:  # the pairs a scorer gets most wrong
            worst = sorted(have, key=lambda p: p[1])
            entry["misaligned_highest"] = [(d["line"], round(x, 3)) for d, x in worst[::-1]
                                           if d["label"] == "misaligned"][:6]
            entry["valid_lowest"] = [(d["line"], round(x, 3)) for d, x in worst
                                     if d["label"] == "valid"][:6]
        scores[name] = entry
    bad_kept = [(d["line"], d["label"]) for d, _ in scored
                if d["label"] != "valid" and d["outcome"] == "clean"]
    valid_rejected = [(d["line"], d["reject_rule"]) for d, _ in scored
                      if d["label"] == "valid" and d["outcome"] != "clean"]
    return {"kept": kept, "outcomes": {k: dict(v) for k, v in reasons.items()},
            "scores": scores, "bad_kept": bad_kept, "valid_rejected": valid_rejected}


# -- report --------------------------------------------------------------------------------
def fmt_auc(a: dict[str, Any]) -> str:
    if a["auc"] is None:
        return "-"
    return f"{a['auc']:.3f} [{a['ci95'][0]:.2f}, {a['ci95'][1]:.2f}]"


def markdown(results: dict[str, Any]) -> str:
    runs = {k: v for k, v in results["runs"].items() if "kept" in v}
    out = ["| run | valid kept | wrong_language rej. | misaligned rej. | mt rej. | other rej. "
           "| seconds (with training) |", "|---|---|---|---|---|---|---|"]
    for run, r in runs.items():
        k = r["kept"]
        cells = [f"{k['valid']['kept']:.1%} of {k['valid']['n']}"]
        cells += [f"{1 - k[lab]['kept']:.1%} of {k[lab]['n']}" for lab in BAD]
        out.append(f"| {run} | " + " | ".join(cells) + f" | {r['seconds']} |")
    out += ["", "| run | score (higher = more valid) | n valid/rest/misaligned | AUC valid vs rest "
            "[95% CI] | AUC valid vs misaligned [95% CI] | keeping 95% of valid: rest / "
            "misaligned rejected |", "|---|---|---|---|---|---|"]
    shown: set[str] = set()
    for run, r in runs.items():
        for name, s in r["scores"].items():
            if name not in SCORER_COLUMNS and name in shown:
                continue  # the rule scores are the same in every run: shown once
            shown.add(name)
            at = s.get("at_95_valid")
            if at is None:
                out.append(f"| {run} | {name} | 0 (not computed) | - | - | - |")
                continue
            out.append(f"| {run} | {name} | {s['n_valid']}/{s['n_rest']}/{s['n_misaligned']} | "
                       f"{fmt_auc(s['valid_vs_rest'])} | {fmt_auc(s['valid_vs_misaligned'])} | "
                       f"{at['rest_rejected']:.0%} / {at['misaligned_rejected']:.0%} |")
    out.append("")
    for run, r in runs.items():
        bad = {lab: [line for line, b in r["bad_kept"] if b == lab] for lab in BAD}
        out.append(f"- {run}: kept " + "; ".join(f"{lab} {v}" for lab, v in bad.items() if v)
                   + f"; valid rejected {r['valid_rejected']}")
        for name, s in r["scores"].items():
            if "misaligned_highest" in s:
                out.append(f"  - {name}: misaligned scored highest {s['misaligned_highest']}; "
                           f"valid lowest {s['valid_lowest']}")
    for run, r in results["runs"].items():
        if "note" in r or "kept" not in r:
            out.append(f"- {run}: {r.get('note', 'no result')}")
        if "aligner" in r:
            out.append(f"- {run}: reference aligner trained on {r['aligner']}")
    if "model" in results:
        m, held = results["model"], results["model"]["held_apart"]
        out.append(f"- pair_score model trained on {m['train_pairs']} newstest pairs "
                   f"({', '.join(m['features'])}); on its held-apart made negatives AUC "
                   f"{held['auc']:.3f}, threshold {m['threshold']:.3f}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=",".join(RUNS), help=f"of {', '.join(RUNS)}")
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--train-pairs", type=int, default=3000,
                        help="newstest pairs the pair_score is trained on "
                             "(bench/crawl/made_negatives.py)")
    parser.add_argument("--work", type=Path, help="keep the lake here (default: a temp dir)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    wanted = set(args.runs.split(","))
    if wanted - set(RUNS):
        parser.error(f"unknown runs: {', '.join(sorted(wanted - set(RUNS)))}")
    # The Python workers need this venv; C1-only JIT halves a short JVM's CPU (tests/conftest).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 "
                          "-XX:ReservedCodeCacheSize=240m")
    from jobs.filtering.config import load_config
    from jobs.lake.session import build_session

    started = time.time()
    dev = load_dev()
    accept = load_config(None, [], {"pair": PAIR}).langid.accept
    with tempfile.TemporaryDirectory(prefix="crawl-dev-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        root, tsv = work / "lake", work / "opennmt-toy-ende-400.tsv"
        write_input(dev, tsv)
        # The session every filter run below reuses (one JVM, local[2]).
        spark = build_session("sluice-crawl-dev", str(root), master="local[2]", lock=True,
                              conf={"spark.sql.shuffle.partitions": "4",
                                    "spark.ui.enabled": "false"})
        results: dict[str, Any] = {"dev": str(DEV.relative_to(REPO)), "pairs": len(dev),
                                   "labels": dict(Counter(d["label"] for d in dev)),
                                   "bootstrap": {"resamples": RESAMPLES, "seed": SEED},
                                   "runs": {}}
        for run in (r for r in RUNS if r in wanted):
            t0 = time.time()
            entry: dict[str, Any] = {"sets": run_sets(run)}
            results["runs"][run] = entry
            if run == "align_ref":
                entry["aligner"] = train_aligner(spark, root, args.data)
            if run.startswith("pair_score") and "model" not in results:
                results["model"] = train_pair_score(spark, root, args.data, args.train_pairs)
            if run.startswith("full") and "full_model" not in results:
                if "align_ref" not in wanted:
                    entry["aligner"] = train_aligner(spark, root, args.data)
                results["full_model"] = train_full_model(root, args.data, work)
            entry["train_seconds"] = round(time.time() - t0, 1)
            code = filter_run(run, tsv, root)
            if code != 0:
                entry["note"] = f"filter run failed with exit code {code}"
                continue
            entry.update(measure(dev, decided_rows(root, run), accept))
            entry["seconds"] = round(time.time() - t0, 1)
            if run == "align" and not entry["scores"]["align_coverage"]["n_valid"]:
                entry["note"] = ("no aligner: the run's clean pairs are under "
                                 "align.min_train_pairs and the lake has no saved one; "
                                 "align scores null, nothing rejected by align")
        spark.stop()
    results["seconds"] = round(time.time() - started, 1)
    print(markdown(results))
    print(f"\ntotal {results['seconds']} s")
    if args.out:
        write_json(args.out, results)


if __name__ == "__main__":
    main()
