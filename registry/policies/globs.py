"""Repository globs and byte sizes as the governance rules spell them (pure, no Django).

A glob matches a whole repository name: ``*`` is any run of characters within one path component,
``**`` any run across components, ``?`` one character other than ``/``, ``[a-c]`` and ``[!a-c]``
one character (never ``/``) of or not of a set; everything else is literal. So ``team/*`` holds
``team/app`` but not ``team/app/debug``, which ``team/**`` holds too. The governance rules and the
[[notifications]] endpoints read ``repositories`` with this one function.

The regular expression a glob becomes is written in the subset that Python's ``re`` and
PostgreSQL's ``~`` read alike, so the database can select the repositories of a rule.
"""
from __future__ import annotations

import math
import re

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789._-/")
_GLOB_CHARS = set("*?[]!")

UNITS = {
    "B": 1,
    "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4, "PB": 1000**5,
    "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4, "PiB": 1024**5,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def glob_regex(glob: str) -> str:
    """The anchored regular expression of ``glob``; ValueError saying what is wrong with it."""
    if not glob:
        raise ValueError("empty glob")
    bad = sorted({c for c in glob if c not in _NAME_CHARS and c not in _GLOB_CHARS})
    if bad:
        raise ValueError(f"{''.join(bad)!r} cannot occur in a repository name (lower case letters, "
                         "digits, . _ - and /)")
    if glob.startswith("/") or glob.endswith("/") or "//" in glob:
        raise ValueError("a repository name has no empty component (no leading, trailing or double /)")
    if "***" in glob:
        raise ValueError("*** means nothing: * within a component, ** across them")
    out, i = ["^"], 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = glob.find("]", i + 1)
            if end < 0:
                raise ValueError(f"unclosed [ at position {i + 1}")
            body = glob[i + 1:end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            if (not body or any(c in _GLOB_CHARS or c == "/" for c in body)
                    or body.startswith("-") or body.endswith("-")):
                raise ValueError(f"bad character set {glob[i:end + 1]!r} (a set is of characters other than /)")
            # A set matches one character within a component, as ? does: a negated one never /.
            out.append(f"[^/{body}]" if negate else f"[{body}]")
            i = end + 1
        elif char in "]!":
            raise ValueError(f"unexpected {char!r} at position {i + 1}")
        else:
            out.append(re.escape(char) if char in "." else char)
            i += 1
    out.append("$")
    pattern = "".join(out)
    re.compile(pattern)  # a range such as [z-a] is refused here
    return pattern


def parse_size(text: str) -> int:
    """``"50GiB"``, ``"1.5 TB"``, ``"1048576"`` -> bytes; ValueError naming the problem."""
    if text.strip().startswith("-"):
        raise ValueError(f"must not be negative, got {text!r}")
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"expected a size such as \"50GiB\" or \"500MB\", got {text!r}")
    number, unit = match.groups()
    if unit and unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r} in {text!r} (one of {', '.join(UNITS)})")
    value = float(number) * UNITS[unit or "B"]
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"expected at least 1 byte, got {text!r}")
    return int(value)


def format_size(value: int) -> str:
    """1610612736 -> "1.5 GiB" (exact below 1 KiB)."""
    amount = float(value)
    if abs(amount) < 1024:
        return f"{value} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        amount /= 1024
        if abs(amount) < 1024 or unit == "PiB":
            return f"{amount:.1f} {unit}".replace(".0 ", " ")
    raise AssertionError("unreachable")
