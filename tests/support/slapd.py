"""A throwaway OpenLDAP server (slapd, back_mdb, the memberof overlay) on a loopback port.

Started in the foreground (``-d stats``) as a child process, so its log, which has a ``BIND`` line
for every bind, is a file the tests count binds in; stopped by its PID. It starts in about a
second: share one per test module (``slapd`` fixture). People are under ``ou=people``, groups
(groupOfNames) under ``ou=groups``; passwords are stored as given (slapd compares them).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.server import free_port

SUFFIX = "dc=example,dc=org"
ADMIN_DN = f"cn=admin,{SUFFIX}"
ADMIN_PASSWORD = "adminpw"
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
SCHEMAS = ("core", "cosine", "inetorgperson", "nis")
# The directory's people and their groups: ldap-ann in team-a, ldap-ben in team-b.
PASSWORDS = {"ldap-ann": "ann-secret", "ldap-ben": "ben-secret"}
MEMBERS = {"team-a": ["ldap-ann"], "team-b": ["ldap-ben"]}


def dn_of(uid: str) -> str:
    return f"uid={uid},{PEOPLE}"


def _config(workdir: Path) -> str:
    includes = "".join(f"include /etc/ldap/schema/{name}.schema\n" for name in SCHEMAS)
    return (f"{includes}pidfile {workdir}/slapd.pid\nmodulepath /usr/lib/ldap\nmoduleload back_mdb\n"
            f"moduleload memberof\nmoduleload refint\ndatabase mdb\nmaxsize 104857600\n"
            f"suffix \"{SUFFIX}\"\nrootdn \"{ADMIN_DN}\"\nrootpw {ADMIN_PASSWORD}\ndirectory {workdir}/data\n"
            "overlay memberof\n"
            "access to attrs=userPassword by self read by anonymous auth by * none\n"
            "access to * by * read\n")


def _entries(people: dict[str, str], members: dict[str, list[str]]) -> str:
    blocks = [f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\no: Example\ndc: example\n",
              f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n",
              f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups\n"]
    for uid, password in people.items():
        blocks.append(f"dn: {dn_of(uid)}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n"
                      f"userPassword: {password}\n")
    for group, uids in members.items():
        # groupOfNames needs a member: the admin keeps a group valid when its last person leaves.
        blocks.append(f"dn: cn={group},{GROUPS}\nobjectClass: groupOfNames\ncn: {group}\nmember: {ADMIN_DN}\n"
                      + "".join(f"member: {dn_of(uid)}\n" for uid in uids))
    return "\n".join(blocks)


@dataclass
class Slapd:
    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"ldap://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / "slapd.log"

    def start(self) -> Slapd:
        self.port = self.port or free_port()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                ["/usr/sbin/slapd", "-d", "stats", "-f", str(self.workdir / "slapd.conf"), "-h", self.url + "/"],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while subprocess.run(["ldapwhoami", "-x", "-H", self.url], capture_output=True).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"slapd did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None

    def ldap(self, tool: str, ldif: str) -> None:
        """Run ldapadd or ldapmodify as the admin against the running server (the overlay sees it)."""
        subprocess.run([tool, "-x", "-H", self.url, "-D", ADMIN_DN, "-w", ADMIN_PASSWORD], input=ldif.encode(),
                       check=True, capture_output=True, timeout=30)

    def move(self, uid: str, from_group: str, to_group: str) -> None:
        self.ldap("ldapmodify", f"dn: cn={from_group},{GROUPS}\nchangetype: modify\ndelete: member\n"
                                f"member: {dn_of(uid)}\n\ndn: cn={to_group},{GROUPS}\nchangetype: modify\n"
                                f"add: member\nmember: {dn_of(uid)}\n")

    def binds(self, dn: str) -> int:
        """How many binds as ``dn`` the server has logged."""
        needle = f'BIND dn="{dn}" method='  # the request's line (its result is logged as mech=)
        return sum(1 for line in self.log.read_text(errors="replace").splitlines() if needle in line)


def start_slapd(workdir: Path, people: dict[str, str] | None = None,
                members: dict[str, list[str]] | None = None) -> Slapd:
    """A directory of ``people`` (uid: password) in the groups of ``members``; the tests' by default."""
    if shutil.which("slapd", path="/usr/sbin:/usr/bin") is None:
        raise RuntimeError("slapd is not installed: run scripts/install-test-deps.sh")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "data").mkdir()
    (workdir / "slapd.conf").write_text(_config(workdir))
    server = Slapd(workdir).start()
    server.ldap("ldapadd", _entries(PASSWORDS if people is None else people, MEMBERS if members is None else members))
    return server


def ldap_settings(server: Slapd, **overrides: object) -> dict[str, object]:
    """The ``[ldap]`` table for this server: binds by DN template, groups by group search."""
    from regsite.config import DEFAULTS

    return {**DEFAULTS["ldap"], "url": server.url, "user_dn_template": f"uid={{username}},{PEOPLE}",
            "group_search_base": GROUPS, "timeout_seconds": 2, **overrides}


@pytest.fixture(scope="module")
def slapd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slapd]:
    """One directory server for the tests of a module."""
    server = start_slapd(tmp_path_factory.mktemp("slapd"))
    yield server
    server.stop()
