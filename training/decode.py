"""The torch model's own decoding: batched greedy search and beam search with incremental
(key/value cached) decoding, forced scoring, and a text-in/text-out helper.

The beam search follows CTranslate2's BeamSearch::search step for step (2*beam candidates,
finished hypotheses replaced by the next non-EOS candidate, early exit when the top beam is
finished and no length penalty is used, score / len(hypothesis)**length_penalty), so that
scores and hypotheses can be compared with the exported model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from training.data import pad_sources
from training.model import Transformer
from training.vocab import BOS, EOS, Vocab


@torch.no_grad()
def greedy(model: Transformer, src: torch.Tensor, max_len: int | Sequence[int]) -> list[list[int]]:
    """Greedy decoding of a padded source batch. Each row stops at </s> (not returned) or
    after its max_len tokens. Finished rows are dropped from the batch as they finish."""
    model.eval()
    b = src.shape[0]
    limits = torch.as_tensor(
        [max_len] * b if isinstance(max_len, int) else list(max_len), dtype=torch.long
    )
    state = model.start_state(src)
    alive = torch.arange(b)
    tokens = torch.full((b,), BOS, dtype=torch.long, device=src.device)
    out: list[list[int]] = [[] for _ in range(b)]
    step = 0
    while len(alive):
        if step >= int(limits[alive].max()):
            break
        lp = model.step(tokens, state)
        nxt = lp.argmax(dim=-1)
        keep = []
        toks = nxt.tolist()  # one device sync per step, not one per row
        for j, row in enumerate(alive.tolist()):
            tok = toks[j]
            if tok == EOS:
                continue
            out[row].append(tok)
            if step + 1 < int(limits[row]):
                keep.append(j)
        step += 1
        if len(keep) < len(alive):
            idx = torch.as_tensor(keep, dtype=torch.long, device=src.device)
            alive = alive[idx.cpu()]
            if not len(alive):
                break
            model.reorder_state(state, idx)
            nxt = nxt.index_select(0, idx)
        tokens = nxt
    return out


@dataclass
class Hypothesis:
    tokens: list[int]
    score: float  # log-probability (incl. </s>) / length**length_penalty
    finished: bool = True  # ended with </s> (else cut at max_len)


@torch.no_grad()
def beam_search(model: Transformer, src: torch.Tensor, beam_size: int, max_len: int,
                length_penalty: float = 1.0, num_hypotheses: int = 1) -> list[list[Hypothesis]]:
    """Beam search over a padded source batch; the n best hypotheses per row, best first."""
    model.eval()
    b = src.shape[0]
    k = beam_size
    device = src.device
    state = model.start_state(src)
    model.reorder_state(state, torch.arange(b, device=device).repeat_interleave(k))
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0
    seqs = torch.full((b, k, 0), BOS, dtype=torch.long, device=device)
    tokens = torch.full((b * k,), BOS, dtype=torch.long, device=device)
    results: list[list[Hypothesis]] = [[] for _ in range(b)]
    top_finished = [False] * b
    alive = list(range(b))
    allow_early_exit = length_penalty == 0
    for step in range(max_len):
        lp = model.step(tokens, state)  # (n*k, V)
        n = len(alive)
        vocab = lp.shape[-1]
        cand = (scores.reshape(-1, 1) + lp).reshape(n, k * vocab)
        top_scores, top_ids = cand.topk(2 * k, dim=-1)
        origin = top_ids // vocab
        word = top_ids % vocab
        last = step + 1 == max_len
        next_pick = torch.zeros((n, k), dtype=torch.long)
        # One device sync per step, not one per candidate.
        word_l, origin_l, top_scores_l = word.tolist(), origin.tolist(), top_scores.tolist()
        still = []
        for i in range(n):
            row = alive[i]
            offset = k
            for j in range(k):
                pick = j
                wid = word_l[i][j]
                if wid == EOS or last:
                    if j == 0:
                        top_finished[i] = True
                    hyp = seqs[i, origin_l[i][j]].tolist()
                    if wid != EOS:
                        hyp.append(wid)
                    results[row].append(Hypothesis(hyp, top_scores_l[i][j], wid == EOS))
                    for c in range(offset, 2 * k):
                        if word_l[i][c] != EOS:
                            pick, offset = c, c + 1
                            break
                next_pick[i, j] = pick
            if last:
                done = True
            elif allow_early_exit:
                done = top_finished[i] and len(results[row]) >= num_hypotheses
            else:
                done = len(results[row]) >= k
            if not done:
                still.append(i)
        if not still:
            break
        sel = next_pick.to(device)
        org = origin.gather(1, sel)
        new_words = word.gather(1, sel)
        new_scores = top_scores.gather(1, sel)
        parents = (torch.arange(n, device=device)[:, None] * k + org)  # flat beam index
        seqs = torch.cat([seqs[torch.arange(n)[:, None], org], new_words[..., None]], dim=2)
        keep = torch.as_tensor(still, dtype=torch.long, device=device)
        parents, seqs = parents[keep], seqs[keep]
        new_words, new_scores = new_words[keep], new_scores[keep]
        top_finished = [top_finished[i] for i in still]
        alive = [alive[i] for i in still]
        model.reorder_state(state, parents.reshape(-1))
        scores = new_scores
        tokens = new_words.reshape(-1)
    out = []
    for hyps in results:
        for h in hyps:
            # CTranslate2 counts the </s> in the length it normalizes by.
            h.score = h.score / ((len(h.tokens) + int(h.finished)) ** length_penalty)
        hyps.sort(key=lambda h: -h.score)
        out.append(hyps[:num_hypotheses])
    return out


@torch.no_grad()
def score(model: Transformer, src: torch.Tensor, hyps: Sequence[Sequence[int]],
          with_eos: bool | Sequence[bool] = True) -> list[float]:
    """Sum of log-probabilities of each hypothesis (teacher forcing), plus that of the </s>
    after it where `with_eos` (a hypothesis cut at the length limit has none)."""
    model.eval()
    t_max = max(len(h) for h in hyps) + 1
    tin = torch.zeros((len(hyps), t_max), dtype=torch.long, device=src.device)
    tout = torch.zeros_like(tin)
    for i, h in enumerate(hyps):
        tin[i, 0] = BOS
        tin[i, 1:len(h) + 1] = torch.as_tensor(list(h), dtype=torch.long)
        tout[i, :len(h)] = torch.as_tensor(list(h), dtype=torch.long)
        tout[i, len(h)] = EOS
    logits = model(src, tin).float()
    lp = torch.log_softmax(logits, dim=-1).gather(2, tout[..., None]).squeeze(-1)
    eos = [with_eos] * len(hyps) if isinstance(with_eos, bool) else list(with_eos)
    return [float(lp[i, :len(h) + int(e)].sum()) for i, (h, e) in enumerate(zip(hyps, eos,
                                                                               strict=True))]


def translate(model: Transformer, vocab: Vocab, texts: Sequence[str], tgt_lang: str | None = None,
              beam_size: int = 1, max_len_a: float = 1.5, max_len_b: int = 10,
              batch_size: int = 64, device: torch.device | None = None) -> list[str]:
    """Text to text with the torch model: sources sorted by length, batched, decoded."""
    device = device or next(model.parameters()).device
    ids = [vocab.source_ids(t, tgt_lang) for t in texts]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: list[str] = [""] * len(ids)
    limit = model.conf.max_positions - 1
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        src = pad_sources([ids[i] for i in chunk]).to(device)
        lens = [min(limit, int(max_len_a * len(ids[i]) + max_len_b)) for i in chunk]
        if beam_size <= 1:
            hyps = greedy(model, src, lens)
        else:
            hyps = [h[0].tokens for h in beam_search(model, src, beam_size, max(lens))]
        for i, h in zip(chunk, hyps, strict=True):
            out[i] = vocab.decode_target(h)
    return out
