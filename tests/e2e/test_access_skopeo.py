"""The three-team scenario under gunicorn with skopeo (Basic challenge): who may push, pull and delete
where, the refusals' words, the catalog each sees, anonymous pulls of public/*, a token limited to one
repository, a user taken out of a group losing their tokens' access within a reload, and the audit
log holding every step in order (manage.py audit --json and the UI's page)."""
from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.e2e.conftest import Skopeo
from tests.e2e.test_ui_sign_out import Browser
from tests.support.access import GROUPS, PASSWORDS, audit_steps, http_get, shared_team_server, team_server
from tests.support.images import build_image
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """For the tests that leave the teams as they are (the group change has a server of its own)."""
    yield from shared_team_server(tmp_path_factory, "teams")


class Team:
    def __init__(self, server: RegistryServer, skopeo: Skopeo, image: Path) -> None:
        self.server, self.skopeo, self.image = server, skopeo, image

    def push(self, creds: str, ref: str, check: bool = True) -> Any:
        return self.skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", creds, f"oci:{self.image}:v1",
                               f"docker://{self.server.host}/{ref}", check=check)

    def inspect(self, creds: str | None, ref: str, check: bool = True) -> Any:
        auth = ["--creds", creds] if creds else ["--no-creds"]
        return self.skopeo.run("inspect", "--tls-verify=false", *auth, f"docker://{self.server.host}/{ref}",
                               check=check)

    def delete(self, creds: str, ref: str, check: bool = True) -> Any:
        return self.skopeo.run("delete", "--tls-verify=false", "--creds", creds, f"docker://{self.server.host}/{ref}",
                               check=check)


def creds(who: str) -> str:
    return f"{who}:{PASSWORDS[who]}"


def _untimed(stderr: str) -> str:
    """skopeo's error without its log line's time, which differs between two runs a second apart."""
    return re.sub(r'time="[^"]*" ', "", stderr)


def test_three_teams_with_skopeo(shared: RegistryServer, skopeo: Skopeo, tmp_path: Path) -> None:
    server, since = shared, datetime.now(timezone.utc).isoformat()
    team = Team(server, skopeo, build_image(tmp_path / "src", layers=1).layout)
    team.push(creds("alice"), "team-a/app:v1")
    team.push(creds("bob"), "team-a/secret/keys:v1")
    team.push(creds("carol"), "team-b/app:v1")
    team.push(creds("alice"), "public/base:v1")

    # public/* is pulled without credentials (skopeo sends Basic Og== after the challenge).
    assert json.loads(team.inspect(None, "public/base:v1").stdout)["Name"].endswith("/public/base")
    skopeo.run("copy", "--src-tls-verify=false", f"docker://{server.host}/public/base:v1", f"oci:{tmp_path / 'out'}:v1")
    anonymous = team.inspect(None, "team-a/app:v1", check=False)
    assert anonymous.returncode != 0 and "unauthorized" in anonymous.stderr

    # carol reads team-a/* but may not push there; bob writes there but may not delete.
    team.inspect(creds("carol"), "team-a/app:v1")
    refused = team.push(creds("carol"), "team-a/app:v2", check=False)
    assert refused.returncode != 0 and "carol has role read on team-a/*; push needs write" in refused.stderr
    undeleted = team.delete(creds("bob"), "team-a/app:v1", check=False)
    assert undeleted.returncode != 0 and "bob has role write on team-a/*; delete needs admin" in undeleted.stderr

    # team-a/secret/* is bob's alone: to alice it is exactly a repository that does not exist.
    hidden = team.inspect(creds("alice"), "team-a/secret/keys:v1", check=False)
    absent = team.inspect(creds("alice"), "team-a/secret/ghost:v1", check=False)
    assert hidden.returncode != 0 and "manifest unknown" in hidden.stderr
    assert _untimed(hidden.stderr).replace("keys", "ghost") == _untimed(absent.stderr)

    catalogs = {who: http_get(server, "/v2/_catalog", who)[1]["repositories"] for who in ("alice", "bob", "carol",
                                                                                          "dave", "erin")}
    assert catalogs == {
        "alice": ["public/base", "team-a/app"],
        "bob": ["public/base", "team-a/app", "team-a/secret/keys"],
        "carol": ["public/base", "team-a/app", "team-b/app"],
        "dave": ["public/base"],
        "erin": ["public/base", "team-a/app", "team-a/secret/keys", "team-b/app"],
    }
    assert http_get(server, "/v2/_catalog")[1]["repositories"] == ["public/base"]

    # The audit log has every step, in order (and the reads skopeo tried where it may not read, as it
    # looks for blobs to mount from repositories it pushed them to before: each a refusal).
    steps = [step for step in audit_steps(server, "--since", since) if step[1] in ("push", "delete", "pull")]
    assert in_order([
        ("alice", "push", "team-a/app", "success"),
        ("bob", "push", "team-a/secret/keys", "success"),
        ("carol", "push", "team-b/app", "success"),
        ("alice", "push", "public/base", "success"),
        ("carol", "push", "team-a/app", "denied"),
        ("bob", "delete", "team-a/app", "denied"),
        ("alice", "pull", "team-a/secret/keys", "denied"),
        ("alice", "pull", "team-a/secret/ghost", "denied"),
    ], steps)
    assert [step for step in steps if step[3] == "success"] == [
        ("alice", "push", "team-a/app", "success"), ("bob", "push", "team-a/secret/keys", "success"),
        ("carol", "push", "team-b/app", "success"), ("alice", "push", "public/base", "success")]


def in_order(expected: list[Any], steps: list[Any]) -> bool:
    """Whether ``expected`` happened in this order among ``steps``."""
    found = iter(steps)
    missing = [step for step in expected if step not in found]
    assert not missing, f"not in order in the audit log: {missing}\n{steps}"
    return True


def test_a_limited_token_and_a_group_change_within_one_reload(start_registry: Callable[..., RegistryServer],
                                                               skopeo: Skopeo, tmp_path: Path) -> None:
    server = team_server(start_registry, tmp_path)
    team = Team(server, skopeo, build_image(tmp_path / "src", layers=1).layout)
    done = server.manage("createtoken", "--username", "alice", "--role", "write", "--repository", "team-a/app")
    assert done.returncode == 0, done.stderr
    token = f"token:{done.stdout.strip()}"
    team.push(token, "team-a/app:v1")
    for elsewhere in ("team-a/other:v1", "team-b/app:v1"):
        refused = team.push(token, elsewhere, check=False)
        assert refused.returncode != 0 and "outside its repositories team-a/app" in refused.stderr, refused.stderr

    # alice leaves team-a: the groups file is rewritten, and within one reload her token is cut,
    # on every worker, with no restart.
    staged = server.workdir / "groups.new"
    staged.write_text(GROUPS.replace("alice ", ""))
    staged.replace(server.workdir / "groups")
    changed = time.monotonic()
    answers: list[int] = []
    while answers[-6:] != [404] * 6:  # six in a row: each worker has seen the change
        assert time.monotonic() - changed < 5, f"the token still reads team-a/app 5 s after the change: {answers}"
        answers.append(http_get(server, "/v2/team-a/app/tags/list", "token", token[len("token:"):])[0])
        time.sleep(0.1)
    cut = team.push(token, "team-a/app:v2", check=False)
    assert cut.returncode != 0 and "has role none on team-a/*; push needs write" in cut.stderr

    prefix = done.stderr.split("hash_prefix ")[1].split(",")[0]
    steps = audit_steps(server)
    assert steps[0] == ("manage.py", "token.create", prefix, "success")
    assert in_order([
        ("alice", "push", "team-a/app", "success"),
        ("alice", "push", "team-a/other", "denied"),
        ("alice", "push", "team-b/app", "denied"),
        ("alice", "pull", "team-a/app", "denied"),  # the reads that found it cut
        ("alice", "push", "team-a/app", "denied"),
    ], [step for step in steps if step[1] in ("push", "pull", "blob.push")])
    tokens_events = [e for e in json.loads(server.manage("audit", "--json", "--actor", prefix).stdout)["events"]]
    assert {e["token"] for e in tokens_events} == {prefix} and {e["actor"] for e in tokens_events} == {"alice"}


def test_the_audit_page_shows_the_steps_to_an_admin(shared: RegistryServer, skopeo: Skopeo, tmp_path: Path) -> None:
    server = shared
    team = Team(server, skopeo, build_image(tmp_path / "src", layers=1).layout)
    team.push(creds("alice"), "team-a/app:v1")
    team.push(creds("carol"), "team-a/app:v2", check=False)
    browser = Browser(server)
    browser.origin = server.url
    browser.get("/ui/sign-in")
    assert browser.post("/ui/sign-in", {"username": "erin", "password": PASSWORDS["erin"]}).status == 302
    page = browser.get("/ui/audit/?repository=team-a/app").body.decode()
    rows = re.findall(r'data-label="Actor" class="strong">([^<]+)<.*?<td data-label="Action"><code>([^<]+)</code>.*?'
                      r'<td data-label="Outcome">(?:<span class="badge badge-danger">)?(\w+)', page, re.S)
    assert rows[0] == ("carol", "push", "denied")  # newest first
    assert ("alice", "push", "success") in rows
    assert "carol has role read on team-a/*; push needs write" in page
    assert browser.get("/ui/audit/").status == 200
    alice = Browser(server)
    alice.origin = server.url
    alice.get("/ui/sign-in")
    alice.post("/ui/sign-in", {"username": "alice", "password": PASSWORDS["alice"]})
    assert alice.get("/ui/audit/").status == 403
