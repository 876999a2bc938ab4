"""Translate with an exported CTranslate2 model directory (from training.export), applying
the same text pipeline as training: SentencePiece, <2xx> tag, source reversal, rtl undo.
The translate job (jobs/translate.py) applies the same pipeline through udfs/text_codec.py.

    python -m training.translator --model models/zh-en-ct2 < in.txt > out.txt"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import ctranslate2

from training.vocab import TextOptions, Vocab


@dataclass
class Translation:
    text: str
    tokens: list[str]  # output pieces in model order (before rtl undo), no </s>
    score: float | None


class Ct2Translator:
    def __init__(self, model_dir: str | Path, device: str = "cpu", compute_type: str = "default",
                 intra_threads: int = 0, inter_threads: int = 1):
        d = Path(model_dir)
        self.meta = json.loads((d / "sluice.json").read_text(encoding="utf-8"))
        self.vocab = Vocab.from_file(d / "spm.model", TextOptions(**self.meta["text_options"]))
        self.tgt_lang = self.meta["tgt_lang"]
        self.model = ctranslate2.Translator(str(d), device=device, compute_type=compute_type,
                                            intra_threads=intra_threads,
                                            inter_threads=inter_threads)

    def translate(self, texts: Sequence[str], tgt_lang: str | None = None, beam_size: int = 4,
                  max_decoding_length: int = 256, length_penalty: float = 1.0,
                  num_hypotheses: int = 1, max_batch_size: int = 64,
                  return_scores: bool = True, **kwargs) -> list[Translation]:
        lang = tgt_lang or self.tgt_lang
        src = [self.vocab.source_pieces(t, lang) for t in texts]
        results = self.model.translate_batch(
            src, beam_size=beam_size, max_decoding_length=max_decoding_length,
            length_penalty=length_penalty, num_hypotheses=num_hypotheses,
            max_batch_size=max_batch_size, return_scores=return_scores, **kwargs,
        )
        out = []
        for r in results:
            toks = r.hypotheses[0]
            out.append(Translation(self.vocab.decode_target_pieces(toks), toks,
                                   r.scores[0] if r.scores else None))
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.translator", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="exported CTranslate2 directory")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--tgt-lang", default=None, help="target language (multilingual models)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compute-type", default="default")
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args(argv)
    tr = Ct2Translator(args.model, device=args.device, compute_type=args.compute_type)
    lines = [line.rstrip("\n") for line in sys.stdin]
    for start in range(0, len(lines), 1000):
        for t in tr.translate(lines[start:start + 1000], tgt_lang=args.tgt_lang,
                              beam_size=args.beam, max_batch_size=args.batch,
                              return_scores=False):
            print(t.text, flush=False)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
