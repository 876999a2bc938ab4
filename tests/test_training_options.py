"""Right-to-left targets, source reversal and multilingual <2xx> tags, from the config
through training data, the checkpoint and export to the CTranslate2 translator."""

from __future__ import annotations

from pathlib import Path

import pytest

from training import checkpoint as ck
from training.config import from_dict
from training.decode import translate
from training.export import export
from training.train import Trainer, run
from training.translator import Ct2Translator
from training.vocab import EOS

DATA = Path(__file__).resolve().parent / "data"
ANKI = str(DATA / "train_anki_cmn.tsv")


def config(run_dir: Path, **options) -> dict:
    return {
        "run_dir": str(run_dir), "seed": 5,
        "data": {
            # one file, both directions: zh->en and en->zh, each with its target language
            "train": [{"paths": [ANKI], "format": "tsv", "tsv_columns": [1, 0],
                       "tgt_lang": "en", "limit": 600},
                      {"paths": [ANKI], "format": "tsv", "tsv_columns": [0, 1],
                       "tgt_lang": "zh", "limit": 600}],
            "src_lang": "mul", "tgt_lang": "en", "max_len": 64},
        "vocab": {"size": 2000},
        "model": {"d_model": 32, "ffn_dim": 64, "heads": 2, "encoder_layers": 1,
                  "decoder_layers": 1, "max_positions": 128},
        "optim": {"lr": 0.003, "warmup_steps": 10},
        "train": {"max_tokens": 800, "max_steps": 30, "save_every": 30, "eval_every": 0,
                  "log_every": 10, "threads": 1},
        "options": options,
    }


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    root = tmp_path_factory.mktemp("opts")
    cfg = from_dict(config(root / "run", rtl=True, reverse_source=True, target_tags=True))
    run(cfg)
    ckpt = root / "run" / "checkpoints" / "ckpt_00000030.pt"
    return cfg, ckpt, export(ckpt, root / "ct2")


def test_training_data_carries_tags_reversed_sources_and_rtl_targets(multi) -> None:
    cfg, _, _ = multi
    trainer = Trainer(cfg.model_copy(update={"train": cfg.train.model_copy(
        update={"resume": False})}))
    trainer.setup()
    vocab, corpus = trainer.data.vocab, trainer.data.train
    en, zh = vocab.tag_id("en"), vocab.tag_id("zh")  # tags collected from the corpora
    first_src, first_tgt = corpus.pair(0)  # "嗨。" -> "Hi." : first zh->en pair
    assert first_src[0] == en and first_src[-1] == EOS
    assert list(first_src[1:-1]) == vocab.sp.encode("嗨。")[::-1]
    assert list(first_tgt) == vocab.sp.encode("Hi.")[::-1]
    tags = {int(corpus.pair(i)[0][0]) for i in range(len(corpus))}
    assert tags == {en, zh}
    assert sum(int(corpus.pair(i)[0][0]) == zh for i in range(len(corpus))) == 600


def test_checkpoint_and_export_keep_the_options(multi) -> None:
    _, ckpt, ct2 = multi
    c = ck.load(ckpt)
    assert c["text_options"] == {"rtl": True, "reverse_source": True, "target_tags": True}
    _, vocab = ck.build_model(c)
    assert vocab.options.rtl and vocab.options.reverse_source and vocab.options.target_tags
    tr = Ct2Translator(ct2, intra_threads=1)
    assert tr.vocab.options == vocab.options


@pytest.mark.parametrize("lang,texts", [("en", ["我们明天去北京。", "他很高兴。"]),
                                        ("zh", ["Tom is happy.", "I like tea."])])
def test_translator_matches_torch_through_the_pipeline(multi, lang, texts) -> None:
    _, ckpt, ct2 = multi
    model, vocab = ck.build_model(ck.load(ckpt))
    tr = Ct2Translator(ct2, intra_threads=1)
    out = tr.translate(texts, tgt_lang=lang, beam_size=1, max_decoding_length=20)
    ours = translate(model, vocab, texts, tgt_lang=lang, max_len_a=0, max_len_b=20)
    assert [t.text for t in out] == ours
    for t in out:
        ids = [vocab.sp.piece_to_id(p) for p in t.tokens]
        # the model emits the target right to left; the text is its reversal
        assert t.text == vocab.sp.decode(ids[::-1])
    # the tag is the first source token CTranslate2 sees
    assert vocab.source_pieces(texts[0], lang)[0] == f"<2{lang}>"
