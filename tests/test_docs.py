"""The documentation site builds in strict mode, documents every configuration key, and the README
stays a short landing page whose links lead into it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from regsite import config

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "docs"))
import hooks  # noqa: E402  (docs/hooks.py, the MkDocs hooks)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_it_documents_every_configuration_key_with_its_variable(site: Path) -> None:
    page = _text((site / "reference" / "configuration" / "index.html").read_text())
    for table, keys in config.DEFAULTS.items():
        for key in keys:
            assert f"SVC_{table.upper()}_{key.upper()}" in page, (table, key)
    for table, keys in config.LISTS.items():
        assert f"[[{table}]]" in page
        for key in keys:
            assert f" {key} " in page, (table, key)


def test_every_key_has_a_description_in_the_example_file() -> None:
    said = hooks.descriptions((REPO / "config.example.toml").read_text())
    keys = [(t, k) for t, ks in config.DEFAULTS.items() for k in ks]
    keys += [(t, k) for t, ks in config.LISTS.items() for k in ks]
    assert [key for key in keys if not said.get(key)] == []


def test_it_reads_a_keys_description_from_the_comments_above_it() -> None:
    example = ("[server]\n# Where it listens.\nbind = \"x\"\n# Shared by both.\nworkers = 2\nthreads = 8\n\n"
               "# [[proxy]]\n# # The local namespace.\n# prefix = \"hub\"  # required\n")
    said = hooks.descriptions(example)
    assert said[("server", "bind")] == "Where it listens."
    assert said[("server", "threads")] == said[("server", "workers")] == "Shared by both."
    assert said[("proxy", "prefix")] == "The local namespace. required"


def test_an_unclosed_code_fence_is_found() -> None:
    assert hooks.unclosed_fence("text\n```sh\nmake run\n```\n") is None
    # The README once closed a fence with "``` `GET", which swallowed the next heading.
    assert hooks.unclosed_fence("```\nerror text\n``` `GET\n/v2/ stays open\n## Heading\n") == 1


def test_a_page_with_an_unclosed_fence_fails_the_strict_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Broken\n\n```sh\nmake run\n\n## Lost heading\n")
    (tmp_path / "mkdocs.yml").write_text(f"site_name: t\nhooks:\n  - {REPO / 'docs' / 'hooks.py'}\n")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "never closed" in done.stderr


def test_every_page_is_in_the_navigation(site: Path) -> None:
    nav = (REPO / "mkdocs.yml").read_text()
    pages = [p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")]
    assert [page for page in pages if page not in nav] == []


def test_the_readme_is_a_short_landing_page_whose_links_exist() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    assert hooks.unclosed_fence(readme) is None
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert local and [link for link in local if not (REPO / link).exists()] == []
