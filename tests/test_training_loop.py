"""The training loop on a slice of real zh-en data: loss goes down, checkpoints rotate, an
interrupted run resumes to exactly the same weights, averaging, fine-tuning, the CLIs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from jobs.kit.errors import ConfigError
from training import average as avg_cli
from training import checkpoint as ck
from training import train as train_cli
from training.average import average_checkpoints
from training.config import from_dict, load_config
from training.train import inverse_sqrt_lr, run

DATA = Path(__file__).resolve().parent / "data"


def tiny(run_dir: Path, **sections) -> dict:
    cfg = {
        "run_dir": str(run_dir),
        "seed": 3,
        "data": {
            "train": [{"paths": [str(DATA / "train_anki_cmn.tsv")], "format": "tsv",
                       "tsv_columns": [1, 0]}],
            "dev": {"paths": [str(DATA / "train_dev_tatoeba.zh"),
                              str(DATA / "train_dev_tatoeba.en")]},
            "src_lang": "zh", "tgt_lang": "en", "dev_size": 20, "max_len": 64,
        },
        "vocab": {"size": 2000, "tags": ["en", "zh"]},
        "model": {"d_model": 32, "ffn_dim": 64, "heads": 2, "encoder_layers": 2,
                  "decoder_layers": 1, "max_positions": 128},
        "optim": {"lr": 0.003, "warmup_steps": 10},
        "train": {"max_tokens": 600, "max_steps": 12, "save_every": 4, "keep_last": 2,
                  "eval_every": 6, "log_every": 3, "threads": 1, "update_freq": 2},
    }
    for key, value in sections.items():
        cfg[key].update(value)
    return cfg


def weights(path: Path) -> dict[str, torch.Tensor]:
    return ck.load(path)["model"]


def test_loss_goes_down_and_checkpoints_rotate(tmp_path: Path) -> None:
    cfg = from_dict(tiny(tmp_path / "run", train={"max_steps": 60, "save_every": 20,
                                                   "eval_every": 30, "log_every": 10,
                                                   "update_freq": 1}))
    out = run(cfg)
    assert out["step"] == 60 and out["stop_reason"] == "max_steps"
    rows = train_cli.CsvLog(tmp_path / "run" / "train_log.csv", train_cli.TRAIN_FIELDS).read()
    losses = [float(r["loss"]) for r in rows]
    assert [int(r["step"]) for r in rows] == [10, 20, 30, 40, 50, 60]
    assert losses[-1] < losses[0] - 1.0, losses
    assert all(float(r["tgt_tokens_per_s"]) > 0 for r in rows)
    dev = train_cli.CsvLog(tmp_path / "run" / "dev_log.csv", train_cli.DEV_FIELDS).read()
    assert [int(r["step"]) for r in dev] == [30, 60]
    assert float(dev[1]["dev_loss"]) < float(dev[0]["dev_loss"])
    assert {"bleu", "chrf"} <= set(dev[0]) and dev[0]["bleu"] != ""
    names = [p.name for p in ck.list_checkpoints(tmp_path / "run" / "checkpoints")]
    assert names == ["ckpt_00000040.pt", "ckpt_00000060.pt"]  # keep_last: 2
    assert (tmp_path / "run" / "spm.model").exists()
    assert (tmp_path / "run" / "config.yaml").exists()
    assert len(list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))) == 1


def test_resume_gives_the_same_weights_as_an_uninterrupted_run(tmp_path: Path) -> None:
    full = run(from_dict(tiny(tmp_path / "full")))
    assert full["step"] == 12
    # Interrupted at step 8 (a checkpoint at 8; the run stops there), then resumed.
    first = run(from_dict(tiny(tmp_path / "cut", train={"max_steps": 8})))
    assert first["step"] == 8
    second = run(from_dict(tiny(tmp_path / "cut")))
    assert second["step"] == 12
    a = weights(tmp_path / "full" / "checkpoints" / "ckpt_00000012.pt")
    b = weights(tmp_path / "cut" / "checkpoints" / "ckpt_00000012.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ca = ck.load(tmp_path / "full" / "checkpoints" / "ckpt_00000012.pt")
    cb = ck.load(tmp_path / "cut" / "checkpoints" / "ckpt_00000012.pt")
    assert (ca["epoch"], ca["batch_in_epoch"]) == (cb["epoch"], cb["batch_in_epoch"])
    assert ca["tokens_seen"] == cb["tokens_seen"]
    # logged windows that do not straddle the interruption are identical (but wall clock)
    def rows(name: str) -> dict[int, dict]:
        log = train_cli.CsvLog(tmp_path / name / "train_log.csv", train_cli.TRAIN_FIELDS)
        drop = ("elapsed_s", "tgt_tokens_per_s")
        return {int(r["step"]): {k: v for k, v in r.items() if k not in drop} for r in log.read()}

    ra, rb = rows("full"), rows("cut")
    assert sorted(ra) == [3, 6, 9, 12] and sorted(rb) == [3, 6, 8, 9, 12]
    for step in (3, 6, 12):
        assert ra[step] == rb[step], step


def test_a_different_seed_gives_different_weights(tmp_path: Path) -> None:
    run(from_dict(tiny(tmp_path / "a", train={"max_steps": 4})))
    cfg = tiny(tmp_path / "b", train={"max_steps": 4})
    cfg["seed"] = 4
    run(from_dict(cfg))
    a = weights(tmp_path / "a" / "checkpoints" / "ckpt_00000004.pt")
    b = weights(tmp_path / "b" / "checkpoints" / "ckpt_00000004.pt")
    assert not torch.equal(a["embed.weight"], b["embed.weight"])


def test_average_last_n(tmp_path: Path) -> None:
    run(from_dict(tiny(tmp_path / "r", train={"keep_last": 3})))
    ckpts = ck.list_checkpoints(tmp_path / "r" / "checkpoints")
    assert [p.name for p in ckpts] == ["ckpt_00000004.pt", "ckpt_00000008.pt", "ckpt_00000012.pt"]
    out = tmp_path / "avg.pt"
    assert avg_cli.main(["--checkpoints", str(tmp_path / "r"), "--last", "2",
                         "--out", str(out)]) == 0
    got = ck.load(out)
    w8, w12 = weights(ckpts[1]), weights(ckpts[2])
    for k in w8:
        torch.testing.assert_close(got["model"][k], (w8[k] + w12[k]) / 2, rtol=0, atol=1e-7)
    assert got["averaged_steps"] == [8, 12] and "optimizer" not in got
    model, vocab = ck.build_model(got)  # loads as a model
    assert model.vocab_size == len(vocab)
    three = average_checkpoints(ckpts)
    k = "encoder_layers.0.ffn.fc1.weight"
    manual = sum(weights(p)[k].double() for p in ckpts) / 3
    torch.testing.assert_close(three["model"][k].double(), manual, rtol=0, atol=1e-7)


def test_fine_tuning_starts_from_the_parent_with_its_own_schedule(tmp_path: Path) -> None:
    run(from_dict(tiny(tmp_path / "parent")))
    parent = tmp_path / "parent" / "checkpoints" / "ckpt_00000012.pt"
    # "in-domain" data: the dev file pair; a schedule of its own (fresh warmup, step 0)
    cfg = tiny(tmp_path / "ft", optim={"lr": 0.001, "warmup_steps": 4},
               train={"init_from": str(parent), "max_steps": 1, "save_every": 1,
                      "eval_every": 0, "log_every": 1, "update_freq": 1})
    cfg["data"]["train"] = [{"paths": cfg["data"]["dev"]["paths"], "format": "moses"}]
    out = run(from_dict(cfg))
    assert out["step"] == 1
    child = ck.load(tmp_path / "ft" / "checkpoints" / "ckpt_00000001.pt")
    assert child["spm"] == ck.load(parent)["spm"]  # the parent's vocabulary
    row = train_cli.CsvLog(tmp_path / "ft" / "train_log.csv", train_cli.TRAIN_FIELDS).read()[0]
    assert math.isclose(float(row["lr"]), inverse_sqrt_lr(1, 0.001, 4), rel_tol=1e-3)
    p = weights(parent)
    # one small Adam step away from the parent: close to it, yet moved
    diff = max(float((child["model"][k] - p[k]).abs().max()) for k in p)
    assert 0 < diff < 0.01


def test_inverse_sqrt_schedule() -> None:
    assert inverse_sqrt_lr(1, 1e-3, 4000) < 1e-6
    assert math.isclose(inverse_sqrt_lr(4000, 1e-3, 4000), 1e-3)
    assert math.isclose(inverse_sqrt_lr(16000, 1e-3, 4000), 5e-4)
    assert inverse_sqrt_lr(2000, 1e-3, 4000) < inverse_sqrt_lr(3000, 1e-3, 4000)


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    cfg = tiny(tmp_path / "x")
    cfg["model"]["d_modle"] = 8
    with pytest.raises(ConfigError, match="model.d_modle"):
        from_dict(cfg)
    cfg = tiny(tmp_path / "x")
    cfg["model"]["heads"] = 5
    with pytest.raises(ConfigError, match="divisible"):
        from_dict(cfg)


def test_shipped_configs_load_and_deep_encoders_are_expressible() -> None:
    root = Path(__file__).resolve().parent.parent / "conf" / "train"
    zh_en = load_config(root / "zh-en.yaml")
    assert zh_en.model.d_model == 512 and zh_en.optim.warmup_steps == 4000
    assert zh_en.optim.label_smoothing == 0.1 and zh_en.optim.betas == (0.9, 0.98)
    deep = load_config(root / "zh-en.yaml", ["model.encoder_layers=25", "model.decoder_layers=6"])
    assert (deep.model.encoder_layers, deep.model.decoder_layers) == (25, 6)
    from training.model import Transformer

    m = Transformer(deep.model.model_copy(update={"d_model": 16, "ffn_dim": 32, "heads": 2}), 50)
    assert len(m.encoder_layers) == 25 and len(m.decoder_layers) == 6
    # shared embeddings: one matrix for source, target and output projection
    assert sum(1 for n, _ in m.named_parameters() if "embed" in n) == 1


def test_cli_train_and_set_overrides(tmp_path: Path, capsys) -> None:
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny(tmp_path / "cli")))
    assert train_cli.main(["--config", str(path), "--set", "train.max_steps=3",
                           "--set", "train.eval_every=0"]) == 0
    assert "step: 3" in capsys.readouterr().out
    assert train_cli.main(["--config", str(path), "--set", "train.nope=1"]) == 2


def test_resuming_with_another_architecture_is_a_clear_error(tmp_path: Path) -> None:
    run(from_dict(tiny(tmp_path / "r", train={"max_steps": 2, "save_every": 2})))
    cfg = tiny(tmp_path / "r", model={"d_model": 64})
    with pytest.raises(ConfigError, match="different model"):
        run(from_dict(cfg))


def test_mixed_precision_path_runs_under_cpu_autocast(tmp_path: Path) -> None:
    """The bf16 code path (autocast, fp32 master weights and loss) exercised on the CPU's
    autocast; on CUDA the same code runs with device_type='cuda'."""
    from training.train import Trainer

    results = {}
    for precision in ("fp32", "bf16"):
        t = Trainer(from_dict(tiny(tmp_path / precision, train={"max_steps": 3,
                                                                 "eval_every": 0})))
        t.setup()
        t.precision = precision  # Trainer itself falls back to fp32 on a CPU
        t.train()
        results[precision] = {k: v.clone() for k, v in t.model.state_dict().items()}
        rows = t.train_log.read()
        assert all(math.isfinite(float(r["loss"])) for r in rows)
    assert all(v.dtype == torch.float32 for v in results["bf16"].values())
    # autocast really changed the arithmetic
    assert not torch.equal(results["fp32"]["embed.weight"], results["bf16"]["embed.weight"])
    torch.testing.assert_close(results["fp32"]["embed.weight"], results["bf16"]["embed.weight"],
                               atol=0.05, rtol=0)


def test_fused_projections_equal_the_three_linears_they_are_stored_as() -> None:
    """Self-attention projects q, k and v in one matmul and cross-attention k and v in one
    (fused, issue 36), from the same three Linear modules the checkpoint and the CTranslate2
    export name: the results are the separate projections'."""
    from training.model import Attention

    torch.manual_seed(0)
    attn = Attention(d_model=16, heads=4, dropout=0.0)
    x = torch.randn(3, 5, 16)
    q, k, v = attn.project_qkv(x)
    for got, linear in ((q, attn.q_proj), (k, attn.k_proj), (v, attn.v_proj)):
        torch.testing.assert_close(got, attn.split(linear(x)))
    k2, v2 = attn.project_kv(x)
    torch.testing.assert_close(k2, k)
    torch.testing.assert_close(v2, v)
    assert sorted(name for name, _ in attn.named_parameters()) == sorted(
        f"{p}_proj.{w}" for p in ("q", "k", "v", "out") for w in ("weight", "bias"))


def test_training_configs_load_with_the_jobs_config_kit(tmp_path: Path) -> None:
    """`extends:` chains and `--set` errors read as the jobs' do: one line naming the key."""
    shipped = Path(__file__).resolve().parent.parent / "conf" / "train" / "tiny-multi-zh-en.yaml"
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {shipped}\nseed: 7\n", encoding="utf-8")
    cfg = load_config(child, ["model.d_model=64"])
    assert (cfg.seed, cfg.model.d_model) == (7, 64)
    for bad, named in ((["model.d_modle=8"], "model.d_modle"), (["model.heads=[1,"], "--set")):
        with pytest.raises(ConfigError) as err:
            load_config(child, bad)
        assert named in str(err.value) and "\n" not in str(err.value)
