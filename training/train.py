"""Train (or fine-tune, or resume) a Transformer from a YAML config.

    python -m training.train --config conf/train/zh-en.yaml [--set train.max_steps=2000 ...]
    python -m training.train --config conf/train/zh-en.yaml --mixture NAME[:STAGE|:all] --lake L

The run directory holds spm.model, config.yaml, checkpoints/ckpt_XXXXXXXX.pt (last K),
train_log.csv and dev_log.csv. Re-running the same command resumes from the newest
checkpoint: weights, optimizer, step, data position and RNG state are restored, so an
interrupted run ends with the same weights as an uninterrupted one."""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from jobs.kit.errors import ConfigError
from training import checkpoint as ck
from training.config import TrainingConfig, load_config
from training.data import (
    TARGET_TAG_PREFIX,
    EncodedCorpus,
    Pair,
    collate,
    encode_corpus,
    epoch_batches,
    mixture_source,
    mixture_stages,
    mixture_tags,
    read_source,
    read_sources,
)
from training.decode import translate
from training.evaluate import bleu_chrf, corpus_loss
from training.logs import CsvLog, TensorBoardLog, fmt_duration, progress
from training.model import Transformer, label_smoothed_loss
from training.vocab import (
    TextOptions,
    Vocab,
    sample_for_vocab,
    tag_piece,
    train_sentencepiece,
)

TRAIN_FIELDS = ["step", "epoch", "elapsed_s", "lr", "loss", "nll", "ppl", "grad_norm",
                "tgt_tokens", "tgt_tokens_per_s"]
DEV_FIELDS = ["step", "elapsed_s", "dev_loss", "dev_nll", "dev_ppl", "bleu", "chrf", "sentences"]


def inverse_sqrt_lr(step: int, peak: float, warmup: int, init: float = 1e-7) -> float:
    """Linear warmup from `init` to `peak` over `warmup` steps, then peak*sqrt(warmup/step)."""
    step = max(step, 1)
    if warmup <= 0:
        return peak / math.sqrt(step)
    if step < warmup:
        return init + (peak - init) * step / warmup
    return peak * math.sqrt(warmup / step)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class Prepared:
    vocab: Vocab
    train: EncodedCorpus
    dev_pairs: list[Pair]
    dev: EncodedCorpus | None


def text_options(cfg: TrainingConfig) -> TextOptions:
    return TextOptions(**cfg.options.model_dump())


def prepare(cfg: TrainingConfig, run_dir: Path, init_ckpt: dict | None) -> Prepared:
    """Read the corpora, get the vocabulary (fine-tuning: the parent's; else config path,
    else the run's own spm.model, else train one) and encode everything."""
    t0 = time.time()
    pairs = read_sources(cfg.data.train, cfg.data.tgt_lang)
    if not pairs:
        raise ConfigError("data.train yields no pairs")
    progress(f"read {len(pairs):,} training pairs in {time.time() - t0:.1f}s")
    spm_path = run_dir / "spm.model"
    opts = text_options(cfg)
    if init_ckpt is not None:
        vocab = Vocab(init_ckpt["spm"], opts)
        spm_path.write_bytes(vocab.proto)
    elif cfg.vocab.model:
        vocab = Vocab.from_file(cfg.vocab.model, opts)
    elif spm_path.exists():
        vocab = Vocab.from_file(spm_path, opts)
    else:
        t1 = time.time()
        sample = sample_for_vocab(((s, t) for s, t, _ in pairs), cfg.vocab.sample_sentences,
                                  cfg.seed)
        tags = list(cfg.vocab.tags)
        if cfg.options.target_tags:
            langs = {lang for _, _, lang in pairs if lang} | {cfg.data.tgt_lang}
            tags += sorted(lang for lang in langs if lang not in tags)
        train_sentencepiece(sample, spm_path.with_suffix(""), cfg.vocab.size, tags=tags,
                            extra_symbols=cfg.vocab.extra_symbols,
                            model_type=cfg.vocab.model_type,
                            character_coverage=cfg.vocab.character_coverage,
                            threads=cfg.vocab.threads)
        vocab = Vocab.from_file(spm_path, opts)
        progress(f"trained SentencePiece ({len(vocab)} pieces) on {len(sample):,} sentences "
                 f"in {time.time() - t1:.1f}s -> {spm_path}")
    t2 = time.time()
    train, skipped = encode_corpus(pairs, vocab, cfg.data.max_len, cfg.data.max_len_ratio)
    progress(f"encoded {len(train):,} pairs ({skipped:,} skipped by length), "
             f"{train.num_target_tokens():,} target tokens, in {time.time() - t2:.1f}s")
    dev_pairs: list[Pair] = []
    dev = None
    if cfg.data.dev is not None:
        dev_pairs = [(s, t, lang or cfg.data.tgt_lang) for s, t, lang in read_source(cfg.data.dev)]
        dev, _ = encode_corpus(dev_pairs, vocab, cfg.model.max_positions - 1)
    return Prepared(vocab, train, dev_pairs, dev)


class Trainer:
    def __init__(self, cfg: TrainingConfig):
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        t = cfg.train
        if t.threads:
            torch.set_num_threads(t.threads)
        self.device = pick_device(t.device)
        self.precision = t.precision
        if self.device.type != "cuda" and self.precision != "fp32":
            progress(f"precision {self.precision} needs a GPU; using fp32 on {self.device}")
            self.precision = "fp32"
        self.train_log = CsvLog(self.run_dir / "train_log.csv", TRAIN_FIELDS)
        self.dev_log = CsvLog(self.run_dir / "dev_log.csv", DEV_FIELDS)
        self.tb: TensorBoardLog | None = None

    # -- state ----------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        existing = ck.list_checkpoints(self.ckpt_dir) if cfg.train.resume else []
        self.resume_ckpt = ck.load(existing[-1]) if existing else None
        init_ckpt = None
        if self.resume_ckpt is None and cfg.train.init_from:
            init_ckpt = ck.load(cfg.train.init_from)
        parent = self.resume_ckpt or init_ckpt
        if self.resume_ckpt is not None and \
                self.resume_ckpt["model_conf"] != cfg.model.model_dump(mode="json"):
            raise ConfigError(f"{existing[-1]} holds a different model than config `model`; "
                              "use a new run_dir (or train.resume=false to start over)")
        self.data = prepare(cfg, self.run_dir, parent)
        (self.run_dir / "config.yaml").write_text(
            yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True),
            encoding="utf-8")
        vocab = self.data.vocab
        if parent is not None and parent["vocab_size"] != len(vocab):
            raise ConfigError("the checkpoint's vocabulary differs from this run's")
        seed_everything(cfg.seed)
        self.model = Transformer(cfg.model, len(vocab)).to(self.device)
        o = cfg.optim
        # Fused on a GPU: one kernel for every parameter's update instead of several per
        # tensor (the checkpointed state is the same either way).
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=o.lr, betas=o.betas,
                                          eps=o.eps, weight_decay=o.weight_decay,
                                          fused=self.device.type == "cuda")
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.precision == "fp16")
        self.step = 0
        self.epoch = 0
        self.batch_in_epoch = 0
        self.elapsed = 0.0
        self.tokens_seen = 0
        if self.resume_ckpt is not None:
            c = self.resume_ckpt
            self.model.load_state_dict(c["model"])
            self.optimizer.load_state_dict(c["optimizer"])
            if c.get("scaler"):
                self.scaler.load_state_dict(c["scaler"])
            self.step, self.epoch = c["step"], c["epoch"]
            self.batch_in_epoch, self.elapsed = c["batch_in_epoch"], c["elapsed"]
            self.tokens_seen = c.get("tokens_seen", 0)
            torch.set_rng_state(c["rng_torch"])
            if torch.cuda.is_available() and c.get("rng_cuda") is not None:
                torch.cuda.set_rng_state_all(c["rng_cuda"])
            self.train_log.truncate_after(self.step)
            self.dev_log.truncate_after(self.step)
            progress(f"resumed from {existing[-1]} at step {self.step} "
                     f"(epoch {self.epoch}, batch {self.batch_in_epoch})")
        else:
            if init_ckpt is not None:
                self.model.load_state_dict(init_ckpt["model"])
                progress(f"fine-tuning from {cfg.train.init_from} with a fresh optimizer "
                         "and schedule")
            for log in (self.train_log, self.dev_log):
                log.path.unlink(missing_ok=True)
        n = self.model.num_parameters()
        progress(f"model {cfg.model.encoder_layers}-{cfg.model.decoder_layers} layers, "
                 f"d={cfg.model.d_model}, ffn={cfg.model.ffn_dim}, heads={cfg.model.heads}: "
                 f"{n / 1e6:.2f}M parameters on {self.device} ({self.precision})")

    def save(self) -> Path:
        c = self.cfg
        extra: dict[str, Any] = {
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
            "step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
            "elapsed": self.elapsed, "tokens_seen": self.tokens_seen,
            "rng_torch": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "config": c.model_dump(mode="json"), "config_hash": c.hash(),
        }
        payload = ck.model_payload(self.model, self.data.vocab, c.data.src_lang, c.data.tgt_lang,
                                   extra)
        path = ck.save_atomic(payload, self.ckpt_dir / ck.checkpoint_name(self.step))
        ck.prune(self.ckpt_dir, c.train.keep_last)
        return path

    # -- loop -----------------------------------------------------------------------------
    def collated(self):
        """(epoch, index-in-epoch, batch on the device) from the current data position on.
        Collated here, not ahead on a thread: on an H200 a collating thread made Transformer
        base at 16k tokens a batch slower (180k against 197k target tokens/s,
        docs/scoring.md "GPU figures"): it takes the GIL from the loop that launches the
        kernels. With no host sync in the step, the host collates the next batch while the
        GPU still runs this one anyway."""
        for epoch, i, idx in self.batches():
            yield epoch, i, collate(self.data.train, idx).to(self.device)

    def batches(self):
        """(epoch, index-in-epoch, indices) from the current data position onward. The
        position itself moves as the loop consumes batches (`train`), not as they are made:
        the collating thread runs ahead."""
        t = self.cfg.train
        epoch, start = self.epoch, self.batch_in_epoch
        while t.max_epochs is None or epoch < t.max_epochs:
            order = epoch_batches(self.data.train, t.max_tokens, self.cfg.seed, epoch,
                                  t.max_sentences)
            for i in range(start, len(order)):
                yield epoch, i, order[i]
            epoch, start = epoch + 1, 0

    def autocast(self):
        if self.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def evaluate(self) -> dict[str, Any]:
        cfg, d = self.cfg, self.data
        if d.dev is None:
            return {}
        t0 = time.time()
        loss = corpus_loss(self.model, d.dev, cfg.train.max_tokens, cfg.optim.label_smoothing,
                           self.device)
        pairs = d.dev_pairs[:cfg.data.dev_size]
        lang = cfg.data.tgt_lang
        with self.autocast():
            hyps = translate(self.model, d.vocab, [s for s, _, _ in pairs],
                             tgt_lang=pairs[0][2] if pairs else lang,
                             beam_size=cfg.train.eval_beam, max_len_a=cfg.train.eval_max_len_a,
                             max_len_b=cfg.train.eval_max_len_b, device=self.device)
        self.model.train()
        scores = bleu_chrf(hyps, [t for _, t, _ in pairs], lang) if pairs else {}
        row = {"step": self.step, "elapsed_s": round(self.elapsed, 1),
               "dev_loss": round(loss["loss"], 4), "dev_nll": round(loss["nll"], 4),
               "dev_ppl": round(math.exp(min(loss["nll"], 50)), 2), "sentences": len(pairs),
               **scores}
        self.dev_log.append(row)
        if self.tb:
            self.tb.scalars(self.step, {f"dev/{k}": row.get(k) for k in
                                        ("dev_loss", "dev_nll", "bleu", "chrf")})
        progress(f"dev @ step {self.step}: loss {row['dev_loss']} ppl {row['dev_ppl']} "
                 f"BLEU {scores.get('bleu')} chrF {scores.get('chrf')} "
                 f"({len(pairs)} sentences, {time.time() - t0:.1f}s)")
        return row

    def train(self) -> dict[str, Any]:
        t, o = self.cfg.train, self.cfg.optim
        if t.tensorboard:
            self.tb = TensorBoardLog(self.run_dir / "tensorboard")
        self.model.train()
        start = time.time()
        base_elapsed = self.elapsed
        win_tokens, win_t0 = 0, time.time()
        win_loss = win_nll = 0.0
        last_saved = self.step
        # Sums and the grad norm stay on the device between log points: reading one is a
        # host sync that stalls the GPU's queue.
        zero = torch.zeros((), device=self.device)
        grad_norm = torch.full((), float("nan"), device=self.device)
        stop_reason = "max_steps"
        it = self.collated()
        while self.step < t.max_steps:
            if t.max_minutes is not None and time.time() - start > t.max_minutes * 60:
                stop_reason = "max_minutes"
                break
            # One optimizer step = update_freq batches.
            self.optimizer.zero_grad(set_to_none=True)
            ntok_acc = 0
            loss_acc = nll_acc = zero
            got = 0
            for _ in range(t.update_freq):
                try:
                    epoch, i, batch = next(it)
                except StopIteration:  # max_epochs done
                    self.epoch, self.batch_in_epoch = t.max_epochs or self.epoch, 0
                    break
                with self.autocast():
                    logits = self.model(batch.src, batch.tgt_in)
                loss, nll = label_smoothed_loss(logits, batch.tgt_out, o.label_smoothing)
                self.scaler.scale(loss).backward()
                ntok_acc += batch.num_tokens
                loss_acc = loss_acc + loss.detach()
                nll_acc = nll_acc + nll
                self.epoch, self.batch_in_epoch = epoch, i + 1
                got += 1
            if got == 0:
                stop_reason = "max_epochs"
                break
            self.scaler.unscale_(self.optimizer)
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            torch._foreach_div_(grads, ntok_acc)  # one kernel launch for all, not one each
            if o.clip_norm > 0:
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), o.clip_norm,
                                                           foreach=True)
            lr = inverse_sqrt_lr(self.step + 1, o.lr, o.warmup_steps, o.warmup_init_lr)
            for g in self.optimizer.param_groups:
                g["lr"] = lr
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.step += 1
            self.tokens_seen += ntok_acc
            win_tokens += ntok_acc
            win_loss = win_loss + loss_acc
            win_nll = win_nll + nll_acc
            self.elapsed = base_elapsed + time.time() - start
            if self.step % t.log_every == 0 or self.step == t.max_steps:
                win_loss, win_nll = float(win_loss), float(win_nll)  # the window's one sync
                dt = max(time.time() - win_t0, 1e-9)
                row = {"step": self.step, "epoch": self.epoch, "elapsed_s": round(self.elapsed, 1),
                       "lr": f"{lr:.3e}", "loss": round(win_loss / max(win_tokens, 1), 4),
                       "nll": round(win_nll / max(win_tokens, 1), 4),
                       "ppl": round(math.exp(min(win_nll / max(win_tokens, 1), 50)), 2),
                       "grad_norm": round(float(grad_norm), 3), "tgt_tokens": win_tokens,
                       "tgt_tokens_per_s": round(win_tokens / dt, 1)}
                self.train_log.append(row)
                if self.tb:
                    self.tb.scalars(self.step, {
                        "train/loss": row["loss"], "train/nll": row["nll"], "train/lr": lr,
                        "train/grad_norm": row["grad_norm"],
                        "train/tgt_tokens_per_s": row["tgt_tokens_per_s"]})
                eta = (t.max_steps - self.step) * dt / max(t.log_every, 1)
                if t.max_minutes is not None:
                    eta = min(eta, t.max_minutes * 60 - (time.time() - start))
                progress(f"step {self.step}/{t.max_steps} ep {self.epoch} | loss {row['loss']} "
                         f"nll {row['nll']} | lr {lr:.2e} | {row['tgt_tokens_per_s']:.0f} tgt "
                         f"tok/s | {fmt_duration(self.elapsed)} elapsed, ETA "
                         f"{fmt_duration(eta)}")
                win_tokens, win_loss, win_nll, win_t0 = 0, 0.0, 0.0, time.time()
            if t.eval_every and self.step % t.eval_every == 0:
                self.evaluate()
                win_t0 = time.time()
            if t.save_every and self.step % t.save_every == 0:
                path = self.save()
                last_saved = self.step
                progress(f"saved {path}")
        self.elapsed = base_elapsed + time.time() - start
        final_dev: dict[str, Any] = {}
        if self.step != last_saved or not ck.list_checkpoints(self.ckpt_dir):
            if t.eval_every and self.step % t.eval_every != 0:
                final_dev = self.evaluate()
            path = self.save()
            progress(f"saved {path}")
        progress(f"stopped at step {self.step} ({stop_reason}); "
                 f"{self.tokens_seen:,} target tokens in {fmt_duration(self.elapsed)}")
        return {"step": self.step, "stop_reason": stop_reason, "elapsed_s": self.elapsed,
                "tokens_seen": self.tokens_seen, "dev": final_dev,
                "checkpoints": [str(p) for p in ck.list_checkpoints(self.ckpt_dir)]}


def with_mixture(cfg: TrainingConfig, lake: str, spec: str) -> TrainingConfig:
    """`cfg` training on one mixture stage of the lake (jobs/mix.py), its tags whole pieces.
    A mixture whose rows carry target tags (`<2en> `, the mix job's default) trains a
    multilingual model: the tags become the model's target tags, as with data files, so the
    exported model asks for its output language the way the translate job gives it."""
    source = mixture_source(lake, spec)
    cfg.data.train = [source]
    tags = mixture_tags(source)
    langs = [m.group(1) for t in tags if (m := TARGET_TAG_PREFIX.fullmatch(t + " "))]
    source.tag_in_source = bool(langs)
    cfg.options.target_tags = bool(langs)
    cfg.vocab.tags += [lang for lang in langs if lang not in cfg.vocab.tags]
    reserved = {*cfg.vocab.extra_symbols, *(tag_piece(t) for t in cfg.vocab.tags)}
    cfg.vocab.extra_symbols += [t for t in tags if t not in reserved]
    return cfg


def run(cfg: TrainingConfig) -> dict[str, Any]:
    trainer = Trainer(cfg)
    trainer.setup()
    return trainer.train()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="YAML file, e.g. conf/train/zh-en.yaml")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key, e.g. --set train.max_steps=500 (repeatable)")
    ap.add_argument("--mixture", metavar="NAME[:STAGE|:all]",
                    help="train on a mixture of the lake (jobs/mix.py) instead of data.train; "
                         ":all trains on each stage in turn, train.max_steps each")
    ap.add_argument("--lake", default="./lake", help="with --mixture: the lake root")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config, args.set)
        if not args.mixture:
            summary = run(cfg)
        else:
            summary = {}
            stages = mixture_stages(args.lake, args.mixture)
            for k, spec in enumerate(stages, 1):
                # stage after stage in one run directory: each resumes from the last one's
                # final checkpoint and trains train.max_steps more on its (cleaner) rows
                stage_cfg = with_mixture(cfg.model_copy(deep=True), args.lake, spec)
                if len(stages) > 1:
                    stage_cfg.train.max_steps = cfg.train.max_steps * k
                    progress(f"mixture stage {spec} ({k}/{len(stages)}): to step "
                             f"{stage_cfg.train.max_steps}")
                summary[spec] = run(stage_cfg)
            summary = summary[stages[0]] if len(stages) == 1 else summary
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(yaml.safe_dump(summary, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
