"""The registry's one version number: pyproject.toml's, as installed (or read from the file in a
checkout that was never installed). The API documentation, the UI footer, /metrics
(registry_build_info) and ``manage.py version`` all show this one."""
from __future__ import annotations

import importlib.metadata
from functools import lru_cache
from pathlib import Path

import tomli

PACKAGE = "svc-registry"


@lru_cache(maxsize=1)
def version() -> str:
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.exists():  # a checkout: the file is the truth even if an older copy is installed
        with pyproject.open("rb") as fh:
            return str(tomli.load(fh)["project"]["version"])
    return importlib.metadata.version(PACKAGE)
