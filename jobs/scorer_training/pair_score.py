"""Train the learned `pair_score` of a language pair and store it in the lake's model store.

    spark-submit jobs/train_pair_score.py --config conf/zh-en.yaml --name news-2026-11
    spark-submit jobs/train_pair_score.py --config conf/zh-en.yaml --name wmt \\
        --input trusted.zh trusted.en

Positives: clean pairs — the lake's clean rows of the pair (`--where` narrows them, e.g.
"corpus = 'newstest'"), or a trusted Moses file pair (`--input SRC TGT`). Up to `--max-pairs` are
drawn (by a hash of their text); a fifth is held apart. Negatives are made from each part
alone (jobs/filtering/pair_score_model.py), every pair is scored by the filter's own scoring with
the
config's scorers on every row, the model is fitted on the four fifths and measured on the
held-apart fifth (AUC overall and per kind of negative), and its threshold is the score that
keeps 95% of the held-apart clean pairs. A filter run uses it with `pair_score.enabled: true`
(and the same scorers on).
"""

from __future__ import annotations

import argparse
import zlib
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from jobs.filtering.config import FilterConfig, load_config
from jobs.filtering.pair_score_model import (
    FIT_QUANTILES,
    KEEP_VALID,
    KEEP_VALID_FLOOR,
    NEGATIVE_KINDS,
    auc,
    fit,
    model_dir,
    negatives,
    save,
)
from jobs.filtering.pair_scores import training_sample
from jobs.filtering.stages import normalize_and_analyze, rule_row, score_and_decide
from jobs.kit.cli import add_config, add_lake, hidden_alias, job_parser, lake_extra
from jobs.kit.config import (
    ConfigError,
    check_name,
)
from jobs.kit.errors import InputError
from jobs.kit.progress import log
from jobs.lake.models import AlignerStore, for_executors
from jobs.lake.runs import job_main, open_lake
from udfs.pair_features import available, feature_columns, score_python

HELD_APART = 5  # one pair in five, by a hash of its text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = job_parser("jobs/train_pair_score.py", __doc__)
    add_config(p, "defaults.yaml: the filter config the model serves", required=True)
    p.add_argument("--name", required=True, help="the model's name in the lake's model store")
    p.add_argument("--input", nargs=2, metavar=("SRC", "TGT"), help="a trusted Moses pair")
    p.add_argument("--where", help="SQL filter on the lake's clean rows of the pair")
    p.add_argument("--max-pairs", type=int, default=5000,
                   help="at most this many clean pairs are drawn (default 5000)")
    hidden_alias(p, "--pairs", "max_pairs", type=int)
    add_lake(p)
    return p.parse_args(argv)


def read_moses(src: str, tgt: str) -> list[tuple[str, str]]:
    """The file pair's lines, in order (empty pairs kept: they mark a document's gaps)."""
    sides = []
    for path in (src, tgt):
        try:
            with open(path, encoding="utf-8") as f:
                sides.append(f.read().splitlines())
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except UnicodeDecodeError as err:
            raise InputError(f"{path}: not UTF-8 (byte {err.start})") from None
    if len(sides[0]) != len(sides[1]):
        raise InputError(f"{src} has {len(sides[0])} lines, {tgt} {len(sides[1])}: not a pair")
    return list(zip(*sides, strict=True))


NEIGHBOURED = "src string, tgt string, next_src string, next_tgt string"


def with_neighbours(lines: list[tuple[str, str]]) -> list[tuple[str, str, str | None,
                                                              str | None]]:
    """Each non-empty pair with the next line's pair (its document neighbour), None where the
    next line is missing or has an empty side."""
    out = []
    for i, (src, tgt) in enumerate(lines):
        if src.strip() and tgt.strip():
            nxt = lines[i + 1] if i + 1 < len(lines) else ("", "")
            ok = bool(nxt[0].strip() and nxt[1].strip())
            out.append((src, tgt, nxt[0] if ok else None, nxt[1] if ok else None))
    return out


def positives(spark: SparkSession, cfg: FilterConfig, args: argparse.Namespace,
              database: str) -> tuple[list[tuple[str, str, str | None, str | None]], str]:
    """Up to --max-pairs clean pairs, each with its document neighbour (the next line of its file,
    None where there is none), and where they came from."""
    if args.input:
        df = spark.createDataFrame(with_neighbours(read_moses(*args.input)), NEIGHBOURED)
        source = f"files {args.input[0]} {args.input[1]}"
    else:
        table = f"`{database}`.`bitext_clean`"
        if not spark.catalog.tableExists(f"{database}.bitext_clean"):
            raise InputError(f"{table}: no such table (run jobs/filter.py first, or --input)")
        df = spark.table(table).where(F.col("pair") == cfg.pair)
        if args.where:
            df = df.where(args.where)
        # The neighbour is the next clean line of the same file (a rejected line between
        # them leaves a gap of one or more, still the same document as often as not).
        doc = Window.partitionBy("corpus", "file").orderBy("line")
        df = df.select("src", "tgt", F.lead("src").over(doc).alias("next_src"),
                       F.lead("tgt").over(doc).alias("next_tgt"))
        source = f"{table} pair {cfg.pair}" + (f" where {args.where}" if args.where else "")
    sample = training_sample(df.withColumn("reject_rule", F.lit(None).cast("string")),
                             args.max_pairs, columns=("src", "tgt", "next_src", "next_tgt"))
    if len(sample) < 50:
        raise InputError(f"{source}: {len(sample)} clean pairs; a pair_score needs at least 50")
    return sample, source


def labelled(pairs: list[tuple[str, str, str | None, str | None]], cfg: FilterConfig
             ) -> list[tuple[str, str, int, str, bool]]:
    """(src, tgt, label, kind, held_apart): each pair and the negatives made from its part."""
    src_lang, tgt_lang = cfg.langs
    parts: dict[bool, list[tuple[str, str, str | None, str | None]]] = {False: [], True: []}
    for pair in pairs:
        parts[zlib.crc32(f"{pair[0]}\t{pair[1]}".encode()) % HELD_APART == 0].append(pair)
    rows = []
    for held, part in parts.items():
        clean = [(s, t) for s, t, _, _ in part]
        near = [(ns, nt) if ns is not None and nt is not None else None for _, _, ns, nt in part]
        rows += [(s, t, 1, "clean", held) for s, t in clean]
        rows += [(s, t, 0, kind, held)
                 for s, t, kind in negatives(clean, src_lang, tgt_lang, neighbours=near)]
    return rows


def scored(spark: SparkSession, rows: list, cfg: FilterConfig,
           aligner: str | None = None) -> DataFrame:
    """Every row through the filter's scoring, the pair scorers on every row (not only on
    those the rules keep: a model must see the scores of bad pairs too). `aligner`: the
    saved aligner's directory when align is on."""
    df = spark.createDataFrame(rows, "src string, tgt string, label int, kind string, "
                                     "held_apart boolean")
    df = df.withColumn("ingest_error", F.lit(None).cast("string"))
    langid = for_executors(spark, cfg.langid.model, "fastText language-ID model")
    df = score_and_decide(normalize_and_analyze(df, cfg, langid), cfg)
    everyone = F.lit(True)
    if cfg.align.enabled:
        from udfs.align import add_alignment_scores

        df = add_alignment_scores(df, aligner, *cfg.langs, everyone)
    if cfg.embedding.enabled:
        from udfs.embed import EncoderSpec, add_embedding_scores

        enc = cfg.embedding.chosen
        model = for_executors(spark, enc.model, f"{cfg.embedding.encoder} encoder")
        spec = EncoderSpec(enc.backend, model, enc.batch_size, cfg.embedding.device)
        df = add_embedding_scores(df, spec, everyone, cfg.embedding.margin_k)
    return df


def saved_aligner(lake: Any, cfg: FilterConfig) -> str | None:
    """With align on, the saved aligner the features come from (`align.model_dir`, or the
    one `align.reference` names): filter runs then score with that same aligner."""
    if not cfg.align.enabled:
        return None
    if cfg.align.model_dir:
        return cfg.align.model_dir
    if not cfg.align.reference:
        raise ConfigError("pair_score with align on needs a saved aligner: set align.reference "
                          "(a name or latest; python -m jobs.align_reference makes one), and "
                          "the same in the filter runs that use the model")
    store = AlignerStore(lake, cfg.pair)
    return store.path(store.resolve(cfg.align.reference))


def train(spark: SparkSession, cfg: FilterConfig,
          pairs: list[tuple[str, str, str | None, str | None]],
          aligner: str | None = None) -> dict[str, Any]:
    """The model and its held-apart measurements. `pairs`: clean pairs with their document
    neighbours (`positives`). Fitted on the rows the config's rules keep, as a filter run
    scores only those: a made pair that the rules reject (every copy, every wrong language)
    would teach the model the rules' own work, and its weights would go to the copies'
    artefacts instead of to what sets the survivors apart."""
    import numpy as np

    df = scored(spark, labelled(pairs, cfg), cfg, aligner)
    names = [n for n in available(df.columns)
             if not (n == "embed_margin" and cfg.embedding.margin_k == 0)]
    table = df.select("label", "kind", "held_apart", F.col("reject_rule").isNull().alias("alive"),
                      *[col.alias(name) for name, col in
                        feature_columns(names, rule_row(cfg)).items()]).toPandas()
    columns = [f"f_{n}" for n in names]
    train_part = table[~table.held_apart & table.alive]
    if train_part.label.nunique() < 2:
        raise InputError("the rules reject every made pair (or every clean one): nothing to fit")
    model = fit(names, train_part[columns].to_numpy(dtype=float), train_part.label.to_numpy())
    held = table[table.held_apart]
    held_scores = np.array([score_python(model, dict(zip(names, values, strict=True)))
                            for values in held[columns].itertuples(index=False)])
    alive, kind = held.alive.to_numpy(), held.kind.to_numpy()
    pos = held_scores[alive & (kind == "clean")]
    threshold = float(np.quantile(pos, 1 - KEEP_VALID))
    kinds = {}
    for name in sorted(set(kind) - {"clean"}):
        neg = held_scores[alive & (kind == name)]
        by_rules = 1 - float(alive[kind == name].mean())
        kinds[name] = {"by_rules": by_rules,
                       "auc": auc(list(pos), list(neg)) if len(neg) else None,
                       "rejected": by_rules + (1 - by_rules) * float((neg < threshold).mean()
                                                                     if len(neg) else 0.0)}
    neg_all = held_scores[alive & (kind != "clean")]
    return {
        **model,
        "threshold": threshold,
        # What a run fits its threshold with (jobs/filtering/pair_score_stage.py
        # `fitted_threshold`).
        "clean_quantiles": {str(q): float(np.quantile(pos, q)) for q in FIT_QUANTILES},
        "threshold_floor": float(np.quantile(pos, 1 - KEEP_VALID_FLOOR)),
        "held_apart": {"clean_pairs": int(len(pos)), "auc": auc(list(pos), list(neg_all)),
                       "kept_clean": float((pos >= threshold).mean()), "kinds": kinds},
        "train_pairs": int((train_part.label == 1).sum()),
        "negatives": list(NEGATIVE_KINDS),
        "align": cfg.align.enabled, "aligner": aligner,
        "embedding": cfg.embedding.enabled,
        "encoder": cfg.embedding.encoder if cfg.embedding.enabled else None,
    }


def report(model: dict[str, Any]) -> str:
    held = model["held_apart"]
    lines = [f"held apart: {held['clean_pairs']} clean pairs, AUC {held['auc']:.3f}, threshold "
             f"{model['threshold']:.3f} keeps {held['kept_clean']:.1%}"]
    for kind, m in held["kinds"].items():
        seen = "-" if m["auc"] is None else f"{m['auc']:.3f}"
        lines.append(f"  {kind:16} by the rules {m['by_rules']:6.1%}  AUC of the rest {seen:5}  "
                     f"rejected in all {m['rejected']:.1%}")
    lines.append("weights (standardized): " + ", ".join(
        f"{n} {w:+.2f}" for n, w in zip(model["features"], model["weights"], strict=True)))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    check_name("--name", args.name)  # a directory in the model store, not outside it
    extra = lake_extra(args)
    cfg = load_config(args.config, args.set, extra)
    if cfg.mono:
        raise ConfigError("pair_score scores pairs: give a pair config")
    spark, lake = open_lake("sluice-train-pair-score", cfg)
    if lake.exists(model_dir(lake.root, cfg.pair, args.name)):
        raise ConfigError(f"pair_score model {args.name} of {cfg.pair} exists: pick another "
                          "--name")
    aligner = saved_aligner(lake, cfg)
    pairs, source = positives(spark, cfg, args, cfg.lake.database)
    log(f"training pair_score {args.name} of {cfg.pair} on {len(pairs)} clean pairs ({source})")
    model = train(spark, cfg, pairs, aligner)
    path = save(lake, cfg.pair, args.name, {**model, "source": source})
    log(report(model))
    print(f"pair_score model {args.name} of {cfg.pair}: {path}")
    return 0


main = job_main(parse_args, run)
