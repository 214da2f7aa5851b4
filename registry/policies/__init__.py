"""Governance rules configured as code: retention ([[retention]]), immutable tags ([[immutable]]) and
quotas ([[quota]]).

``rules`` and ``globs`` are pure Python (the configuration loader validates with them before Django
starts); ``immutable``, ``quotas`` and ``pulls`` are the small calls the registry services make.
Retention itself is in ``registry.retention``.
"""
