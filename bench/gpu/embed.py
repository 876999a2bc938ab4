"""GPU throughput of the sentence-transformers scorer on a LaBSE-sized encoder, in fp16.

Builds LaBSE's shape with random weights (no download): BERT-base (12 layers, hidden 768,
12 heads, FFN 3072) with a 501,153-entry vocabulary, CLS pooling, a tanh Dense layer and
normalization, saved and loaded offline through udfs.encoders (the production code path:
local files only, fp16 on cuda). The tokenizer's vocabulary holds every word and character of
the sample text (BERT splits CJK into characters), padded with filler entries to LaBSE's size,
so sentences tokenize at about LaBSE's granularity.

Prints pairs/s (both sides encoded) and the share of the GPU's measured bf16 matmul rate that
the encoder achieves, from FLOPs per sentence of n tokens padded to its batch's length L:
2 * P * L + 4 * layers * hidden * L^2 (P = non-embedding parameters; the second term is QK^T
and attention x V), counted both for the padded batches actually run and for the real tokens.

    python -m bench.gpu.embed [--pairs 20000] [--batch-size 256]
    python -m bench.gpu.embed --smoke      # tiny model on the CPU: checks the script only

Needs torch, transformers and sentence-transformers; exits with a message when no GPU is there.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import tempfile
import time
from pathlib import Path

from bench.kit import REPO

DATA = REPO / "tests" / "data"
SAMPLE = DATA / "embed_tico19.tsv"
LABSE = {"vocab": 501_153, "hidden": 768, "layers": 12, "heads": 12, "ffn": 3072}
SMOKE = {"vocab": 20_000, "hidden": 64, "layers": 2, "heads": 2, "ffn": 128}
MAX_SEQ = 256  # LaBSE's max_seq_length


def side_texts(lang: str) -> list[str]:
    """Real lines of one language from the test data: the TICO-19 slice and the Moses
    punctuation sample (news, medical, Wikipedia and short Tatoeba lines)."""
    with open(SAMPLE, encoding="utf-8", newline="") as f:
        tico = [row[lang] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    moses = (DATA / f"moses_{lang}.txt").read_text(encoding="utf-8").splitlines()
    return tico + [line for line in moses if line.strip()]


def sample_pairs(pair: str, n: int) -> list[tuple[str, str]]:
    """n (src, tgt) pairs, each side cycling over its language's lines. Alignment does not
    matter for throughput; each side staying one language does (batches are sorted by length)."""
    src, tgt = (side_texts(lang) for lang in pair.split("-"))
    return [(src[i % len(src)], tgt[i % len(tgt)]) for i in range(n)]


def build_model(root: Path, shape: dict, texts: list[str]) -> Path:
    """A random-weight LaBSE-shaped SentenceTransformer saved under root/st."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Dense,
        Normalize,
        Pooling,
        Transformer,
    )
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    chars = sorted({c for w in words for c in w})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    vocab += [w for w in words if len(w) > 1]
    vocab += [f"[unused{i}]" for i in range(shape["vocab"] - len(vocab))]
    hf_dir = root / "hf"
    hf_dir.mkdir(parents=True)
    (hf_dir / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast.from_pretrained(str(hf_dir)).save_pretrained(str(hf_dir))
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        intermediate_size=shape["ffn"],
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(hf_dir))
    hidden = shape["hidden"]
    modules = [
        Transformer(str(hf_dir), max_seq_length=MAX_SEQ),
        Pooling(hidden, "cls"),
        Dense(hidden, hidden, activation_function=torch.nn.Tanh()),
        Normalize(),
    ]
    SentenceTransformer(modules=modules, device="cpu").save(str(root / "st"))
    return root / "st"


def matmul_tflops(device: str, n: int, iters: int) -> float:
    """Achieved bf16 TFLOP/s of one large square matmul (the practical tensor-core peak)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    _sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        torch.matmul(a, b)
    _sync(device)
    return 2 * n**3 * iters / (time.perf_counter() - start) / 1e12


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def sentence_flops(n: int, shape: dict, params: int) -> float:
    """Forward FLOPs of one sentence of n tokens: the dense layers plus QK^T and A x V."""
    return 2 * params * n + 4 * shape["layers"] * shape["hidden"] * n * n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--pair", choices=("zh-en", "ru-en"), default="zh-en")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--smoke", action="store_true", help="tiny model on the CPU")
    args = parser.parse_args()

    import torch

    if args.smoke:
        device, shape, pairs = "cpu", SMOKE, min(args.pairs, 400)
    elif not torch.cuda.is_available():
        sys.exit(
            "bench.gpu.embed: no CUDA GPU visible to torch; this benchmark measures fp16 GPU "
            "throughput (use --smoke to check the script on a CPU)"
        )
    else:
        device, shape, pairs = "cuda:0", LABSE, args.pairs
    from udfs.encoders import SentenceTransformerEncoder

    data = sample_pairs(args.pair, pairs)
    sides = [[s for s, _ in data], [t for _, t in data]]  # one encode call per side, as in jobs
    texts = sides[0] + sides[1]
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp), shape, texts)
        threads = torch.get_num_threads()
        encoder = SentenceTransformerEncoder(str(model_dir), device, threads=threads)
    bert = encoder.model[0].auto_model
    embedding_params = sum(p.numel() for p in bert.embeddings.parameters())
    params = sum(p.numel() for p in bert.encoder.parameters())
    start = time.perf_counter()
    side_lengths = [encoder.token_lengths(side) for side in sides]  # the pass batches() makes
    sort_seconds = time.perf_counter() - start
    lengths = [int(n) for side in side_lengths for n in side]

    for side in sides:  # warm-up: kernels and allocator for both sides' shapes
        encoder.encode(side[: 2 * args.batch_size], args.batch_size)
    _sync(device)
    start = time.perf_counter()
    for side in sides:
        emb = encoder.encode(side, args.batch_size)
    _sync(device)
    seconds = time.perf_counter() - start
    assert emb.shape == (pairs, shape["hidden"])

    peak = matmul_tflops(device, 8192 if device != "cpu" else 512, 50 if device != "cpu" else 3)
    batches = [  # (sentences, padded length) of each forward pass
        (len(idx), int(n[idx].max()))
        for side, n in zip(sides, side_lengths, strict=True)
        for idx in encoder.batches(side, args.batch_size)
    ]
    real = sum(sentence_flops(n, shape, params) for n in lengths) / seconds / 1e12
    run = sum(k * sentence_flops(n, shape, params) for k, n in batches) / seconds / 1e12
    padded_tokens = sum(k * n for k, n in batches)
    name = torch.cuda.get_device_name(0) if device != "cpu" else "CPU (smoke run)"
    print(
        f"device {name}; encoder {shape}: {params / 1e6:.1f} M non-embedding parameters "
        f"(+{embedding_params / 1e6:.1f} M embedding), batch {args.batch_size}"
    )
    print(
        f"{pairs} {args.pair} pairs = {len(texts)} sentences, "
        f"{sum(lengths) / len(texts):.1f} tokens each "
        f"(padding adds {padded_tokens / sum(lengths) - 1:.1%}), encoded in {seconds:.2f} s"
    )
    print(f"throughput: {pairs / seconds:,.0f} pairs/s, {sum(lengths) / seconds:,.0f} tokens/s")
    print(f"tokenizing to sort batches: {sort_seconds / seconds:.1%} of the encoding time")
    print(f"bf16 matmul: {peak:.1f} TFLOP/s measured")
    print(
        f"encoder: {run:.1f} TFLOP/s as run (padded batches) = {run / peak:.1%} of that; "
        f"{real:.1f} TFLOP/s on real tokens = {real / peak:.1%}"
    )


if __name__ == "__main__":
    main()
