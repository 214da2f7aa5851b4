"""Plain-text tables for management commands: columns padded to their widest cell, the last column
(free text such as a description) left unpadded."""
from __future__ import annotations

from typing import Sequence


def lines(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([cell.ljust(width) for cell, width in zip(row, widths, strict=False)] + [row[-1]]).rstrip()
            for row in rows]
