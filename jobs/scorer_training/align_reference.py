"""Train a reference word aligner on a large clean corpus and save it, by name, in the lake's
aligner store (`<lake>/models/align/<pair>/<name>/`, jobs/lake/models.py `AlignerStore`), for filter
runs to score with (`align.reference: <name>` or `latest`) instead of training on their own
rows, which a small or noisy run does badly (bench/thresholds/calibrate_align.py sizes).

    python -m jobs.align_reference --pair zh-en --input news.zh news.en --lake ./lake \\
        --name newstest-zh-en

--src/--tgt: a Moses-style file pair (one sentence a line, same line = same pair; .gz too) in
--pair order. Distinct pairs with text on both sides are used, the first --max-pairs of them
(default `align.sample_pairs`); fewer than `align.min_train_pairs` is an error. Trains on the
driver on one thread (udfs/align.py: ~300-560 pairs/s).
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

from jobs.filtering.config import load_config
from jobs.kit.cli import add_config, add_lake, hidden_alias, lake_extra
from jobs.kit.errors import ConfigError, InputError
from jobs.kit.progress import log
from jobs.lake.models import AlignerStore
from jobs.lake.runs import job_main, open_lake
from udfs.align import train_alignment


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m jobs.align_reference",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--pair", required=True, help="language pair, source-target, e.g. zh-en")
    p.add_argument("--input", nargs=2, metavar=("SRC", "TGT"),
                   help="the trusted pairs: two Moses files in --pair order, one sentence a line")
    hidden_alias(p, "--src", "src")
    hidden_alias(p, "--tgt", "tgt")
    add_lake(p)
    p.add_argument("--name", required=True, help="the aligner's name in the store")
    p.add_argument("--max-pairs", type=int, help="at most this many (default align.sample_pairs)")
    add_config(p, "defaults.yaml")
    args = p.parse_args(argv)
    if args.input:
        args.src, args.tgt = args.input
    if not (args.src and args.tgt):
        p.error("--input SRC TGT is required")
    if not args.lake:
        p.error("--lake is required")
    return args


def read_lines(path: str) -> list[str]:
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n").lstrip("\ufeff") for line in f]


def read_pairs(src: str, tgt: str, limit: int) -> list[tuple[str, str]]:
    """The first `limit` distinct pairs with text on both sides."""
    left, right = read_lines(src), read_lines(tgt)
    if len(left) != len(right):
        raise InputError(f"{src} has {len(left):,} lines, {tgt} {len(right):,}: not a pair")
    pairs = (p for p in zip(left, right, strict=True) if p[0].strip() and p[1].strip())
    return list(dict.fromkeys(pairs))[:limit]


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.set, {"pair": args.pair, **lake_extra(args)})
    pairs = read_pairs(args.src, args.tgt, args.max_pairs or cfg.align.sample_pairs)
    if len(pairs) < cfg.align.min_train_pairs:
        raise ConfigError(
            f"{len(pairs):,} distinct pairs in {args.src}/{args.tgt}, fewer than "
            f"align.min_train_pairs {cfg.align.min_train_pairs:,}: too few to train an aligner"
        )
    _, lake = open_lake("sluice-align-reference", cfg)
    store = AlignerStore(lake, args.pair)
    src_lang, tgt_lang = cfg.langs
    about = {"name": args.name, "run_id": None, "source": f"{args.src} + {args.tgt}"}
    log(f"training aligner {args.name!r} on {len(pairs):,} {args.pair} pairs")
    path = store.save(args.name, lambda out: train_alignment(pairs, src_lang, tgt_lang, out, about))
    log(f"saved {path}; use it with --set align.reference={args.name}")
    return 0


main = job_main(parse_args, run)
