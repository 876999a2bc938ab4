"""Chinese normalization and tokenization on real Tatoeba / Anki / news lines (tests/data).

OpenCC t2s on the lines Tatoeba labels cmn_Hant, full-width -> half-width with Chinese
punctuation kept next to Chinese, and jieba word counts (the "word" of the zh rules).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from udfs.chinese import fullwidth_to_halfwidth, to_simplified
from udfs.sides import SideOptions, normalize_text
from udfs.tokens import tokenize

DATA = Path(__file__).resolve().parent / "data"
FULLWIDTH_ASCII = re.compile("[\uff01-\uff5e\u3000]")


def varieties(label: str) -> list[str]:
    with open(DATA / "tatoeba-zho-varieties.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    return [text for lab, text in rows if lab == label]


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def anki_zh() -> list[str]:
    with gzip.open(DATA / "anki-cmn-zh-en.tsv.gz", "rt", encoding="utf-8") as f:
        return [line.split("\t")[0] for line in f.read().splitlines()]


# --- traditional -> simplified -------------------------------------------------------------


def test_t2s_converts_the_cmn_hant_lines_completely() -> None:
    hant = varieties("cmn_Hant")
    converted = [to_simplified(t) for t in hant]
    assert len(hant) == 150
    # 132 of the 150 lines contain at least one traditional form (measured); the rest are
    # written with characters that are the same in both scripts (尤其是要有耐心。).
    assert sum(c != t for c, t in zip(converted, hant, strict=True)) == 132
    # Nothing t2s would still change: neither the line nor any single character of it.
    assert all(to_simplified(c) == c for c in converted)
    leftovers = {ch for c in converted for ch in c if to_simplified(ch) != ch}
    assert leftovers == set()
    # Same length: t2s maps character for character on these lines.
    assert [len(c) for c in converted] == [len(t) for t in hant]


@pytest.mark.parametrize(
    ("hant", "hans"),
    [
        ("這投資保證有 6% 的回報。", "这投资保证有 6% 的回报。"),
        ("一鳥在手勝過二鳥在林。", "一鸟在手胜过二鸟在林。"),
        ("根據我的估計，她現在應該在印度了。", "根据我的估计，她现在应该在印度了。"),
        ("吃完晚飯後，我做作業。", "吃完晚饭后，我做作业。"),  # 後 -> 后
        ("箱子裡有蘋果嗎?", "箱子里有苹果吗?"),  # 裡 -> 里, the ASCII ? untouched
        ("美國的小孩聽著這些話長大。", "美国的小孩听著这些话长大。"),  # 著 is kept by t2s
    ],
)
def test_t2s_known_conversions_on_real_lines(hant: str, hans: str) -> None:
    assert hant in varieties("cmn_Hant")
    assert to_simplified(hant) == hans


def test_t2s_phrase_conversion_on_a_real_line() -> None:
    line = next(t for t in varieties("cmn_Hant") if "口腹之慾" in t)
    assert "口腹之欲" in to_simplified(line)  # 慾 -> 欲 in this phrase


def tatoeba_zh(label: str) -> list[str]:
    labels = lines("tatoeba-zh-en.zh.labels")
    return [t for t, lab in zip(lines("tatoeba-zh-en.zh"), labels, strict=True) if lab == label]


def test_t2s_on_the_cmn_hant_lines_of_the_zh_en_corpus() -> None:
    hant = tatoeba_zh("cmn_Hant")
    converted = [to_simplified(t) for t in hant]
    assert len(hant) == 653
    assert sum(c != t for c, t in zip(converted, hant, strict=True)) == 546  # measured
    assert {ch for c in converted for ch in c if to_simplified(ch) != ch} == set()
    line = "如果你想要那把水槍，你必須自己存錢買。我沒有辦法一直買玩具給你。錢不會從我背上長出來。"
    assert line in hant
    assert to_simplified(line) == (
        "如果你想要那把水枪，你必须自己存钱买。我没有办法一直买玩具给你。钱不会从我背上长出来。"
    )


def test_t2s_fixes_traditional_characters_inside_lines_labelled_simplified() -> None:
    changed = {t: to_simplified(t) for t in tatoeba_zh("cmn_Hans") if to_simplified(t) != t}
    # 3 of the 636 lines labelled cmn_Hans are written (partly) in traditional forms.
    assert changed == {
        "彼此必須一輩子努力,才能把感情维系好。": "彼此必须一辈子努力,才能把感情维系好。",
        "湯𡡡想知道我們在這裡做甚麼。": "汤𡡡想知道我们在这里做甚么。",  # U+21861 kept
        "荷蘭的首都是什麽？": "荷兰的首都是什么？",
    }


def test_t2s_leaves_simplified_and_non_chinese_lines_alone() -> None:
    mixed = {  # labelled cmn_Hans, written partly in traditional forms
        "一個醉了的男人在長椅上睡觉。",
        "這之後他與他的母親、兄弟和門徒們一起去了迦百农。",
        "他身上的錢全被強盗搶走了。",
    }
    assert {t for t in varieties("cmn_Hans") if to_simplified(t) != t} == mixed
    hans = [t for t in varieties("cmn_Hans") if t not in mixed]
    assert len(hans) == 147
    assert [to_simplified(t) for t in hans] == hans
    for name in ("tatoeba-zh-en.en", "tatoeba-ru-en.ru", "moses_de.txt"):
        text = lines(name)
        assert [to_simplified(t) for t in text] == text


# --- full-width -> half-width --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ＡＢＣ１２３！", "ABC123!"),
        ("你好！", "你好！"),
        ("你好！ＡＢＣ", "你好！ABC"),
        ("Ｈｅｌｌｏ，ｗｏｒｌｄ！", "Hello,world!"),
        ("ＡＢＣ！！", "ABC!!"),  # a run of punctuation with no Chinese next to it
        ("Ｗｈａｔ？！", "What?!"),
        ("好！！！", "好！！！"),  # the whole run touches 好
        ("什么？！", "什么？！"),
        ("（你好）", "（你好）"),
        ("价格（ＵＳＤ）", "价格（USD）"),  # brackets go by pairs
        ("全角\u3000空格", "全角 空格"),  # ideographic space
        ("他说：“你好。”", "他说：“你好。”"),
        ("１０％，", "10%,"),
        ("「好」！", "「好」！"),
    ],
)
def test_fullwidth_to_halfwidth(text: str, expected: str) -> None:
    assert fullwidth_to_halfwidth(text) == expected


def test_fullwidth_forms_injected_into_real_lines_come_back() -> None:
    table = {cp - 0xFEE0: cp for cp in range(0xFF01, 0xFF5F)}  # ASCII -> full-width
    real = [
        "3个马来西亚侨民与一个菲律宾国民在棉兰老岛达沃市爆炸里被炸死了。",
        "我在书商Maruzen那里买了这本书。",
        "听那些只看CCAV的老百姓进行全球经济的个人分析一直是很有趣的。",
        "Tom 不想让Mary走",  # Anki
        "我乘的火车7点出发，10点到了纽约。",  # Anki
    ]
    zh = lines("tatoeba-zh-en.zh") + anki_zh()
    for line in real:
        assert line in zh
        noisy = re.sub(r"[0-9A-Za-z%]+", lambda m: m.group().translate(table), line)
        assert noisy != line
        assert fullwidth_to_halfwidth(noisy) == line


def test_real_chinese_punctuation_is_kept() -> None:
    zh = lines("tatoeba-zh-en.zh") + anki_zh() + [t for _, t in _all_varieties()]
    with_fullwidth = [t for t in zh if FULLWIDTH_ASCII.search(t)]
    assert len(with_fullwidth) > 1000  # ，？！：； in real Chinese text
    assert [fullwidth_to_halfwidth(t) for t in with_fullwidth] == with_fullwidth


def _all_varieties() -> list[tuple[str, str]]:
    with open(DATA / "tatoeba-zho-varieties.tsv", encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # Real news lines (tests/data/moses_zh.txt): punctuation after Chinese quotes and
        # brackets around Latin text stay Chinese; the per-cent sign becomes ASCII.
        (
            "监视必须“合法、必要且相称”；",
            "监视必须“合法、必要且相称”；",
        ),
        (
            "钱伯斯是个不可知论者，他认为自己的诉讼是“随意的”，“任何人都可以起诉任何人”。",
            "钱伯斯是个不可知论者，他认为自己的诉讼是“随意的”，“任何人都可以起诉任何人”。",
        ),
        (
            "大卫·约翰逊（David Johnson） 牧师是约翰逊神父的儿子以及圣马丁教堂的继任者，"
            "他自豪地将该大钟称之为“穷人的大钟“",
            "大卫·约翰逊（David Johnson） 牧师是约翰逊神父的儿子以及圣马丁教堂的继任者，"
            "他自豪地将该大钟称之为“穷人的大钟“",
        ),
        (
            "这意味着七月的经济情况与之前六月相似，酒吧营业额增长2.8％，但餐厅受到的冲击更为严重。",
            "这意味着七月的经济情况与之前六月相似，酒吧营业额增长2.8%，但餐厅受到的冲击更为严重。",
        ),
    ],
)
def test_fullwidth_on_real_news_lines(line: str, expected: str) -> None:
    news = "\n".join(lines("moses_zh.txt"))
    assert line in news
    assert fullwidth_to_halfwidth(line) == expected


def test_fullwidth_does_not_crash_on_supplementary_private_use_characters() -> None:
    # U+F0000.. once served as placeholders for the kept punctuation: such a character in the
    # input raised IndexError (or became a stray ：) and crashed the side pass.
    line = "你好！\U000f0010ＯＫ"
    assert fullwidth_to_halfwidth(line) == "你好！\U000f0010OK"
    assert fullwidth_to_halfwidth("你好！\U000f0002Ａ") == "你好！\U000f0002A"


def test_side_options_choose_the_steps() -> None:
    model = "models/lid.176.ftz"
    line = "根據我的估計，她現在應該在印度了。ＯＫ！"
    assert normalize_text(line, SideOptions("zh", model)) == "根据我的估计，她现在应该在印度了。OK!"
    off = SideOptions("zh", model, to_simplified=False, fullwidth_to_halfwidth=False)
    assert normalize_text(line, off) == line
    # ja: full-width only (t2s is for Chinese); other languages: neither.
    assert normalize_text(line, SideOptions("ja", model)) == "根據我的估計，她現在應該在印度了。OK!"
    assert normalize_text(line, SideOptions("en", model)) == line


# --- tokens (the "word" of the zh rules) -----------------------------------------------------


@pytest.mark.parametrize(
    ("line", "tokens"),
    [
        ("一點果汁，麻煩你。", ["一点", "果汁", "，", "麻烦", "你", "。"]),
        (
            "2016年是有记录以来最热的一年。",
            ["2016", "年", "是", "有", "记录", "以来", "最热", "的", "一年", "。"],
        ),
        ("吃完晚飯後，我做作業。", ["吃", "完", "晚饭", "后", "，", "我", "做作业", "。"]),
        ("Tom 不想让Mary走", ["Tom", "不想", "让", "Mary", "走"]),  # (Anki) the space is no token
    ],
)
def test_zh_tokens_are_jieba_words(line: str, tokens: list[str]) -> None:
    assert tokenize(to_simplified(line), "zh") == tokens


def test_zh_token_counts_on_the_corpus() -> None:
    zh = [to_simplified(t) for t in tatoeba_zh("cmn_Hans") + tatoeba_zh("cmn_Hant")]
    assert len(zh) == 1289
    counts = [len(tokenize(t, "zh")) for t in zh]
    chars = [len(t.replace(" ", "")) for t in zh]
    # jieba words are 1-2 characters: 1.50 characters per token over the 1289 cmn lines, 7.3
    # tokens a line (measured); every line inside the zh char/word range [1.0, 4.0] of
    # conf/defaults.yaml (the highest is 2.5).
    ratio = sum(chars) / sum(counts)
    assert 1.45 < ratio < 1.55
    assert 6.8 < sum(counts) / len(counts) < 7.8
    assert tokenize("以眼还眼以牙还牙", "zh") == ["以眼还眼", "以牙还牙"]
    assert all(1.0 <= c / n <= 4.0 for c, n in zip(chars, counts, strict=True))
    assert all(not tok.isspace() for t in zh for tok in tokenize(t, "zh"))


def test_other_languages_split_on_whitespace_and_ja_th_on_icu_words() -> None:
    en = "Don't be scared of making mistakes."
    assert en in lines("tatoeba-zh-en.en")
    assert tokenize(en, "en") == ["Don't", "be", "scared", "of", "making", "mistakes."]
    ru = lines("tatoeba-ru-en.ru")[0]
    assert tokenize(ru, "ru") == ru.split(" ")
    # Japanese and Thai have no spaces between words: ICU's dictionary cuts them.
    assert tokenize("日本語 です", "ja") == ["日本語", "です"]
    assert tokenize("赤ちゃんがベビーベッドで寝てるよ。", "ja") == [
        "赤ちゃん", "が", "ベビーベッド", "で", "寝", "てるよ", "。"]
    assert tokenize("ภาษาไทยเป็นภาษาที่ไม่มีการเว้นวรรค", "th") == [
        "ภาษา", "ไทย", "เป็น", "ภาษา", "ที่", "ไม่มี", "การ", "เว้น", "วรรค"]
    assert tokenize("𠮷野家で食べた", "ja")[0] == "𠮷"  # outside the BMP: cut by code point
