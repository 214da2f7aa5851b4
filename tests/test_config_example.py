"""config.example.toml lists every configuration key with its default."""
from __future__ import annotations

from pathlib import Path

import tomli

from regsite import config

EXAMPLE = Path(__file__).resolve().parents[1] / "config.example.toml"


def test_it_lists_every_key_with_its_default() -> None:
    with EXAMPLE.open("rb") as fh:
        example = tomli.load(fh)
    assert example == config.DEFAULTS


def test_it_loads_as_a_valid_configuration() -> None:
    assert config.load({"SVC_CONFIG": str(EXAMPLE)}) == config.defaults()


def test_it_refuses_a_misspelt_environment_key() -> None:
    import pytest

    with pytest.raises(config.ConfigError, match="SVC_REGISTRY_MAX_MANIFEST"):
        config.load({"SVC_REGISTRY_MAX_MANIFEST": "10"})


def commented_entry(table: str) -> dict:
    """The commented-out ``# [[table]]`` example entry of config.example.toml, parsed."""
    lines = EXAMPLE.read_text().splitlines()
    start = lines.index(f"# [[{table}]]")
    block = []
    for line in lines[start:]:
        if not line.startswith("#"):
            break
        block.append(line[2:])
    return tomli.loads("\n".join(block))[table][0]


def test_it_shows_every_key_of_each_array_of_tables_with_its_default() -> None:
    for table, schema in config.LISTS.items():
        entry = commented_entry(table)
        assert set(entry) == set(schema), table
        for key, default in schema.items():
            if not isinstance(default, config.Required):
                assert entry[key] == default, (table, key)
