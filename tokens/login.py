"""A password login on behalf of a request: throttled by client address, recorded for metrics."""
from __future__ import annotations

from regsite.forwarded import client_address
from tokens import throttle
from tokens.principal import AuthAttempt, AuthenticatedHttpRequest, Mechanism, Outcome
from tokens.throttle import Throttled


def password_login(request: AuthenticatedHttpRequest, username: str, password: str,
                   mechanism: Mechanism = Mechanism.PASSWORD) -> bool:
    """Whether the htpasswd user's password is right; raises Throttled while the client must wait."""
    try:
        login = throttle.verify_password(username, password, client_address(request))
    except Throttled:
        request.auth_attempt = AuthAttempt(mechanism, Outcome.THROTTLED)
        raise
    request.auth_attempt = AuthAttempt(mechanism, Outcome.SUCCESS if login.ok else Outcome.FAILURE,
                                       distributed=login.distributed)
    return login.ok
