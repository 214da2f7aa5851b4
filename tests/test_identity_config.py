"""[ldap] and [oidc]: off unless their address is set, read from the file and SVC_LDAP_* / SVC_OIDC_*,
checked at start-up with one line per mistake naming the key, and never repeating a secret."""
from __future__ import annotations

from pathlib import Path

import pytest

from regsite import config

SECRET = "s3cr3t-never-shown"


def _load(tmp_path: Path, text: str, **env: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return config.load({"SVC_CONFIG": str(path), **env})


def _mistakes(tmp_path: Path, text: str, **env: str) -> list[str]:
    with pytest.raises(config.ConfigError) as raised:
        _load(tmp_path, text, **env)
    return str(raised.value).splitlines()


def test_both_sources_are_off_by_default_and_read_from_file_and_environment(tmp_path) -> None:
    assert config.load({})["ldap"]["url"] == "" and config.load({})["oidc"]["issuer"] == ""
    cfg = _load(tmp_path, '[ldap]\nurl = "ldap://127.0.0.1:389"\nuser_dn_template = "uid={username},ou=people"\n'
                          'bind_dn = "cn=search"\n[oidc]\nissuer = "https://idp.example.org/realms/main"\n'
                          'client_id = "registry"\n',
                SVC_LDAP_BIND_PASSWORD=SECRET, SVC_OIDC_CLIENT_SECRET=SECRET, SVC_LDAP_CACHE_SECONDS="5")
    assert cfg["ldap"]["bind_password"] == SECRET and cfg["oidc"]["client_secret"] == SECRET
    assert cfg["ldap"]["cache_seconds"] == 5 and cfg["oidc"]["scopes"] == ["openid", "profile", "email"]


def test_every_mistake_is_one_line_naming_its_key(tmp_path) -> None:
    lines = _mistakes(tmp_path, '[ldap]\nurl = "http://ldap.example.org"\nstart_tls = true\n'
                                'user_search_base = "ou=people"\nuser_filter = "uid=x"\n'
                                'group_search_base = "ou=groups"\ngroup_filter = "(member=x)"\nbind_dn = "cn=a"\n'
                                '[oidc]\nissuer = "idp.example.org"\nscopes = ["profile"]\n')
    assert [line.split(":")[0] for line in lines] == [
        "[ldap] url", "[ldap] user_filter", "[ldap] group_filter", "[ldap] bind_password",
        "[oidc] issuer", "[oidc] client_id", "[oidc] scopes"]


@pytest.mark.parametrize("text, key", [
    ('[ldap]\nurl = "ldaps://h"\nstart_tls = true\nuser_dn_template = "uid={username}"\n', "[ldap] start_tls"),
    ('[ldap]\nurl = "ldap://h"\n', "[ldap] user_dn_template"),
    ('[ldap]\nurl = "ldap://h"\nuser_dn_template = "uid=x"\n', "[ldap] user_dn_template"),
    ('[ldap]\nurl = "ldap://h"\nuser_dn_template = "uid={username}"\nca_file = "/nonexistent/ca.pem"\n',
     "[ldap] ca_file"),
    ('[ldap]\nurl = "ldap://h"\nuser_dn_template = "uid={username}"\ncache_seconds = -1\n', "[ldap] cache_seconds"),
    ('[oidc]\nissuer = "https://h"\nclient_id = "r"\nusername_claim = ""\n', "[oidc] username_claim"),
    ('[oidc]\nissuer = "https://h"\nclient_id = "r"\ngroups_max_age_hours = 0\n', "[oidc] groups_max_age_hours"),
    ('[ldap]\nurl = "ldap://h"\nuser_dn_template = "uid={username}"\nport = 389\n', "[ldap] port"),
])
def test_bad_settings_name_the_key(tmp_path, text: str, key: str) -> None:
    assert _mistakes(tmp_path, text)[0].startswith(key + ":")


def test_secrets_never_appear_in_errors(tmp_path) -> None:
    lines = _mistakes(tmp_path, f'[ldap]\nurl = "ldap://h"\nuser_dn_template = "uid={{username}}"\n'
                                f'bind_password = ["{SECRET}"]\n')
    assert lines[0].startswith("[ldap] bind_password:") and SECRET not in "\n".join(lines)
    lines = _mistakes(tmp_path, f'[oidc]\nclient_secret = {{ value = "{SECRET}" }}\n')
    assert lines[0].startswith("[oidc] client_secret:") and SECRET not in "\n".join(lines)
