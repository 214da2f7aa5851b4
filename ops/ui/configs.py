"""An image's config blob (os, architecture, entrypoint, labels, history), read through the services.

Configs are small JSON documents; anything over MAX_CONFIG_BYTES is not read at all, so a page view
never pulls a large blob into memory.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from registry.services import blobs
from registry.services.exceptions import RegistryError
from registry.services.manifest_format import Descriptor

MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Step:
    created: datetime | None
    created_by: str
    comment: str
    empty_layer: bool
    layer: Descriptor | None  # the layer this step produced, when it produced one


@dataclass(frozen=True)
class ImageConfig:
    os: str = ""
    architecture: str = ""
    variant: str = ""
    created: datetime | None = None
    author: str = ""
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    working_dir: str = ""
    user: str = ""
    exposed_ports: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    history: list[Step] = field(default_factory=list)

    @property
    def platform(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)


@dataclass(frozen=True)
class ConfigResult:
    config: ImageConfig | None
    problem: str = ""  # why there is no config to show


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _moment(value: Any) -> datetime | None:
    try:
        return parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _history(value: Any, layers: list[Descriptor]) -> list[Step]:
    steps, remaining = [], iter(layers)
    for entry in value if isinstance(value, list) else []:
        if not isinstance(entry, dict):
            continue
        empty = entry.get("empty_layer") is True
        steps.append(Step(_moment(entry.get("created")), _text(entry.get("created_by")),
                          _text(entry.get("comment")), empty,
                          None if empty else next(remaining, None)))
    return steps


def parse_config(data: bytes, layers: list[Descriptor]) -> ImageConfig:
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("config is not a JSON object")
    run = _object(doc.get("config"))
    labels = _object(run.get("Labels"))
    ports = _object(run.get("ExposedPorts"))
    return ImageConfig(
        os=_text(doc.get("os")),
        architecture=_text(doc.get("architecture")),
        variant=_text(doc.get("variant")),
        created=_moment(doc.get("created")),
        author=_text(doc.get("author")),
        entrypoint=_strings(run.get("Entrypoint")),
        cmd=_strings(run.get("Cmd")),
        env=_strings(run.get("Env")),
        working_dir=_text(run.get("WorkingDir")),
        user=_text(run.get("User")),
        exposed_ports=sorted(str(p) for p in ports),
        labels={str(k): str(v) for k, v in sorted(labels.items())},
        history=_history(doc.get("history"), layers),
    )


def read_config(name: str, config: Descriptor, layers: list[Descriptor]) -> ConfigResult:
    if config.size > MAX_CONFIG_BYTES:
        return ConfigResult(None, f"The config blob is {config.size} bytes, too large to show here.")
    try:
        stream, _info = blobs.open_blob(name, config.digest)
    except RegistryError:
        return ConfigResult(None, "The config blob is not in this repository.")
    try:
        data = stream.read(MAX_CONFIG_BYTES + 1)
    finally:
        stream.close()
    try:
        return ConfigResult(parse_config(data, layers))
    except (UnicodeDecodeError, ValueError):
        return ConfigResult(None, "The config blob is not a JSON image configuration.")
