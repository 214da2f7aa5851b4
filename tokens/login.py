"""A password login on behalf of a request: throttled by client address, recorded for metrics; and the
one reading of Basic credentials, for the middleware and /auth/token alike."""
from __future__ import annotations

import base64
import binascii

from audit import log as audit
from regsite import text
from regsite.forwarded import client_address
from tokens import throttle
from tokens.principal import AuthAttempt, AuthenticatedHttpRequest, Mechanism, Outcome
from tokens.throttle import Throttled


class MalformedBasic(ValueError):
    """Basic credentials that are not the base64 of ``username:password`` in UTF-8."""


def basic_credentials(value: str) -> tuple[str, str]:
    """The username and password of a Basic Authorization value (what follows ``Basic ``)."""
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise MalformedBasic("malformed Basic credentials") from None
    username, sep, password = decoded.partition(":")
    if not sep:
        raise MalformedBasic("malformed Basic credentials")
    for what, value in (("username", username), ("password", password)):
        why = text.problem(value)
        if why:
            raise MalformedBasic(f"malformed Basic credentials: the {what} {why}")
    return username, password


def password_login(request: AuthenticatedHttpRequest, username: str, password: str,
                   mechanism: Mechanism = Mechanism.PASSWORD) -> bool:
    """Whether the htpasswd user's password is right; raises Throttled while the client must wait."""
    audit.claim(request, username)
    try:
        login = throttle.verify_password(username, password, client_address(request))
    except Throttled:
        request.auth_attempt = AuthAttempt(mechanism, Outcome.THROTTLED)
        raise
    request.auth_attempt = AuthAttempt(mechanism, Outcome.SUCCESS if login.ok else Outcome.FAILURE,
                                       distributed=login.distributed)
    return login.ok
