"""The OCI grammar for repository names and tags."""
from __future__ import annotations

import re

_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
NAME_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
TAG_RE = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$")
MAX_NAME_LENGTH = 255


def is_valid_name(name: str) -> bool:
    return len(name) <= MAX_NAME_LENGTH and NAME_RE.fullmatch(name) is not None


def is_valid_tag(tag: str) -> bool:
    return TAG_RE.fullmatch(tag) is not None
