"""MkDocs hooks: the configuration reference is generated from the code, and pages are checked.

``<!-- config-reference -->`` in a page becomes one table per configuration table: every key of
``regsite.config.DEFAULTS`` and of each array of tables (``LISTS``), its default, its environment
variable, and what it does, taken from the comments above the key in config.example.toml (which a
test holds to the same keys and defaults). Nothing is written by hand, so it cannot drift.

Every page is also checked for an unclosed code fence, which would swallow the rest of the page
(headings included) into one code block; the warning fails ``mkdocs build --strict``.
"""
from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from regsite import config  # noqa: E402  (after the project directory is importable)

log = logging.getLogger("mkdocs.plugins.svc_registry")
MARKER = "<!-- config-reference -->"
_TABLE = re.compile(r"^(?:# )?\[\[?(\w+)\]\]?\s*$")
_KEY = re.compile(r"^(\w+)\s*=\s*(.*?)\s*(?:#\s*(.*))?$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def descriptions(example: str) -> dict[tuple[str, str], str]:
    """(table, key) -> what config.example.toml says of it: the comment above the key (shared by a
    run of keys with no blank line between them, as ``workers`` and ``threads`` share one) and the
    comment after it on its line. The arrays of tables are shown there commented out, so their keys
    are ``# key = ...`` lines and their comments ``# # ...`` ones."""
    found: dict[tuple[str, str], str] = {}
    table, array, comment, shared = "", False, [], ""
    for raw in example.splitlines():
        line = raw.rstrip()
        head = _TABLE.match(line)
        if head:
            table, array, comment, shared = head.group(1), line.lstrip("# ").startswith("[["), [], ""
            continue
        key = _KEY.match(line[2:] if array and line.startswith("# ") and not line.startswith("# #") else line)
        if key and table and (array or not line.startswith("#")):
            name, _value, trailing = key.groups()
            shared = " ".join(comment) or shared
            found[(table, name)] = " ".join(filter(None, [shared, trailing])).strip()
            comment = []
            continue
        if line.startswith("#"):
            comment.append(re.sub(r"^#\s*(?:#\s*)?", "", line))
            continue
        comment, shared = [], ""
    return found


def _shown(value: Any) -> str:
    if isinstance(value, config.Required):
        return "required"
    return f"`{json.dumps(value)}`" if not isinstance(value, bool) else f"`{str(value).lower()}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _said(notes: dict[tuple[str, str], str], table: str, key: str) -> str:
    """A key's description, or a pointer to the key before it that shares the same comment."""
    text = notes.get((table, key), "")
    keys = [name for (tab, name) in notes if tab == table]
    earlier = keys[:keys.index(key)] if key in keys else []
    first = next((name for name in earlier if notes[(table, name)] == text), None) if text else None
    return f"See `{first}`." if first else _cell(text)


def reference() -> str:
    notes = descriptions((ROOT / "config.example.toml").read_text())
    out: list[str] = []
    for table, keys in config.DEFAULTS.items():
        out += [f"### `[{table}]`", "", "| Key | Default | Environment | Meaning |", "|---|---|---|---|"]
        for key, default in keys.items():
            env = f"SVC_{table.upper()}_{key.upper()}"
            out.append(f"| `{key}` | {_shown(default)} | `{env}` | {_said(notes, table, key)} |")
        out.append("")
    for table, keys in config.LISTS.items():
        out += [f"### `[[{table}]]`", "",
                f"An array of tables: none by default, each entry one `[[{table}]]` table. Entry *n* "
                f"(from 0) can be set from the environment as `SVC_{table.upper()}_<n>_<KEY>`.", "",
                "| Key | Default | Meaning |", "|---|---|---|"]
        for key, default in keys.items():
            out.append(f"| `{key}` | {_shown(default)} | {_said(notes, table, key)} |")
        out.append("")
    return "\n".join(out)


def unclosed_fence(markdown: str) -> int | None:
    """The line (from 1) of a code fence that is never closed, if any."""
    opened: tuple[int, str] | None = None
    for number, line in enumerate(markdown.splitlines(), 1):
        fence = _FENCE.match(line)
        if not fence:
            continue
        if opened is None:
            opened = (number, fence.group(1))
        elif fence.group(1) == opened[1] and line.strip() == fence.group(1):
            opened = None
    return opened[0] if opened else None


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    line = unclosed_fence(markdown)
    if line is not None:
        log.warning("%s: the code fence opened on line %d is never closed", page.file.src_path, line)
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, reference())
    return markdown
