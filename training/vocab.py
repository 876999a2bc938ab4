"""Joint SentencePiece vocabulary with reserved target-language tags, and the text pipeline
around it (tags, source reversal, right-to-left targets) shared by training, torch decoding
and the CTranslate2 translator, so that all three see exactly the same token sequences."""

from __future__ import annotations

import io
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

PAD, UNK, BOS, EOS = 0, 1, 2, 3
PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE = "<pad>", "<unk>", "<s>", "</s>"


def tag_piece(lang: str) -> str:
    """The reserved symbol that asks for output in `lang`: `<2zh>`, `<2en>`..."""
    return f"<2{lang}>"


def train_sentencepiece(
    sentences: Iterable[str],
    model_prefix: str | Path,
    vocab_size: int,
    tags: Sequence[str] = (),
    extra_symbols: Sequence[str] = (),
    model_type: str = "unigram",
    character_coverage: float = 0.9995,
    threads: int = 2,
) -> Path:
    """Train a joint model on `sentences` (both languages mixed). Ids 0-3 are
    <pad> <unk> <s> </s>; every tag gets a user-defined symbol that is never split."""
    model_prefix = Path(model_prefix)
    model_prefix.parent.mkdir(parents=True, exist_ok=True)
    user_symbols = [tag_piece(t) for t in tags] + list(extra_symbols)
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([s for s in sentences if s.strip()]),
        model_writer=proto,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        pad_piece=PAD_PIECE,
        unk_piece=UNK_PIECE,
        bos_piece=BOS_PIECE,
        eos_piece=EOS_PIECE,
        user_defined_symbols=user_symbols,
        hard_vocab_limit=False,
        num_threads=threads,
        input_sentence_size=0,
        shuffle_input_sentence=False,
        max_sentence_length=8192,
        minloglevel=2,
    )
    path = model_prefix.with_suffix(".model")
    path.write_bytes(proto.getvalue())
    return path


def sample_for_vocab(pairs: Iterable[tuple[str, str]], max_sentences: int, seed: int) -> list[str]:
    """Reservoir sample of pairs, both sides, at most `max_sentences` sentences in all."""
    rng = random.Random(seed)
    k = max(1, max_sentences // 2)
    reservoir: list[tuple[str, str]] = []
    for i, pair in enumerate(pairs):
        if i < k:
            reservoir.append(pair)
        else:
            j = rng.randint(0, i)
            if j < k:
                reservoir[j] = pair
    return [s for pair in reservoir for s in pair]


@dataclass(frozen=True)
class TextOptions:
    rtl: bool = False
    reverse_source: bool = False
    target_tags: bool = False


class Vocab:
    """A SentencePiece model plus the sequence conventions of this package:

    source ids = [<2xx>] + pieces (reversed if reverse_source) + [</s>]
    decoder in = [<s>] + target pieces (reversed if rtl); labels = pieces + [</s>]
    """

    def __init__(self, model_proto: bytes, options: TextOptions | None = None):
        self.proto = bytes(model_proto)
        self.sp = spm.SentencePieceProcessor(model_proto=self.proto)
        self.options = options or TextOptions()
        for i, piece in enumerate((PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE)):
            if self.sp.id_to_piece(i) != piece:
                raise ValueError(
                    f"SentencePiece id {i} is {self.sp.id_to_piece(i)!r}, expected {piece!r}: "
                    "train the model with training.vocab.train_sentencepiece"
                )

    @classmethod
    def from_file(cls, path: str | Path, options: TextOptions | None = None) -> Vocab:
        return cls(Path(path).read_bytes(), options)

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def pieces(self) -> list[str]:
        return [self.sp.id_to_piece(i) for i in range(len(self))]

    def tag_id(self, lang: str) -> int:
        piece = tag_piece(lang)
        idx = self.sp.piece_to_id(piece)
        if idx == UNK:
            raise KeyError(f"{piece} is not a reserved symbol of this vocabulary (vocab.tags)")
        return idx

    # -- the pipeline ---------------------------------------------------------------------
    def source_pieces(self, text: str, tgt_lang: str | None = None) -> list[str]:
        """Source token strings without </s> (what CTranslate2 is given)."""
        return [self.sp.id_to_piece(i) for i in self.source_ids(text, tgt_lang, eos=False)]

    def source_ids(self, text: str, tgt_lang: str | None = None, eos: bool = True) -> list[int]:
        ids = self.sp.encode(text)
        if self.options.reverse_source:
            ids = ids[::-1]
        if self.options.target_tags:
            if tgt_lang is None:
                raise ValueError("target_tags is on: a target language is needed for the tag")
            ids = [self.tag_id(tgt_lang)] + ids
        return ids + [EOS] if eos else ids

    def target_ids(self, text: str) -> list[int]:
        """Target ids in model order (reversed if rtl), without <s> or </s>."""
        ids = self.sp.encode(text)
        return ids[::-1] if self.options.rtl else ids

    def decode_target(self, ids: Sequence[int]) -> str:
        """Model-order ids (no specials) back to text, undoing the rtl reversal."""
        ids = [int(i) for i in ids if int(i) not in (PAD, BOS, EOS)]
        if self.options.rtl:
            ids = ids[::-1]
        return self.sp.decode(ids)

    def decode_target_pieces(self, pieces: Sequence[str]) -> str:
        return self.decode_target([self.sp.piece_to_id(p) for p in pieces])
