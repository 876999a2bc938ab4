"""Train the learned `pair_score` of a language pair and store it in the lake's model store.

    spark-submit jobs/train_pair_score.py --config conf/zh-en.yaml --name news-2026-11
    spark-submit jobs/train_pair_score.py --config conf/zh-en.yaml --name wmt \\
        --input trusted.zh trusted.en [--check labelled.tsv]
    spark-submit jobs/train_pair_score.py --config my-en-da.yaml --name crawl \\
        --labelled crawl-a.tsv crawl-b.tsv

Made negatives (the default): positives are clean pairs — the lake's clean rows of the pair
(`--where` narrows them, e.g. "corpus = 'newstest'"), or a trusted Moses file pair (`--input
SRC TGT`). Up to `--max-pairs` are drawn (by a hash of their text); a fifth is held apart.
Negatives are made from each part alone (jobs/filtering/pair_score_model.py).

Human labels (`--labelled`, `src<TAB>tgt<TAB>label` lines; label V, valid, 1, good or yes is a
valid pair, any other a bad one): no made negatives; each file is a group held out in turn to
choose the regularisation, to choose between the linear and the additive learner (each
feature's own monotone step function, jobs/filtering/pair_score_additive.py) and to check the
model (one file: fifths by a hash of the text).

Every pair is scored by the filter's own scoring with the config's scorers on every row; the
model (made negatives: monotone logistic regression, `fit_monotone`) is fitted on what the
rules keep. It is
checked against its best single input on pairs it was not fitted on, labelled ones where there
are any (`--check`, or `--labelled`'s held-out groups): where it ranks valid pairs worse, the
best input alone becomes the model and the manifest says so. Checked only on made negatives,
the job warns that it was not checked on real pairs. Its threshold is the score that keeps 95%
of the held-apart valid pairs. A filter run uses it with `pair_score.enabled: true` (and the
same scorers on).
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
    KEEP_VALID,
    NEGATIVE_KINDS,
    auc,
    check,
    choose_c,
    fit_monotone,
    negatives,
    scores,
    single_input,
    thresholds,
    train_on_labels,
)
from jobs.filtering.pair_scores import training_sample
from jobs.filtering.stages import normalize_and_analyze, rule_row, score_and_decide
from jobs.kit.cli import add_config, add_lake, hidden_alias, job_parser, lake_extra
from jobs.kit.config import (
    ConfigError,
    check_name,
)
from jobs.kit.errors import InputError
from jobs.kit.labelled_pairs import need_both_classes, read_labelled, read_moses
from jobs.kit.progress import log
from jobs.lake.models import AlignerStore, PairScoreStore, for_executors
from jobs.lake.runs import job_main, open_lake
from udfs.pair_features import available, feature_columns
from udfs.side_lm import add_english_lm, english_side

HELD_APART = 5  # one pair in five, by a hash of its text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = job_parser("jobs/train_pair_score.py", __doc__)
    add_config(p, "defaults.yaml: the filter config the model serves", required=True)
    p.add_argument("--name", required=True, help="the model's name in the lake's model store")
    p.add_argument("--input", nargs=2, metavar=("SRC", "TGT"), help="a trusted Moses pair")
    p.add_argument("--labelled", nargs="+", metavar="TSV",
                   help="human-labelled pairs, src<TAB>tgt<TAB>label (V/valid/1 = valid): "
                        "trained on these instead of made negatives")
    p.add_argument("--check", metavar="TSV",
                   help="labelled pairs held apart to check the model on (same format)")
    p.add_argument("--where", help="SQL filter on the lake's clean rows of the pair")
    p.add_argument("--max-pairs", type=int, default=5000,
                   help="at most this many clean pairs are drawn (default 5000)")
    hidden_alias(p, "--pairs", "max_pairs", type=int)
    add_lake(p)
    return p.parse_args(argv)


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
        spec = EncoderSpec(enc.backend, model, enc.batch_size, cfg.embedding.device,
                           enc.pooling)
        df = add_embedding_scores(df, spec, everyone, cfg.embedding.margin_k)
    if cfg.pair_score.english_lm is not None and english_side(cfg.sides) is not None:
        path = for_executors(spark, cfg.pair_score.english_lm, "pair_score.english_lm")
        df = add_english_lm(df, cfg.sides, path, everyone)
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


def feature_table(spark: SparkSession, rows: list, cfg: FilterConfig,
                  aligner: str | None) -> tuple[list[str], Any]:
    """(features, pandas table of src, tgt, label, kind, held_apart, alive, f_<feature>) of `rows`
    (src, tgt, label, kind, held_apart) as the filter scores them."""
    df = scored(spark, rows, cfg, aligner)
    names = [n for n in available(df.columns)
             if not (n == "embed_margin" and cfg.embedding.margin_k == 0)]
    table = df.select("src", "tgt", "label", "kind", "held_apart",
                      F.col("reject_rule").isNull().alias("alive"),
                      *[col.alias(name) for name, col in
                        feature_columns(names, rule_row(cfg)).items()]).toPandas()
    return names, table


def _x(table: Any, names: list[str]) -> Any:
    return table[[f"f_{n}" for n in names]].to_numpy(dtype=float)


def train(spark: SparkSession, cfg: FilterConfig,
          pairs: list[tuple[str, str, str | None, str | None]],
          aligner: str | None = None,
          check_rows: list[tuple[str, str, int, str]] | None = None,
          check_file: str = "") -> dict[str, Any]:
    """The model of clean pairs and the negatives made from them, and its held-apart
    measurements. `pairs`: clean pairs with their document neighbours (`positives`). Fitted on
    the rows the config's rules keep, as a filter run scores only those: a made pair that the
    rules reject (every copy, every wrong language) would teach the model the rules' own work.
    `check_rows`: labelled pairs (`read_labelled`) to check it on, else the held-apart made
    ones (and a warning)."""
    import numpy as np

    real = None
    if check_rows:  # scored first: a check the rules leave one-sided fails before the fit
        _, real = feature_table(spark, [(s, t, v, lab, True) for s, t, v, lab in check_rows],
                                cfg, aligner)
        real = real[real.alive]
        if real.label.nunique() < 2:
            raise InputError(f"--check {check_file}: the pairs the rules keep are all valid or "
                             "all bad: a check needs both")
    names, table = feature_table(spark, labelled(pairs, cfg), cfg, aligner)
    train_part = table[~table.held_apart & table.alive]
    if train_part.label.nunique() < 2:
        raise InputError("the rules reject every made pair (or every clean one): nothing to fit")
    x, y = _x(train_part, names), train_part.label.to_numpy()
    # The regularisation chosen on fifths of the rest, by a hash of the text: the same fifths
    # however Spark ordered the rows.
    folds = np.array([zlib.crc32(f"{s}\t{t}".encode()) % HELD_APART
                      for s, t in zip(train_part.src, train_part.tgt, strict=True)])
    c, tried = choose_c(names, x, y, folds)
    model = fit_monotone(names, x, y, c)
    held = table[table.held_apart]
    alive, kind = held.alive.to_numpy(), held.kind.to_numpy()
    if real is not None:
        checked = {**check(model, _x(real, names), real.label.to_numpy()),
                   "by": "labelled pairs (--check)"}
    else:
        checked = {**check(model, _x(held[alive], names), held.label[alive].to_numpy()),
                   "by": "made negatives only: not checked on real pairs"}
        log("warning: pair_score checked on made negatives only, not on real pairs: give "
            "--check with labelled pairs (src<TAB>tgt<TAB>label) to check it")
    if not checked["not_worse"]:
        log(f"pair_score ranks valid pairs worse than {checked['best_input']} alone "
            f"({checked['auc']:.3f} < {checked['inputs'][checked['best_input']]:.3f}, "
            f"{checked['by']}): the model is {checked['best_input']} alone")
        model = single_input(checked["best_input"], names, x)
    held_scores = scores(model, _x(held, model["features"]))
    pos = held_scores[alive & (kind == "clean")]
    fitted = thresholds(pos)
    kinds = {}
    for name in sorted(set(kind) - {"clean"}):
        neg = held_scores[alive & (kind == name)]
        by_rules = 1 - float(alive[kind == name].mean())
        kinds[name] = {"by_rules": by_rules,
                       "auc": auc(list(pos), list(neg)) if len(neg) else None,
                       "rejected": by_rules + (1 - by_rules) * float(
                           (neg < fitted["threshold"]).mean() if len(neg) else 0.0)}
    neg_all = held_scores[alive & (kind != "clean")]
    return {
        **model, **fitted,
        "c_tried": {str(k): v for k, v in tried.items()},
        "check": checked,
        "held_apart": {"clean_pairs": int(len(pos)), "auc": auc(list(pos), list(neg_all)),
                       "kept_clean": float((pos >= fitted["threshold"]).mean()),
                       "kinds": kinds},
        "train_pairs": int((train_part.label == 1).sum()),
        "negatives": list(NEGATIVE_KINDS), "labels": "made",
        **_scorers(cfg, aligner),
    }


def train_labelled(spark: SparkSession, cfg: FilterConfig,
                   files: list[list[tuple[str, str, int, str]]],
                   aligner: str | None = None) -> dict[str, Any]:
    """The model of human-labelled pairs (`train_on_labels`): each file a group held out in
    turn; a single file is cut in fifths by a hash of the text."""
    import numpy as np

    rows = []
    for i, part in enumerate(files):
        for s, t, valid, label in part:
            group = i if len(files) > 1 else zlib.crc32(f"{s}\t{t}".encode()) % HELD_APART
            rows.append((s, t, valid, f"{group}\t{label}", False))
    names, table = feature_table(spark, rows, cfg, aligner)
    kept = table[table.alive]
    if kept.label.nunique() < 2:
        raise InputError("the labelled pairs the rules keep are all valid or all bad: a "
                         "pair_score needs both")
    groups = kept.kind.str.split("\t").str[0].to_numpy()
    model = train_on_labels(names, _x(kept, names), kept.label.to_numpy(), groups)
    labels = table.kind.str.split("\t").str[1]
    by_rules = {lab: 1 - float(table.alive[labels == lab].mean()) for lab in sorted(set(labels))}
    return {**model, "held_apart": {"clean_pairs": int((kept.label == 1).sum()),
                                    "auc": model["check"]["auc"],
                                    "kept_clean": KEEP_VALID,
                                    "by_rules": by_rules},
            "train_pairs": int(len(kept)), "negatives": [], "labels": "human",
            "groups": int(len(np.unique(groups))), **_scorers(cfg, aligner)}


def _scorers(cfg: FilterConfig, aligner: str | None) -> dict[str, Any]:
    return {"align": cfg.align.enabled, "aligner": aligner,
            "embedding": cfg.embedding.enabled,
            "encoder": cfg.embedding.encoder if cfg.embedding.enabled else None,
            "english_lm": cfg.pair_score.english_lm}


def report(model: dict[str, Any]) -> str:
    held, checked = model["held_apart"], model["check"]
    lines = [f"held apart: {held['clean_pairs']} valid pairs, AUC {held['auc']:.3f}, threshold "
             f"{model['threshold']:.3f} keeps {held['kept_clean']:.1%}"]
    for kind, m in held.get("kinds", {}).items():
        seen = "-" if m["auc"] is None else f"{m['auc']:.3f}"
        lines.append(f"  {kind:16} by the rules {m['by_rules']:6.1%}  AUC of the rest {seen:5}  "
                     f"rejected in all {m['rejected']:.1%}")
    best = checked["best_input"]
    lines.append(f"checked on {checked['by']} ({checked['pairs']} pairs): AUC "
                 f"{checked['auc']:.3f}, best input {best} {checked['inputs'][best]:.3f}"
                 + ("" if checked["not_worse"] else f": worse, so the model is {best} alone"))
    if learners := checked.get("learners"):
        lines.append("learners on held-out groups (AUC): " + ", ".join(
            f"{name} {value:.3f}" for name, value in learners.items()))
    if model.get("learner") == "additive":
        lines.append("additive steps (how far each feature moves the logit): " + ", ".join(
            f"{n} {max(s['values']) - min(s['values']):.2f}"
            for n, s in zip(model["features"], model["shapes"], strict=True)))
    else:
        lines.append(f"weights (standardized, C={model['c']}): " + ", ".join(
            f"{n} {w:+.2f}" for n, w in zip(model["features"], model["weights"], strict=True)))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    check_name("--name", args.name)  # a directory in the model store, not outside it
    extra = lake_extra(args)
    cfg = load_config(args.config, args.set, extra)
    if cfg.mono:
        raise ConfigError("pair_score scores pairs: give a pair config")
    if args.labelled and (args.input or args.where):
        raise ConfigError("--labelled trains on human labels alone: drop --input/--where")
    labelled_files = [read_labelled(path) for path in args.labelled or []]
    if labelled_files:
        need_both_classes([r for rows in labelled_files for r in rows],
                          "--labelled " + " ".join(args.labelled))
    check_rows = read_labelled(args.check) if args.check else None
    if check_rows is not None:
        need_both_classes(check_rows, f"--check {args.check}")
    spark, lake = open_lake("sluice-train-pair-score", cfg)
    store = PairScoreStore(lake, cfg.pair)
    if store.exists(args.name):
        raise ConfigError(f"pair_score model {args.name} of {cfg.pair} exists: pick another "
                          "--name")
    aligner = saved_aligner(lake, cfg)
    if labelled_files:
        source = "labelled " + " ".join(args.labelled)
        log(f"training pair_score {args.name} of {cfg.pair} on "
            f"{sum(map(len, labelled_files))} labelled pairs ({source})")
        model = train_labelled(spark, cfg, labelled_files, aligner)
    else:
        pairs, source = positives(spark, cfg, args, cfg.lake.database)
        log(f"training pair_score {args.name} of {cfg.pair} on {len(pairs)} clean pairs "
            f"({source})")
        model = train(spark, cfg, pairs, aligner, check_rows, args.check or "")
    path = store.save_manifest(args.name, {**model, "source": source})
    log(report(model))
    print(f"pair_score model {args.name} of {cfg.pair}: {path}")
    return 0


main = job_main(parse_args, run)
