"""`python -m training.train --mixture NAME[:STAGE] --lake ROOT` trains on a mixture as the
mix job lays it out (<lake>/tables/mixture/mixture=NAME/stage=K/*.parquet, tags already in
the source text), here written with pyarrow from real Tatoeba pairs: the tags become whole
vocabulary pieces, and a missing stage is a one-line error naming the stages there."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import sentencepiece as spm
import torch

from training.train import main

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"


def write_mixture(lake: Path) -> int:
    zh = (DATA / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()[:400]
    en = (DATA / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:400]
    rows = [("<2en> " + a, b, ["<2en> "]) for a, b in zip(zh, en, strict=True)]
    rows += [("<2zh> <BT> " + b, a, ["<2zh> ", "<BT> "]) for a, b in zip(zh, en, strict=True)]
    for stage, part in ((1, rows), (2, rows[::2])):
        where = lake / "tables" / "mixture" / "mixture=toy" / f"stage={stage}"
        where.mkdir(parents=True)
        pq.write_table(pa.table({"src": [r[0] for r in part], "tgt": [r[1] for r in part],
                                 "tags": [r[2] for r in part]}), where / "part-0.parquet")
    return len(rows[::2])


def test_training_reads_a_mixture_stage(tmp_path: Path, capsys) -> None:
    lake = tmp_path / "lake"
    pairs = write_mixture(lake)
    run_dir = tmp_path / "run"
    args = ["--config", str(REPO / "conf/train/tiny-multi-zh-en.yaml"),
            "--set", f"run_dir={run_dir}", "--set", "data.dev=null",
            "--set", "train.max_steps=2", "--set", "train.save_every=2",
            "--set", "train.eval_every=1000", "--set", "train.tensorboard=false",
            "--set", "vocab.size=1200", "--lake", str(lake)]
    assert main([*args, "--mixture", "toy:2"]) == 0
    assert f"read {pairs:,} training pairs" in capsys.readouterr().err
    sp = spm.SentencePieceProcessor(model_file=str(run_dir / "spm.model"))
    pieces = sp.encode("<2zh> <BT> Hello", out_type=str)
    assert "<2zh>" in pieces and "<BT>" in pieces, pieces  # each tag one piece, never split
    # The rows' target tags make a multilingual model, as tagged data files do: the tag comes
    # off the source text and back as the model's target tag, so an exported model asks for
    # its output language as the translate job gives it (udfs/text_codec.py).
    meta = torch.load(sorted((run_dir / "checkpoints").glob("*.pt"))[-1], weights_only=False)
    assert meta["config"]["options"]["target_tags"] is True
    assert {"en", "zh"} <= set(meta["config"]["vocab"]["tags"])
    from training.config import SourceConf
    from training.data import read_source
    tagged = SourceConf(paths=[str(lake / "tables/mixture/mixture=toy/stage=2")],
                        format="parquet", tag_in_source=True)
    langs = {lang for _, _, lang in read_source(tagged)}
    first = next(read_source(tagged))
    assert langs == {"en", "zh"} and not first[0].startswith("<2"), first
    assert main([*args, "--mixture", "toy:3"]) == 2
    err = capsys.readouterr().err
    assert "--mixture toy:3: no rows" in err and "stages of 'toy' there: 1, 2" in err


def test_all_stages_train_one_after_the_other(tmp_path: Path, capsys) -> None:
    """`--mixture NAME:all`: stage 1 to train.max_steps, then stage 2 (its cleaner half)
    resumed from stage 1's last checkpoint for as many steps again, in one run directory."""
    lake = tmp_path / "lake"
    write_mixture(lake)
    run_dir = tmp_path / "run"
    assert main(["--config", str(REPO / "conf/train/tiny-multi-zh-en.yaml"),
                 "--set", f"run_dir={run_dir}", "--set", "data.dev=null",
                 "--set", "train.max_steps=2", "--set", "train.save_every=2",
                 "--set", "train.eval_every=1000", "--set", "train.tensorboard=false",
                 "--set", "vocab.size=1200", "--lake", str(lake), "--mixture", "toy:all"]) == 0
    err = capsys.readouterr().err
    assert err.count("training pairs") == 2
    assert "read 800 training pairs" in err and "read 400 training pairs" in err
    assert "resumed from" in err and "at step 2" in err
    steps = [int(line.split(",")[0]) for line in
             (run_dir / "train_log.csv").read_text().splitlines()[1:]]
    assert steps[-1] == 4  # two stages of two steps each, one log
