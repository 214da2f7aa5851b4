"""The ``[ldap]`` and ``[oidc]`` tables: checked at start-up, one line per mistake, never showing a secret.

Each source is off while its address (``[ldap] url``, ``[oidc] issuer``) is empty; once it is set,
what it needs must be there and make sense: a user DN template or a search base, filters that are
LDAP filters with their placeholder, an issuer that is an http(s) URL, the ``openid`` scope.
"""
from __future__ import annotations

import os
from typing import Any, Callable
from urllib.parse import urlsplit

from regsite.config import BASE_DIR, ConfigError


def _filter_mistake(text: str, placeholder: str) -> str | None:
    """Why ``text`` is not an LDAP search filter with ``{placeholder}`` in it, or None."""
    if placeholder not in text:
        return f"must contain {{{placeholder}}}"
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            break
    if not (text.startswith("(") and text.endswith(")")) or depth != 0:
        return f"expected an LDAP filter in parentheses such as (uid={{{placeholder}}}), got {text!r}"
    return None


def ldap_mistakes(ldap: dict[str, Any]) -> list[str]:
    if not ldap["url"]:
        return []
    mistakes = []
    url = urlsplit(ldap["url"])
    if url.scheme not in ("ldap", "ldaps") or not url.hostname or url.path not in ("", "/") or url.query:
        mistakes.append(f"[ldap] url: expected ldap://host[:port] or ldaps://host[:port], got {ldap['url']!r}")
    if ldap["start_tls"] and url.scheme == "ldaps":
        mistakes.append("[ldap] start_tls: ldaps:// is TLS already; use ldap:// with start_tls = true, or ldaps://")
    if ldap["ca_file"] and not os.access(BASE_DIR / ldap["ca_file"], os.R_OK):  # an absolute path stays
        mistakes.append(f"[ldap] ca_file: cannot read {ldap['ca_file']}")
    if bool(ldap["user_dn_template"]) == bool(ldap["user_search_base"]):
        mistakes.append("[ldap] user_dn_template: set either user_dn_template or user_search_base (with "
                        "user_filter), not both and not neither")
    elif ldap["user_dn_template"] and "{username}" not in ldap["user_dn_template"]:
        mistakes.append("[ldap] user_dn_template: must contain {username}, e.g. "
                        "uid={username},ou=people,dc=example,dc=org")
    elif ldap["user_search_base"]:
        why = _filter_mistake(ldap["user_filter"], "username")
        if why:
            mistakes.append(f"[ldap] user_filter: {why}")
    if ldap["group_search_base"]:
        why = _filter_mistake(ldap["group_filter"].replace("{username}", "{dn}"), "dn")
        if why:
            mistakes.append(f"[ldap] group_filter: {why.replace('{dn}', '{dn} or {username}')}")
        if not ldap["group_name_attribute"]:
            mistakes.append("[ldap] group_name_attribute: required with group_search_base (e.g. cn)")
    if ldap["bind_dn"] and not ldap["bind_password"]:
        mistakes.append("[ldap] bind_password: required with bind_dn (set SVC_LDAP_BIND_PASSWORD)")
    if ldap["cache_seconds"] < 0:
        mistakes.append(f"[ldap] cache_seconds: must not be negative, got {ldap['cache_seconds']}")
    return mistakes


def oidc_mistakes(oidc: dict[str, Any]) -> list[str]:
    if not oidc["issuer"]:
        return []
    mistakes = []
    issuer = urlsplit(oidc["issuer"])
    if issuer.scheme not in ("http", "https") or not issuer.hostname or issuer.query or issuer.fragment:
        mistakes.append(f"[oidc] issuer: expected an https:// URL such as https://idp.example.org/realms/main, "
                        f"got {oidc['issuer']!r}")
    if not oidc["client_id"]:
        mistakes.append("[oidc] client_id: required with issuer")
    if "openid" not in oidc["scopes"]:
        mistakes.append(f"[oidc] scopes: must include \"openid\", got {oidc['scopes']!r}")
    for key in ("username_claim", "groups_claim"):
        if not oidc[key]:
            mistakes.append(f"[oidc] {key}: must not be empty")
    return mistakes


def check(cfg: dict[str, Any]) -> None:
    mistakes = ldap_mistakes(cfg["ldap"]) + oidc_mistakes(cfg["oidc"])
    if mistakes:
        raise ConfigError("\n".join(mistakes))


def register(cross_checks: list[Callable[[dict[str, Any]], None]]) -> None:
    cross_checks.append(check)
