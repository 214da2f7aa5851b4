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
    assert config.load({"SVC_CONFIG": str(EXAMPLE)}) == config.DEFAULTS


def test_it_refuses_a_misspelt_environment_key() -> None:
    import pytest

    with pytest.raises(config.ConfigError, match="SVC_REGISTRY_MAX_MANIFEST"):
        config.load({"SVC_REGISTRY_MAX_MANIFEST": "10"})
