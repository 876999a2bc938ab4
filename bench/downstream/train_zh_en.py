"""Proof that the training module learns: a small zh->en Transformer on real data.

    .venv/bin/python -m bench.downstream.train_zh_en [--minutes 10] \\
        [--workdir /tmp/sluice-bench-zh-en]

Data: Tatoeba/Anki cmn.txt (29k pairs) + the Tatoeba eng-zho test set (10k pairs) from
../shared/data (CC-BY 2.0 FR). A seeded random held-out test split (500) and dev split
(300) are taken first, and every training pair whose Chinese or English side occurs in
them is removed (the two corpora overlap). Then:

1. train for --minutes of wall time (dev BLEU/chrF every --eval-every steps -> the curve),
2. average the last 3 checkpoints, export to CTranslate2 (float32 and int8),
3. translate the test split with CTranslate2 (greedy and beam 4) and score it,
4. time the torch model's own greedy decoding against CTranslate2 greedy on the same test
   sentences and thread count (target tokens/s and ratio), and count identical outputs.

Writes results.json and the files it made under --workdir; prints a summary."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from bench.kit import SHARED

BITEXT = SHARED / "bitext"


def load_pairs() -> list[tuple[str, str]]:
    """(zh, en) pairs from both corpora, stripped, exact duplicates removed."""
    pairs = []
    with open(BITEXT / "anki-cmn" / "cmn.txt", encoding="utf-8-sig") as fh:
        for line in fh:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 2:
                pairs.append((cols[1].strip(), cols[0].strip()))
    base = BITEXT / "tatoeba" / "eng-zho" / "tatoeba-test-v2021-08-07"
    with open(f"{base}.zho", encoding="utf-8") as fz, open(f"{base}.eng", encoding="utf-8") as fe:
        for z, e in zip(fz, fe, strict=True):
            pairs.append((z.strip(), e.strip()))
    seen, out = set(), []
    for p in pairs:
        if p[0] and p[1] and p not in seen:
            seen.add(p)
            out.append(p)
    return out


def split(pairs, n_test: int, n_dev: int, seed: int):
    rng = random.Random(seed)
    idx = list(range(len(pairs)))
    rng.shuffle(idx)
    test = [pairs[i] for i in idx[:n_test]]
    dev = [pairs[i] for i in idx[n_test : n_test + n_dev]]
    held_zh = {z for z, _ in test + dev}
    held_en = {e for _, e in test + dev}
    train = [
        pairs[i]
        for i in idx[n_test + n_dev :]
        if pairs[i][0] not in held_zh and pairs[i][1] not in held_en
    ]
    return train, dev, test


def write_pair(path_prefix: Path, pairs) -> list[str]:
    zh, en = Path(f"{path_prefix}.zh"), Path(f"{path_prefix}.en")
    zh.write_text("".join(z + "\n" for z, _ in pairs), encoding="utf-8")
    en.write_text("".join(e + "\n" for _, e in pairs), encoding="utf-8")
    return [str(zh), str(en)]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--workdir", default="/tmp/sluice-bench-zh-en")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", default="2-2", help="encoder-decoder layers")
    ap.add_argument("--vocab", type=int, default=6000)
    ap.add_argument("--max-tokens", type=int, default=1500)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--fresh", action="store_true", help="delete an earlier run in --workdir")
    args = ap.parse_args()

    import shutil

    import torch

    from training import checkpoint as ck
    from training.average import average_checkpoints
    from training.config import from_dict
    from training.data import pad_sources
    from training.decode import greedy
    from training.evaluate import bleu_chrf
    from training.export import export
    from training.logs import progress
    from training.train import run
    from training.translator import Ct2Translator

    work = Path(args.workdir)
    if args.fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    pairs = load_pairs()
    train, dev, test = split(pairs, 500, 300, seed=1)
    progress(
        f"{len(pairs):,} unique pairs: train {len(train):,}, dev {len(dev)}, "
        f"test {len(test)} (held-out sides removed from train)"
    )
    train_files = write_pair(work / "train", train)
    dev_files = write_pair(work / "dev", dev)
    write_pair(work / "test", test)

    enc, dec = (int(x) for x in args.layers.split("-"))
    cfg = from_dict(
        {
            "run_dir": str(work / "run"),
            "seed": 1,
            "data": {
                "train": [{"paths": train_files, "format": "moses"}],
                "dev": {"paths": dev_files, "format": "moses"},
                "dev_size": 300,
                "src_lang": "zh",
                "tgt_lang": "en",
                "max_len": 64,
            },
            "vocab": {"size": args.vocab, "tags": ["zh", "en"]},
            "model": {
                "d_model": args.d_model,
                "ffn_dim": 4 * args.d_model,
                "heads": max(1, args.d_model // 64),
                "encoder_layers": enc,
                "decoder_layers": dec,
                "dropout": 0.1,
                "max_positions": 256,
            },
            "optim": {"lr": args.lr, "warmup_steps": args.warmup},
            "train": {
                "max_tokens": args.max_tokens,
                "max_steps": 10**9,
                "max_minutes": args.minutes,
                "save_every": args.eval_every,
                "keep_last": 3,
                "eval_every": args.eval_every,
                "log_every": 50,
                "threads": args.threads,
            },
        }
    )
    summary = run(cfg)
    run_dir = Path(cfg.run_dir)

    # training throughput: target tokens/s over the logged windows (eval time excluded)
    import csv

    with open(run_dir / "train_log.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    tok = sum(int(r["tgt_tokens"]) for r in rows)
    secs = sum(int(r["tgt_tokens"]) / float(r["tgt_tokens_per_s"]) for r in rows)
    with open(run_dir / "dev_log.csv", encoding="utf-8") as fh:
        curve = [
            {k: r[k] for k in ("step", "elapsed_s", "dev_nll", "bleu", "chrf")}
            for r in csv.DictReader(fh)
        ]

    # average, pick by dev BLEU, export
    ckpts = ck.list_checkpoints(run_dir / "checkpoints")
    avg = average_checkpoints(ckpts[-3:])
    ck.save_atomic(avg, run_dir / "avg_last3.pt")
    model_avg, vocab = ck.build_model(avg)
    model_last, _ = ck.build_model(ck.load(ckpts[-1]))
    torch.set_num_threads(args.threads)
    dev_src, dev_ref = [z for z, _ in dev], [e for _, e in dev]
    from training.decode import translate

    dev_avg = bleu_chrf(translate(model_avg, vocab, dev_src), dev_ref, "en")
    dev_last = bleu_chrf(translate(model_last, vocab, dev_src), dev_ref, "en")
    best = avg if dev_avg["bleu"] >= dev_last["bleu"] else ck.load(ckpts[-1])
    best_name = "avg_last3" if best is avg else ckpts[-1].name
    model, _ = ck.build_model(best)
    progress(f"dev BLEU last {dev_last} vs averaged {dev_avg}: exporting {best_name}")
    ct2_dir = export(best, work / "ct2-fp32", force=True)
    ct2_int8 = export(best, work / "ct2-int8", quantization="int8", force=True)

    test_src, test_ref = [z for z, _ in test], [e for _, e in test]
    results: dict = {
        "data": {"train": len(train), "dev": len(dev), "test": len(test)},
        "model": cfg.model.model_dump(),
        "threads": args.threads,
        "params_M": round(model.num_parameters() / 1e6, 2),
        "training": {
            "steps": summary["step"],
            "wall_s": round(summary["elapsed_s"]),
            "tgt_tokens": summary["tokens_seen"],
            "tgt_tokens_per_s": round(tok / max(secs, 1e-9), 1),
        },
        "dev_curve": curve,
        "dev_last": dev_last,
        "dev_avg3": dev_avg,
        "exported": best_name,
        "test": {},
    }

    # decoding speed: torch greedy vs CTranslate2 greedy, same sentences, same threads
    max_len = 64
    ids = [vocab.source_ids(s) for s in test_src]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    t0 = time.perf_counter()
    torch_out: list[list[int]] = [[] for _ in ids]
    for start in range(0, len(order), 32):
        chunk = order[start : start + 32]
        hyps = greedy(model, pad_sources([ids[i] for i in chunk]), max_len)
        for i, h in zip(chunk, hyps, strict=True):
            torch_out[i] = h
    t_torch = time.perf_counter() - t0
    n_torch = sum(len(h) + 1 for h in torch_out)
    for name, d in (("fp32", ct2_dir), ("int8", ct2_int8)):
        tr = Ct2Translator(d, intra_threads=args.threads)
        tr.translate(test_src[:20], beam_size=1)  # warm-up
        t0 = time.perf_counter()
        g = tr.translate(test_src, beam_size=1, max_decoding_length=max_len, max_batch_size=32)
        t_g = time.perf_counter() - t0
        n_g = sum(len(x.tokens) + 1 for x in g)
        t0 = time.perf_counter()
        b = tr.translate(test_src, beam_size=4, max_decoding_length=max_len, max_batch_size=32)
        t_b = time.perf_counter() - t0
        same = sum(
            [vocab.sp.piece_to_id(p) for p in x.tokens] == h
            for x, h in zip(g, torch_out, strict=True)
        )
        results["test"][name] = {
            "greedy": bleu_chrf([x.text for x in g], test_ref, "en"),
            "beam4": bleu_chrf([x.text for x in b], test_ref, "en"),
            "greedy_tgt_tokens_per_s": round(n_g / t_g, 1),
            "beam4_s": round(t_b, 2),
            "greedy_identical_to_torch": f"{same}/{len(test_src)}",
        }
        (work / f"test.ct2-{name}.beam4.en").write_text(
            "".join(x.text + "\n" for x in b), encoding="utf-8"
        )
    torch_text = [vocab.decode_target(h) for h in torch_out]
    results["test"]["torch"] = {
        "greedy": bleu_chrf(torch_text, test_ref, "en"),
        "greedy_tgt_tokens_per_s": round(n_torch / t_torch, 1),
    }
    results["ct2_vs_torch_greedy_speed"] = {
        name: round(
            results["test"][name]["greedy_tgt_tokens_per_s"]
            / results["test"]["torch"]["greedy_tgt_tokens_per_s"],
            2,
        )
        for name in ("fp32", "int8")
    }
    results["examples"] = [
        {
            "src": test_src[i],
            "ref": test_ref[i],
            "ct2_beam4": (work / "test.ct2-fp32.beam4.en")
            .read_text(encoding="utf-8")
            .splitlines()[i],
        }
        for i in range(0, 50, 7)
    ]
    results["load_average"] = os.getloadavg()
    (work / "results.json").write_text(
        json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(json.dumps(results, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
