"""Which tests pytest-xdist must keep in one process (`make test` runs the suite with ``-n``).

A fixture broader than one test is made once per process that needs it, so the tests that share one
go to the same process, as they would all run in one without xdist:

- the tests of a module (or class) using a fixture of that scope from this project (a server the
  module's tests share);
- across modules, the tests using a session fixture of this project that holds a resource, i.e.
  one that yields and so has a teardown (an RGW cluster, a PostgreSQL cluster, a dockerd). A session
  fixture that only computes or configures is cheap to make again in each process and groups nothing;
- tests marked ``serial`` (timing-sensitive): `make test` runs them alone after the parallel run,
  and one process takes them all when they are run under ``-n`` anyway, so no two overlap;
- tests with an explicit ``xdist_group`` mark, by its name.

Tests linked through any of these form one group; every other test is handed out on its own.

The groups are drawn where the fixtures are known, in the workers' collection, and reach the
scheduler in the controlling process through a file per worker: xdist's own ``--dist loadgroup``
carries its marks in the node ids, which pytest 9.2's structured node ids no longer let it change
(pytest-xdist issue 1386), so that it silently stops grouping. The scheduler is xdist's
LoadScopeScheduling (units of work, the largest first) with these groups as its scopes.
"""
from __future__ import annotations

import inspect
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

GROUPS_DIR = "registry_test_groups"  # the key of the workers' input naming the directory


class _Groups:
    """Union-find over the keys of what tests share."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, keys: list[str]) -> None:
        for key in keys[1:]:
            self.parent[self.find(key)] = self.find(keys[0])


def _shared(item: pytest.Item) -> dict[str, str]:
    """What ``item`` shares with other tests: {key: the name it gives a group}."""
    keys: dict[str, str] = {}
    info = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames if info is not None else []:
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixture = defs[-1]
        module = getattr(fixture.func, "__module__", "")
        if fixture.scope == "function" or not module.startswith("tests."):
            continue  # a plugin's broad fixtures (pytest-django's test database) are made per process
        path = item.nodeid.split("::")[0]
        if fixture.scope != "session":
            keys[f"{fixture.scope} {path}"] = path
        elif inspect.isgeneratorfunction(fixture.func):
            keys[f"session {module}.{name}"] = name
    if item.get_closest_marker("serial"):
        keys["serial"] = "serial"
    for mark in item.iter_markers("xdist_group"):
        name = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        keys[f"xdist_group {name}"] = name
    return keys


def groups_of(items: list[pytest.Item]) -> dict[str, str]:
    """{node id: group name} for the tests that share something; named after the session fixtures,
    "serial" or explicit groups it holds, else after its module."""
    groups = _Groups()
    shared = {}
    for item in items:
        if keys := _shared(item):
            groups.union(list(keys))
            shared[item.nodeid] = keys
    names: dict[str, set[str]] = {}
    for keys in shared.values():
        names.setdefault(groups.find(next(iter(keys))), set()).update(keys.values())
    found = {}
    for nodeid, keys in shared.items():
        members = names[groups.find(next(iter(keys)))]
        broad = sorted(name for name in members if "/" not in name)
        found[nodeid] = "+".join(broad) if broad else sorted(members)[0]
    return found


def end_to_end_first(items: list[pytest.Item]) -> None:
    """Under xdist, the server-driven tests (tests/e2e, tests/faults: seconds to minutes each) are
    handed out before the unit tests (milliseconds), so that no long test starts last."""
    def rank(item: pytest.Item) -> int:
        return 0 if any(f"/{part}/" in f"/{item.nodeid}" for part in ("e2e", "faults")) else 1

    items.sort(key=rank)  # stable: the order within each part is unchanged


# Hooks, imported into tests/conftest.py.

@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: a directory for the workers' groups, named in each worker's input."""
    config = node.config
    directory = getattr(config, "_registry_test_groups", None)
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="registry-test-groups-"))
        config._registry_test_groups = directory
        config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))
    node.workerinput[GROUPS_DIR] = str(directory)


@pytest.hookimpl(trylast=True)  # the final list and order of the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or GROUPS_DIR not in workerinput:
        return  # not an xdist worker: nothing to schedule, the order is left as it was
    end_to_end_first(items)
    path = Path(workerinput[GROUPS_DIR]) / f"{workerinput['workerid']}.json"
    path.write_text(json.dumps(groups_of(items)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadgroup":
        return None  # another --dist: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            # Called once every worker has collected (and so written its file).
            if self.groups is None:
                directory = Path(getattr(config, "_registry_test_groups", ""))
                files = sorted(directory.glob("*.json")) if directory.name else []
                self.groups = json.loads(files[0].read_text()) if files else {}
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)
