"""Average the weights of the last N checkpoints (or of listed ones).

    python -m training.average --checkpoints runs/zh-en/checkpoints --last 5 [--out avg.pt]

The result is a weights-only checkpoint (no optimizer) that export and decoding accept."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from training import checkpoint as ck
from training.logs import progress

CARRIED = ("format", "model_conf", "vocab_size", "spm", "text_options", "src_lang", "tgt_lang",
           "config", "config_hash")


def average_checkpoints(paths: Sequence[str | Path]) -> dict:
    """Element-wise mean (accumulated in float64) of the models in `paths`; they must share
    architecture and vocabulary. Metadata comes from the newest (last) one."""
    if not paths:
        raise ValueError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    first = None
    steps = []
    for p in paths:
        c = ck.load(p)
        if first is None:
            first = c
        elif c["model_conf"] != first["model_conf"] or c["spm"] != first["spm"]:
            raise ValueError(f"{p}: architecture or vocabulary differs from {paths[0]}")
        steps.append(c.get("step"))
        for k, v in c["model"].items():
            acc = total.get(k)
            total[k] = v.double() if acc is None else acc + v.double()
        last = c
    n = len(paths)
    model = {k: (v / n).to(last["model"][k].dtype) for k, v in total.items()}
    out = {k: last[k] for k in CARRIED if k in last}
    out["model"] = model
    out["averaged_from"] = [str(p) for p in paths]
    out["averaged_steps"] = steps
    out["step"] = last.get("step")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.average", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoints", required=True,
                    help="a run's checkpoints/ directory (or the run directory)")
    ap.add_argument("--last", type=int, default=5, help="average the newest N (default 5)")
    ap.add_argument("--out", help="output file (default: <dir>/avg_last<N>.pt)")
    args = ap.parse_args(argv)
    d = Path(args.checkpoints)
    if not ck.list_checkpoints(d) and (d / "checkpoints").is_dir():
        d = d / "checkpoints"
    ckpts = ck.list_checkpoints(d)
    if not ckpts:
        print(f"error: no ckpt_*.pt in {args.checkpoints}", file=sys.stderr)
        return 2
    chosen = ckpts[-args.last:]
    if len(chosen) < args.last:
        progress(f"only {len(chosen)} checkpoints in {d}; averaging those")
    progress("averaging " + ", ".join(p.name for p in chosen))
    avg = average_checkpoints(chosen)
    out = Path(args.out) if args.out else d / f"avg_last{len(chosen)}.pt"
    ck.save_atomic(avg, out)
    progress(f"wrote {out}")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
