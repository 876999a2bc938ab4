"""Target tokens/s of jobs/translate.py against a plain CTranslate2 loop and the torch model.

The same model and sentences (newstest English, en->zh) are decoded three ways, at equal
threads (two cores here):

  (a) plain CTranslate2: one process, `translate_batch` over all sentences, 2 inter-op
      threads x 1 intra-op thread, batches of `--batch-tokens` source tokens;
  (b) the Spark job (`TranslateRun.execute`, local[2]: 2 tasks x 1 thread), timed from the
      selection of the input to the staged, counted output (everything but session start
      and the catalog commit);
  (c) the torch model's own beam search (training/decode.py), 2 torch threads, on a subset.

It prints tokens/s of each and the ratios (b)/(a) (the cost of the Spark plumbing; target at
most 1.3x) and (a)/(c), and checks (a) and (b) produced the same hypotheses.

    python -m bench.downstream.translate_throughput [--sentences 2000] [--method beam|greedy]
        [--checkpoint runs/x/ckpt.pt]   # default: train a d=256 model on the test slice
        [--device cpu|cuda]             # cuda: (a) and (b) on the GPU, (c) on it too
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.kit import REPO, SHARED

NEWSTEST_EN = SHARED / "mono" / "newstest_all.en.txt"
FALLBACK_EN = REPO / "tests" / "data" / "tatoeba-zh-en.en"
THREADS = 2
MAX_OUT = 128


def sentences(n: int) -> list[str]:
    path = NEWSTEST_EN if NEWSTEST_EN.exists() else FALLBACK_EN
    lines = [x.strip() for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    print(f"sentences: {min(n, len(lines)):,} from {path} (those the model can take are used)")
    return lines[:n]


def bench_model(workdir: Path, checkpoint: str | None) -> Path:
    """A checkpoint: the one given, or tiny-multi-zh-en widened to d=256 and trained briefly
    (cached in the workdir)."""
    if checkpoint:
        return Path(checkpoint)
    from training.config import load_config
    from training.train import run

    run_dir = workdir / "model"
    found = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))
    if found:
        return found[-1]
    cfg = load_config(REPO / "conf/train/tiny-multi-zh-en.yaml", [
        f"run_dir={run_dir}", "model.d_model=256", "model.ffn_dim=1024", "train.max_steps=400",
        "train.save_every=400", "train.eval_every=0", f"train.threads={THREADS}"])
    for source in [*cfg.data.train, cfg.data.dev]:
        source.paths = [str(REPO / p) for p in source.paths]
    print("training the bench model (d=256, 400 steps; cached in the workdir)")
    run(cfg)
    return sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1]


def options(method: str, batch_tokens: int) -> dict:
    from udfs.translate import DecodeSpec

    return DecodeSpec(model_dir="", tgt_lang="zh", method=method, batch_tokens=batch_tokens,
                      max_input_tokens=10_000, max_output_tokens=MAX_OUT).options()


def plain_ct2(ct2: Path, texts: list[str], method: str, batch_tokens: int,
              device: str) -> tuple[float, int, list[list[str]]]:
    import ctranslate2

    from udfs.text_codec import CodecSpec, load_codec

    codec = load_codec(str(ct2), CodecSpec(target_tag="zh"))
    translator = ctranslate2.Translator(str(ct2), device=device, inter_threads=THREADS,
                                        intra_threads=1)
    translator.translate_batch([codec.encode(texts[0])])  # warm up (allocations)
    start = time.perf_counter()
    tokens = [codec.encode(t) for t in texts]
    results = translator.translate_batch(tokens, **options(method, batch_tokens))
    hyps = [r.hypotheses[0] for r in results]
    _ = [codec.decode(h) for h in hyps]
    seconds = time.perf_counter() - start
    return seconds, sum(len(h) for h in hyps), hyps


def spark_job(ct2: Path, texts: list[str], method: str, batch_tokens: int, device: str,
              lake_dir: Path, partitions: int) -> tuple[float, int, list[list[str]]]:

    from jobs.lake.session import build_session
    from jobs.lake.store import Lake
    from jobs.translation.config import load_translate_config
    from jobs.translation.job import TranslateRun

    spark = build_session("sluice-bench-translate", str(lake_dir), f"local[{THREADS}]",
                          {"spark.ui.enabled": "false",
                           "spark.sql.execution.arrow.maxRecordsPerBatch": "2048"})
    lake = Lake(spark, str(lake_dir), "bench")
    rows = [(i, "en", "news", t) for i, t in enumerate(texts)]
    spark.createDataFrame(rows, "row_id long, lang string, corpus string, text string") \
        .write.mode("overwrite").saveAsTable("bench.mono_clean")
    cfg = load_translate_config(None, [
        f"lake.root={lake_dir}", "lake.database=bench", f"decoding.batch_tokens={batch_tokens}",
        f"decoding.max_output_tokens={MAX_OUT}", "decoding.max_input_tokens=10000",
        f"decoding.device={'cuda' if device == 'cuda' else 'cpu'}", "decoding.threads=1",
        f"decoding.partitions={partitions}"],
        {"streams": [{"name": "bench", "model": str(ct2), "direction": "en-zh",
                      "method": method, "input": {"table": "bench.mono_clean"}}]})
    job = TranslateRun(spark, lake, cfg, "bench")
    streams = [job.open_stream(s) for s in cfg.streams]
    start = time.perf_counter()
    job.execute(streams)
    seconds = time.perf_counter() - start
    out = spark.read.parquet(f"{lake.run_dir('bench')}/synthetic").select(
        "source_row_id", "hypothesis", "tgt_tokens").orderBy("source_row_id").collect()
    tokens = sum(r.tgt_tokens or 0 for r in out)
    by_id = {r.source_row_id: r.hypothesis for r in out}
    spark.stop()
    return seconds, tokens, [by_id.get(i) for i in range(len(texts))]


def torch_decoding(checkpoint: Path, texts: list[str], method: str, device: str,
                   batch: int = 32) -> tuple[float, int]:
    import torch

    from training import checkpoint as ck
    from training.data import pad_sources
    from training.decode import beam_search, greedy

    torch.set_num_threads(THREADS)
    model, vocab = ck.build_model(ck.load(checkpoint))
    model.to(device).eval()
    ids = sorted((vocab.source_ids(t, "zh") for t in texts), key=len)
    start = time.perf_counter()
    tokens = 0
    for i in range(0, len(ids), batch):
        src = pad_sources(ids[i:i + batch]).to(device)
        if method == "greedy":
            hyps = greedy(model, src, MAX_OUT)
        else:
            hyps = [h[0].tokens for h in beam_search(model, src, 4, MAX_OUT)]
        tokens += sum(len(h) for h in hyps)
    return time.perf_counter() - start, tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--torch-sentences", type=int, default=300)
    ap.add_argument("--method", choices=["beam", "greedy"], default="beam")
    ap.add_argument("--batch-tokens", type=int, default=2048)
    ap.add_argument("--partitions", type=int, default=0, help="decoding tasks (0: the job's)")
    ap.add_argument("--checkpoint", help="a training checkpoint (default: train a bench model)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "sluice-bench-bt"))
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from training.export import export

    workdir = Path(args.workdir)
    checkpoint = bench_model(workdir, args.checkpoint)
    ct2 = export(checkpoint, workdir / "ct2", force=True)
    from udfs.text_codec import CodecSpec, load_codec

    codec = load_codec(str(ct2), CodecSpec(target_tag="zh"))
    # Inputs past the model's positions would be rejected by the job, not decoded.
    texts = [t for t in sentences(args.sentences) if len(codec.encode(t)) <= codec.max_tokens]

    a_s, a_tok, a_hyps = plain_ct2(ct2, texts, args.method, args.batch_tokens, args.device)
    b_s, b_tok, b_hyps = spark_job(ct2, texts, args.method, args.batch_tokens, args.device,
                                   workdir / "lake", args.partitions)
    sub = texts[: args.torch_sentences]
    c_s, c_tok = torch_decoding(checkpoint, sub, args.method, args.device)

    same = sum(codec.decode(a) == b for a, b in zip(a_hyps, b_hyps, strict=True))
    rate = {"a": a_tok / a_s, "b": b_tok / b_s, "c": c_tok / c_s}
    print(f"model {checkpoint}, method {args.method}, device {args.device}, "
          f"{THREADS} threads each, max {MAX_OUT} output tokens")
    print(f"(a) plain CTranslate2 loop: {a_tok:>9,} tokens in {a_s:7.1f} s = {rate['a']:9,.0f}/s")
    print(f"(b) Spark translate job   : {b_tok:>9,} tokens in {b_s:7.1f} s = {rate['b']:9,.0f}/s")
    print(f"(c) torch decoding        : {c_tok:>9,} tokens in {c_s:7.1f} s = {rate['c']:9,.0f}/s"
          f"  ({len(sub)} sentences)")
    print(f"time per token, Spark job / plain loop: {rate['a'] / rate['b']:.2f}x (target <= 1.3x)")
    print(f"CTranslate2 / torch tokens/s: {rate['a'] / rate['c']:.2f}x")
    print(f"identical outputs (a) vs (b): {same:,}/{len(texts):,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
