"""A pair_score from human-labelled crawl pairs, judged on languages it never saw (issue 39).

The ParaCrawl human labels (../shared/data/bitext/paracrawl-human-labels/, English with 25
languages; V valid, A misaligned, MT machine translation, E error, F free, L wrong language,
T tokenization) go through the filter's own scoring (jobs/scorer_training/pair_score.py
`scored`: normalize, the rules' scores, the --encoder's cosine on every row; the bundled USE
by default), and
the features the filter's pair_score reads (udfs/pair_features.py) are kept, one Parquet file
per release and encoder in --work (computed once; ~12 minutes for both releases on local[2]
with USE, ~45 with e5-small).

Then leave one language out: for each language L, a model is trained on release 6.2's labels of
the other 24 languages (jobs/filtering/pair_score_model.py `train_on_labels`: the monotone
linear or additive learner, whichever ranks better when each of those 24 is left out in turn,
and its check against the best single input) and judged on release 7's pairs of L (other pairs,
another labelling, a language it did not see). Per language: AUC of valid vs rest, vs
misaligned (A), vs machine translation (MT), for the model and each input alone, over the pairs
the rules keep; the default decision's valid kept and misaligned / wrong-language rejected (the
rules plus the model's threshold), each with a bootstrap 95% interval. The fits take ~20 minutes
on 2 cores: each language's model chooses its learner by leaving each of the other 24 out.

    python -m bench.crawl.pair_score [--encoder use-multilingual|e5-small] [--work DIR]
        [--langs da,fr,...] [--out result.json] [--ship conf/pair_score/paracrawl-use.json]

`--ship` trains on release 6.2 of every language and writes the model the filter ships for
that encoder (conf/pair_score/paracrawl-use.json, paracrawl-e5-small.json).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.crawl.rule_loss import LABELS, labelled_pairs
from bench.kit import write_json

TRAIN_RELEASE = "paracrawl-v6-2-validation"
TEST_RELEASE = "paracrawl-v7-validation"
RESAMPLES = 1000
SEED = 7


def features(spark: Any, release: str, langs: list[str], encoder: str, work: Path) -> Any:
    """One row per labelled pair of `release`: lang, label, alive (kept by the rules),
    reject_rule and every pair_score feature, scored as the filter scores. Each language's
    rows are kept in `work` as they are done (a long e5-small run resumes where it stopped)."""
    import pandas as pd
    from pyspark.sql import functions as F

    from jobs.filtering.config import load_config
    from jobs.filtering.stages import rule_row
    from jobs.scorer_training.pair_score import scored
    from udfs.pair_features import available, feature_columns

    parts = []
    for lang in langs:
        done = work / f"{cache_name(release, encoder)}.parts" / f"{lang}.parquet"
        if done.is_file():
            parts.append(pd.read_parquet(done))
            continue
        rows = labelled_pairs(LABELS / release / f"sorted.en-{lang}")
        cfg = load_config(None, ["embedding.enabled=true", f"embedding.encoder={encoder}"],
                          {"pair": f"en-{lang}"})
        df = scored(spark, [(s, t, int(label == "V"), label, False) for s, t, label in rows],
                    cfg)
        names = available(df.columns)
        part = df.select(F.lit(lang).alias("lang"), F.col("kind").alias("label"),
                         F.col("reject_rule").isNull().alias("alive"), "reject_rule",
                         "src", "tgt",  # the pair itself, for probing features not stored
                         *[c.alias(n.removeprefix("f_"))
                           for n, c in feature_columns(names, rule_row(cfg)).items()]
                         ).toPandas()
        print(f"{release} en-{lang}: {len(part)} pairs, {int(part.alive.sum())} kept by the "
              "rules", flush=True)
        done.parent.mkdir(parents=True, exist_ok=True)
        part.to_parquet(done)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def cached_features(work: Path, langs: list[str], encoder: str) -> dict[str, Any]:
    """{release: features}, computed once into --work."""
    import pandas as pd

    out, missing = {}, []
    for release in (TRAIN_RELEASE, TEST_RELEASE):
        path = work / cache_name(release, encoder)
        if path.is_file():
            out[release] = pd.read_parquet(path).rename(
                columns=lambda c: c.removeprefix("f_"))
        else:
            missing.append(release)
    unread = [n for n in SHIPPED_FEATURES if any(n not in df.columns for df in out.values())]
    if missing or unread:
        from jobs.lake.session import build_session

        spark = build_session("crawl-pair-score", str(work / "lake"), master="local[2]",
                              conf={"spark.sql.shuffle.partitions": "4",
                                    "spark.ui.enabled": "false"})
        for release in missing:
            out[release] = features(spark, release, langs, encoder, work)
            out[release].to_parquet(work / cache_name(release, encoder))
        for release, df in out.items():
            out[release] = with_text_features(spark, df)
        spark.stop()
    return out


def with_text_features(spark: Any, df: Any) -> Any:
    """`df` with every feature read off the pair's text alone (`needs` src and tgt, or the
    English side's LM score) that it lacks: a feature added after the cache was made,
    computed by the filter's own code on the cached text (the encoder's hour is not spent
    again)."""
    from pyspark.sql import functions as F

    from jobs.filtering.config import load_config
    from jobs.filtering.stages import rule_row
    from jobs.lake.models import for_executors
    from udfs.pair_features import FEATURES, feature_columns
    from udfs.side_lm import ENGLISH_LM, add_english_lm

    names = [f.name for f in FEATURES if set(f.needs) <= {"src", "tgt", ENGLISH_LM}
             and f.name not in df]
    if not names:
        return df
    if "src" not in df.columns:
        raise SystemExit("the feature cache was made before it kept the pairs' text: delete "
                         "--work's parquet files and run again")
    cfg = load_config(None, [], {"pair": "en-fr"})  # every labelled pair is English first
    text = spark.createDataFrame(df[["src", "tgt"]].reset_index(names="row"))
    if any(ENGLISH_LM in f.needs for f in FEATURES if f.name in names):
        lm = for_executors(spark, str(cfg.pair_score.english_lm), "pair_score.english_lm")
        text = add_english_lm(text, cfg.sides, lm, F.lit(True))
    got = text.select("row", *[c.alias(n.removeprefix("f_")) for n, c in
                               feature_columns(names, rule_row(cfg)).items()]).toPandas()
    return df.join(got.set_index("row"))


def cache_name(release: str, encoder: str) -> str:
    # USE's files keep the name they had before there was a choice of encoder.
    return f"{release}.parquet" if encoder == "use-multilingual" else \
        f"{release}.{encoder}.parquet"


def all_langs() -> list[str]:
    return sorted(p.name.rsplit("-", 1)[1] for p in (LABELS / TEST_RELEASE).glob("sorted.en-*"))


# The features a default run with the bundled encoder stores (embedding on, margin_k 0, no
# aligner): the only ones a model shipped for every pair can count on.
SHIPPED_FEATURES = ("char_len_ratio", "token_len_ratio", "min_tokens", "src_lang_fit",
                    "tgt_lang_fit", "src_script_share", "tgt_script_share", "punct_share_diff",
                    "bracket_mismatch", "copy_share", "embed_cosine", "number_mismatch",
                    "sentence_end_diff", "capitals_gap", "english_fluency")


def arrays(df: Any, names: list[str]) -> tuple[Any, Any]:
    return df[list(names)].to_numpy(dtype=float), (df.label == "V").to_numpy().astype(int)


def auc_ci(pos: Any, neg: Any, rng: Any) -> list[float | None]:
    """[AUC, low, high]: a percentile bootstrap 95% interval, valid and bad resampled apart."""
    import numpy as np

    from jobs.filtering.pair_score_model import auc

    if len(pos) == 0 or len(neg) == 0:
        return [None, None, None]
    boot = [auc(rng.choice(pos, len(pos)), rng.choice(neg, len(neg))) for _ in range(RESAMPLES)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return [round(auc(list(pos), list(neg)), 4), round(float(lo), 3), round(float(hi), 3)]


def share_ci(hits: Any, rng: Any) -> list[float | None]:
    """[share, low, high] of a boolean array, bootstrap 95% interval."""
    import numpy as np

    if len(hits) == 0:
        return [None, None, None]
    boot = [rng.choice(hits, len(hits)).mean() for _ in range(RESAMPLES)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return [round(float(hits.mean()), 4), round(float(lo), 3), round(float(hi), 3)]


def judge(model: dict[str, Any], threshold: float, test: Any, names: list[str],
          rng: Any) -> dict[str, Any]:
    """The model and each input alone on one language's held-out pairs: AUCs over the pairs
    the rules keep, and the decision (rules, then the threshold) per label."""
    from jobs.filtering.pair_score_model import oriented, scores

    kept = test[test.alive]
    x, _ = arrays(kept, model["features"])
    mine = scores(model, x)
    inputs = oriented(names, kept[names].to_numpy(dtype=float))
    label = kept.label.to_numpy()
    out: dict[str, Any] = {"pairs": len(test), "kept_by_rules": len(kept),
                           "valid": int((test.label == "V").sum())}
    versus = {"rest": label != "V", "A": label == "A", "MT": label == "MT"}
    for against, bad in versus.items():
        out[f"auc_{against}"] = auc_ci(mine[label == "V"], mine[bad], rng)
        out[f"inputs_auc_{against}"] = {
            n: auc_ci(inputs[label == "V", i], inputs[bad, i], rng)[0]
            for i, n in enumerate(names)}
    passed = test.alive.to_numpy().copy()
    passed[test.alive.to_numpy()] = mine >= threshold
    every = test.label.to_numpy()
    out["valid_kept"] = share_ci(passed[every == "V"], rng)
    out["misaligned_rejected"] = share_ci(~passed[every == "A"], rng)
    out["wrong_language_rejected"] = share_ci(~passed[every == "L"], rng)
    return out


def trained(train: Any, names: list[str]) -> dict[str, Any]:
    """`train_on_labels` on the rows the rules keep (a filter run scores only those), each
    language a group: its threshold keeps 95% of the valid pairs, each scored by the model
    fitted without its language."""
    from jobs.filtering.pair_score_model import train_on_labels

    kept = train[train.alive]
    x, y = arrays(kept, names)
    return train_on_labels(names, x, y, kept.lang.to_numpy())


def ship(train: Any, out: Path, encoder: str) -> None:
    """The model sluice ships for `encoder`, trained on every language."""
    from datetime import UTC, datetime

    from jobs.filtering.config import load_config

    model = trained(train, list(SHIPPED_FEATURES))
    manifest = {
        **model, "name": out.stem, "pair": "any",
        "source": f"ParaCrawl human evaluations, {TRAIN_RELEASE}: English with "
                  f"{train.lang.nunique()} languages, {int(train.alive.sum())} labelled pairs "
                  "the default rules keep (github.com/paracrawl/human-evaluations, "
                  "CC-BY-SA-4.0); V valid, every other label not",
        "trained_by": f"python -m bench.crawl.pair_score --encoder {encoder} --ship {out}",
        "train_pairs": int(train.alive.sum()), "negatives": [], "labels": "human",
        "align": False, "aligner": None, "embedding": True, "encoder": encoder,
        "english_lm": load_config(None, [], {}).pair_score.english_lm,
        "english_lm_source": "conf/lm/en-open.txt.gz (conf/lm/README.md): the English of "
                             "FLORES-200 devtest and NTREX-128 (CC-BY-SA 4.0), TICO-19 (CC0) "
                             "and the OpenNMT toy en-de (MIT)",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: AUC valid vs rest, each language scored by the model fitted without it: "
          f"{model['check']['auc']:.3f} (best input {model['check']['best_input']} "
          f"{model['check']['inputs'][model['check']['best_input']]:.3f})")


def leave_one_language_out(data: dict[str, Any], langs: list[str]) -> dict[str, Any]:
    import numpy as np

    train_all, test_all = data[TRAIN_RELEASE], data[TEST_RELEASE]
    names = list(SHIPPED_FEATURES)
    rng = np.random.default_rng(SEED)
    results = {}
    for lang in langs:
        model = trained(train_all[train_all.lang != lang], names)
        kept = ("features", "learner", "weights", "c")
        results[lang] = {"model": {k: model.get(k) for k in kept},
                         "check": model["check"]["not_worse"],
                         "learners": model["check"].get("learners"),
                         **judge(model, model["threshold"], test_all[test_all.lang == lang],
                                 names, rng)}
        r = results[lang]
        print(f"en-{lang}: AUC valid vs rest {r['auc_rest'][0]:.3f} (cosine "
              f"{r['inputs_auc_rest']['embed_cosine']:.3f}), vs A {r['auc_A'][0]:.3f} (cosine "
              f"{r['inputs_auc_A']['embed_cosine']:.3f}); valid kept {r['valid_kept'][0]:.1%}, "
              f"A rejected {r['misaligned_rejected'][0]:.1%}", flush=True)
    return results


def table(results: dict[str, Any]) -> str:
    head = ["lang", "AUC V/rest", "best input", "AUC V/A", "best input", "AUC V/MT",
            "valid kept", "A rejected", "L rejected"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def best(r: dict, against: str) -> str:
        inputs = {k: v for k, v in r[f"inputs_auc_{against}"].items() if v is not None}
        name = max(inputs, key=inputs.get)
        return f"{inputs[name]:.3f} {name}"

    def ci(x: list) -> str:
        return "-" if x[0] is None else f"{x[0]:.3f} [{x[1]:.2f}, {x[2]:.2f}]"

    def pct(x: list) -> str:
        return "-" if x[0] is None else f"{x[0]:.1%} [{x[1]:.0%}, {x[2]:.0%}]"

    for lang, r in sorted(results.items()):
        lines.append("| " + " | ".join([
            lang, ci(r["auc_rest"]), best(r, "rest"), ci(r["auc_A"]), best(r, "A"),
            ci(r["auc_MT"]), pct(r["valid_kept"]), pct(r["misaligned_rejected"]),
            pct(r["wrong_language_rejected"])]) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--encoder", default="use-multilingual",
                   help="a key of embedding.encoders: use-multilingual or e5-small")
    p.add_argument("--work", type=Path, default=Path("/tmp/sluice-crawl-pair-score"))
    p.add_argument("--langs", default="", help="comma-separated; default: all 25")
    p.add_argument("--out", type=Path)
    p.add_argument("--ship", type=Path, help="train on all of release 6.2; write the model")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    langs = [x for x in args.langs.split(",") if x] or all_langs()
    data = cached_features(args.work, all_langs(), args.encoder)
    if args.ship:
        ship(data[TRAIN_RELEASE], args.ship, args.encoder)
        return
    results = leave_one_language_out(data, langs)
    print(table(results))
    if args.out:
        write_json(args.out, results)


if __name__ == "__main__":
    main()
