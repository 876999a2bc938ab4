"""N-gram language models: tokenization for the LM, training, loading and per-token scoring.

Training uses KenLM's `lmplz` and `build_binary` (built into the venv by `make setup`:
scripts/build_kenlm.sh). Where they are missing it falls back to VariKN (a PyPI wheel), whose
ARPA output is rewritten into the form KenLM reads. Either way the result is loaded with the
`kenlm` Python module (ufal-kenlm) and scored with `cross_entropy`, in bits per token.

    lm = train_lm((lm_tokens(s, "en") for s in sentences), 3, "in-domain.en.binlm")
    cross_entropy(load_lm(lm), lm_tokens("An unseen sentence.", "en"))  # bits per token
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from udfs.scripts import unspaced

if TYPE_CHECKING:
    import kenlm

log = logging.getLogger(__name__)

# A word (letters, digits, _) or one punctuation/symbol character.
_TOKEN = re.compile(r"\w+|[^\w\s]")
LOG2_10 = math.log2(10)

Trainer = Literal["auto", "lmplz", "varikn"]
# KENLM_MAX_ORDER of scripts/build_kenlm.sh's build and of ufal-kenlm's module (the default).
MAX_ORDER = 6


def character_lm(lang: str) -> bool:
    """Whether the LM of `lang` (any region/script suffix: zh-Hant, zh_TW) sees characters: a
    language written without spaces between words (udfs/scripts.py)."""
    return unspaced(lang.replace("_", "-").split("-", 1)[0].lower())


def lm_tokens(text: str, lang: str) -> str:
    """The space-separated token stream an LM is trained on and scores, for `lang` (ISO 639).

    Languages written without spaces between words (zh, ja, yue, wuu, th, ...; any region/script
    suffix: zh-Hant, zh_TW): every non-space character is a token, e.g. `你好， 世界` ->
    `你 好 ， 世 界`. Other languages: lowercased, words split from
    punctuation, each punctuation character a token: `Don't stop!` -> `don ' t stop !`.
    A run of letters/digits from any script is one word. Blank text gives "".
    """
    if character_lm(lang):
        return " ".join("".join(text.split()))
    return " ".join(_TOKEN.findall(text.lower()))


# Where `make setup` puts lmplz and build_binary: next to the running Python.
VENV_BIN = os.path.dirname(sys.executable)


def _find_tool(name: str, tools_dir: str | None) -> str | None:
    """`name` in tools_dir, else in VENV_BIN, else on PATH."""
    for folder in (tools_dir, VENV_BIN):
        if folder and os.access(path := os.path.join(folder, name), os.X_OK):
            return path
    return shutil.which(name)


def _run(cmd: list[str]) -> None:
    """Run a training tool quietly; on failure raise with the end of what it printed."""
    done = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-2000:]
        raise RuntimeError(f"{Path(cmd[0]).name} failed (exit {done.returncode}):\n{tail}")


def sort_memory(text_path: str) -> str:
    """lmplz's sorting memory (-S): 16x the text, at least 64 MB, at most 20% of RAM (more
    spills to -T). A fixed 20% costs ~1.5 s and 1 GB per call even on a 120-line seed."""
    wanted_mb = max(64, 16 * os.path.getsize(text_path) // 2**20)
    try:
        ram_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError):
        return f"{wanted_mb}M"
    return f"{wanted_mb}M" if wanted_mb < ram_mb // 5 else "20%"


def train_lm(
    lines: Iterable[str],
    order: int,
    out_path: str,
    *,
    tools_dir: str | None = None,
    trainer: Trainer = "auto",
) -> str:
    """Train an `order`-gram LM on tokenized lines (`lm_tokens`) and write it to out_path.

    trainer="lmplz": KenLM (modified Kneser-Ney; --discount_fallback so that a corpus of a
    few hundred lines works too), then build_binary; the tools are looked up in tools_dir, then
    in VENV_BIN (next to sys.executable), then on PATH. trainer="varikn": VariKN's
    Kneser-Ney growing (`_train_varikn`). "auto": lmplz where found, else VariKN.
    The file at out_path is a KenLM binary, or an ARPA file when build_binary is missing;
    `load_lm` reads either. Blank lines are skipped; none left raises ValueError.
    Returns out_path, written whole or not at all.
    """
    if not 2 <= order <= MAX_ORDER:  # KenLM's binary format needs bigrams at least
        raise ValueError(f"train_lm: order must be 2..{MAX_ORDER}, got {order}")
    if trainer not in ("auto", "lmplz", "varikn"):
        raise ValueError(f"train_lm: trainer must be auto, lmplz or varikn, got {trainer!r}")
    lmplz = _find_tool("lmplz", tools_dir) if trainer != "varikn" else None
    if trainer == "lmplz" and lmplz is None:
        raise FileNotFoundError("train_lm: lmplz not found (tools_dir, venv bin, PATH)")
    build_binary = _find_tool("build_binary", tools_dir)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sluice-lm-", dir=out.parent) as tmp:
        text, arpa = os.path.join(tmp, "train.txt"), os.path.join(tmp, "lm.arpa")
        # VariKN wants the sentence boundaries in the text; lmplz adds its own.
        bounds = ("", "\n") if lmplz else ("<s> ", " </s>\n")
        n_lines = 0
        with open(text, "w", encoding="utf-8") as f:
            for line in lines:
                if line.strip():
                    f.write(f"{bounds[0]}{line.strip()}{bounds[1]}")
                    n_lines += 1
        if n_lines == 0:
            raise ValueError("train_lm: empty corpus (no non-blank line to train on)")
        if lmplz:
            log.info("train_lm: %d lines, %d-gram, trainer lmplz (%s)", n_lines, order, lmplz)
            _run([lmplz, "-o", str(order), "--discount_fallback", "-S", sort_memory(text),
                  "-T", tmp, "--text", text, "--arpa", arpa])  # fmt: skip
        else:
            why = "asked" if trainer == "varikn" else "no lmplz found"
            log.info("train_lm: %d lines, %d-gram, trainer varikn (%s)", n_lines, order, why)
            _train_varikn(text, order, arpa)
        part = os.path.join(tmp, "lm.out")
        if build_binary:
            _run([build_binary, arpa, part])
        else:
            log.info("train_lm: no build_binary, %s stays an ARPA file", out_path)
            os.replace(arpa, part)
        os.replace(part, out)
    return out_path


# Run in a child process: VariKN's C++ calls exit() on some errors and prints its progress on
# the process's stderr; neither should reach a Spark driver.
_VARIKN = """
import sys, varikn
text, order, raw = sys.argv[1], int(sys.argv[2]), sys.argv[3]
vg = varikn.VarigramTrainer(True, False)  # modified Kneser-Ney: 3 discounts an order
vg.set_datacost_scale(float(sys.argv[4]))
vg.set_max_order(order)
vg.initialize(text, 0, 0, -1, "", "<s>", False, "")  # leave-one-out discounts, <s> resets
vg.grow(1)
vg.write_file(raw, True)
"""
# VariKN's growing threshold (its -D; lower keeps more n-grams). On 45k news lines 0.01 gave
# the lowest held-out cross-entropy at orders 3 and 5 (0.001: 2x the n-grams, 0.03 bits worse;
# 0.05: 0.4 bits worse).
VARIKN_DSCALE = 0.01


def _train_varikn(text: str, order: int, arpa: str) -> None:
    """VariKN: grow a Kneser-Ney model up to `order` on `<s> ... </s>` lines; ARPA for KenLM.

    VariKN separates an ARPA line's fields with spaces and calls the unknown word <UNK>;
    KenLM's reader needs tabs and <unk> (or it gives unknown words log10 p = -100).
    """
    raw = arpa + ".varikn"
    _run([sys.executable, "-c", _VARIKN, text, str(order), raw, str(VARIKN_DSCALE)])
    with open(raw, encoding="utf-8") as src, open(arpa, "w", encoding="utf-8") as dst:
        n = 0  # the order of the section being read; 0 in the header
        for line in src:
            fields = line.split()
            if line.startswith("\\"):
                m = re.fullmatch(r"\\(\d+)-grams:", line.strip())
                n = int(m.group(1)) if m else 0
            elif n and fields:
                words = ["<unk>" if w == "<UNK>" else w for w in fields[1 : 1 + n]]
                line = "\t".join([fields[0], " ".join(words), *fields[1 + n :]]) + "\n"
            dst.write(line)
    os.remove(raw)


_MODELS: dict[str, kenlm.Model] = {}


def load_lm(path: str) -> kenlm.Model:
    """The KenLM model at path (binary or ARPA), loaded once per process and then reused.

    Keyed by absolute path: a model retrained to the same path is not reloaded by a process
    that already holds it, so write a new model under a new name.
    """
    key = os.path.abspath(path)
    model = _MODELS.get(key)
    if model is None:
        import kenlm  # the score extra (ufal-kenlm); imported only where a model is used

        model = _MODELS[key] = kenlm.Model(key)
    return model


def cross_entropy(model: kenlm.Model, tokens: str) -> float:
    """Per-token cross-entropy of `tokens` (an lm_tokens string) in bits, </s> counted.

    -log2 P(tokens </s> | <s>) / (n_tokens + 1). NaN for an empty token string.
    """
    n = len(tokens.split())
    if n == 0:
        return math.nan
    return -model.score(tokens, bos=True, eos=True) * LOG2_10 / (n + 1)
