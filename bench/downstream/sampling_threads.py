"""What repeatable sampling costs on a CPU: tokens/s of top-k sampling three ways, same model
and sentences (newstest English, en->zh), two cores:

  (a) one cached translator, 2 decoding threads x 1 intra-op thread (sub-batches in parallel;
      what a 2-core task would do if its seed could hold);
  (b) `seeded_sampler` with 2 cores: 1 decoding thread x 2 intra-op threads (what a
      sampling task with `spark.task.cpus=2` does);
  (c) two `seeded_sampler`s with 1 core each, on halves of the input, side by side (what two
      sampling tasks with the default `spark.task.cpus=1` do).

It prints tokens/s and the ratios (a)/(b) and (a)/(c), and checks that `seeded_sampler` with
one seed repeats its samples.

    python -m bench.downstream.sampling_threads [--sentences 6000] [--checkpoint runs/x/ckpt.pt]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.downstream.translate_throughput import bench_model, options, sentences

TOPK_OPTIONS = options("sampling", 2048)


def tokens_per_s(translators: list, inputs: list[list[str]]) -> tuple[float, list[list[str]]]:
    """Decode an equal share of `inputs` on each translator at once; (tokens/s, hypotheses)."""
    shares = [inputs[i :: len(translators)] for i in range(len(translators))]
    start = time.perf_counter()
    with ThreadPoolExecutor(len(translators)) as pool:  # CTranslate2 releases the GIL
        done = list(pool.map(lambda ts: ts[0].translate_batch(ts[1], **TOPK_OPTIONS),
                             zip(translators, shares, strict=True)))
    seconds = time.perf_counter() - start
    hyps = [r.hypotheses[0] for results in done for r in results]
    return sum(len(h) for h in hyps) / seconds, hyps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=6000)
    ap.add_argument("--checkpoint", help="a training checkpoint (default: train a bench model)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "sluice-bench-bt"))
    args = ap.parse_args()
    from training.export import export
    from udfs.text_codec import CodecSpec, load_codec
    from udfs.translate import load_translator, seeded_sampler

    workdir = Path(args.workdir)
    ct2 = str(export(bench_model(workdir, args.checkpoint), workdir / "ct2", force=True))
    codec = load_codec(ct2, CodecSpec(target_tag="zh"))
    inputs = [p for t in sentences(args.sentences)
              if 0 < len(p := codec.encode(t)) <= codec.max_tokens]

    def sampler(threads: int, seed: int = 1):
        return seeded_sampler(ct2, "cpu", 0, "default", threads, seed)

    a, _ = tokens_per_s([load_translator(ct2, "cpu", 0, "default", 2, 1)], inputs)
    b, first = tokens_per_s([sampler(2)], inputs)
    c, _ = tokens_per_s([sampler(1), sampler(1, 2)], inputs)
    _, again = tokens_per_s([sampler(2)], inputs)
    print(f"top-k sampling, {len(inputs):,} sentences, 2 cores")
    print(f"(a) cached, 2 decoding threads x 1     : {a:9,.0f} tokens/s (seed does not hold)")
    print(f"(b) seeded, 1 decoding thread x 2 intra : {b:9,.0f} tokens/s   (a)/(b) {a / b:.2f}x")
    print(f"(c) seeded, two 1-thread tasks          : {c:9,.0f} tokens/s   (a)/(c) {a / c:.2f}x")
    same = sum(x == y for x, y in zip(first, again, strict=True))
    print(f"same seed, same samples: {same:,}/{len(inputs):,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
