"""The TensorBoard event writer (no tensorboard package needed): CRC-32C, record framing and
the Event protobuf fields, read back by an independent decoder."""

from __future__ import annotations

import struct
from pathlib import Path

from training.logs import CsvLog, TensorBoardLog, crc32c, masked_crc32c


def read_varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def parse(buf: bytes) -> dict[int, list]:
    """Minimal protobuf decoder: field number -> list of raw values."""
    out: dict[int, list] = {}
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            ln, i = read_varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        out.setdefault(num, []).append(v)
    return out


def read_records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    recs, i = [], 0
    while i < len(data):
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[i + 8:i + 12])[0] == masked_crc32c(header)
        payload = data[i + 12:i + 12 + n]
        assert struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0] == masked_crc32c(payload)
        recs.append(payload)
        i += 16 + n
    return recs


def test_crc32c_known_vector() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C (Castagnoli) check value
    assert crc32c(b"") == 0


def test_event_file_round_trip(tmp_path: Path) -> None:
    tb = TensorBoardLog(tmp_path)
    tb.scalars(7, {"train/loss": 3.25, "dev/bleu": 12.5})
    tb.scalars(300, {"train/loss": 2.0, "dev/chrf": ""})  # empty values are skipped
    (path,) = tmp_path.glob("events.out.tfevents.*")
    recs = [parse(r) for r in read_records(path)]
    assert recs[0][3] == [b"brain.Event:2"]
    assert [recs[1][2][0], recs[2][2][0]] == [7, 300]  # steps
    values = parse(recs[1][5][0])[1]
    got = {}
    for v in values:
        f = parse(v)
        got[f[1][0].decode()] = struct.unpack("<f", f[2][0])[0]
    assert got == {"train/loss": 3.25, "dev/bleu": 12.5}
    assert len(parse(recs[2][5][0])[1]) == 1
    assert struct.unpack("<d", recs[1][1][0])[0] > 1.6e9  # wall time


def test_csv_log_truncates_after_a_step(tmp_path: Path) -> None:
    log = CsvLog(tmp_path / "x.csv", ["step", "loss"])
    for s in (1, 2, 3):
        log.append({"step": s, "loss": s / 10})
    log.truncate_after(2)
    assert [r["step"] for r in log.read()] == ["1", "2"]
