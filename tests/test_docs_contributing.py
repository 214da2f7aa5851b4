"""The contributors' page says what `make test` installs and what `make lint` checks: held to the
install script and to pyproject's mypy settings, so that adding a tool or an app updates the text."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "docs" / "contributing.md").read_text()


def _make_test_comment() -> str:
    """The comment lines of ``make test`` in the page's first block (up to ``make lint``)."""
    block = README[README.index("make test    #"):README.index("make lint    #")]
    return " ".join(line.split("#", 1)[1] for line in block.splitlines() if "#" in line)


def test_make_test_names_every_package_the_install_script_installs() -> None:
    script = (REPO / "scripts" / "install-test-deps.sh").read_text()
    packages = re.findall(r"need\+=\(([a-z0-9.+-]+)\)", script)
    assert len(packages) >= 10, packages  # the pattern still reads the script
    said = set(re.findall(r"[a-z0-9.+-]+", _make_test_comment()))
    assert [p for p in packages if p not in said] == []


def test_make_lint_names_every_package_mypy_checks() -> None:
    checked = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    start = README.index("`make lint` is configured in `pyproject.toml`")
    paragraph = README[start:README.index("\n\n", start)]
    named = paragraph[paragraph.index("mypy"):]
    assert [app for app in checked if f"`{app}`" not in named] == []
