"""A new token is a read token unless asked otherwise (the product spec), wherever it is made."""
from __future__ import annotations

import io

from django.core.management import call_command

from ops import openapi
from ops.ui.forms import TokenForm
from tests.support.auth import auth_paths  # noqa: F401  (fixture)
from tokens import services


def test_createtoken_without_a_role_makes_a_read_token(auth_paths) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("createtoken", "--username", "alice", stdout=out, stderr=err)
    assert services.authenticate_token(out.getvalue().strip()).role == "read"
    assert "Created a read token" in err.getvalue()


def test_the_ui_form_offers_read_first() -> None:
    assert TokenForm().fields["role"].initial == "read"


def test_the_openapi_document_says_read() -> None:
    schema = openapi.document()["components"]["schemas"]["TokenCreateRequest"]["allOf"][1]
    assert schema["properties"]["role"]["default"] == "read"
    assert "`role` defaults to read," in openapi.document()["paths"]["/api/tokens"]["post"]["description"]
