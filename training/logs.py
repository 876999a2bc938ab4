"""Training logs: plain CSV files (one row per logged step / evaluation) that a resumed run
truncates back to its checkpoint, plus progress lines on stderr."""

from __future__ import annotations

import csv
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
