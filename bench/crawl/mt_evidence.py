"""pair_score with the MT detector, the website evidence and the tokenization artifacts, on
crawl pairs of languages it never saw (issue 67, item 5).

bench/crawl/pair_score.py's protocol (its feature cache in --work, the same learner choice:
`train_on_labels`, monotone linear or additive, checked against its best input): for each
language L, a pair_score is trained on release 6.2's labels of the other 24 languages and
judged on release 7's pairs of L the rules keep. The features are the shipped model's plus:

- `mt_human`, each pair scored by an MT detector that never saw its language: the two fold
  models of bench/crawl/mt_detector.py (`--detectors DIR`: DIR/fold0/model was trained on
  the second group of languages and scores the first, DIR/fold1/model the other way round);
- `host_mt` (jobs/filtering/hosts.py) over the release's labelled pairs of all 25 languages
  (url1's registrable domain), from the same out-of-fold scores, never a label; with
  `--lake-scaled`, a third model also reads `host_langs` and `host_pairs`, counted over the
  same labelled pairs (a sample: a lake's counts are on another scale);
- `src_tok_artifacts`, `tgt_tok_artifacts`;
- with `--cross-encoders DIR`, a third model also reads `cross_encoder` (as log-odds), each
  pair scored by the fold model of bench/crawl/cross_encoder.py that never saw its language
  (DIR/fold{0,1}, that bench's --work).

Beside the AUCs over all of L's kept pairs, the same over those whose website no training
pair came from ("hosts apart"). The detectors' scores are cached in --work (~20 minutes for
both releases on 2 cores); the fits take ~40 minutes (`--linear`: a few).

    python -m bench.crawl.mt_evidence --detectors /tmp/sluice-mt-detector [--work DIR]
        [--cross-encoders /tmp/sluice-cross-encoder] [--encoder e5-small]
        [--langs da,fr,...] [--linear] [--lake-scaled] [--out result.json]
    python -m bench.crawl.mt_evidence --detectors DIR --cross-encoders DIR \
        [--encoder e5-small] --ship conf/pair_score/paracrawl-use-mt.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bench.crawl.cross_encoder import BASE, language_groups
from bench.crawl.cross_encoder import host as netloc
from bench.crawl.pair_score import (
    SEED,
    SHIPPED_FEATURES,
    TEST_RELEASE,
    TRAIN_RELEASE,
    all_langs,
    cached_features,
    judge,
    trained,
)
from bench.crawl.rule_loss import LABELS
from bench.kit import write_json
from jobs.filtering.pair_score_model import auc, scores
from udfs.hosts import registrable
from udfs.pair_features import LOG_ODDS_FLOOR

# host_pairs and host_langs count a lake's pairs: over these labelled samples (1,000 pairs a
# language) their scale is not a real lake's, so the shipped model leaves them out (a model
# trained on a user's own lake can read them); host_mt, a mean, carries over.
NEW_FEATURES = ("mt_human", "host_mt", "src_tok_artifacts", "tgt_tok_artifacts")
LAKE_SCALED = ("host_langs", "host_pairs")
# The shipped pair_score of each encoder, whose manifest the MT-evidence model extends.
SHIPPED = {"use-multilingual": "paracrawl-use.json", "e5-small": "paracrawl-e5-small.json"}


def hosts_of(release: str, lang: str) -> list[str | None]:
    """url1's registrable domain for each labelled pair of a file, in labelled_pairs' order."""
    out = []
    path = LABELS / release / f"sorted.en-{lang}"
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        fields = line.split("\t")
        if len(fields) > 5 and fields[2].strip() and fields[3].strip():
            name = netloc(fields[0]).split(":")[0]
            out.append(registrable(name) or name or None)
    return out


def with_fold_scores(df: Any, release: str, column: str, models: Path, work: Path) -> Any:
    """`column` of every pair, from the fold model that never saw its language (cached):
    models/fold{k} (or models/fold{k}/model, the MT detector bench's layout) scores group k."""
    import pandas as pd

    from udfs.cross_encoder_model import CrossEncoder

    cache = work / f"{release}.{column}.parquet"
    if cache.is_file():
        return df.assign(**{column: pd.read_parquet(cache)[column].to_numpy()})
    out = np.full(len(df), np.nan)
    for k, group in enumerate(language_groups()):
        fold = models / f"fold{k}"
        fold = fold / "model" if (fold / "model").is_dir() else fold
        model = CrossEncoder(str(fold), BASE, "cpu", 2)
        mask = df.lang.isin(group).to_numpy()
        out[mask] = model.score(df.src[mask].tolist(), df.tgt[mask].tolist())
        print(f"{release}: {column} of {int(mask.sum())} pairs of {' '.join(group)}", flush=True)
    pd.DataFrame({column: out}).to_parquet(cache)
    return df.assign(**{column: out})


def with_cross_encoder(df: Any, release: str, models: Path, work: Path) -> Any:
    """`cross_encoder` out of fold, as the pair_score reads it: log-odds
    (udfs/pair_features.py `log_odds`, the same floor)."""
    df = with_fold_scores(df, release, "cross_encoder", models, work)
    p = np.clip(df.cross_encoder.to_numpy(dtype=float), LOG_ODDS_FLOOR, 1 - LOG_ODDS_FLOOR)
    return df.assign(cross_encoder=np.log(p / (1 - p)))


def with_hosts(df: Any, release: str) -> Any:
    """host and the host features over the release's pairs (all languages, every label)."""
    hosts = []
    for lang in df.lang.unique():  # the cache holds each language's rows in file order
        found = hosts_of(release, lang)
        assert len(found) == int((df.lang == lang).sum()), lang
        hosts += found
    df = df.assign(host=hosts)
    site = df.groupby("host")
    n = site.lang.transform("size")
    s, c = site.mt_human.transform("sum"), site.mt_human.transform("count")
    others = c - df.mt_human.notna()
    return df.assign(host_pairs=n - 1, host_langs=site.lang.transform("nunique"),
                     host_mt=np.where(others > 0, (s - df.mt_human.fillna(0)) / others.clip(1),
                                      np.nan))


def linear(train: Any, names: list[str]) -> dict[str, Any]:
    """`train_on_labels`'s monotone linear learner alone, its strength chosen the same way
    (leave one language out), its threshold keeping 95% of the valid pairs it was fitted on."""
    from jobs.filtering.pair_score_model import choose_c, fit_monotone, thresholds

    kept = train[train.alive]
    x, y = kept[names].to_numpy(dtype=float), (kept.label == "V").to_numpy().astype(int)
    c, _ = choose_c(names, x, y, kept.lang.to_numpy())
    model = fit_monotone(names, x, y, c)
    return {**model, **thresholds(scores(model, x)[y == 1])}


def ship(train: Any, out: Path, cross_encoder: bool, encoder: str) -> None:
    """The shipped model with the MT evidence: bench/crawl/pair_score.py's, with
    NEW_FEATURES (and `cross_encoder`), each pair's `mt_human` (`cross_encoder`) from a fold
    model that never saw its language (what the shipped one gives a language it was not
    trained on)."""
    import json
    from datetime import UTC, datetime

    base = out.with_name(SHIPPED[encoder])  # the encoder's model without the MT evidence
    manifest = json.loads(base.read_text(encoding="utf-8"))
    model = trained(train, [*SHIPPED_FEATURES, *NEW_FEATURES,
                            *(["cross_encoder"] if cross_encoder else [])])
    for key in ("weights", "means", "stds", "shapes", "c", "intercept", "learner"):
        manifest.pop(key, None)
    manifest.update(model)
    manifest.update({
        "name": out.stem,
        "source": manifest["source"] + "; mt_human by MT detectors that never saw the pair's "
                  "language (bench/crawl/mt_detector.py's folds)"
                  + ("; cross_encoder by cross-encoders that never saw it "
                     "(bench/crawl/cross_encoder.py's folds)" if cross_encoder else "")
                  + "; the host features over the release's labelled pairs of all 25 "
                    "languages",
        "trained_by": "python -m bench.crawl.mt_evidence --detectors DIR "
                      + ("--cross-encoders DIR " if cross_encoder else "")
                      + f"--encoder {encoder} --ship {out}",
        "mt_detector": "conf/mt_detector/paracrawl-e5-small", "hosts": True,
        **({"cross_encoder": "conf/cross_encoder/paracrawl-e5-small"} if cross_encoder
           else {}),
        "created": datetime.now(UTC).isoformat(timespec="seconds")})
    out.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: AUC valid vs rest, each language scored by the model fitted without it: "
          f"{model['check']['auc']:.3f} (best input {model['check']['best_input']})")


def hosts_apart(model: dict, test: Any, train_hosts: set) -> dict[str, float | None]:
    kept = test[test.alive & ~test.host.isin(train_hosts)]
    x = kept[list(model["features"])].to_numpy(dtype=float)
    mine, label = scores(model, x), kept.label.to_numpy()
    out: dict[str, float | None] = {"pairs": len(kept)}
    for against, bad in (("rest", label != "V"), ("MT", label == "MT"), ("A", label == "A")):
        ok = (label == "V").any() and bad.any()
        out[against] = round(auc(list(mine[label == "V"]), list(mine[bad])), 4) if ok else None
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--detectors", type=Path, required=True)
    p.add_argument("--cross-encoders", type=Path,
                   help="also a model with `cross_encoder`: DIR/fold{0,1} of "
                   "bench/crawl/cross_encoder.py (its --work)")
    p.add_argument("--work", type=Path, default=Path("/tmp/sluice-crawl-pair-score"))
    p.add_argument("--encoder", default="use-multilingual", choices=sorted(SHIPPED),
                   help="the cosine's encoder (bench/crawl/pair_score.py's feature cache)")
    p.add_argument("--langs", default="")
    p.add_argument("--ship", type=Path, help="train on all of release 6.2 with the MT "
                   "evidence; write the model (conf/pair_score/paracrawl-use-mt.json)")
    p.add_argument("--lake-scaled", action="store_true",
                   help="also a model with host_langs and host_pairs")
    p.add_argument("--linear", action="store_true",
                   help="the linear learner only (its strength chosen as train_on_labels "
                   "does): about a tenth of the fitting time")
    p.add_argument("--out", type=Path, default=Path("mt_evidence.json"))
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    data = cached_features(args.work, all_langs(), args.encoder)
    for release in (TRAIN_RELEASE, TEST_RELEASE):
        data[release] = with_hosts(with_fold_scores(data[release], release, "mt_human",
                                                    args.detectors, args.work), release)
        if args.cross_encoders:
            data[release] = with_cross_encoder(data[release], release, args.cross_encoders,
                                               args.work)
    train_all, test_all = data[TRAIN_RELEASE], data[TEST_RELEASE]
    if args.ship:
        ship(train_all, args.ship, bool(args.cross_encoders), args.encoder)
        return
    langs = [x for x in args.langs.split(",") if x] or all_langs()
    rng = np.random.default_rng(SEED)
    results: dict[str, Any] = {}
    for lang in langs:
        train = train_all[train_all.lang != lang]
        test = test_all[test_all.lang == lang]
        results[lang] = {}
        configs = [("shipped_features", list(SHIPPED_FEATURES)),
                   ("with_mt_evidence", [*SHIPPED_FEATURES, *NEW_FEATURES])]
        if args.cross_encoders:
            configs.append(("with_cross_encoder", [*SHIPPED_FEATURES, *NEW_FEATURES,
                                                   "cross_encoder"]))
        if args.lake_scaled:
            configs.append(("with_lake_counts", [*SHIPPED_FEATURES, *NEW_FEATURES,
                                                 *LAKE_SCALED]))
        for name, features in configs:
            model = linear(train, features) if args.linear else trained(train, features)
            r = judge(model, model["threshold"], test, features, rng)
            r["hosts_apart"] = hosts_apart(model, test, set(train.host))
            r["learner"] = model.get("learner")
            results[lang][name] = r
        a, b = results[lang]["shipped_features"], results[lang]["with_mt_evidence"]
        print(f"en-{lang}: V/rest {a['auc_rest'][0]} -> {b['auc_rest'][0]}, V/MT "
              f"{a['auc_MT'][0]} -> {b['auc_MT'][0]}, V/A {a['auc_A'][0]} -> {b['auc_A'][0]}; "
              f"valid kept {b['valid_kept'][0]}, A rejected {b['misaligned_rejected'][0]}",
              flush=True)
    means = {}
    for name in results[langs[0]]:
        means[name] = {
            key: round(float(np.mean([v[name][key][0] for v in results.values()
                                      if v[name][key][0] is not None])), 4)
            for key in ("auc_rest", "auc_MT", "auc_A", "valid_kept", "misaligned_rejected",
                        "wrong_language_rejected")}
        means[name]["hosts_apart"] = {
            k: round(float(np.mean([v[name]["hosts_apart"][k] for v in results.values()
                                    if v[name]["hosts_apart"][k] is not None])), 4)
            for k in ("rest", "MT", "A")}
    print(means)
    write_json(args.out, {"means": means, "per_language": results}, say=True)


if __name__ == "__main__":
    main()
