"""Fine-tune a cross-encoder pair classifier for the filter's `cross_encoder` scorer, or
(`--detect mt`) an MT detector for its `mt_detector` scorer.

    python jobs/train_cross_encoder.py --pair en-da --out models/cross-encoder/en-da \\
        --labelled crawl-a.tsv crawl-b.tsv [--input trusted.en trusted.da] [--check held.tsv]
    python jobs/train_cross_encoder.py --detect mt --pair en-de --out models/mt/en-de \\
        --input refs.en refs.de --machine mt.en mt.de [--labelled crawl.tsv]

An MT detector is the same model trained on human translations (`--input`, and labelled
valid pairs) against machine translations (`--machine`, a Moses file pair, and pairs labelled
MT; other labels are not read); no made negatives, no prior on the two sides' cosine. Its
held-apart fifth is drawn by the source sentence, so a reference and a system output of one
source are never split (a source's other translations would give its answer away).

Positives are the trusted pairs (`--input SRC TGT`, a Moses file pair) and the labelled valid
ones (`--labelled`, `src<TAB>tgt<TAB>label` lines as jobs/train_pair_score.py reads them: V,
valid, 1, good, yes, true is valid, any other label bad). Negatives are the labelled bad pairs
and two made negatives a positive: a misaligned one, and one of the other kinds in turn
(truncated, wrong language, copied, half translated, a span dropped, a fuzzy match, a
sentence too many: jobs/filtering/pair_score_model.py `negatives`). A fifth of the pairs
(by a hash of their text) is held apart: the model's threshold is the score that keeps 95% of
its valid pairs, and its AUCs (valid vs made negatives, vs labelled bad pairs, and on
`--check`) go into the model's card.

The base encoder is a BERT-class checkpoint directory (`--base`, default the e5-small one
`make setup` writes); the model directory holds only the adapter and the head (a few MB), so a
filter run names both (`cross_encoder.model`, `cross_encoder.base`). No Spark: it trains in
this process, on a GPU where `--device` finds one (~1,000 examples/s on one H100-class GPU is
the order to expect; ~10-20 examples/s on 2 CPU cores, docs/bert.md "The cross-encoder pair
scorer").
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import numpy as np

from jobs.filtering.pair_score_model import KEEP_VALID, NEGATIVE_KINDS, auc, negatives
from jobs.kit.errors import EXIT_USAGE, InputError
from jobs.kit.labelled_pairs import need_both_classes, read_labelled, read_moses
from training.cross_encoder import Example, fine_tune
from udfs.cross_encoder_model import CrossEncoder, CrossEncoderCard

HELD_APART = 5  # one pair in five, by a hash of its text
DEFAULT_BASE = "models/e5-small-hf"
# Each positive gets a misaligned negative (a crawl's commonest bad pair, and the one a
# cross-encoder must learn to read both sides for) and one of the other kinds in turn.
# "neighbour" needs a document's next line, which labelled crawl pairs lack ("fuzzy" stands in).
ALWAYS = "misaligned"
IN_TURN = tuple(k for k in NEGATIVE_KINDS if k not in ("neighbour", ALWAYS))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="jobs/train_cross_encoder.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pair", required=True, help="SRC-TGT language codes, e.g. en-da")
    p.add_argument("--out", required=True, help="the model directory to write")
    p.add_argument("--base", default=DEFAULT_BASE, help="BERT-class checkpoint directory")
    p.add_argument("--input", nargs=2, metavar=("SRC", "TGT"), help="a trusted Moses pair")
    p.add_argument("--labelled", nargs="+", default=[], metavar="TSV",
                   help="human-labelled pairs, src<TAB>tgt<TAB>label")
    p.add_argument("--check", metavar="TSV", help="labelled pairs to report the AUC on")
    p.add_argument("--detect", choices=("pairs", "mt"), default="pairs",
                   help="pairs: valid against bad pairs (cross_encoder); mt: human against "
                   "machine translations (mt_detector)")
    p.add_argument("--machine", nargs=2, metavar=("SRC", "TGT"),
                   help="--detect mt: machine-translated pairs, a Moses file pair")
    p.add_argument("--max-pairs", type=int, default=4000,
                   help="positives drawn (by a hash of their text)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--layers", type=int, default=6, help="top layers the adapter is on")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    return p.parse_args(argv)


def held_apart(src: str, tgt: str) -> bool:
    return zlib.crc32(f"{src}\t{tgt}".encode()) % HELD_APART == 0


def made(pairs: list[tuple[str, str]], src_lang: str, tgt_lang: str) -> list[Example]:
    """Two made negatives a pair: a misaligned one, and one of the other kinds in turn."""
    if len(pairs) < 2:
        return []
    every = negatives(pairs, src_lang, tgt_lang)
    kinds = len(NEGATIVE_KINDS)
    out = []
    for i in range(len(pairs)):
        for kind in (ALWAYS, IN_TURN[i % len(IN_TURN)]):
            src, tgt, _ = every[i * kinds + NEGATIVE_KINDS.index(kind)]
            if src.strip() and tgt.strip() and (src, tgt) != pairs[i]:
                out.append((src, tgt, 0))
    return out


def drawn(pairs: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """Up to n distinct pairs, chosen by a hash of their text (the same on any machine)."""
    unique = sorted(set(pairs), key=lambda p: zlib.crc32(f"{p[0]}\t{p[1]}".encode()))
    return unique[:n]


def resolve_device(requested: str) -> str:
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device here")
    return "cuda" if requested != "cpu" and torch.cuda.is_available() else "cpu"


def run_mt(args: argparse.Namespace) -> int:
    """`--detect mt`: human (1) against machine (0) translations."""
    if not (args.input or args.labelled) or not (args.machine or args.labelled):
        raise InputError("--detect mt: give human translations (--input SRC TGT or "
                         "--labelled) and machine translations (--machine SRC TGT or --labelled)")
    human = [p for p in (read_moses(*args.input) if args.input else []) if all(map(str.strip, p))]
    machine = [p for p in (read_moses(*args.machine) if args.machine else [])
               if all(map(str.strip, p))]
    for path in args.labelled:
        rows = read_labelled(path)
        human += [(s, t) for s, t, valid, _ in rows if valid]
        machine += [(s, t) for s, t, _, label in rows if label.upper() == "MT"]
    human, machine = drawn(human, args.max_pairs), drawn(machine, args.max_pairs)
    apart = [p for p in human + machine if held_apart(p[0], "")]
    if len(human) - len(apart) < 20 or len(machine) < 25 or not apart:
        raise InputError(f"{len(human)} human and {len(machine)} machine translations: too "
                         "few to train and hold a fifth apart (at least 30 of each)")
    examples = ([(s, t, 1) for s, t in human if not held_apart(s, "")]
                + [(s, t, 0) for s, t in machine if not held_apart(s, "")])
    device = resolve_device(args.device)
    print(f"MT detector: {len(examples):,} examples on {device}", flush=True)
    fine_tune(examples, args.base, args.out, top_layers=args.layers, epochs=args.epochs,
              device=device, threads=args.threads, sides_weight=0.0, what="MT detector")
    model = CrossEncoder(args.out, args.base, device, args.threads or 1)
    held_human = [p for p in human if held_apart(p[0], "")]
    held_machine = [p for p in machine if held_apart(p[0], "")]
    card = CrossEncoderCard.read(args.out)
    card.checked = {"held_apart": "a fifth of the sources, by a hash of the source sentence",
                    "human": len(held_human), "machine": len(held_machine)}
    if held_human:
        pos = model.score(*zip(*held_human, strict=True))
        card.threshold = float(np.quantile(pos, 1 - KEEP_VALID))
        card.checked["keeps_human"] = KEEP_VALID
        if held_machine:
            card.checked["auc_human_vs_machine"] = round(
                auc(pos, model.score(*zip(*held_machine, strict=True))), 4)
    card.trained_on.update({"detects": "mt", "pair": args.pair, "inputs": [
        *(args.input or []), *(args.machine or []), *args.labelled]})
    card.write(args.out)
    print(f"{args.out}: " + ", ".join(f"{k} {v}" for k, v in card.checked.items()))
    return 0


def run(args: argparse.Namespace) -> int:
    src_lang, _, tgt_lang = args.pair.partition("-")
    if not (src_lang and tgt_lang):
        raise InputError(f"--pair {args.pair}: expected SRC-TGT, e.g. en-da")
    if args.detect == "mt":
        return run_mt(args)
    if args.machine:
        raise InputError("--machine is for --detect mt")
    if not args.input and not args.labelled:
        raise InputError("give trusted pairs (--input SRC TGT), labelled pairs (--labelled), "
                         "or both")
    good = [(s, t) for s, t in (read_moses(*args.input) if args.input else [])
            if s.strip() and t.strip()]
    bad: list[tuple[str, str]] = []
    for path in args.labelled:
        rows = read_labelled(path)
        good += [(s, t) for s, t, valid, _ in rows if valid]
        bad += [(s, t) for s, t, valid, _ in rows if not valid]
    check_rows = read_labelled(args.check) if args.check else None
    if check_rows is not None:
        need_both_classes(check_rows, f"--check {args.check}")
    good = drawn(good, args.max_pairs)
    train_good = [p for p in good if not held_apart(*p)]
    held_good = [p for p in good if held_apart(*p)]
    if len(train_good) < 20 or len(held_good) < 5:
        raise InputError(f"{len(good)} valid pairs: too few to train and hold a fifth apart "
                         "(at least 30)")
    examples = ([(s, t, 1) for s, t in train_good] + made(train_good, src_lang, tgt_lang)
                + [(s, t, 0) for s, t in bad if not held_apart(s, t)])
    device = resolve_device(args.device)
    print(f"cross-encoder: {len(examples):,} examples ({len(train_good):,} valid) on {device}",
          flush=True)
    fine_tune(examples, args.base, args.out, top_layers=args.layers, epochs=args.epochs,
              device=device, threads=args.threads)
    model = CrossEncoder(args.out, args.base, device, args.threads or 1)
    pos = model.score(*zip(*held_good, strict=True))
    made_neg = made(held_good, src_lang, tgt_lang)
    card = CrossEncoderCard.read(args.out)
    card.threshold = float(np.quantile(pos, 1 - KEEP_VALID))
    card.checked = {"held_apart_valid": len(pos), "keeps_valid": KEEP_VALID,
                    "auc_valid_vs_made": round(auc(pos, model.score(
                        [s for s, _, _ in made_neg], [t for _, t, _ in made_neg])), 4)}
    held_bad = [p for p in bad if held_apart(*p)]
    if held_bad:
        card.checked["auc_valid_vs_labelled_bad"] = round(
            auc(pos, model.score(*zip(*held_bad, strict=True))), 4)
    if check_rows is not None:
        scores = model.score([r[0] for r in check_rows], [r[1] for r in check_rows])
        valid = np.array([r[2] for r in check_rows], dtype=bool)
        card.checked[f"auc_check:{Path(args.check).name}"] = round(
            auc(scores[valid], scores[~valid]), 4)
    card.trained_on.update({"pair": args.pair, "inputs": [*(args.input or []), *args.labelled]})
    card.write(args.out)
    print(f"{args.out}: threshold {card.threshold:.4f}; "
          + ", ".join(f"{k} {v}" for k, v in card.checked.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except (InputError, FileNotFoundError) as err:
        print(f"sluice: error: {err}", file=sys.stderr)
        return EXIT_USAGE
