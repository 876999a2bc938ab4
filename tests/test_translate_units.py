"""The translate job's parts without Spark: noise, tokenizer handling, decoding a batch with
its reject reasons, input quotas (FTST balance), model ids and config errors."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from jobs.kit.errors import ConfigError
from jobs.translation.job import config_from_args, model_id, parse_args, quotas
from training.translator import Ct2Translator
from udfs.noise import Noise, noise_text, shuffle_locally
from udfs.text_codec import CodecSpec, SluiceCodec, load_codec
from udfs.translate import (
    DecodeSpec,
    device_of,
    load_translator,
    on_device,
    seeded_sampler,
    translate_rows,
)


def lines(path: Path, n: int) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[:n]


# -- noise ---------------------------------------------------------------------------------
def test_noise_rates_on_real_english(data_dir: Path) -> None:
    texts = lines(data_dir / "tatoeba-zh-en.en", 1000)
    words = sum(len(t.split()) for t in texts)
    noised = [noise_text(t, "en", Noise(), seed=1, row_id=i) for i, t in enumerate(texts)]
    out_words = sum(len(t.split()) for t in noised)
    fillers = sum(t.split().count("<blank>") for t in noised)
    assert 0.035 < (words - out_words) / words < 0.065  # deleted: 0.05
    assert 0.035 < fillers / words < 0.065  # replaced: 0.05
    changed = sum(a != b for a, b in zip(texts, noised, strict=True))
    assert changed > 0.3 * len(texts)  # ~7-word lines, 3 kinds at 0.05 each: most change
    assert noised == [noise_text(t, "en", Noise(), 1, i) for i, t in enumerate(texts)]
    reseeded = [noise_text(t, "en", Noise(), 2, i) for i, t in enumerate(texts)]
    assert sum(a != b for a, b in zip(noised, reseeded, strict=True)) > 0.2 * len(texts)


def test_noise_on_chinese_joins_words_without_spaces(data_dir: Path) -> None:
    texts = lines(data_dir / "tatoeba-zh-en.zh", 300)
    only_fill = Noise(delete=0, filler=0.3, swap=0)
    noised = [noise_text(t, "zh", only_fill, 1, i) for i, t in enumerate(texts)]
    assert all(" " not in t for t in noised if " " not in texts[noised.index(t)])
    restored = [t.replace("<blank>", "") for t in noised]
    assert sum("<blank>" in t for t in noised) > 0.5 * len(texts)
    assert all(len(r) <= len(t) for r, t in zip(restored, texts, strict=True))


def test_noise_keeps_the_spaces_of_mixed_chinese_text() -> None:
    text = "我喜欢 New York 和 Python 3.10 版本。"
    assert noise_text(text, "zh", Noise(delete=0, filler=0, swap=0), 1, 1) == text
    everything_deleted = Noise(delete=1.0, filler=0, swap=0)
    assert noise_text(text, "zh", everything_deleted, 1, 1) == text  # never an empty target
    assert noise_text("Tom", "en", everything_deleted, 1, 1) == "Tom"


def test_swaps_move_no_word_further_than_the_distance() -> None:
    words = [str(i) for i in range(40)]
    moved = 0
    for seed in range(500):
        out = shuffle_locally(words, 1.0, 3, random.Random(seed))
        assert sorted(out, key=int) == words
        assert max(abs(int(w) - i) for i, w in enumerate(out)) <= 3
        moved += out != words
    assert moved == 500
    assert shuffle_locally(words, 0.0, 3, random.Random(1)) == words


# -- quotas ----------------------------------------------------------------------------------
def test_quotas_cap_by_limit_and_balance_by_weight() -> None:
    avail = {"ft": 1000, "bt": 5000}
    assert quotas(avail, {"ft": None, "bt": 300}, {"ft": 1, "bt": 1}, False) == {
        "ft": 1000, "bt": 300}
    # FTST 1:2: the scarcer stream sets the scale
    assert quotas(avail, {"ft": None, "bt": None}, {"ft": 1, "bt": 2}, True) == {
        "ft": 1000, "bt": 2000}
    assert quotas(avail, {"ft": None, "bt": 900}, {"ft": 1, "bt": 3}, True) == {
        "ft": 300, "bt": 900}
    assert quotas({"a": 0, "b": 10}, {"a": None, "b": None}, {"a": 1, "b": 1}, True) == {
        "a": 0, "b": 0}


# -- model ids -------------------------------------------------------------------------------
def test_model_id_follows_the_bytes_not_the_name(tiny_multi_ct2: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_multi_ct2, tmp_path / "renamed"))
    assert model_id(str(copy)) == model_id(str(tiny_multi_ct2))
    with open(copy / "sluice.json", "a", encoding="utf-8") as fh:
        fh.write(" ")
    assert model_id(str(copy)) != model_id(str(tiny_multi_ct2))


# -- tokenizers ------------------------------------------------------------------------------
def test_sentencepiece_codec_reproduces_the_sluice_pipeline(tiny_multi_ct2: Path,
                                                            data_dir: Path) -> None:
    sluice = load_codec(str(tiny_multi_ct2), CodecSpec(target_tag="en"))
    assert isinstance(sluice, SluiceCodec)
    generic = load_codec(str(tiny_multi_ct2), CodecSpec(
        kind="sentencepiece", source_model=str(tiny_multi_ct2 / "spm.model"),
        source_prefix=("<2en>",)))
    vocab = generic.source  # pieces outside the vocabulary are <unk> to the model either way
    for text in lines(data_dir / "tatoeba-zh-en.zh", 50):
        tokens = sluice.encode(text)
        assert tokens[0] == "<2en>"
        assert [vocab.piece_to_id(t) for t in tokens] == [
            vocab.piece_to_id(t) for t in generic.encode(text)]
        assert generic.decode(tokens[1:]) == sluice.decode(tokens[1:])


def test_tokenizer_errors_name_the_problem(tiny_multi_ct2: Path, tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="<2ru>"):
        load_codec(str(tiny_multi_ct2), CodecSpec(target_tag="ru"))
    with pytest.raises(ValueError, match="set target_tag"):
        load_codec(str(tiny_multi_ct2), CodecSpec())
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(ValueError, match="configure its tokenizer"):
        load_codec(str(bare), CodecSpec())


# -- decoding a batch ------------------------------------------------------------------------
def spec(model: Path, **kw) -> DecodeSpec:
    base = dict(model_dir=str(model), tgt_lang="en", codec=CodecSpec(target_tag="en"),
                device="cpu", threads=1)
    return DecodeSpec(**{**base, **kw})


def test_translate_rows_decodes_like_the_plain_translator(tiny_multi_ct2: Path,
                                                          data_dir: Path) -> None:
    texts = lines(data_dir / "tatoeba-zh-en.en", 40)
    s = spec(tiny_multi_ct2, method="greedy", tgt_lang="zh", codec=CodecSpec(target_tag="zh"),
             max_output_tokens=200)
    translator = load_translator(s.model_dir, "cpu", 0, "default", 1)
    codec = load_codec(s.model_dir, s.codec)
    out = translate_rows(translator, codec, s, list(range(len(texts))), texts)
    plain = Ct2Translator(tiny_multi_ct2, intra_threads=1).translate(
        texts, tgt_lang="zh", beam_size=1, max_decoding_length=200)
    ok = out["reject_reason"].isna()
    assert ok.sum() > len(texts) / 2
    assert out["hypothesis"].tolist() == [p.text for p in plain]  # same text, same order
    assert out.loc[ok, "tgt"].tolist() == out.loc[ok, "hypothesis"].tolist()
    assert out["source_row_id"].tolist() == list(range(len(texts)))


def test_translate_rows_rejects_with_reasons(tiny_multi_ct2: Path, data_dir: Path) -> None:
    texts = ["", "   ", None, *lines(data_dir / "tatoeba-zh-en.zh", 30)]
    s = spec(tiny_multi_ct2, method="beam", max_input_tokens=8, max_output_tokens=6)
    translator = load_translator(s.model_dir, "cpu", 0, "default", 1)
    codec = load_codec(s.model_dir, s.codec)
    out = translate_rows(translator, codec, s, list(range(len(texts))), texts)
    reasons = out["reject_reason"].tolist()
    assert reasons[:3] == ["empty_input"] * 3
    long_in = out["src_tokens"] > 8
    assert long_in.sum() > 0 and (out.loc[long_in, "reject_reason"] == "input_too_long").all()
    decoded = out["hypothesis"].notna()
    truncated = out["reject_reason"] == "output_truncated"
    assert (truncated == (decoded & (out["tgt_tokens"] >= 6))).all()
    assert out.loc[out["reject_reason"].isna(), "tgt"].notna().all()
    assert out.loc[out["reject_reason"].notna(), "tgt"].isna().all()


def test_output_truncated_means_the_decoder_had_not_finished(tiny_multi_ct2: Path,
                                                             data_dir: Path) -> None:
    """Exact, not conservative: the end token counts against max_output_tokens, so an output
    that reaches the limit is one CTranslate2 stopped before its end token."""
    texts = lines(data_dir / "tatoeba-zh-en.zh", 80)
    s = spec(tiny_multi_ct2, method="beam", max_output_tokens=12)
    translator = load_translator(s.model_dir, "cpu", 0, "default", 1)
    codec = load_codec(s.model_dir, s.codec)
    out = translate_rows(translator, codec, s, list(range(len(texts))), texts)
    ended = [r.hypotheses[0][-1] == "</s>" for r in translator.translate_batch(
        [codec.encode(t) for t in texts], beam_size=4, max_decoding_length=12,
        return_end_token=True)]
    truncated = (out["reject_reason"] == "output_truncated").tolist()
    assert truncated == [not e for e in ended]
    assert 15 < sum(ended) < len(texts) - 15


def test_a_sampling_seed_repeats_its_samples(tiny_multi_ct2: Path, data_dir: Path) -> None:
    texts = lines(data_dir / "tatoeba-zh-en.en", 60)
    s = spec(tiny_multi_ct2, method="sampling", tgt_lang="zh", codec=CodecSpec(target_tag="zh"))
    codec = load_codec(s.model_dir, s.codec)

    def sample(seed: int) -> list[str]:
        sampler = seeded_sampler(s.model_dir, "cpu", 0, "default", 2, seed)
        out = translate_rows(sampler, codec, s, list(range(len(texts))), texts)
        return out["hypothesis"].tolist()

    first = sample(7)
    assert sample(7) == first  # the worker's earlier draws do not shift a reseeded task
    assert sum(a != b for a, b in zip(first, sample(8), strict=True)) > len(texts) / 2


# -- config ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "nothing to translate"),
        (["--direction", "zh-en"], "go with --model"),
        (["--model", "m"], "needs --direction"),
        (["--model", "m", "--direction", "zhen"], "must look like 'en-zh'"),
        (["--model", "m", "--direction", "zh-en", "--set", "decoding.batch_tokens=0"],
         "batch_tokens"),
    ],
)
def test_config_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_args(parse_args(argv))


def test_duplicate_stream_names_are_refused(tmp_path: Path) -> None:
    conf = tmp_path / "bt.yaml"
    conf.write_text("streams:\n  - {name: a, model: m, direction: en-zh}\n"
                    "  - {name: a, model: m, direction: zh-en}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unique"):
        config_from_args(parse_args(["--config", str(conf)]))


def test_a_stream_may_name_its_model_and_a_set_swaps_it(tmp_path: Path) -> None:
    conf = tmp_path / "ftst.yaml"
    conf.write_text("models: {zh-en: models/r0-ct2}\n"
                    "streams:\n  - {name: ft, model: zh-en, direction: zh-en}\n"
                    "  - {name: bt, model: models/en-zh-ct2, direction: en-zh}\n",
                    encoding="utf-8")
    cfg = config_from_args(parse_args(["--config", str(conf)]))
    assert [s.model for s in cfg.streams] == ["models/r0-ct2", "models/en-zh-ct2"]
    cfg = config_from_args(parse_args(["--config", str(conf), "--set", "models.zh-en=r1-ct2"]))
    assert cfg.streams[0].model == "r1-ct2"


def test_inputs_past_the_models_positions_are_rejected(tiny_multi_ct2: Path) -> None:
    """The tiny model has 256 positions: a longer input would fail CTranslate2's whole batch."""
    s = spec(tiny_multi_ct2, method="greedy", max_input_tokens=10_000, max_output_tokens=10_000)
    long_text = " ".join(["Tom"] * 300)
    translator = load_translator(s.model_dir, "cpu", 0, "default", 1)
    out = translate_rows(translator, load_codec(s.model_dir, s.codec), s, [1, 2],
                         [long_text, "I like tea."])
    assert out["reject_reason"].iloc[0] == "input_too_long"
    assert out["src_tokens"].iloc[0] > 255 and out["hypothesis"].iloc[1]


@pytest.mark.parametrize("name", ["bt-zh-en.yaml", "ftst-zh-en.yaml"])
def test_example_configs_load(name: str) -> None:
    conf = Path(__file__).resolve().parent.parent / "conf" / name
    cfg = config_from_args(parse_args(["--config", str(conf)]))
    assert cfg.streams and all(s.model.startswith("models/") for s in cfg.streams)
    assert cfg.balance == (name == "ftst-zh-en.yaml")


def test_a_one_direction_model_refuses_the_other_direction(tiny_multi_ct2: Path,
                                                           tmp_path: Path) -> None:
    one_way = Path(shutil.copytree(tiny_multi_ct2, tmp_path / "one-way"))
    meta = json.loads((one_way / "sluice.json").read_text(encoding="utf-8"))
    meta["text_options"]["target_tags"] = False  # as a model trained for zh->en only
    (one_way / "sluice.json").write_text(json.dumps(meta), encoding="utf-8")
    assert load_codec(str(one_way), CodecSpec(target_tag="en", source_lang="zh"))
    with pytest.raises(ValueError, match="translates zh-en, not en-zh"):
        load_codec(str(one_way), CodecSpec(target_tag="zh", source_lang="en"))


def test_a_forced_target_prefix_does_not_eat_the_length_limit(tiny_multi_ct2: Path,
                                                              data_dir: Path) -> None:
    codec = CodecSpec(kind="sentencepiece", source_model=str(tiny_multi_ct2 / "spm.model"),
                      source_prefix=("<2en>",), target_prefix=("▁I",))
    s = spec(tiny_multi_ct2, method="greedy", codec=codec, max_output_tokens=3)
    texts = lines(data_dir / "tatoeba-zh-en.zh", 30)
    out = translate_rows(load_translator(s.model_dir, "cpu", 0, "default"),
                         load_codec(s.model_dir, codec), s, list(range(len(texts))), texts)
    assert out["tgt_tokens"].max() == 3  # three tokens after the prefix, not two
    assert ((out["tgt_tokens"] == 3) == (out["reject_reason"] == "output_truncated")).all()


def test_cpu_unless_a_gpu_is_assigned_or_asked_for() -> None:
    assert device_of("auto") == ("cpu", 0) and device_of("cpu") == ("cpu", 0)
    import ctranslate2

    if ctranslate2.get_cuda_device_count() == 0:  # this machine: asking for cuda must fail
        with pytest.raises(RuntimeError, match="no CUDA device"):
            device_of("cuda")
    else:
        assert device_of("cuda") == ("cuda", 0)


def test_stream_flags_build_one_stream() -> None:
    cfg = config_from_args(parse_args([
        "--model", "m", "--direction", "en-zh", "--method", "sampling", "--topk", "5",
        "--temperature", "0.7", "--seed", "3", "--limit", "10", "--corpus", "news"]))
    [s] = cfg.streams
    assert (s.name, s.method, s.topk, s.temperature, s.seed) == ("back-sampling", "sampling",
                                                                  5, 0.7, 3)
    assert s.params() == {"topk": 5, "temperature": 0.7, "seed": 3}
    assert (s.input.limit, s.input.corpora, cfg.input_table(s)) == (10, ["news"],
                                                                    "sluice.mono_clean")
    with pytest.raises(ConfigError, match="go with --model"):
        config_from_args(parse_args(["--method", "greedy"]))


def test_monolingual_runs_dedup_on_the_text_alone() -> None:
    from jobs.filtering.config import load_config
    from jobs.filtering.stages import dedup_rules

    both = ["dedup.source_side=true", "dedup.target_side=true"]
    assert dedup_rules(load_config(None, both, {"lang": "en"})) == ["duplicate"]
    assert dedup_rules(load_config(None, both, {"pair": "zh-en"})) == [
        "duplicate", "duplicate_source", "duplicate_target"]


def test_models_are_found_where_the_worker_runs(tiny_multi_ct2: Path, tmp_path: Path,
                                                monkeypatch) -> None:
    from udfs.paths import on_this_worker

    monkeypatch.chdir(tiny_multi_ct2.parent)  # as YARN unpacks --archives into the cwd
    assert on_this_worker(tiny_multi_ct2.name) == str(tiny_multi_ct2)
    with pytest.raises(FileNotFoundError, match="no-such-model is not on this worker"):
        on_this_worker(str(tmp_path / "no-such-model"))


def test_a_converted_third_party_model_decodes_with_its_own_tokenizer(
        marian_ct2: Path, data_dir: Path) -> None:
    codec_spec = CodecSpec(kind="sentencepiece", source_model=str(marian_ct2 / "source.spm"),
                           target_model=str(marian_ct2 / "target.spm"),
                           source_suffix=("</s>",), max_positions=64)
    s = DecodeSpec(model_dir=str(marian_ct2), tgt_lang="zh", method="beam", codec=codec_spec,
                   device="cpu", threads=1, max_output_tokens=12)
    texts = [*lines(data_dir / "tatoeba-zh-en.en", 20), " ".join(["tea"] * 80)]
    codec = load_codec(str(marian_ct2), codec_spec)
    assert codec.encode("I like tea.")[-1] == "</s>"
    out = translate_rows(load_translator(s.model_dir, "cpu", 0, "default"), codec, s,
                         list(range(len(texts))), texts)
    assert out["reject_reason"].iloc[-1] == "input_too_long"  # past its 64 positions
    decoded = out.iloc[:-1]
    assert decoded["hypothesis"].str.len().gt(0).all()  # target.spm pieces back to text
    assert set(decoded["reject_reason"].dropna()) <= {"output_truncated"}
    assert (decoded["tgt_tokens"] <= 12).all() and decoded["score"].lt(0).all()


def test_a_gpu_task_decodes_in_half_precision_and_gpu_sized_batches(tmp_path: Path) -> None:
    """On a GPU the spec takes `gpu_batch_tokens` and, for compute type "default", bfloat16
    where the GPU supports it, else float16; a type the user named stays; a CPU task's spec
    is unchanged. The job's config carries both batch sizes to the spec."""
    cpu = spec(tmp_path, batch_tokens=2048, gpu_batch_tokens=16384)
    assert on_device(cpu, "cpu", {"int8", "float32"}) == cpu
    hopper = on_device(cpu, "cuda", {"float32", "float16", "bfloat16", "int8_float16"})
    assert (hopper.compute_type, hopper.options()["max_batch_size"]) == ("bfloat16", 16384)
    assert on_device(cpu, "cuda", {"float32", "float16"}).compute_type == "float16"
    named = on_device(spec(tmp_path, compute_type="int8_float16"), "cuda", {"bfloat16"})
    assert named.compute_type == "int8_float16"
    conf = Path(__file__).resolve().parent.parent / "conf" / "bt-zh-en.yaml"
    cfg = config_from_args(parse_args(["--config", str(conf),
                                       "--set", "decoding.gpu_batch_tokens=8192"]))
    decode = cfg.decode_spec(cfg.streams[0], "model-dir")
    assert (decode.batch_tokens, decode.gpu_batch_tokens) == (2048, 8192)
