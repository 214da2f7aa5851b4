"""The three-team scenario of the access rules, for unit and end-to-end tests alike.

team-a (alice, bob) writes ``team-a/*``; carol reads it and writes ``team-b/*``; ``public/*`` is
pulled without credentials; ``team-a/secret/*`` is bob's alone (it narrows ``team-a/*``); dave is
in no team and, with ``default_role = "none"``, may do nothing outside ``public/*``; erin is an
admin everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.auth import AuthSetup, write_htpasswd

PASSWORDS = {"alice": "wonderland", "bob": "builder", "carol": "christmas", "dave": "diving", "erin": "errands"}
GROUPS = "# teams\nteam-a: alice bob\nteam-b: carol\n"
RULES: list[dict[str, Any]] = [
    {"repositories": ["team-a/*"], "groups": ["team-a"], "role": "write"},
    {"repositories": ["team-a/*"], "users": ["carol"], "role": "read"},
    {"repositories": ["team-b/*"], "groups": ["team-b"], "role": "write"},
    {"repositories": ["team-a/secret/*"], "users": ["bob"], "role": "admin"},
    {"repositories": ["public/*"], "groups": ["team-a"], "role": "admin", "anonymous": "read"},
]
TOML = """
[auth]
default_role = "none"
admins = ["erin"]

[[access]]
repositories = ["team-a/*"]
groups = ["team-a"]
role = "write"

[[access]]
repositories = ["team-a/*"]
users = ["carol"]
role = "read"

[[access]]
repositories = ["team-b/*"]
groups = ["team-b"]
role = "write"

[[access]]
repositories = ["team-a/secret/*"]
users = ["bob"]
role = "admin"

[[access]]
repositories = ["public/*"]
groups = ["team-a"]
role = "admin"
anonymous = "read"
"""


@dataclass
class Teams:
    auth: AuthSetup
    groups_file: Path

    def set_groups(self, text: str) -> None:
        """Rewrite the groups file (a new inode, as editors and config management write it)."""
        staged = self.groups_file.with_suffix(".new")
        staged.write_text(text)
        staged.replace(self.groups_file)


def write_users(path: Path) -> Path:
    return write_htpasswd(path, PASSWORDS)


@pytest.fixture
def teams(settings, auth_on: AuthSetup, monkeypatch) -> Iterator[Teams]:
    """Auth on with the three teams' users, groups file and rules (the Django settings)."""
    from tokens import groups, htpasswd

    write_users(auth_on.htpasswd_file)
    htpasswd.clear_cache()
    groups_file = auth_on.htpasswd_file.parent / "groups"
    groups_file.write_text(GROUPS)
    settings.AUTH_GROUPS_FILE = str(groups_file)
    settings.ACCESS_RULES = [dict(rule) for rule in RULES]
    settings.AUTH_DEFAULT_ROLE = "none"
    settings.AUTH_ADMINS = ["erin"]
    monkeypatch.setattr(groups, "STAT_SECONDS", 0.0)  # a rewritten file is seen at the next request
    yield Teams(auth_on, groups_file)


def team_server(start_registry: Any, root: Path, name: str = "teams", **env: str) -> Any:
    """A gunicorn server with auth on and the three teams' users, groups file and rules."""
    workdir = root / name
    workdir.mkdir(parents=True)
    write_users(workdir / "users.htpasswd")
    (workdir / "groups").write_text(GROUPS)
    (workdir / "config.toml").write_text(TOML)
    return start_registry(name=name, SVC_AUTH_ENABLED="true", SVC_AUTH_GROUPS_FILE=str(workdir / "groups"), **env)


def shared_team_server(factory: pytest.TempPathFactory, name: str, **env: str) -> Iterator[Any]:
    """``team_server`` for a module-scoped fixture: one server for the tests of a file that can share it."""
    from tests.support.server import RegistryServer

    servers: list[RegistryServer] = []

    def start(name: str, **env: str) -> RegistryServer:
        servers.append(RegistryServer(root / name, env_overrides=env))
        return servers[-1].start()

    root = factory.mktemp(name)
    try:
        yield team_server(start, root, name, **env)
    finally:
        for server in servers:
            server.stop()


def http_get(server: Any, path: str, who: str | None = None, password: str | None = None) -> tuple[int, Any]:
    """GET ``path`` as ``who`` (Basic) or anonymously; the status and the JSON body."""
    import base64
    import json
    import urllib.error
    import urllib.request

    headers = {}
    if who is not None:
        secret = password if password is not None else PASSWORDS[who]
        headers["Authorization"] = "Basic " + base64.b64encode(f"{who}:{secret}".encode()).decode()
    request = urllib.request.Request(server.url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def audit_steps(server: Any, *args: str) -> list[tuple[str, str, str, str]]:
    """(actor, action, repository or reference, outcome) of each audit event, oldest first."""
    import json

    done = server.manage("audit", "--json", *args)
    assert done.returncode == 0, done.stderr
    return [(e["actor"] or e["actor_kind"], e["action"], e["repository"] or e["reference"], e["outcome"])
            for e in json.loads(done.stdout)["events"]]
