"""gunicorn with access rules: a bad rule stops it with one line per mistake naming the rule and the
key; a group that the groups file does not define is a warning at start, and the server serves."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from tests.support.access import TOML, http_get, team_server, write_users
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

BAD = """
[[access]]
repositories = ["team-a/*"]
groups = ["team-a"]
role = "owner"

[[access]]
repositories = []
users = ["carol"]
role = "read"
"""


def test_a_bad_rule_stops_gunicorn_naming_the_rule_and_the_key(start_registry: Callable[..., RegistryServer],
                                                                 tmp_path: Path) -> None:
    workdir = tmp_path / "bad"
    workdir.mkdir()
    (workdir / "config.toml").write_text(BAD)
    with pytest.raises(RuntimeError, match="gunicorn exited early"):
        start_registry(name="bad", SVC_AUTH_ENABLED="true")
    lines = (workdir / "gunicorn.log").read_text().splitlines()
    assert lines == [
        "configuration error: [[access]] #1 \"team-a/*\" role: unknown role 'owner': expected one of read, write, "
        "admin",
        'configuration error: [[access]] #2 repositories: empty: name at least one glob such as "team-a/*"',
    ]


def test_an_undefined_group_is_a_warning_and_the_server_starts(start_registry: Callable[..., RegistryServer],
                                                                tmp_path: Path) -> None:
    workdir = tmp_path / "partial"
    workdir.mkdir()
    (workdir / "groups").write_text("team-a: alice bob\n")  # no team-b
    (workdir / "config.toml").write_text(TOML)
    write_users(workdir / "users.htpasswd")
    partial = start_registry(name="partial", SVC_AUTH_ENABLED="true", SVC_AUTH_GROUPS_FILE=str(workdir / "groups"))
    warnings = [e["message"] for e in partial.log_entries("gunicorn.error") if e["level"] == "warning"]
    assert warnings == [f'[[access]] #3 "team-b/*" groups: group \'team-b\' is not defined in {workdir / "groups"}: '
                        "nobody is in it"]
    assert http_get(partial, "/v2/_catalog", "alice")[0] == 200


def test_audit_lines_are_written_whatever_the_log_level(start_registry: Callable[..., RegistryServer],
                                                         tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    from tests.support.auth import basic

    server = team_server(start_registry, tmp_path, SVC_SERVER_LOG_LEVEL="warning")
    # Its groups file defines every group the rules name: no warning (the test above has one missing).
    assert [e for e in server.log_entries("gunicorn.error") if e["level"] == "warning"] == []
    request = urllib.request.Request(f"{server.url}/v2/team-b/app/blobs/uploads/", method="POST", data=b"",
                                     headers={"Authorization": basic("dave", "diving")})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
    lines = server.log_entries("audit")
    assert [line["message"] for line in lines] == ["audit: dave push team-b/app denied"]
    assert lines[0]["audit"]["detail"] == "dave has role none on team-b/*; push needs write"
    assert server.log_entries("ops.requests") == []  # the request log follows log_level
