"""The cross-encoder on human-labelled crawl pairs of languages it never saw (issue 66).

The ParaCrawl human labels (../shared/data/bitext/paracrawl-human-labels/, English with 25
languages) are cut into two groups of languages (alternate languages in alphabetical order).
For each group, a cross-encoder (jobs/train_cross_encoder.py's recipe: labelled valid pairs
and two made negatives each, plus labelled bad pairs) is fine-tuned on release 6.2's pairs of
the other group, and judged on release 7's pairs of this group whose website (url1's host)
the training pairs never came from. A fine-tune takes ~10 minutes on 2 cores, so languages are
held out by group, not one at a time.

Per language: AUC of valid vs rest, vs misaligned (A) and vs machine translation (MT), for
the cross-encoder, and for the same base encoder's bi-encoder cosine (mean pooling, the
`e5-small` embed scorer's vectors) on the same pairs; no rules applied (scores alone). And
the two together, as a pair_score would weigh them: a logistic regression on the
cross-encoder's logit and the cosine, fitted on release 6.2 pairs of the training languages
the fine-tune did not use, applied to the held-out languages.

    python -m bench.crawl.cross_encoder [--per-lang-train 120] [--per-lang-test 300]
        [--out result.json]
    python -m bench.crawl.cross_encoder --ship conf/cross_encoder/paracrawl-e5-small

`--ship` trains on release 6.2 of all 25 languages but a fifth held apart by a hash of the
text, whose valid pairs set the model's threshold (the score that keeps 95% of them), and
writes the model the filter ships (`cross_encoder.model`'s default).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from sklearn.linear_model import LogisticRegression

from bench.crawl.rule_loss import LABELS, labelled_pairs
from bench.kit import REPO, write_json
from jobs.filtering.pair_score_model import KEEP_VALID, auc
from jobs.scorer_training.cross_encoder import held_apart, made
from training.cross_encoder import fine_tune
from udfs.bert import load_bert
from udfs.cross_encoder_model import CrossEncoder

TRAIN, TEST = "paracrawl-v6-2-validation", "paracrawl-v7-validation"
BASE = str(REPO / "models" / "e5-small-hf")
SEED = 11


def rows_of(release: str, lang: str) -> list[dict]:
    path = LABELS / release / f"sorted.en-{lang}"
    hosts = []
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        fields = line.split("\t")
        if len(fields) > 5 and fields[2].strip() and fields[3].strip():
            hosts.append(host(fields[0]))
    pairs = labelled_pairs(path)
    return [{"src": s, "tgt": t, "label": lab, "host": h, "lang": lang}
            for (s, t, lab), h in zip(pairs, hosts, strict=True)]


def host(url: str) -> str:
    netloc = urlsplit(url if "//" in url else "//" + url).netloc.lower()
    return netloc.removeprefix("www.")


def languages() -> list[str]:
    return sorted(p.name.removeprefix("sorted.en-") for p in (LABELS / TEST).glob("sorted.en-*"))


def language_groups() -> list[list[str]]:
    """The two groups of languages every fold bench holds out in turn (alternate languages in
    alphabetical order): bench/crawl/mt_evidence.py reads mt_detector.py's fold k as trained
    on the group that is not k, so the split is written once, here."""
    langs = languages()
    return [langs[0::2], langs[1::2]]


def training_examples(rows: list[dict], per_lang: int, rng: random.Random) -> list:
    """Per language: up to `per_lang` valid pairs, two made negatives each, and as many
    labelled bad pairs as valid ones."""
    examples = []
    for lang in sorted({r["lang"] for r in rows}):
        mine = [r for r in rows if r["lang"] == lang]
        rng.shuffle(mine)
        valid = [(r["src"], r["tgt"]) for r in mine if r["label"] == "V"][:per_lang]
        bad = [(r["src"], r["tgt"], 0) for r in mine if r["label"] != "V"][:per_lang]
        examples += [(s, t, 1) for s, t in valid] + made(valid, "en", lang) + bad
    return examples


def calibration(rows: list[dict], examples: list, per_lang: int) -> list[dict]:
    """Labelled pairs of the training languages the fine-tune did not read."""
    read = {(s, t) for s, t, _ in examples}
    out = []
    for lang in sorted({r["lang"] for r in rows}):
        out += [r for r in rows if r["lang"] == lang and (r["src"], r["tgt"]) not in read
                ][:per_lang]
    return out


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def pair_scores(model: CrossEncoder, bi, rows: list[dict]) -> np.ndarray:
    """(cross-encoder logit, e5 cosine) per pair."""
    src, tgt = [r["src"] for r in rows], [r["tgt"] for r in rows]
    cosine = np.einsum("ij,ij->i", bi.encode(src), bi.encode(tgt))
    return np.column_stack([logit(model.score(src, tgt)), cosine])


def aucs(scores: np.ndarray, labels: list[str]) -> dict[str, float | None]:
    lab = np.array(labels)
    valid = scores[lab == "V"]
    out = {}
    for name, mask in (("rest", lab != "V"), ("A", lab == "A"), ("MT", lab == "MT")):
        out[name] = round(auc(valid, scores[mask]), 4) if mask.sum() and len(valid) else None
    return out


def ship(out: str, per_lang: int) -> dict:
    """The shipped model: every language's release 6.2 but the held-apart fifth."""
    rows = [r for lang in languages() for r in rows_of(TRAIN, lang)]
    train = [r for r in rows if not held_apart(r["src"], r["tgt"])]
    held = [r for r in rows if held_apart(r["src"], r["tgt"])]
    rng = random.Random(SEED)
    examples = training_examples(train, per_lang, rng)
    card = fine_tune(examples, BASE, out, threads=2)
    model = CrossEncoder(out, BASE, "cpu", 2)
    rng.shuffle(held)
    held = held[:2000]
    scores = model.score([r["src"] for r in held], [r["tgt"] for r in held])
    labels = [r["label"] for r in held]
    valid = scores[np.array(labels) == "V"]
    card.threshold = float(np.quantile(valid, 1 - KEEP_VALID))
    card.checked = {"held_apart": "a fifth of release 6.2 by a hash of the text, 25 languages",
                    "pairs": len(held), "keeps_valid": KEEP_VALID,
                    **{f"auc_valid_vs_{k}": v for k, v in aucs(scores, labels).items()}}
    card.trained_on.update({"data": f"ParaCrawl human labels, {TRAIN}, 25 languages: up to "
                                    f"{per_lang} valid pairs a language, two made negatives "
                                    "each, as many labelled bad pairs",
                            "trained_by": "python -m bench.crawl.cross_encoder --ship"})
    card.write(out)
    print(card)
    return {"card": card.checked}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.crawl.cross_encoder")
    ap.add_argument("--per-lang-train", type=int, default=120)
    ap.add_argument("--per-lang-test", type=int, default=300)
    ap.add_argument("--per-lang-calibration", type=int, default=60)
    ap.add_argument("--work", default="/tmp/sluice-cross-encoder")
    ap.add_argument("--out", default="cross_encoder_crawl.json")
    ap.add_argument("--ship", metavar="DIR", help="train the shipped model into DIR instead")
    args = ap.parse_args()
    if args.ship:
        write_json(args.out, ship(args.ship, args.per_lang_train))
        return
    langs = languages()
    groups = language_groups()
    rng = random.Random(SEED)
    bi = load_bert(BASE, "cpu", 2)
    result: dict = {"groups": groups, "per_language": {}, "folds": []}
    for k, held in enumerate(groups):
        seen = [lang for lang in langs if lang not in held]
        train_rows = [r for lang in seen for r in rows_of(TRAIN, lang)]
        train_hosts = {r["host"] for r in train_rows}
        examples = training_examples(train_rows, args.per_lang_train, rng)
        out_dir = Path(args.work) / f"fold{k}"
        started = time.monotonic()
        card = fine_tune(examples, BASE, str(out_dir), threads=2)
        trained = time.monotonic() - started
        model = CrossEncoder(str(out_dir), BASE, "cpu", 2)
        calib = calibration(train_rows, examples, args.per_lang_calibration)
        both = LogisticRegression().fit(pair_scores(model, bi, calib),
                                        [r["label"] == "V" for r in calib])
        scored = 0
        started = time.monotonic()
        for lang in held:
            test = [r for r in rows_of(TEST, lang) if r["host"] not in train_hosts]
            rng.shuffle(test)
            test = test[:args.per_lang_test]
            labels = [r["label"] for r in test]
            x = pair_scores(model, bi, test)
            scored += len(test)
            result["per_language"][lang] = {
                "pairs": len(test), "valid": labels.count("V"),
                "cross_encoder": aucs(x[:, 0], labels), "e5_cosine": aucs(x[:, 1], labels),
                "both": aucs(both.decision_function(x), labels)}
            print(lang, result["per_language"][lang], flush=True)
        result["folds"].append({"held_out": held, "examples": len(examples),
                                "train_seconds": round(trained),
                                "examples_per_second": round(len(examples) / trained, 1),
                                "test_pairs": scored,
                                "score_ms_per_pair_with_cosine":
                                    round(1000 * (time.monotonic() - started) / scored, 1),
                                "both_weights": both.coef_.tolist(),
                                "card": card.trained_on})
    for scorer in ("cross_encoder", "e5_cosine", "both"):
        result[f"mean_{scorer}"] = {
            cls: round(float(np.mean([v[scorer][cls] for v in result["per_language"].values()
                                      if v[scorer][cls] is not None])), 4)
            for cls in ("rest", "A", "MT")}
    print({k: v for k, v in result.items() if k.startswith("mean")})
    write_json(args.out, result)


if __name__ == "__main__":
    main()
