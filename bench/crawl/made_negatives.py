"""The learned pair_score on real pairs it was not trained on: AUC of clean vs each kind of
made-bad pair, and what its threshold keeps and rejects.

Trained as `jobs/train_pair_score.py` trains (newstest 2017-2019 of the pair, up to
--pairs), measured on pairs from other sources held apart from training: newstest 2020 and
FLORES-200 devtest, with negatives made from those alone. Two feature sets: the rule scores
alone, and with the embedding cosine (USE multilingual, the default encoder); and two models
on the second: the logistic regression sluice uses, and scikit-learn's gradient boosting.

No human labels here (the issue's human-labelled web pairs are held out from us): these are
synthetic negatives and real clean pairs only, so the numbers say how well each kind of
damage is seen, not how a web crawl's pairs are judged.

    python -m bench.crawl.made_negatives --pair zh-en [--pairs 3000] [--eval 1000] [--out r.json]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

from bench.kit import REPO, SHARED, write_json
from jobs.filtering.config import load_config
from jobs.filtering.pair_score_model import KEEP_VALID, NEGATIVE_KINDS, auc, fit_monotone, negatives
from jobs.filtering.stages import rule_row
from udfs.pair_features import available, feature_columns, score_python

FLORES_COLUMN = {"zh": "zho_Hans", "ru": "rus", "de": "deu", "en": "eng"}


def newstest(data: Path, pair: str, years: range) -> list[tuple[str, str]]:
    src, tgt = pair.split("-")
    folder = data / "bitext/newstest" / pair
    out: list[tuple[str, str]] = []
    for year in years:
        a, b = folder / f"newstest{year}.{src}", folder / f"newstest{year}.{tgt}"
        if a.exists() and b.exists():
            out += zip(a.read_text(encoding="utf-8").splitlines(),
                       b.read_text(encoding="utf-8").splitlines(), strict=True)
    return [(s, t) for s, t in out if s.strip() and t.strip()]


def flores(data: Path, pair: str) -> list[tuple[str, str]]:
    src, tgt = pair.split("-")
    with (data / "bitext/multiway_flores200_devtest.tsv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [(r[FLORES_COLUMN[src]], r[FLORES_COLUMN[tgt]]) for r in rows]


def spread(pairs: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    step = max(1, len(pairs) // n)
    return pairs[::step][:n]


def feature_table(spark, pairs: list[tuple[str, str]], cfg, held: bool):
    from jobs.scorer_training.pair_score import scored

    src_lang, tgt_lang = cfg.langs
    rows = [(s, t, 1, "clean", held) for s, t in pairs]
    rows += [(s, t, 0, kind, held) for s, t, kind in negatives(pairs, src_lang, tgt_lang)]
    df = scored(spark, rows, cfg)
    names = [n for n in available(df.columns) if n != "embed_margin"]
    cols = [c.alias(n.removeprefix("f_")) for n, c in feature_columns(names, rule_row(cfg)).items()]
    return names, df.select("label", "kind", *cols).toPandas()


def evaluate(scores, table) -> dict:
    import numpy as np

    scores = np.asarray(scores)
    pos = scores[table.label.to_numpy() == 1]
    threshold = float(np.quantile(pos, 1 - KEEP_VALID))
    out = {"auc": auc(list(pos), list(scores[table.label.to_numpy() == 0])),
           "kept_clean": float((pos >= threshold).mean()), "kinds": {}}
    for kind in NEGATIVE_KINDS:
        neg = scores[table.kind.to_numpy() == kind]
        out["kinds"][kind] = {"auc": auc(list(pos), list(neg)),
                              "rejected": float((neg < threshold).mean())}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="zh-en")
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--pairs", type=int, default=3000)
    parser.add_argument("--eval", type=int, default=1000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers need this venv
    from pyspark.sql import SparkSession
    from sklearn.ensemble import HistGradientBoostingClassifier

    spark = (SparkSession.builder.master("local[2]").appName("pair_score bench")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    train_pairs = spread(newstest(args.data, args.pair, range(2017, 2020)), args.pairs)
    eval_pairs = spread(newstest(args.data, args.pair, range(2020, 2021))
                        + flores(args.data, args.pair), args.eval)
    results: dict = {"pair": args.pair, "train_pairs": len(train_pairs),
                     "eval_pairs": len(eval_pairs)}
    for label, sets in (("rules", ["embedding.enabled=false"]),
                        ("rules+embedding", ["embedding.enabled=true"])):
        cfg = load_config(REPO / f"conf/{args.pair}.yaml"
                          if (REPO / f"conf/{args.pair}.yaml").exists() else None,
                          sets, {"pair": args.pair})
        start = time.time()
        names, train = feature_table(spark, train_pairs, cfg, False)
        _, held = feature_table(spark, eval_pairs, cfg, True)
        model = fit_monotone(names, train[names].to_numpy(dtype=float), train.label.to_numpy())
        lr = [score_python(model, dict(zip(names, v, strict=True)))
              for v in held[names].itertuples(index=False)]
        results[label] = {"features": names, "logistic": evaluate(lr, held),
                          "weights": dict(zip(names, model["weights"], strict=True)),
                          "seconds": round(time.time() - start, 1)}
        boosted = HistGradientBoostingClassifier(random_state=13).fit(
            train[names].to_numpy(dtype=float), train.label.to_numpy())
        gb = boosted.predict_proba(held[names].to_numpy(dtype=float))[:, 1]
        results[label]["gradient_boosting"] = evaluate(gb, held)
        for model_name in ("logistic", "gradient_boosting"):
            r = results[label][model_name]
            print(f"{args.pair} {label:16} {model_name:17} AUC {r['auc']:.3f}; at the "
                  f"threshold keeping {r['kept_clean']:.0%} of clean: " + ", ".join(
                      f"{k} {v['rejected']:.0%} (AUC {v['auc']:.2f})"
                      for k, v in r["kinds"].items()))
    if args.out:
        write_json(args.out, results)
    spark.stop()


if __name__ == "__main__":
    main()
