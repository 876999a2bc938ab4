"""Training logs: plain CSV files (one row per logged step / evaluation) that a resumed run
truncates back to its checkpoint, plus progress lines on stderr."""

from __future__ import annotations

import csv
import struct
import sys
import time
from pathlib import Path
from typing import Any


class CsvLog:
    def __init__(self, path: str | Path, fields: list[str]):
        self.path = Path(path)
        self.fields = fields

    def truncate_after(self, step: int) -> None:
        """Drop rows logged after `step` (a resumed run repeats them)."""
        if not self.path.exists():
            return
        with self.path.open(newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.DictReader(fh) if int(r["step"]) <= step]
        self._write(rows)

    def _write(self, rows: list[dict[str, Any]]) -> None:
        with self.path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=self.fields)
            w.writeheader()
            w.writerows(rows)

    def append(self, row: dict[str, Any]) -> None:
        new = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=self.fields)
            if new:
                w.writeheader()
            w.writerow({k: row.get(k, "") for k in self.fields})

    def read(self) -> list[dict[str, str]]:
        if not self.path.exists():
            return []
        with self.path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))


def fmt_duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- TensorBoard event files, written without tensorboard/tensorflow ---------------------------
# Record framing (TFRecord): uint64 length, masked crc32c(length), payload, masked crc32c(payload).
# Payload: a tensorflow.Event protobuf, encoded by hand (wall_time=1 double, step=2 varint,
# file_version=3 string, summary=5 {value=1 {tag=1 string, simple_value=2 float}}).

def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:
    return _varint((num << 3) | 2) + _varint(len(payload)) + payload


def encode_event(wall_time: float, step: int | None = None, file_version: str | None = None,
                 scalars: dict[str, float] | None = None) -> bytes:
    msg = b"\x09" + struct.pack("<d", wall_time)
    if step is not None:
        msg += b"\x10" + _varint(step)
    if file_version is not None:
        msg += _field(3, file_version.encode())
    if scalars:
        values = b"".join(
            _field(1, _field(1, tag.encode()) + b"\x15" + struct.pack("<f", float(v)))
            for tag, v in scalars.items()
        )
        msg += _field(5, values)
    return msg


class TensorBoardLog:
    """Scalars to `<dir>/events.out.tfevents.<time>.<host>`, readable by TensorBoard."""

    def __init__(self, directory: str | Path):
        import socket

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.path = d / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
        self._write(encode_event(time.time(), file_version="brain.Event:2"))

    def _write(self, payload: bytes) -> None:
        header = struct.pack("<Q", len(payload))
        with self.path.open("ab") as fh:
            fh.write(header + struct.pack("<I", masked_crc32c(header)) + payload
                     + struct.pack("<I", masked_crc32c(payload)))

    def scalars(self, step: int, values: dict[str, float]) -> None:
        clean = {k: float(v) for k, v in values.items() if v not in ("", None)}
        if clean:
            self._write(encode_event(time.time(), step=step, scalars=clean))
