"""Export a checkpoint to a CTranslate2 model directory.

    python -m training.export --checkpoint runs/zh-en/checkpoints/avg_last5.pt \
        --out models/zh-en-ct2 [--quantization int8|int8_float16|float16|...] [--force]

Built directly on `ctranslate2.specs.TransformerSpec.from_config(..., pre_norm=True)` with
an explicit weight mapping (no detour through another toolkit's format):

    torch (training/model.py)                  CTranslate2 spec
    embed.weight (shared)                      encoder.embeddings[0].weight,
                                               decoder.embeddings.weight,
                                               decoder.projection.weight (tied; aliased)
    positions (sinusoidal table)               {encoder,decoder}.position_encodings.encodings
    x * sqrt(d_model)                          scale_embeddings = True
    *_layers[i].self_attn_norm                 layer[i].self_attention.layer_norm
    self_attn.{q,k,v}_proj                     self_attention.linear[0] (fused q|k|v)
    self_attn.out_proj                         self_attention.linear[1]
    decoder_layers[i].cross_attn_norm          layer[i].attention.layer_norm
    cross_attn.q_proj / {k,v}_proj / out_proj  attention.linear[0] / [1] (fused k|v) / [2]
    *_layers[i].ffn_norm, ffn.fc1, ffn.fc2     layer[i].ffn.layer_norm, linear_0, linear_1
    encoder_norm / decoder_norm                encoder.layer_norm / decoder.layer_norm

The vocabulary is the SentencePiece piece list (ids identical), `add_source_eos` is set so
CTranslate2 appends </s> like training did, decoding starts from <s>. The directory also gets
the SentencePiece model (spm.model) and sluice.json (languages, tags/reversal/rtl options)
for training.translator."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from ctranslate2.converters.converter import Converter
from ctranslate2.specs import common_spec, transformer_spec

from training import checkpoint as ck
from training.logs import progress
from training.model import Transformer

QUANTIZATIONS = ["int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16",
                 "bfloat16", "float32"]
SIDECAR = "sluice.json"
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, used by training/model.py


def _np(t) -> np.ndarray:
    return t.detach().cpu().float().numpy().copy()


def _linear(spec, module) -> None:
    spec.weight = _np(module.weight)
    if module.bias is not None:
        spec.bias = _np(module.bias)


def _fused(spec, modules) -> None:
    spec.weight = np.concatenate([_np(m.weight) for m in modules], axis=0)
    spec.bias = np.concatenate([_np(m.bias) for m in modules], axis=0)


def _norm(spec, module) -> None:
    spec.gamma = _np(module.weight)
    spec.beta = _np(module.bias)


def _self_attn_ffn(ls, layer) -> None:
    """The pre-norm self-attention and FFN weights, shared by encoder and decoder layers."""
    _norm(ls.self_attention.layer_norm, layer.self_attn_norm)
    a = layer.self_attn
    _fused(ls.self_attention.linear[0], [a.q_proj, a.k_proj, a.v_proj])
    _linear(ls.self_attention.linear[1], a.out_proj)
    _norm(ls.ffn.layer_norm, layer.ffn_norm)
    _linear(ls.ffn.linear_0, layer.ffn.fc1)
    _linear(ls.ffn.linear_1, layer.ffn.fc2)


def build_spec(model: Transformer, pieces: list[str],
               position_table: bool = True) -> transformer_spec.TransformerSpec:
    """The CTranslate2 spec with every weight of `model` mapped. position_table=False leaves
    the encodings to CTranslate2 (its own sinusoids); the tests show both give the same
    output, i.e. training/model.py's table is the one CTranslate2 computes."""
    c = model.conf
    spec = transformer_spec.TransformerSpec.from_config(
        (c.encoder_layers, c.decoder_layers), c.heads, pre_norm=True,
        activation=common_spec.Activation.RELU,
    )
    emb = _np(model.embed.weight)
    table = _np(model.positions)
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = emb
    enc.scale_embeddings = True
    dec.embeddings.weight = emb
    dec.scale_embeddings = True
    dec.projection.weight = emb
    if position_table:
        enc.position_encodings.encodings = table
        dec.position_encodings.encodings = table
    _norm(enc.layer_norm, model.encoder_norm)
    _norm(dec.layer_norm, model.decoder_norm)
    for ls, layer in zip(enc.layer, model.encoder_layers, strict=True):
        _self_attn_ffn(ls, layer)
    for ls, layer in zip(dec.layer, model.decoder_layers, strict=True):
        _self_attn_ffn(ls, layer)
        _norm(ls.attention.layer_norm, layer.cross_attn_norm)
        x = layer.cross_attn
        _linear(ls.attention.linear[0], x.q_proj)
        _fused(ls.attention.linear[1], [x.k_proj, x.v_proj])
        _linear(ls.attention.linear[2], x.out_proj)
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    cfg = spec.config
    cfg.unk_token, cfg.bos_token, cfg.eos_token = "<unk>", "<s>", "</s>"
    cfg.decoder_start_token = "<s>"
    cfg.add_source_bos = False
    cfg.add_source_eos = True
    cfg.layer_norm_epsilon = LAYER_NORM_EPS
    return spec


class SluiceConverter(Converter):
    """ctranslate2 Converter for sluice checkpoints (gives quantization, validation,
    aliasing of the tied embeddings and saving for free)."""

    def __init__(self, checkpoint: dict, position_table: bool = True):
        self._ckpt = checkpoint
        self._position_table = position_table

    def _load(self):
        model, vocab = ck.build_model(self._ckpt)
        return build_spec(model, vocab.pieces(), self._position_table)


def export(checkpoint: str | Path | dict, out_dir: str | Path, quantization: str | None = None,
           force: bool = False, position_table: bool = True) -> Path:
    ckpt = checkpoint if isinstance(checkpoint, dict) else ck.load(checkpoint)
    out = Path(out_dir)
    SluiceConverter(ckpt, position_table).convert(str(out), quantization=quantization,
                                                 force=force)
    (out / "spm.model").write_bytes(ckpt["spm"])
    side = {
        "format": "sluice-ct2-v1",
        "src_lang": ckpt["src_lang"],
        "tgt_lang": ckpt["tgt_lang"],
        "text_options": ckpt["text_options"],
        "model_conf": ckpt["model_conf"],
        "quantization": quantization,
        "source_checkpoint": None if isinstance(checkpoint, dict) else str(checkpoint),
        "step": ckpt.get("step"),
        "config_hash": ckpt.get("config_hash"),
    }
    (out / SIDECAR).write_text(json.dumps(side, indent=2, ensure_ascii=False) + "\n",
                               encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.export", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="a ckpt_*.pt or averaged .pt file")
    ap.add_argument("--out", required=True, help="output CTranslate2 model directory")
    ap.add_argument("--quantization", choices=QUANTIZATIONS, default=None,
                    help="weight type (default: keep float32)")
    ap.add_argument("--force", action="store_true", help="replace an existing --out")
    args = ap.parse_args(argv)
    try:
        out = export(args.checkpoint, args.out, args.quantization, args.force)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    progress(f"exported {args.checkpoint} -> {out} (quantization {args.quantization})")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
