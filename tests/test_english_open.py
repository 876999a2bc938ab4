"""The open English text the shipped English LM is trained from (conf/lm/en-open.txt.gz,
conf/lm/README.md) and the script that rebuilds it from ../shared (scripts/build_english_open.py),
run here on a small tree laid out as ../shared is, of lines from the committed file."""

from __future__ import annotations

import gzip
import html
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMITTED = REPO / "conf/lm/en-open.txt.gz"


def committed_lines() -> list[str]:
    return gzip.decompress(COMMITTED.read_bytes()).decode("utf-8").splitlines()


def test_the_committed_text_is_distinct_unescaped_english_lines() -> None:
    lines = committed_lines()
    assert len(lines) == 17_439 and len(set(lines)) == len(lines)
    assert all(line == " ".join(line.split()) and line for line in lines)
    assert not [line for line in lines if "&apos;" in line or "&quot;" in line]
    # FLORES-200 devtest's first English line opens it (conf/lm/README.md's order)
    assert lines[0].startswith('"We now have 4-month-old mice that are non-diabetic')
    # the labelled en-de dev set bench/crawl/dev_set.py judges pair_score on is drawn from the same
    # toy data: none of its English is in the LM's text
    dev = (REPO / "tests/data/labelled/opennmt-toy-ende-400.tsv").read_text(encoding="utf-8")
    english = {" ".join(html.unescape(row.split("\t")[3]).split())
               for row in dev.splitlines()[1:]}
    assert len(english) == 400 and not english & set(lines)


def shared_tree(root: Path, lines: list[str]) -> Path:
    bitext = root / "data/bitext"
    (bitext / "tico19/en-ru").mkdir(parents=True)
    (bitext / "tico19/en-zh").mkdir(parents=True)
    (bitext / "opennmt-toy-ende/data").mkdir(parents=True)
    (bitext / "multiway_flores200_devtest.tsv").write_text(
        f"eng\tzho_Hans\n{lines[0]}\t他补充道\n{lines[1]}\t。\n", encoding="utf-8")
    (bitext / "multiway_ntrex128.tsv").write_text(
        f"eng_src\tdeu\n{lines[1]}\tdoppelt\n", encoding="utf-8")  # FLORES's line again
    for pair in ("en-ru", "en-zh"):  # TICO-19's English is the same in both
        (bitext / f"tico19/{pair}/tico19-test.en").write_text(f"{lines[2]}\n",
                                                             encoding="utf-8")
    toy = bitext / "opennmt-toy-ende/data"
    dev = (REPO / "tests/data/labelled/opennmt-toy-ende-400.tsv").read_text(encoding="utf-8")
    held = dev.splitlines()[1].split("\t")[3]  # a dev-set line: never in the LM's text
    (toy / "src-train.txt").write_text(f"{held}\nParliament &apos;s  prerogative\n\n",
                                       encoding="utf-8")
    (toy / "src-val.txt").write_text(f"{lines[3]}\n", encoding="utf-8")
    (toy / "src-test.txt").write_text("&quot; Two soldiers came up to me\n", encoding="utf-8")
    return root


def build(shared: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts/build_english_open.py"),
                           "--shared", str(shared), "--out", str(out)],
                          capture_output=True, text=True, check=True)


def test_the_build_keeps_each_line_once_in_source_order_and_undoes_escapes(
        tmp_path: Path) -> None:
    lines = committed_lines()
    shared = shared_tree(tmp_path / "shared", lines)
    out = tmp_path / "en.txt.gz"
    assert "6 lines" in build(shared, out).stdout
    got = gzip.decompress(out.read_bytes()).decode("utf-8").splitlines()
    assert got == [lines[0], lines[1], lines[2], "Parliament 's prerogative", lines[3],
                   '" Two soldiers came up to me']
    first = out.read_bytes()
    build(shared, out)
    assert out.read_bytes() == first  # the same text, the same bytes: no churn in git
