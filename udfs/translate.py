"""Decode sentences with a CTranslate2 model inside Spark tasks (`mapInPandas`).

Each Python worker loads the model and its tokenizer once (cached for the worker's life;
Spark reuses workers across tasks; a sampling task gets a freshly seeded one-thread
translator instead, see `seeded_sampler`), on the GPU Spark's resource scheduling gave the task,
else on the CPU with the task's cores. Every Arrow batch is tokenized and handed to
CTranslate2, which sorts it by length and decodes it in sub-batches of at most
`batch_tokens` source tokens (the job also sorts each partition by length, so a batch holds
sentences of similar length to begin with).

Every input row comes out as exactly one row: a synthetic sentence, or a `reject_reason`
(empty_input, input_too_long, empty_output, output_truncated).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from itertools import chain

import pandas as pd

from udfs.noise import Noise, noise_text
from udfs.paths import on_this_worker
from udfs.task import task_cpus, task_gpu
from udfs.text_codec import CodecSpec, TextCodec, load_codec

METHODS = ("beam", "greedy", "sampling", "noised_beam")
OUTPUT_SCHEMA = (
    "source_row_id long, tgt string, hypothesis string, score float, "
    "src_tokens int, tgt_tokens int, reject_reason string"
)


@dataclass(frozen=True)
class DecodeSpec:
    """How one stream decodes (built from the job's config; picklable for the workers)."""

    model_dir: str
    tgt_lang: str
    method: str = "beam"
    beam_size: int = 4
    length_penalty: float = 1.0
    topk: int = 10
    temperature: float = 1.0
    noise: Noise = field(default_factory=Noise)
    seed: int = 1
    codec: CodecSpec = field(default_factory=CodecSpec)
    device: str = "auto"  # auto: the task's GPU if Spark assigned one, else the CPU
    compute_type: str = "default"
    threads: int = 0  # CPU threads per task; 0: spark.task.cpus
    intra_threads: int = 1  # of those, threads per batch; the rest decode batches in parallel
    batch_tokens: int = 2048
    gpu_batch_tokens: int = 16384
    max_input_tokens: int = 256
    max_output_tokens: int = 256

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method {self.method!r} is not one of {METHODS}")

    def options(self) -> dict:
        """CTranslate2 translate_batch options of the method."""
        opts: dict = {
            "max_batch_size": self.batch_tokens,
            "batch_type": "tokens",
            "max_input_length": 0,  # over-long inputs are rejected before, never truncated
            "max_decoding_length": self.max_output_tokens,
            "return_scores": True,
        }
        if self.method == "sampling":
            opts |= {
                "beam_size": 1,
                "sampling_topk": self.topk,
                "sampling_temperature": self.temperature,
            }
        elif self.method == "greedy":
            opts |= {"beam_size": 1}
        else:
            opts |= {"beam_size": self.beam_size, "length_penalty": self.length_penalty}
        return opts


def device_of(requested: str) -> tuple[str, int]:
    """(device, index). auto: the GPU Spark assigned to this task, else the CPU (so executors
    never share a GPU the scheduler did not hand out). cuda: that GPU, else GPU 0 (a single
    machine in local mode, where Spark assigns none)."""
    gpu = task_gpu()
    if gpu is not None and requested != "cpu":
        return "cuda", int(gpu.split(":")[1])
    if requested != "cuda":
        return "cpu", 0
    import ctranslate2

    if ctranslate2.get_cuda_device_count() == 0:
        raise RuntimeError("decoding.device is cuda but no CUDA device is visible")
    return "cuda", 0


def on_device(spec: DecodeSpec, device: str, supported: set[str]) -> DecodeSpec:
    """The spec as a task on `device` decodes with it: on a GPU, its token batches
    (`gpu_batch_tokens`: a CPU-sized batch leaves most of the chip idle) and, for compute
    type "default", bfloat16 where the GPU has it, else float16 (CTranslate2's "default"
    keeps the exported float32 weights, which tensor cores do not take). `supported`: the
    device's compute types (`ctranslate2.get_supported_compute_types`)."""
    if device != "cuda":
        return spec
    compute_type = spec.compute_type
    if compute_type == "default":
        compute_type = next((t for t in ("bfloat16", "float16") if t in supported), compute_type)
    return replace(spec, batch_tokens=spec.gpu_batch_tokens, compute_type=compute_type)


def supported_compute_types(device: str, index: int) -> set[str]:
    import ctranslate2

    return set(ctranslate2.get_supported_compute_types(device, index))


def open_translator(model_dir: str, device: str, index: int, compute_type: str,
                    threads: int = 1, intra_threads: int = 1):
    import ctranslate2

    intra = max(1, min(intra_threads, threads))
    return ctranslate2.Translator(
        model_dir,
        device=device,
        device_index=index,
        compute_type=compute_type,
        inter_threads=max(1, threads // intra),  # sub-batches decoded in parallel
        intra_threads=intra,
    )


@lru_cache(maxsize=4)  # a worker may serve several streams' tasks; each model loads once
def load_translator(model_dir: str, device: str, index: int, compute_type: str,
                    threads: int = 1, intra_threads: int = 1):
    return open_translator(model_dir, device, index, compute_type, threads, intra_threads)


def seeded_sampler(model_dir: str, device: str, index: int, compute_type: str, threads: int,
                   seed: int):
    """A fresh one-thread translator whose sampling starts from `seed`. CTranslate2 seeds
    each decoding thread's generator once, when that thread first samples, so reseeding a
    cached translator changes nothing; a new thread does, and one thread draws in a fixed
    order (several would take sub-batches in whatever order they free up)."""
    import ctranslate2

    ctranslate2.set_random_seed(seed)
    return open_translator(model_dir, device, index, compute_type, threads, threads)


def worker_paths(spec: DecodeSpec) -> tuple[str, CodecSpec]:
    """The model directory and tokenizer files as this executor sees them."""
    c = spec.codec
    files = {k: on_this_worker(v) for k in ("source_model", "target_model")
             if (v := getattr(c, k))}
    return on_this_worker(spec.model_dir), replace(c, **files)


@cache
def cached_codec(model_dir: str, spec: CodecSpec) -> TextCodec:
    return load_codec(model_dir, spec)


def encode_inputs(codec: TextCodec, texts: list[str | None], max_in: int,
                  out: dict[str, list]) -> dict[int, list[str]]:
    """Tokens of each decodable text by its index; the others get their reject reason."""
    tokens: dict[int, list[str]] = {}
    for i, text in enumerate(texts):
        if text is None or not text.strip():
            out["reject_reason"][i] = "empty_input"
            continue
        pieces = codec.encode(text)
        out["src_tokens"][i] = len(pieces)
        if len(pieces) > max_in:
            out["reject_reason"][i] = "input_too_long"
        else:
            tokens[i] = pieces
    return tokens


def output_or_reason(text: str, n_tokens: int, max_out: int, spec: DecodeSpec,
                     row_id: int) -> tuple[str | None, str | None]:
    """(synthetic text, None), or (None, reject reason) for a decoded hypothesis."""
    if n_tokens >= max_out:
        return None, "output_truncated"  # stopped by the length limit
    if not text.strip():
        return None, "empty_output"
    if spec.method == "noised_beam":
        return noise_text(text, spec.tgt_lang, spec.noise, spec.seed, row_id), None
    return text, None


def translate_rows(
    translator, codec: TextCodec, spec: DecodeSpec, row_ids: list[int], texts: list[str | None]
) -> pd.DataFrame:
    """Decode one batch; one output row per input row (OUTPUT_SCHEMA)."""
    columns = ("tgt", "hypothesis", "score", "src_tokens", "tgt_tokens", "reject_reason")
    out: dict[str, list] = {c: [None] * len(texts) for c in columns}
    # Past the model's positions CTranslate2 fails the whole batch: the limits never exceed it.
    max_in = min(spec.max_input_tokens, codec.max_tokens or spec.max_input_tokens)
    max_out = min(spec.max_output_tokens, codec.max_tokens or spec.max_output_tokens)
    tokens = encode_inputs(codec, texts, max_in, out)
    prefix = codec.target_prefix() or []
    # CTranslate2 counts a forced target prefix in the decoding length.
    options = {**spec.options(), "max_decoding_length": max_out + len(prefix)}
    results = translator.translate_batch(
        list(tokens.values()), target_prefix=[prefix] * len(tokens) if prefix else None,
        **options,
    ) if tokens else []
    for i, result in zip(tokens, results, strict=True):
        hyp = result.hypotheses[0][len(prefix) :]
        text = codec.decode(hyp)
        out["hypothesis"][i], out["tgt_tokens"][i] = text, len(hyp)
        out["score"][i] = result.scores[0]
        out["tgt"][i], out["reject_reason"][i] = output_or_reason(
            text, len(hyp), max_out, spec, row_ids[i]
        )
    frame = pd.DataFrame(out)
    frame.insert(0, "source_row_id", pd.Series(row_ids, dtype="int64"))
    frame["score"] = frame["score"].astype("float32")
    for col in ("src_tokens", "tgt_tokens"):
        frame[col] = frame[col].astype("Int32")
    return frame


def task_seed(seed: int, first_batch: pd.DataFrame) -> int:
    """The stream's seed mixed with the task's first row id. The job places and orders rows
    by row id, so a task holds the same rows in the same order on every run (Spark's partition
    index would not do: it depends on the stream's place in the job's union)."""
    first_row = int(first_batch["source_row_id"].iloc[0])
    return zlib.crc32(f"{seed}:{first_row}".encode())


def decoder(spec: DecodeSpec) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The `mapInPandas` function: batches with `source_row_id` and `src` (and any other
    columns, passed through) -> the same columns plus OUTPUT_SCHEMA's."""

    def decode(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        batches = iter(batches)
        first = next(batches, None)
        if first is None:
            return
        device, index = device_of(spec.device)
        task_spec = on_device(spec, device, supported_compute_types(device, index))
        threads = task_spec.threads or task_cpus()
        model_dir, codec_spec = worker_paths(task_spec)
        if task_spec.method == "sampling":
            translator = seeded_sampler(model_dir, device, index, task_spec.compute_type, threads,
                                        task_seed(task_spec.seed, first))
        else:
            translator = load_translator(model_dir, device, index, task_spec.compute_type,
                                         threads, task_spec.intra_threads)
        codec = cached_codec(model_dir, codec_spec)
        for batch in chain([first], batches):
            ids = batch["source_row_id"].astype("int64").tolist()
            decoded = translate_rows(translator, codec, task_spec, ids, batch["src"].tolist())
            yield pd.concat(
                [batch.reset_index(drop=True), decoded.drop(columns="source_row_id")], axis=1
            )

    return decode
