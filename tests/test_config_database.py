"""``[database] url``: libpq's URL syntax whole (several hosts, a query part), the failover defaults a
registry needs, and a URL it cannot use is a one-line configuration error that shows no password."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from regsite import config

ROOT = Path(__file__).resolve().parents[1]


def _settings(url: str, **keys: object) -> dict:
    return config.database_settings({**config.DEFAULTS["database"], "url": url, **keys})


def test_it_takes_several_hosts_with_their_ports() -> None:
    db = _settings("postgresql://registry:s3cret@pg1.example:5432,pg2.example:5433,[::1]:6000/registry")
    assert (db["HOST"], db["PORT"]) == ("pg1.example,pg2.example,::1", "5432,5433,6000")
    assert (db["NAME"], db["USER"], db["PASSWORD"]) == ("registry", "registry", "s3cret")


def test_a_host_without_a_port_gets_the_default_one() -> None:
    db = _settings("postgresql://u@pg1:5433,pg2/registry")
    assert (db["HOST"], db["PORT"]) == ("pg1,pg2", "5433,")


def test_it_keeps_the_query_part_as_connection_parameters() -> None:
    db = _settings("postgresql://u@pg1,pg2/registry?target_session_attrs=primary&sslmode=require"
                   "&connect_timeout=3&application_name=registry-a")
    options = db["OPTIONS"]
    assert options["target_session_attrs"] == "primary"
    assert options["sslmode"] == "require"
    assert options["connect_timeout"] == "3"
    assert options["application_name"] == "registry-a"


def test_it_connects_only_to_a_writable_primary_unless_told_otherwise() -> None:
    options = _settings("postgresql://u@pg1:5432,pg2:5432/registry")["OPTIONS"]
    assert options["target_session_attrs"] == "read-write"
    assert int(options["connect_timeout"]) > 0
    # A peer that vanished (a host powered off, a partition) is noticed by the kernel, not waited on.
    assert options["keepalives"] == "1" and int(options["tcp_user_timeout"]) > 0


def test_statement_timeout_is_sent_to_the_server_and_bounds_every_answer() -> None:
    db = _settings("postgresql://u@pg/registry?options=-c%20search_path%3Dregistry", statement_timeout=7)
    assert db["OPTIONS"]["options"] == "-c search_path=registry -c jit=off -c statement_timeout=7000"
    assert db["ANSWER_TIMEOUT"] > 7
    off = _settings("postgresql://u@pg/registry", statement_timeout=0)
    assert "statement_timeout" not in off["OPTIONS"].get("options", "") and off["ANSWER_TIMEOUT"] is None


def test_the_server_compiles_no_statement_unless_the_url_says_so() -> None:
    # Issue 25: JIT took 7-10 ms of a web UI statement that ran in 2 (its row estimate far off).
    assert _settings("postgresql://u@pg/registry", statement_timeout=0)["OPTIONS"]["options"] == "-c jit=off"
    kept = _settings("postgresql://u@pg/registry?options=-c%20jit%3Don", statement_timeout=0)["OPTIONS"]["options"]
    assert kept == "-c jit=on"


@pytest.mark.parametrize("url, needle", [
    ("postgresql://u:pw@pg1:5432,pg2:port/registry", "port 'port' of host pg2"),
    ("postgresql://u:pw@pg1:99999/registry", "port '99999' of host pg1"),
    ("postgresql://u:pw@pg1/registry?nope=1", 'invalid URI query parameter: "nope"'),
    ("postgresql://u:pw@pg1/registry?connect_timeout=soon", "connect_timeout"),
    ("postgresql://u:pw@pg1/registry?target_session_attrs=whatever", "target_session_attrs"),
    ("postgresql://u:pw@pg1/regi%zzstry", "percent-encoded"),
    ("postgresql://u:pw@pg1/", "no database name"),
    ("postgresql://u@pg1/registry?options=-c%20statement_timeout%3D5", "[database] statement_timeout"),
])
def test_it_refuses_a_url_it_cannot_use_in_one_line(url: str, needle: str) -> None:
    with pytest.raises(config.ConfigError) as error:
        _settings(url)
    message = str(error.value)
    assert message.startswith("[database] url: ") or message.startswith("[database] statement_timeout")
    assert needle in message and "\n" not in message
    assert ":pw@" not in message


def test_a_password_in_the_query_is_not_shown_either() -> None:
    with pytest.raises(config.ConfigError) as error:
        _settings("postgresql://u@pg1:x/registry?password=hunter2")
    assert "hunter2" not in str(error.value)


def test_a_multi_host_url_stops_start_up_with_one_line_not_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    (tmp_path / "empty.toml").write_text("")
    env.update(SVC_CONFIG=str(tmp_path / "empty.toml"), SVC_STORAGE_ROOT=str(tmp_path / "registry"),
               SVC_AUTH_TOKEN_STORAGE=str(tmp_path / "tokens"),
               SVC_DATABASE_URL="postgresql://u:pw@pg1:5432,pg2:nope/registry")
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "configuration error: [database] url: port 'nope' of host pg2 is not a port number "
        "(in 'postgresql://u:***@pg1:5432,pg2:nope/registry')"]


def test_migrate_runs_without_the_statement_timeout(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    (tmp_path / "config.toml").write_text("[database]\nstatement_timeout = 30\n")
    env.update(SVC_CONFIG=str(tmp_path / "config.toml"), SVC_STORAGE_ROOT=str(tmp_path / "registry"),
               SVC_AUTH_TOKEN_STORAGE=str(tmp_path / "tokens"), SVC_DATABASE_URL=f"sqlite:///{tmp_path}/db")
    shown = "from django.conf import settings; print(settings.SVC['database']['statement_timeout'])"
    script = ("import sys, runpy; from django.core import management; "
              f"management.ManagementUtility.execute = lambda self: exec({shown!r}); "
              "sys.argv = ['manage.py'] + sys.argv[1:]; runpy.run_path('manage.py', run_name='__main__')")
    for command, expected in (("migrate", "0"), ("check", "30")):
        done = subprocess.run([sys.executable, "-c", script, command], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.stdout.strip() == expected, done.stderr
