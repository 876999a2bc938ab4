"""pair_score with the MT detector, the website evidence and the tokenization artifacts, on
crawl pairs of languages it never saw (issue 67, item 5).

bench/crawl/pair_score.py's protocol (its feature cache in --work, the same learner choice:
`train_on_labels`, monotone linear or additive, checked against its best input): for each
language L, a pair_score is trained on release 6.2's labels of the other 24 languages and
judged on release 7's pairs of L the rules keep. The features are the shipped model's plus:

- `mt_human`, each pair scored by an MT detector that never saw its language: the two fold
  models of bench/crawl/mt_detector.py (`--detectors DIR`: DIR/fold0/model was trained on
  the second group of languages and scores the first, DIR/fold1/model the other way round);
- `host_mt`, `host_langs`, `host_pairs` (jobs/filtering/hosts.py) over the release's
  labelled pairs of all 25 languages (url1's registrable domain), `host_mt` from the same
  out-of-fold scores, never a label;
- `src_tok_artifacts`, `tgt_tok_artifacts`.

Beside the AUCs over all of L's kept pairs, the same over those whose website no training
pair came from ("hosts apart"). The detectors' scores are cached in --work (~20 minutes for
both releases on 2 cores); the fits take ~20 minutes.

    python -m bench.crawl.mt_evidence --detectors /tmp/sluice-mt-detector [--work DIR]
        [--langs da,fr,...] [--out result.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bench.crawl.cross_encoder import BASE
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

NEW_FEATURES = ("mt_human", "host_mt", "host_langs", "host_pairs", "src_tok_artifacts",
                "tgt_tok_artifacts")


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


def with_mt_human(df: Any, release: str, detectors: Path, work: Path) -> Any:
    """`mt_human` of every pair, from the fold model that never saw its language (cached)."""
    import pandas as pd

    from udfs.cross_encoder_model import CrossEncoder

    cache = work / f"{release}.mt_human.parquet"
    if cache.is_file():
        return df.assign(mt_human=pd.read_parquet(cache)["mt_human"].to_numpy())
    langs = all_langs()
    groups = [langs[0::2], langs[1::2]]
    mt = np.full(len(df), np.nan)
    for k, group in enumerate(groups):
        model = CrossEncoder(str(detectors / f"fold{k}" / "model"), BASE, "cpu", 2)
        mask = df.lang.isin(group).to_numpy()
        mt[mask] = model.score(df.src[mask].tolist(), df.tgt[mask].tolist())
        print(f"{release}: mt_human of {int(mask.sum())} pairs of {' '.join(group)}", flush=True)
    pd.DataFrame({"mt_human": mt}).to_parquet(cache)
    return df.assign(mt_human=mt)


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
    p.add_argument("--work", type=Path, default=Path("/tmp/sluice-crawl-pair-score"))
    p.add_argument("--langs", default="")
    p.add_argument("--out", type=Path, default=Path("mt_evidence.json"))
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    data = cached_features(args.work, all_langs(), "use-multilingual")
    for release in (TRAIN_RELEASE, TEST_RELEASE):
        data[release] = with_hosts(with_mt_human(data[release], release, args.detectors,
                                                 args.work), release)
    train_all, test_all = data[TRAIN_RELEASE], data[TEST_RELEASE]
    langs = [x for x in args.langs.split(",") if x] or all_langs()
    rng = np.random.default_rng(SEED)
    results: dict[str, Any] = {}
    for lang in langs:
        train = train_all[train_all.lang != lang]
        test = test_all[test_all.lang == lang]
        results[lang] = {}
        for name, features in (("shipped_features", list(SHIPPED_FEATURES)),
                               ("with_mt_evidence", [*SHIPPED_FEATURES, *NEW_FEATURES])):
            model = trained(train, features)
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
    for name in ("shipped_features", "with_mt_evidence"):
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
