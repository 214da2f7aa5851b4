"""A database that is down, or a connection pool with no free connection, or a connection lost under a
request (a failover), is a 503 the client may retry (in the OCI envelope, with Retry-After), not a 500."""
from __future__ import annotations

import json

import pytest
from django.db import InterfaceError, OperationalError

from registry.services import manifests


@pytest.mark.django_db
@pytest.mark.parametrize("error", [
    OperationalError("couldn't get a connection after 10.00 sec"),
    OperationalError("the database server is read-only (a standby now?)"),
    InterfaceError("the connection is closed"),  # dropped by regsite.postgresql earlier in the request
])
def test_it_answers_503_when_no_database_connection_can_be_had(client, monkeypatch, error) -> None:
    def no_connection(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(manifests, "get", no_connection)
    response = client.get("/v2/team/app/manifests/v1")
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert json.loads(response.content)["errors"][0]["code"] == "UNAVAILABLE"
