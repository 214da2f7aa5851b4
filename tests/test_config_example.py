"""config.example.toml lists every configuration key with its default, and shows an example entry of
each array of tables ([[retention]], ...) with every key of it (at its default where it has one),
commented out."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomli

from regsite import config

EXAMPLE = Path(__file__).resolve().parents[1] / "config.example.toml"


def _commented_entries() -> dict[str, str]:
    """table -> the TOML of its commented-out example entry (``# [[table]]`` and the ``# key = ...``
    lines after it, up to the first blank line)."""
    entries: dict[str, str] = {}
    for block in EXAMPLE.read_text().split("\n\n"):
        lines = block.strip().splitlines()
        head = re.fullmatch(r"# \[\[(\w+)\]\]", lines[0]) if lines else None
        if head:
            body = [line[2:] for line in lines if line.startswith("# ") and not line.startswith("# #")]
            entries[head.group(1)] = "\n".join(body) + "\n"
    return entries


def test_it_lists_every_key_with_its_default() -> None:
    with EXAMPLE.open("rb") as fh:
        example = tomli.load(fh)
    assert example == config.DEFAULTS


def test_it_loads_as_a_valid_configuration() -> None:
    assert config.load({"SVC_CONFIG": str(EXAMPLE)}) == {**config.DEFAULTS, **{t: [] for t in config.LISTS}}


def test_it_shows_every_key_of_every_array_of_tables(tmp_path) -> None:
    entries = _commented_entries()
    assert set(entries) == set(config.LISTS)
    for table, text in entries.items():
        entry = tomli.loads(text)[table][0]
        assert set(entry) == set(config.LISTS[table]), table
        for key, default in config.LISTS[table].items():
            if not isinstance(default, config.Required):
                assert entry[key] == default, f"[[{table}]] {key}: the example shows a value other than the default"
    path = tmp_path / "config.toml"
    path.write_text("".join(entries.values()))
    loaded = config.load({"SVC_CONFIG": str(path)})
    assert all(len(loaded[table]) == 1 for table in config.LISTS)


def test_it_refuses_a_misspelt_environment_key() -> None:
    with pytest.raises(config.ConfigError, match="SVC_REGISTRY_MAX_MANIFEST"):
        config.load({"SVC_REGISTRY_MAX_MANIFEST": "10"})
