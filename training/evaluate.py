"""Dev evaluation: teacher-forced loss and sacreBLEU BLEU/chrF of decoded output (BLEU with
the `zh` tokenizer for Chinese targets, character-level for Japanese/Korean, 13a otherwise)."""

from __future__ import annotations

from collections.abc import Sequence

import sacrebleu
import torch

from training.data import EncodedCorpus, collate, epoch_batches
from training.model import Transformer, label_smoothed_loss


def bleu_tokenizer(tgt_lang: str | None) -> str:
    lang = (tgt_lang or "").lower()
    if lang.startswith(("zh", "cmn", "yue")):
        return "zh"
    if lang.startswith(("ja", "ko")):
        return "char"
    return "13a"


def bleu_chrf(hyps: Sequence[str], refs: Sequence[str], tgt_lang: str | None) -> dict[str, float]:
    bleu = sacrebleu.corpus_bleu(list(hyps), [list(refs)], tokenize=bleu_tokenizer(tgt_lang))
    chrf = sacrebleu.corpus_chrf(list(hyps), [list(refs)])
    return {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2)}


@torch.no_grad()
def corpus_loss(model: Transformer, corpus: EncodedCorpus, max_tokens: int,
                smoothing: float, device: torch.device) -> dict[str, float]:
    """Per-token label-smoothed loss and NLL over a whole encoded corpus (eval mode)."""
    was_training = model.training
    model.eval()
    tot_loss = tot_nll = 0.0
    tokens = 0
    for idx in epoch_batches(corpus, max_tokens, seed=0, epoch=0):
        batch = collate(corpus, idx).to(device)
        logits = model(batch.src, batch.tgt_in)
        loss, nll = label_smoothed_loss(logits, batch.tgt_out, smoothing)
        tot_loss += float(loss)
        tot_nll += float(nll)
        tokens += batch.num_tokens
    model.train(was_training)
    tokens = max(tokens, 1)
    return {"loss": tot_loss / tokens, "nll": tot_nll / tokens}
