"""Every GPU figure of sluice in one command and one JSON (issue 36), in a few minutes on one
GPU:

- `peak`: the bf16 matmul rate of this GPU (8192^3), the yardstick of every share below.
- `embed`: a LaBSE-shaped encoder (random weights, LaBSE's shape and vocabulary size; built
  by bench/gpu/embed.py) on real zh-en lines, three ways: the scorer's per-group function
  exactly as the filter's embed stage calls it (`udfs.embed_scores.score_group`, on groups of
  the stage's size), the encoder's pair path alone (`encode_pairs`), and the per-side path the
  stage used before (`encode` of each side in batches of 256), all in this run.
- `cross_encoder`: the BERT pair classifier (udfs/cross_encoder_model.py) on an e5-small-shaped
  encoder (random weights; the real checkpoint is 470 MB, too big to carry): a fine-tune
  (training/cross_encoder.py, examples/s), then scoring from token ids made before the timed
  part, as the filter's GPU task gets them (pairs/s, share of the bf16 peak), and the
  tokenizer's rate on one CPU core.
- `train`: the real training loop (`training.train.Trainer`, bf16) for Transformer base and
  big at 16k and 64k target tokens a batch; FLOPs of one real batch counted by torch's
  FlopCounterMode; tokens/s from the loop's own log (its first window is warm-up).
- `ct2`: CTranslate2 decoding on the GPU, when its wheel loads here (it needs CUDA 12's
  cuBLAS); otherwise one line saying why.

Runs without pyspark and without a JVM (GPU hosts have neither): the scorer's group code
lives in udfs/embed_scores.py for that. Anything missing is skipped with one clear line, and
the JSON is rewritten after each part, so a run cut short keeps what it measured.

    python -m bench.gpu.suite --out gpu.json           # on a GPU
    python -m bench.gpu.suite --smoke --out smoke.json  # tiny shapes on the CPU: the script
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.kit import REPO, write_json

DATA = REPO / "tests" / "data"

TRAIN_SHAPES = {  # name: d_model, ffn, heads, (encoder, decoder layers)
    "base": (512, 2048, 8, (6, 6)),
    "big": (1024, 4096, 16, (6, 6)),
}


class Suite:
    def __init__(self, out: Path, smoke: bool, train_runs: str, old_train: Path | None) -> None:
        import torch

        self.out, self.smoke = out, smoke
        self.train_runs, self.old_train = train_runs.split(","), old_train
        self.device = "cpu" if smoke or not torch.cuda.is_available() else "cuda"
        self.results: dict[str, Any] = {"smoke": smoke, "device": self.device}

    def part(self, name: str, run: Callable[[], Any]) -> None:
        start = time.time()
        try:
            self.results[name] = run()
        except Exception as err:  # one part failing must not lose the others
            traceback.print_exc()
            self.results[name] = {"error": f"{type(err).__name__}: {err}"}
        print(f"gpu_suite: {name} done in {time.time() - start:.0f} s", flush=True)
        write_json(self.out, self.results)

    def sync(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()


def environment(suite: Suite) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                           "cuda": torch.version.cuda}
    if suite.device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
    for module in ("transformers", "sentence_transformers", "ctranslate2", "pyspark"):
        try:
            env[module] = __import__(module).__version__
        except Exception as err:
            env[module] = f"not loaded: {type(err).__name__}: {str(err)[:120]}"
    return env


def peak(suite: Suite) -> float:
    from bench.gpu.embed import matmul_tflops

    n, iters = (8192, 30) if suite.device == "cuda" else (256, 2)
    return max(matmul_tflops(suite.device, n, iters) for _ in range(2))  # the better of two


def distinct_sides(pairs: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """Each side's texts all distinct (the encoder encodes a repeated text once: repeats
    would count work not done): two of the side's lines joined, each pair of lines once:
    short news/Tatoeba sentences, ~30 tokens."""
    sides = []
    for column in (0, 1):
        lines = sorted({pair[column] for pair in pairs})
        n = len(lines)
        texts = [f"{lines[i % n]} {lines[(i % n + 1 + i // n) % n]}" for i in range(len(pairs))]
        sides.append(list(dict.fromkeys(texts)))
    size = min(map(len, sides))
    return sides[0][:size], sides[1][:size]


def embed(suite: Suite, peak_tflops: float) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    from bench.gpu.embed import LABSE, SMOKE, build_model, sample_pairs, sentence_flops
    from udfs import embed_scores as eg
    from udfs.encoders import load_encoder

    shape = SMOKE if suite.smoke else LABSE
    n_pairs = 400 if suite.smoke else 40_000
    src, tgt = distinct_sides(sample_pairs("zh-en", n_pairs))
    tmp = Path(tempfile.mkdtemp(prefix="gpu-suite-embed-"))
    model_dir = build_model(tmp, shape, src + tgt)
    spec = eg.EncoderSpec("sentence-transformers", str(model_dir), batch_size=256,
                          device=suite.device)
    encoder = load_encoder(spec.backend, str(model_dir), suite.device, os.cpu_count() or 1)
    params = sum(p.numel() for n, p in encoder.model.named_parameters()
                 if "embeddings" not in n)
    lengths = np.fromiter(map(len, encoder.tokenize(src + tgt)), dtype=np.int64)
    flops = float(sum(sentence_flops(int(n), shape, params) for n in lengths))
    n_pairs = len(src)
    out: dict[str, Any] = {"pairs": n_pairs, "tokens_per_sentence": round(float(lengths.mean()), 1),
                           "encoder_params_M": round(params / 1e6, 1)}

    def rate(name: str, seconds: float) -> None:
        tflops = flops / seconds / 1e12
        share = tflops / peak_tflops if peak_tflops > 0 else float("nan")
        out[name] = {"seconds": round(seconds, 2), "pairs_per_s": round(n_pairs / seconds),
                     "tflops_real_tokens": round(tflops, 1), "share_of_peak": round(share, 3)}
        print(f"embed {name}: {n_pairs / seconds:,.0f} pairs/s, "
              f"{share:.1%} of {peak_tflops:.0f} TFLOP/s", flush=True)

    def timed(run: Callable[[], Any]) -> float:
        run()  # warm-up: kernels, allocator, cuBLAS handles
        suite.sync()
        start = time.perf_counter()
        run()
        suite.sync()
        return time.perf_counter() - start

    rate("bare_encode_pairs", timed(lambda: encoder.encode_pairs(src, tgt)))
    frame = pd.DataFrame({"src": src, "tgt": tgt})
    frame[eg._GROUP] = 0
    frame[eg._ORDER] = pd.util.hash_pandas_object(frame[["src", "tgt"]], index=False).astype(
        "int64")
    # The stage's groups: ENCODE_ROWS pairs without a margin, GROUP_ROWS with one (margin
    # k=4 computed on the GPU in the same call).
    for rows, margin_k in ((eg.ENCODE_ROWS, 0), (eg.GROUP_ROWS, 4)):
        group_fn = eg.score_group(spec, margin_k)
        groups = [frame.iloc[i:i + rows] for i in range(0, n_pairs, rows)]
        name = f"scorer_group_{rows}_rows" + (f"_margin_{margin_k}" if margin_k else "")
        rate(name, timed(lambda g=groups, f=group_fn: [f(x) for x in g]))
    group_fn = eg.score_group(spec, 4)
    got = group_fn(frame.iloc[:512])[[eg.COSINE, eg.MARGIN]].to_numpy()
    again = group_fn(frame.iloc[:512])[[eg.COSINE, eg.MARGIN]].to_numpy()
    out["repeatable"] = bool(np.array_equal(got, again))
    before = n_pairs if suite.smoke else 8_000  # the old path is slow: a slice of the pairs
    seconds = timed(lambda: (eg.encode(spec, src[:before]), eg.encode(spec, tgt[:before])))
    rate("before_per_side_batch_256", seconds * n_pairs / before)
    return out


E5_SMALL = {"vocab": 250_037, "hidden": 384, "layers": 12, "heads": 12, "ffn": 1536}


def cross_encoder(suite: Suite, peak_tflops: float) -> dict[str, Any]:
    import numpy as np

    from bench.gpu.embed import SMOKE, build_model, sample_pairs, sentence_flops
    from training.cross_encoder import fine_tune
    from udfs.cross_encoder_model import CrossEncoder, CrossEncoderCard

    shape = SMOKE if suite.smoke else E5_SMALL
    n_pairs, n_train = (300, 64) if suite.smoke else (40_000, 20_000)
    pairs = sample_pairs("zh-en", n_pairs)
    src, tgt = [p[0] for p in pairs], [p[1] for p in pairs]
    tmp = Path(tempfile.mkdtemp(prefix="gpu-suite-ce-"))
    build_model(tmp, shape, src + tgt)
    base, model_dir = str(tmp / "hf"), str(tmp / "ce")
    examples = [(s, t, i % 2) for i, (s, t) in enumerate(pairs[:n_train])]
    start = time.perf_counter()
    fine_tune(examples, base, model_dir, top_layers=max(1, shape["layers"] // 2),
              device=suite.device)
    trained = time.perf_counter() - start
    card = CrossEncoderCard.read(model_dir)
    card.threshold = 0.5
    card.write(model_dir)
    model = CrossEncoder(model_dir, base, suite.device, os.cpu_count() or 1)
    start = time.perf_counter()
    flat, offsets = model.tokenize(src, tgt)
    tokenized = time.perf_counter() - start
    lengths = np.diff(offsets)
    params = sum(p.numel() for n, p in model.encoder.named_parameters() if "embeddings" not in n)
    flops = float(sum(sentence_flops(int(n), shape, params) for n in lengths))
    model.score_ids(flat[: offsets[min(512, n_pairs)]], offsets[: min(512, n_pairs) + 1])
    suite.sync()
    start = time.perf_counter()
    scores = model.score_ids(flat, offsets)
    suite.sync()
    seconds = time.perf_counter() - start
    share = flops / seconds / 1e12 / peak_tflops if peak_tflops > 0 else float("nan")
    out = {"pairs": n_pairs, "tokens_per_pair": round(float(lengths.mean()), 1),
           "encoder_params_M": round(params / 1e6, 1),
           "fine_tune": {"examples": n_train, "seconds": round(trained, 1),
                         "examples_per_s": round(n_train / trained, 1)},
           "tokenize_one_core_pairs_per_s": round(n_pairs / tokenized),
           "score": {"seconds": round(seconds, 2), "pairs_per_s": round(n_pairs / seconds),
                     "share_of_peak": round(share, 3)},
           "scores_in_0_1": bool(((scores >= 0) & (scores <= 1)).all())}
    print(f"cross_encoder: fine-tune {n_train / trained:,.0f} examples/s, score "
          f"{n_pairs / seconds:,.0f} pairs/s ({share:.1%} of peak)", flush=True)
    return out


STEPS = {"base": 150, "big": 100}  # enough windows of 20 after the warm-up one
TRAIN_RUNS = "base:16384:new,base:65536:new,big:16384:new,big:65536:new"


def loop_variant(loop: str, old_train: Path | None) -> type:
    """The Trainer of a variant of the loop, for a before/after in one run: `new`
    (training/train.py), `old` (a copy of an older training/train.py, with batches copied to
    the GPU as it did: not pinned). Run `old` after a `new` run of the same shape: the first
    run of a shape in a process pays the CUDA allocator's warm-up (variable batch shapes)."""
    import importlib.util

    import training.data
    import training.train

    batch = training.data.Batch
    if not hasattr(batch, "pinned_to"):  # the module's own `to`, kept before any swap
        batch.pinned_to = batch.to
    batch.to = batch.pinned_to
    if loop == "new":
        return training.train.Trainer
    if loop != "old" or old_train is None or not old_train.exists():
        raise ValueError(f"loop {loop!r}: new, or old with --old-train FILE")

    def unpinned(batch: Any, device: Any) -> Any:
        return training.data.Batch(batch.src.to(device), batch.tgt_in.to(device),
                                   batch.tgt_out.to(device), batch.num_tokens)

    training.data.Batch.to = unpinned
    spec = importlib.util.spec_from_file_location("old_train", old_train)
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_train"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.Trainer


def train(suite: Suite, peak_tflops: float) -> list[dict[str, Any]]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from training.config import from_dict
    from training.data import collate
    from training.model import label_smoothed_loss

    tmp = Path(tempfile.mkdtemp(prefix="gpu-suite-train-"))
    zh = (DATA / "moses_zh.txt").read_text(encoding="utf-8").splitlines()
    en = (DATA / "moses_en.txt").read_text(encoding="utf-8").splitlines()
    n = min(len(zh), len(en))
    repeat = 2 if suite.smoke else 40  # ~68k pairs: batches of 64k tokens from many lines
    (tmp / "train.zh").write_text("\n".join(zh[:n] * repeat) + "\n", encoding="utf-8")
    (tmp / "train.en").write_text("\n".join(en[:n] * repeat) + "\n", encoding="utf-8")
    runs = [("smoke", (64, 128, 2, (1, 1)), 512, 6, "new")] if suite.smoke else [
        (name, TRAIN_SHAPES[name], int(tokens), STEPS[name], loop)
        for name, tokens, loop in (spec.split(":") for spec in suite.train_runs)]
    results = []
    for name, (d, ffn, heads, layers), max_tokens, steps, loop in runs:
        run_dir = tmp / f"{name}-{max_tokens}-{loop}"
        cfg = from_dict({
            "run_dir": str(run_dir), "seed": 1,
            "data": {"train": [{"paths": [str(tmp / "train.zh"), str(tmp / "train.en")],
                                "format": "moses"}],
                     "src_lang": "zh", "tgt_lang": "en", "max_len": 128},
            "vocab": {"size": 4000 if suite.smoke else 16000, "sample_sentences": 100000,
                      "threads": os.cpu_count() or 1},
            "model": {"d_model": d, "ffn_dim": ffn, "heads": heads,
                      "encoder_layers": layers[0], "decoder_layers": layers[1]},
            "optim": {"lr": 7e-4, "warmup_steps": 1000},
            "train": {"max_tokens": max_tokens, "max_steps": steps, "log_every": 20,
                      "eval_every": 0, "save_every": 10**9, "keep_last": 1,
                      "tensorboard": False, "precision": "bf16", "device": suite.device,
                      "resume": False},
        })
        if suite.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        trainer = loop_variant(loop, suite.old_train)(cfg)
        trainer.setup()
        _, _, idx = next(trainer.batches())
        batch = collate(trainer.data.train, idx).to(trainer.device)
        with FlopCounterMode(display=False) as counter:
            with trainer.autocast():
                logits = trainer.model(batch.src, batch.tgt_in)
            loss, _ = label_smoothed_loss(logits, batch.tgt_out, 0.1)
            loss.backward()
        trainer.model.zero_grad(set_to_none=True)
        flops_per_token = counter.get_total_flops() / batch.num_tokens
        start = time.time()
        trainer.train()
        seconds = time.time() - start
        with open(run_dir / "train_log.csv", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        warm = rows[1:] or rows
        tokens = sum(float(r["tgt_tokens"]) for r in warm)
        tps = tokens / sum(float(r["tgt_tokens"]) / float(r["tgt_tokens_per_s"]) for r in warm)
        result = {"model": name, "loop": loop,
                  "params_M": round(trainer.model.num_parameters() / 1e6, 1),
                  "max_tokens": max_tokens, "steps": steps, "train_s": round(seconds, 1),
                  "tgt_tokens_per_s": round(tps),
                  "tflops": round(tps * flops_per_token / 1e12, 1),
                  "mfu": round(tps * flops_per_token / 1e12 / peak_tflops, 3)
                  if peak_tflops > 0 else None,
                  "peak_mem_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 1)
                  if suite.device == "cuda" else None}
        print(f"train {name} {max_tokens} {loop}: {tps:,.0f} tgt tok/s, MFU {result['mfu']}",
              flush=True)
        results.append(result)
    return results


def ct2(suite: Suite) -> dict[str, Any]:
    try:
        import ctranslate2
    except Exception as err:
        line = f"ctranslate2 does not load here ({type(err).__name__}: {err})"
        print(f"gpu_suite: ct2 skipped: {line}", flush=True)
        return {"skipped": line}
    count = ctranslate2.get_cuda_device_count()
    if suite.device == "cuda" and count == 0:
        line = "ctranslate2 loads but sees no CUDA device (its CUDA 12 libraries are missing?)"
        print(f"gpu_suite: ct2 skipped: {line}", flush=True)
        return {"skipped": line, "version": ctranslate2.__version__}
    return {"version": ctranslate2.__version__, "cuda_devices": count,
            "skipped": "decode comparison not built yet (issue 36 item 3)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_suite.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU")
    parser.add_argument("--parts", default="embed,cross_encoder,train,ct2")
    parser.add_argument("--train-runs", default=TRAIN_RUNS,
                        help="model:max_tokens:loop,... (loop: new, or old after a new)")
    parser.add_argument("--old-train", type=Path, help="an older training/train.py (loop old)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    suite = Suite(args.out, args.smoke, args.train_runs, args.old_train)
    suite.part("env", lambda: environment(suite))
    suite.part("peak_tflops", lambda: round(peak(suite), 1))
    top = suite.results["peak_tflops"]
    top = top if isinstance(top, float) and top > 0 else float("nan")
    parts = args.parts.split(",")
    if "embed" in parts:
        suite.part("embed", lambda: embed(suite, top))
    if "cross_encoder" in parts:
        suite.part("cross_encoder", lambda: cross_encoder(suite, top))
    if "train" in parts:
        suite.part("train", lambda: train(suite, top))
    if "ct2" in parts:
        suite.part("ct2", lambda: ct2(suite))
    print(json.dumps(suite.results, indent=1))


if __name__ == "__main__":
    main()
