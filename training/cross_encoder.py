"""Fine-tuning of the cross-encoder pair classifier (udfs/cross_encoder_model.py): a LoRA
adapter on the top layers' attention and DiDi's CNN head, trained with binary cross-entropy
on (src, tgt, valid) examples; the base's weights stay frozen, so a model is a few MB.

No Spark and no pyspark import (a GPU host has none): jobs/train_cross_encoder.py builds the
examples (labelled pairs, made negatives) and calls `fine_tune`; bench scripts call it too.

Cost: the layers under the adapter run without gradients, so a step costs their forward pass
plus the adapted layers' forward and backward. Batches are cut from length-sorted runs of the
shuffled examples (little padding), in an order fixed by the seed.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from udfs.bert import load_tokenizer, pad_rows, to_device, token_ids
from udfs.cross_encoder_model import (
    ADAPTER_DIR,
    HEAD_FILE,
    SIDES_WEIGHT,
    CrossEncoderCard,
    adapter_config,
    cnn_head,
    load_base,
    logits,
    quiet_peft,
)

Example = tuple[str, str | None, int]  # src, tgt (None: one text), 1 valid (in-domain) / 0 not
BATCH = 16
SORT_RUN = 50  # batches whose examples are sorted by length together


def batches(lengths: np.ndarray, rng: random.Random, batch: int = BATCH) -> list[np.ndarray]:
    """Shuffled indices cut into batches of similar length: runs of SORT_RUN batches are
    sorted by length, cut, and the batches shuffled again."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    out = []
    run = batch * SORT_RUN
    for start in range(0, len(order), run):
        chunk = sorted(order[start:start + run], key=lambda i: lengths[i])
        out += [np.array(chunk[i:i + batch]) for i in range(0, len(chunk), batch)]
    rng.shuffle(out)
    return out


def fine_tune(examples: Sequence[Example], base_dir: str, out_dir: str, *,
              top_layers: int = 6, epochs: int = 1, lr: float = 5e-4, max_length: int = 128,
              device: str = "cpu", threads: int = 0, seed: int = 7,
              sides_weight: float = SIDES_WEIGHT, what: str = "cross-encoder",
              log: Callable[[str], None] = print) -> CrossEncoderCard:
    """Train on `examples` and write the model directory (written whole: a temporary
    directory renamed into place). Returns its card (threshold unset: the caller sets it from
    held-apart pairs and writes the card again). `sides_weight`: the head's starting weight on
    the two sides' cosine (0 for a domain classifier, where alignment says nothing)."""
    import torch
    from peft import get_peft_model
    from safetensors.torch import save_file

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = load_tokenizer(base_dir)
    base = load_base(base_dir, device)
    layers = base.config.num_hidden_layers
    card = CrossEncoderCard(base=Path(base_dir).name,
                            layers=list(range(max(0, layers - top_layers), layers)),
                            max_length=max_length,
                            sep_id=tokenizer.sep_token_id or tokenizer.eos_token_id)
    with quiet_peft():
        encoder = get_peft_model(base, adapter_config(card))
    head = cnn_head(base.config.hidden_size, card.channels, card.kernel, card.sep_id,
                    sides_weight).to(device)
    params = [p for p in encoder.parameters() if p.requires_grad] + list(head.parameters())
    steps = epochs * -(-len(examples) // BATCH)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1),
                                                pct_start=0.1, anneal_strategy="linear")
    pairs = None if all(e[1] is None for e in examples) else [e[1] for e in examples]
    flat, offsets = token_ids(tokenizer, [e[0] for e in examples], "", pairs, max_length)
    labels = np.array([e[2] for e in examples], dtype=np.float32)
    pad = tokenizer.pad_token_id or 0
    on_gpu = device.startswith("cuda")  # bf16 autocast: the tensor cores; weights stay fp32
    encoder.train()
    head.train()
    started, done, seen_loss = time.monotonic(), 0, []
    for epoch in range(epochs):
        for idx in batches(np.diff(offsets), rng):
            ids, mask = pad_rows(flat, offsets, idx, pad)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=on_gpu):
                out = logits(encoder, head, to_device(ids, device), to_device(mask, device))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                out, torch.from_numpy(labels[idx]).to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            done += 1
            seen_loss.append(float(loss.detach()))
            if done % 50 == 0 or done == steps:
                rate = done * BATCH / (time.monotonic() - started)
                log(f"{what}: epoch {epoch + 1}, step {done}/{steps}, loss "
                    f"{np.mean(seen_loss[-50:]):.3f}, {rate:.1f} examples/s")
    card.trained_on = {"examples": len(examples), "valid": int(labels.sum()),
                       "epochs": epochs, "lr": lr, "seconds": round(time.monotonic() - started),
                       "device": device}
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with quiet_peft():
        encoder.save_pretrained(tmp / ADAPTER_DIR)
    (tmp / ADAPTER_DIR / "README.md").unlink(missing_ok=True)  # peft's blank model card
    save_file({k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()},
              str(tmp / HEAD_FILE))
    card.write(str(tmp))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return card
