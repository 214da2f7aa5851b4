"""Statements live in the queries modules: the rest of the product code reads as domain code.

The rule, as the code keeps it: outside the data-access modules (``registry/queries/``,
``tokens/queries.py``, ``ops/ui/queries.py``, ``notifications/queries.py``, ``audit/queries.py``), the
model definitions and migrations, no module imports a model or ``django.db.models``, reaches a manager
(``.objects``), or runs SQL (``.cursor()``, ``.execute()``, ``.executemany()``, ``.raw()``,
``RawSQL``). What stays allowed, because it decides no statement: ``transaction.atomic`` (a service
says what commits together), reading ``connection.vendor`` / ``in_atomic_block``, closing a
connection, and catching the database's exception classes.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("registry", "tokens", "ops", "regsite", "notifications", "audit", "replication")
DATA_ACCESS = ("registry/queries/", "tokens/queries.py", "ops/ui/queries.py", "notifications/queries.py",
               "audit/queries.py", "replication/queries.py")
SQL_CALLS = frozenset({"cursor", "execute", "executemany", "raw"})


def violations(source: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "django.db.models" or node.module.startswith("django.db.models."):
                found.append(f"line {node.lineno}: imports {node.module}")
            elif node.module.split(".")[-1] == "models" or any(alias.name == "models" for alias in node.names):
                found.append(f"line {node.lineno}: imports models from {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: imports {alias.name}" for alias in node.names
                      if "models" in alias.name.split(".")]
        elif isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append(f"line {node.lineno}: uses a manager (.objects)")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in SQL_CALLS):
            found.append(f"line {node.lineno}: runs SQL (.{node.func.attr}())")
        elif isinstance(node, ast.Name) and node.id == "RawSQL":
            found.append(f"line {node.lineno}: uses RawSQL")
    return found


def _outside_data_access() -> list[Path]:
    files = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if ("/migrations/" in relative or relative.endswith("/models.py")
                    or any(relative.startswith(prefix) for prefix in DATA_ACCESS)):
                continue
            files.append(path)
    return files


def test_the_scan_covers_the_services() -> None:
    scanned = {path.relative_to(ROOT).as_posix() for path in _outside_data_access()}
    assert {"registry/services/blobs.py", "registry/services/uploads.py", "tokens/services.py",
            "ops/readiness.py", "notifications/outbox.py"} <= scanned
    assert not {"registry/queries/blobs.py", "tokens/queries.py", "registry/models.py"} & scanned


def test_no_statement_outside_the_queries_modules() -> None:
    found = {path.relative_to(ROOT).as_posix(): problems for path in _outside_data_access()
             if (problems := violations(path.read_text()))}
    assert found == {}, "move these statements into the app's queries module"


@pytest.mark.parametrize("source", [
    "from registry.models import Repository",
    "from tokens import models",
    "import registry.models",
    "from django.db.models import F",
    "from django.db.models.functions import Collate",
    "Repository.objects.exists()",
    "with connection.cursor() as cursor: pass",
    "cursor.execute('SELECT 1')",
    "cursor.executemany('INSERT', [])",
    "Tag.objects.raw('SELECT 1')",
    "RawSQL('1', [])",
])
def test_the_rule_catches_each_form(source: str) -> None:
    assert violations(source)


@pytest.mark.parametrize("source", [
    "from django.db import transaction, connection, IntegrityError\nwith transaction.atomic(): pass",
    "if connection.vendor == 'sqlite' and not connection.in_atomic_block: connection.close()",
    "from registry import queries\nqueries.find_repository('team/app')",
    "'''blob tail objects.'''",
])
def test_the_rule_allows_what_decides_no_statement(source: str) -> None:
    assert violations(source) == []
