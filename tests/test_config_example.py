"""config.example.toml lists every configuration key with its default."""
from __future__ import annotations

import re
from pathlib import Path

import tomli

from regsite import config

EXAMPLE = Path(__file__).resolve().parents[1] / "config.example.toml"
# An array of tables ([[proxy]], ...) is shown commented out, one "#" without a space before each
# of its lines, so that copying the file configures none.
_COMMENTED_SETTING = re.compile(r"^#(?=\[\[|[a-z_]+ = )", re.MULTILINE)


def test_it_lists_every_key_with_its_default() -> None:
    with EXAMPLE.open("rb") as fh:
        example = tomli.load(fh)
    assert example == config.DEFAULTS


def test_it_shows_every_key_of_each_array_of_tables() -> None:
    shown = tomli.loads(_COMMENTED_SETTING.sub("", EXAMPLE.read_text()))
    for table, schema in config.LISTS.items():
        assert shown.get(table), f"config.example.toml shows no [[{table}]] entry"
        entry = shown[table][0]
        assert set(entry) == set(schema), f"[[{table}]]: {set(entry) ^ set(schema)}"
        for key, default in schema.items():
            if not isinstance(default, config.Required):
                assert entry[key] == default, f"[[{table}]] {key}"


def test_it_loads_as_a_valid_configuration() -> None:
    assert config.load({"SVC_CONFIG": str(EXAMPLE)}) == config.DEFAULTS | {table: [] for table in config.LISTS}


def test_it_refuses_a_misspelt_environment_key() -> None:
    import pytest

    with pytest.raises(config.ConfigError, match="SVC_REGISTRY_MAX_MANIFEST"):
        config.load({"SVC_REGISTRY_MAX_MANIFEST": "10"})
