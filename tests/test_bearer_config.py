"""The token flow's [auth] keys: a bad challenge, realm or lifetime stops start-up naming the key."""
from __future__ import annotations

import pytest

from regsite import config


@pytest.mark.parametrize("env, needle", [
    ({"SVC_AUTH_CHALLENGE": "digest"}, "[auth] challenge: expected one of basic, bearer, got 'digest'"),
    ({"SVC_AUTH_TOKEN_REALM": "/auth/token"}, "[auth] token_realm: expected an absolute http:// or https:// URL"),
    ({"SVC_AUTH_TOKEN_REALM": "ftp://host/auth/token"}, "[auth] token_realm: expected an absolute"),
    ({"SVC_AUTH_TOKEN_REALM": 'https://host/a"b'}, "[auth] token_realm: expected an absolute"),
    ({"SVC_AUTH_BEARER_TTL_SECONDS": "0"}, "[auth] bearer_ttl_seconds: must be a positive integer"),
    ({"SVC_AUTH_REFRESH_TTL_DAYS": "-3"}, "[auth] refresh_ttl_days: must be a positive integer"),
])
def test_it_refuses_a_bad_token_flow_setting(tmp_path, monkeypatch, env: dict[str, str], needle: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(config.ConfigError) as error:
        config.load(env)
    assert needle in str(error.value)


def test_it_takes_the_bearer_challenge_and_a_realm(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    auth = config.load({"SVC_AUTH_CHALLENGE": "bearer",
                        "SVC_AUTH_TOKEN_REALM": "https://registry.example.internal/auth/token"})["auth"]
    assert (auth["challenge"], auth["token_realm"]) == ("bearer", "https://registry.example.internal/auth/token")
    assert (auth["bearer_ttl_seconds"], auth["refresh_ttl_days"]) == (300, 30)
