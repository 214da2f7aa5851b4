"""Basic credentials are read one way: by the registry's middleware and by /auth/token alike."""
from __future__ import annotations

import base64

import pytest

from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tokens.login import MalformedBasic, basic_credentials

MALFORMED = [
    "!!!not-base64!!!",
    base64.b64encode(b"alice").decode(),  # no colon
    base64.b64encode(b"alice:\xff\xfe").decode(),  # not UTF-8
]


def test_it_splits_at_the_first_colon_only() -> None:
    value = base64.b64encode(b"alice:pass:with:colons").decode()
    assert basic_credentials(f"  {value} ") == ("alice", "pass:with:colons")


def test_it_takes_an_empty_password() -> None:
    assert basic_credentials(base64.b64encode(b"alice:").decode()) == ("alice", "")


@pytest.mark.parametrize("value", MALFORMED)
def test_it_refuses_what_is_not_base64_of_user_colon_password(value: str) -> None:
    with pytest.raises(MalformedBasic, match="malformed Basic credentials"):
        basic_credentials(value)


@pytest.mark.django_db
@pytest.mark.parametrize("value", MALFORMED)
@pytest.mark.parametrize("path", ["/v2/_catalog", "/auth/token"])
def test_both_endpoints_give_the_same_401(client, auth_on, path: str, value: str) -> None:
    response = client.get(path, HTTP_AUTHORIZATION=f"Basic {value}")
    assert response.status_code == 401
    assert response.json()["error"] == "authentication required: malformed Basic credentials"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/v2/_catalog", "/auth/token"])
def test_both_endpoints_take_well_formed_credentials(client, auth_on, path: str) -> None:
    assert client.get(path, HTTP_AUTHORIZATION=basic("alice", "wonderland")).status_code == 200
