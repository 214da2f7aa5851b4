"""Arrays of tables in the configuration ([[proxy]], [[retention]], ...): each entry's keys with their
types and defaults, required keys, SVC_<TABLE>_<N>_<KEY> overrides, and errors naming the entry."""
from __future__ import annotations

from pathlib import Path

import pytest

from regsite import config


@pytest.fixture(autouse=True)
def mirrors(monkeypatch) -> None:
    def unique_prefixes(entries: list[dict]) -> None:
        seen = set()
        for index, entry in enumerate(entries):
            if entry["prefix"] in seen:
                raise config.ConfigError(f"{config.entry_name('mirror', index, entry, 'prefix')} prefix: "
                                         "used by an earlier entry")
            seen.add(entry["prefix"])

    monkeypatch.setitem(config.LISTS, "mirror", {
        "prefix": config.Required(str), "url": config.Required(str), "password": "",
        "ttl": 300, "tags": [], "headers": {}, "enabled": True,
    })
    monkeypatch.setitem(config.LIST_VALIDATORS, "mirror", unique_prefixes)


def _load(tmp_path: Path, text: str, **env: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return config.load({"SVC_CONFIG": str(path), **env})


def _refused(tmp_path: Path, text: str, **env: str) -> str:
    with pytest.raises(config.ConfigError) as caught:
        _load(tmp_path, text, **env)
    return str(caught.value)


def test_it_reads_entries_with_defaults_filled_in(tmp_path) -> None:
    cfg = _load(tmp_path, """
[[mirror]]
prefix = "hub"
url = "https://registry-1.docker.io"
tags = ["^v1$"]
headers = { Authorization = "Bearer x" }

[[mirror]]
prefix = "ghcr"
url = "https://ghcr.io"
ttl = 60
""")
    first, second = cfg["mirror"]
    assert first == {"prefix": "hub", "url": "https://registry-1.docker.io", "password": "", "ttl": 300,
                     "tags": ["^v1$"], "headers": {"Authorization": "Bearer x"}, "enabled": True}
    assert (second["prefix"], second["ttl"], second["tags"]) == ("ghcr", 60, [])
    second["tags"].append("x")
    assert config.LISTS["mirror"]["tags"] == []  # each entry has its own list


def test_it_has_no_entries_without_the_table(tmp_path) -> None:
    assert _load(tmp_path, "")["mirror"] == []


def test_the_environment_overrides_a_key_of_one_entry(tmp_path) -> None:
    text = '[[mirror]]\nprefix = "hub"\nurl = "u"\n[[mirror]]\nprefix = "q"\nurl = "v"\n'
    cfg = _load(tmp_path, text, SVC_MIRROR_1_PASSWORD="s3cret", SVC_MIRROR_0_TAGS="a, b")
    assert cfg["mirror"][1]["password"] == "s3cret" and cfg["mirror"][0]["tags"] == ["a", "b"]
    assert _refused(tmp_path, text, SVC_MIRROR_2_PASSWORD="x").startswith(
        "SVC_MIRROR_2_PASSWORD: there is no [[mirror]] #3")
    assert _refused(tmp_path, text, SVC_MIRROR_0_PASWORD="x").startswith("SVC_MIRROR_0_PASWORD: expected")


@pytest.mark.parametrize("text, message", [
    ('[[mirror]]\nurl = "u"\n', "[[mirror]] #1 prefix: required"),
    ('[[mirror]]\nprefix = "hub"\nurl = "u"\nttl = "soon"\n', '[[mirror]] #1 "hub" ttl: expected an integer'),
    ('[[mirror]]\nprefix = "hub"\nurl = "u"\ntags = "v1"\n', '[[mirror]] #1 "hub" tags: expected a list'),
    ('[[mirror]]\nprefix = "hub"\nurl = "u"\nheaders = { A = 1 }\n', '[[mirror]] #1 "hub" headers: expected a table'),
    ('[[mirror]]\nprefix = "hub"\nurl = "u"\ncolour = "red"\n', '[[mirror]] #1 "hub" colour: unknown key'),
    ('[mirror]\nprefix = "hub"\n', "[[mirror]]: expected an array of tables"),
    ('[[mirror]]\nprefix = "a"\nurl = "u"\n[[mirror]]\nprefix = "a"\nurl = "v"\n',
     '[[mirror]] #2 "a" prefix: used by an earlier entry'),
])
def test_it_refuses_a_bad_entry_naming_it_and_the_key(tmp_path, text, message) -> None:
    assert _refused(tmp_path, text).startswith(message)
