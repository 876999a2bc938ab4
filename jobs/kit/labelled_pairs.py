"""Pairs read from the user's files outside Spark: a Moses file pair (a scorer's trusted
pairs, a mixture's eval sets) and human-labelled `src<TAB>tgt<TAB>label` lines
(jobs/train_pair_score.py, jobs/train_cross_encoder.py, jobs/mix.py). Errors name the file
(and the line)."""

from __future__ import annotations

from jobs.kit.errors import InputError


def read_moses(src: str, tgt: str) -> list[tuple[str, str]]:
    """The file pair's lines, in order (empty pairs kept: they mark a document's gaps; a
    byte-order mark dropped); the files must line up."""
    sides = []
    for path in (src, tgt):
        try:
            with open(path, encoding="utf-8-sig") as f:
                sides.append(f.read().splitlines())
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except UnicodeDecodeError as err:
            raise InputError(f"{path}: not UTF-8 ({err.reason} at byte {err.start})") from None
    if len(sides[0]) != len(sides[1]):
        raise InputError(f"{src} has {len(sides[0])} lines, {tgt} {len(sides[1])}: not a pair")
    return list(zip(*sides, strict=True))


VALID_LABELS = frozenset({"v", "valid", "1", "good", "yes", "true"})


def read_labelled(path: str) -> list[tuple[str, str, int, str]]:
    """(src, tgt, 1 valid / 0 not, label) of a `src<TAB>tgt<TAB>label` file; a line without
    both sides and a label is an error naming its line."""
    rows = []
    try:
        with open(path, encoding="utf-8", newline="\n") as f:
            for number, line in enumerate(f, 1):
                fields = line.rstrip("\r\n").split("\t")
                if len(fields) < 3 or not (fields[0].strip() and fields[1].strip()
                                           and fields[2].strip()):
                    raise InputError(f"{path}:{number}: expected src<TAB>tgt<TAB>label")
                label = fields[2].strip()
                rows.append((fields[0], fields[1], int(label.lower() in VALID_LABELS), label))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 (byte {err.start})") from None
    return rows


def need_both_classes(rows: list[tuple[str, str, int, str]], what: str) -> None:
    """Labelled pairs that are all valid or all bad cannot rank a model: said before Spark
    starts, not after a whole training run."""
    if not rows:
        raise InputError(f"{what}: no labelled pairs")
    if len({valid for _, _, valid, _ in rows}) < 2:
        raise InputError(f"{what}: every pair is {'valid' if rows[0][2] else 'bad'}: "
                         "labelled pairs need both valid and bad ones")
