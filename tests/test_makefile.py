"""The Makefile's virtualenv: `make run` installs the runtime dependencies only (the test extras come
with `make test`, `make lint` and `make setup`); a virtualenv left without a working pip (a first run
interrupted, python3-venv missing when it was made) is made again instead of failing on
.venv/bin/pip; and a missing python3-venv is named. Run on a copy of the Makefile and pyproject.toml,
with `make -n` where the recipe would install."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import REPO


@pytest.fixture
def project(tmp_path: Path) -> Path:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def make(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Under `make test` the environment says this is a sub-make (MAKELEVEL, MAKEFLAGS): its messages
    # would then read "make[1]:"; the copy is run as a user runs it, from the top.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=project, capture_output=True, text=True,
                          timeout=120, env=env)


def test_make_run_installs_the_runtime_dependencies_only(project: Path) -> None:
    planned = make(project, "-n", "run").stdout
    assert "pip install --quiet -e .\n" in planned and "[test]" not in planned
    assert "[test]" in make(project, "-n", "test").stdout
    assert "[test]" in make(project, "-n", "lint").stdout


def test_a_virtualenv_without_pip_is_made_again(project: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    (project / ".venv" / ".installed").touch()  # even if it was once complete
    planned = make(project, "-n", str(Path(".venv") / ".installed")).stdout
    assert "python3 -m venv .venv" in planned and "pip install --quiet -e ." in planned


def test_a_working_virtualenv_is_kept(project: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(project / ".venv")], check=True)
    (project / ".venv" / ".installed").touch()
    done = make(project, "-n", str(Path(".venv") / ".installed"))
    assert done.stdout == "make: '.venv/.installed' is up to date.\n"


def test_without_python3_venv_it_says_what_to_install_and_leaves_no_half_virtualenv(project: Path) -> None:
    # A python whose venv module fails as Debian's does without python3-venv (no ensurepip).
    fake = project / "python3-without-venv"
    fake.write_text("#!/bin/sh\nmkdir -p .venv/bin && touch .venv/bin/python && exit 1\n")
    fake.chmod(0o755)
    done = make(project, f"PYTHON={fake}", str(Path(".venv") / ".installed"))
    assert done.returncode != 0
    assert "install python3-venv (apt-get install python3-venv)" in done.stderr
    assert not (project / ".venv").exists()
