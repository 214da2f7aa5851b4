"""The one place that says which action a registry request needs: pull, push or delete."""
from __future__ import annotations

from enum import Enum


class Action(str, Enum):
    PULL = "pull"
    PUSH = "push"
    DELETE = "delete"


# Every verb on an upload session, including GET (status) and DELETE (cancel), is part of a push.
UPLOAD_ROUTES = frozenset({"upload-start", "upload-session"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def action_for(url_name: str | None, method: str | None) -> Action:
    if url_name in UPLOAD_ROUTES:
        return Action.PUSH
    if method in SAFE_METHODS:
        return Action.PULL
    if method == "DELETE":
        return Action.DELETE
    return Action.PUSH
