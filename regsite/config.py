"""Service configuration: one TOML file plus ``SVC_<TABLE>_<KEY>`` environment overrides.

The file's path comes from ``SVC_CONFIG`` (default ``config.toml`` in the working directory; the file
is optional). Every key has a default here, and its type is the type of that default. Environment
variables win over the file. Anything wrong stops start-up with one line naming the key.
"""
from __future__ import annotations

import errno
import ipaddress
import os
import socket
import sys
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

import tomli

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULTS: dict[str, dict[str, Any]] = {
    "server": {
        "bind": "0.0.0.0:4000",
        "workers": 2,
        "threads": 8,
        "upload_threads": 64,
        "timeout": 300,
        "keepalive": 75,
        "client_timeout": 60,
        "min_body_rate": 4096,
        "connections": 4096,
        "log_level": "info",
        "secret_key_file": "data/secret_key",
        "trusted_proxies": [],
        "external_url": "",
        "ready_cache_seconds": 5,
        "tls_cert": "",
        "tls_key": "",
    },
    "storage": {
        "backend": "filesystem",
        "root": "data/registry",
        "min_free_bytes": 100 * 1024 * 1024,
        "s3_endpoint": "",
        "s3_region": "us-east-1",
        "s3_bucket": "",
        "s3_prefix": "",
        "s3_access_key": "",
        "s3_secret_key": "",
        "redirect": True,
        "redirect_endpoint": "",
        "s3_timeout": 10,
        "s3_copy_timeout": 300,
        "s3_max_attempts": 3,
    },
    "database": {
        "url": "sqlite:///data/db.sqlite3",
        "pool_size": 8,
        "pool_timeout": 10,
        "statement_timeout": 30,
    },
    "registry": {
        "delete_enabled": True,
        "max_manifest_bytes": 4 * 1024 * 1024,
        "max_descriptors": 1000,
        "upload_expiry_hours": 24,
        "max_upload_sessions": 500,
        "referrers_per_page": 100,
        "referrers_page_annotation_bytes": 1024 * 1024,
        "referrer_annotation_bytes": 64 * 1024,
    },
    "ui": {
        "manifest_entries_per_page": 100,
        "manifest_json_bytes": 256 * 1024,
    },
    "auth": {
        "enabled": False,
        "htpasswd_file": "users.htpasswd",
        "token_storage": "data/tokens",
        "token_backend": "files",
        "challenge": "basic",
        "token_realm": "",
        "bearer_ttl_seconds": 300,
        "refresh_ttl_days": 30,
        "max_tokens_per_user": 100,
        "login_failures": 10,
        "login_backoff_max": 3600,
        # Access control (regsite.access_config, tokens.authz): with these defaults and no [[access]]
        # entry, every htpasswd user is an admin of every repository, as before they existed.
        "default_role": "admin",
        "groups_file": "",
        "admins": [],
    },
    "audit": {
        "retention_days": 90,
    },
    # Identity sources beside htpasswd (regsite.identity_config checks them, tokens.directory and
    # ops.ui.oidc use them): each is off while its address is empty.
    "ldap": {
        "url": "",
        "start_tls": False,
        "ca_file": "",
        "bind_dn": "",
        "bind_password": "",
        "user_dn_template": "",
        "user_search_base": "",
        "user_filter": "(uid={username})",
        "group_search_base": "",
        "group_filter": "(member={dn})",
        "group_name_attribute": "cn",
        "cache_seconds": 60,
        "timeout_seconds": 5,
    },
    "oidc": {
        "issuer": "",
        "name": "",
        "client_id": "",
        "client_secret": "",
        "scopes": ["openid", "profile", "email"],
        "username_claim": "preferred_username",
        "groups_claim": "groups",
        "groups_max_age_hours": 24,
    },
    "gc": {
        "interval_hours": 0,
        "grace_hours": 24,
    },
}

# Keys whose integer value must be positive (a zero or negative value is a mistake, not a choice).
POSITIVE_INTS = {
    ("server", "workers"),
    ("server", "threads"),
    ("server", "upload_threads"),
    ("server", "timeout"),
    ("server", "client_timeout"),
    ("server", "connections"),
    ("storage", "s3_timeout"),
    ("storage", "s3_copy_timeout"),
    ("storage", "s3_max_attempts"),
    ("database", "pool_size"),
    ("database", "pool_timeout"),
    ("registry", "max_manifest_bytes"),
    ("registry", "max_descriptors"),
    ("registry", "upload_expiry_hours"),
    ("registry", "referrers_per_page"),
    ("registry", "referrers_page_annotation_bytes"),
    ("registry", "referrer_annotation_bytes"),
    ("ui", "manifest_entries_per_page"),
    ("ui", "manifest_json_bytes"),
    ("auth", "bearer_ttl_seconds"),
    ("auth", "refresh_ttl_days"),
    ("auth", "max_tokens_per_user"),
    ("auth", "login_failures"),
    ("auth", "login_backoff_max"),
    ("audit", "retention_days"),
    ("ldap", "timeout_seconds"),
    ("oidc", "groups_max_age_hours"),
}
LOG_LEVELS = {"debug", "info", "warning", "error", "critical"}
CHOICES = {
    ("storage", "backend"): ("filesystem", "s3"),
    ("auth", "token_backend"): ("files", "database"),
    ("auth", "challenge"): ("basic", "bearer"),
}
# Never shown in an error message, a log line or /ready.
SECRET_KEYS = {("storage", "s3_secret_key"), ("storage", "s3_access_key"), ("ldap", "bind_password"),
               ("oidc", "client_secret")}


# The project directory (where manage.py is). Relative paths in the configuration, and the default
# config.toml, are relative to it, whatever the working directory: the server and every manage.py
# command, started from anywhere, then use the same files.
BASE_DIR = Path(__file__).resolve().parent.parent
PATHS_NOTE = (f"It reads the server's configuration (config.toml in {BASE_DIR} or SVC_CONFIG, and the SVC_* "
              "variables) and resolves relative paths in it against that directory, as the server "
              "does, wherever it is run from.")
PATH_KEYS = (("server", "secret_key_file"), ("storage", "root"), ("auth", "htpasswd_file"),
             ("auth", "token_storage"), ("auth", "groups_file"), ("server", "tls_cert"), ("server", "tls_key"),
             ("ldap", "ca_file"))


class ConfigError(Exception):
    """A configuration value is missing, unknown or of the wrong type."""


class Required:
    """The default of a key that every entry of an array of tables must give."""

    def __init__(self, kind: type) -> None:
        self.kind = kind


# Arrays of tables ([[proxy]], [[retention]], ...): the keys of one entry with their defaults (a
# Required key has none). Each may have a validator of its whole list, which raises ConfigError
# naming the entry (entry_name) and the key. Features register their tables here.
LISTS: dict[str, dict[str, Any]] = {}
LIST_VALIDATORS: dict[str, Callable[[list[dict[str, Any]]], None]] = {}
# Keys of list entries whose values are never repeated in an error message (a proxy's upstream
# credentials, a webhook's headers and secret).
LIST_SECRET_KEYS: set[tuple[str, str]] = set()
# Checks of one table against another (a governance rule against the [[proxy]] prefixes), run after
# every table's own.
CROSS_CHECKS: list[Callable[[dict[str, Any]], None]] = []


_LABEL_KEYS = ("name", "prefix", "repositories")


def _label(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return ", ".join(value[:3]) + (", ..." if len(value) > 3 else "")  # [[access]]'s globs
    return value if isinstance(value, str) else ""


def entry_name(table: str, index: int, entry: Mapping[str, Any], label: str = "") -> str:
    """How errors name an entry: ``[[proxy]] #2 "hub"``: counted from 1, with its name, prefix or
    repositories when it has one."""
    label = label or next((key for key in _LABEL_KEYS if _label(entry.get(key))), "")
    shown = f' "{_label(entry[label])}"' if label and _label(entry.get(label)) else ""
    return f"[[{table}]] #{index + 1}{shown}"


def _parse_bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(f"{key}: expected true or false, got {raw!r}")


def _coerce(key: str, default: Any, value: Any, from_env: bool) -> Any:
    if isinstance(default, Required):
        default = default.kind()
    if isinstance(default, list):
        if from_env:
            return [item.strip() for item in value.split(",") if item.strip()]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
        return value
    if isinstance(default, dict):
        if from_env or not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ConfigError(f"{key}: expected a table of strings, got {value!r}")
        return value
    if isinstance(default, bool):
        if from_env:
            return _parse_bool(key, value)
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if isinstance(default, int):
        if from_env:
            try:
                return int(value.strip())
            except ValueError:
                raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def load(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return the merged configuration: defaults < TOML file < environment."""
    env = os.environ if environ is None else environ
    path = Path(env["SVC_CONFIG"]) if "SVC_CONFIG" in env else BASE_DIR / "config.toml"
    file_values: dict[str, Any] = {}
    if path.exists():
        try:
            with path.open("rb") as fh:
                file_values = tomli.load(fh)
        except (OSError, tomli.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read configuration file: {exc}") from None
    elif "SVC_CONFIG" in env:
        raise ConfigError(f"SVC_CONFIG: configuration file {path} does not exist")

    merged: dict[str, Any] = {table: dict(keys) for table, keys in DEFAULTS.items()}
    merged |= {table: _entries(table, file_values.pop(table, []), path) for table in LISTS}
    explicit: set[tuple[str, str]] = set()
    for table, keys in file_values.items():
        if table not in DEFAULTS:
            raise ConfigError(f"[{table}]: unknown table in {path}")
        if not isinstance(keys, dict):
            raise ConfigError(f"[{table}]: expected a table in {path}")
        for key, value in keys.items():
            if key not in DEFAULTS[table]:
                raise ConfigError(f"[{table}] {key}: unknown key in {path}")
            merged[table][key] = _coerce_secretly(table, f"[{table}] {key}", key, DEFAULTS[table][key], value, False)
            explicit.add((table, key))

    for name, raw in env.items():
        if not name.startswith("SVC_") or name == "SVC_CONFIG":
            continue
        if _list_override(merged, name, raw):
            continue
        target = _env_target(name)
        if target is None:
            continue
        table, key = target
        merged[table][key] = _coerce_secretly(table, name, key, DEFAULTS[table][key], raw, True)
        explicit.add((table, key))

    _validate(merged)
    if merged["storage"]["backend"] == "s3" and ("server", "secret_key_file") not in explicit \
            and not env.get("SVC_SECRET_KEY"):
        raise ConfigError('[server] secret_key_file: must be set explicitly (or SVC_SECRET_KEY) when '
                          '[storage] backend = "s3": every replica must sign sessions with one key')
    return merged


def _entries(table: str, raw: Any, path: Path) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise ConfigError(f"[[{table}]]: expected an array of tables ([[{table}]]) in {path}")
    schema = LISTS[table]
    entries = []
    mistakes: list[str] = []  # every one of the table's, one line each
    for index, given in enumerate(raw):
        where = entry_name(table, index, given)
        entry: dict[str, Any] = {}
        for key, value in given.items():
            try:
                if key not in schema:
                    raise ConfigError(f"{where} {key}: unknown key in {path}")
                entry[key] = _coerce_secretly(table, f"{where} {key}", key, schema[key], value, False)
            except ConfigError as exc:
                mistakes.append(str(exc))
        for key, default in schema.items():
            if key not in entry and key not in given:
                if isinstance(default, Required):
                    mistakes.append(f"{where} {key}: required")
                    continue
                entry[key] = default.copy() if isinstance(default, (list, dict)) else default
        entries.append(entry)
    if mistakes:
        raise ConfigError("\n".join(mistakes))
    return entries


def _list_override(merged: dict[str, Any], name: str, raw: str) -> bool:
    """``SVC_<TABLE>_<N>_<KEY>`` sets a key of entry N (from 0) of an array of tables."""
    rest = name[len("SVC_"):].lower()
    for table in LISTS:
        head, _, tail = rest.partition("_")
        if head != table:
            continue
        number, _, key = tail.partition("_")
        if not number.isdigit() or key not in LISTS[table]:
            raise ConfigError(f"{name}: expected SVC_{table.upper()}_<n>_<KEY> with a key of [[{table}]]")
        if int(number) >= len(merged[table]):
            raise ConfigError(f"{name}: there is no [[{table}]] #{int(number) + 1} in the configuration file")
        merged[table][int(number)][key] = _coerce_secretly(table, name, key, LISTS[table][key], raw, True)
        return True
    return False


def _coerce_secretly(table: str, where: str, key: str, default: Any, value: Any, from_env: bool) -> Any:
    """_coerce, with the value left out of the error for a secret key (a header's token)."""
    try:
        return _coerce(where, default, value, from_env)
    except ConfigError as exc:
        if (table, key) not in LIST_SECRET_KEYS | SECRET_KEYS:
            raise
        kind = str(exc).partition(": ")[2].partition(", got")[0]
        raise ConfigError(f"{where}: {kind} (the value is not shown: it may be secret)") from None


def _env_target(name: str) -> tuple[str, str] | None:
    """The (table, key) an ``SVC_<TABLE>_<KEY>`` variable sets; None for other SVC_ names.

    A variable naming a known table but no key of it is a typo that would otherwise be ignored.
    """
    rest = name[len("SVC_"):].lower()
    for table, keys in DEFAULTS.items():
        prefix = table + "_"
        if rest.startswith(prefix):
            if rest[len(prefix):] not in keys:
                raise ConfigError(f"{name}: unknown key {rest[len(prefix):]!r} of table [{table}]")
            return table, rest[len(prefix):]
    return None


def _validate(cfg: dict[str, Any]) -> None:
    for table, check in LIST_VALIDATORS.items():
        check(cfg[table])
    for cross_check in CROSS_CHECKS:
        cross_check(cfg)
    for table, key in POSITIVE_INTS:
        if cfg[table][key] <= 0:
            raise ConfigError(f"[{table}] {key}: must be a positive integer, got {cfg[table][key]}")
    for table, key in (("server", "min_body_rate"), ("server", "ready_cache_seconds"), ("storage", "min_free_bytes"),
                       ("gc", "interval_hours"), ("gc", "grace_hours"), ("registry", "max_upload_sessions"),
                       ("database", "statement_timeout")):
        if cfg[table][key] < 0:
            raise ConfigError(f"[{table}] {key}: must not be negative, got {cfg[table][key]}")
    for (table, key), allowed in CHOICES.items():
        if cfg[table][key] not in allowed:
            raise ConfigError(f"[{table}] {key}: expected one of {', '.join(allowed)}, got {cfg[table][key]!r}")
    storage = cfg["storage"]
    if storage["backend"] == "s3" and not storage["s3_bucket"]:
        raise ConfigError('[storage] s3_bucket: required when [storage] backend = "s3"')
    for key in ("s3_endpoint", "redirect_endpoint"):
        if storage[key] and urlsplit(storage[key]).scheme not in ("http", "https"):
            raise ConfigError(f"[storage] {key}: expected an http:// or https:// URL, got {storage[key]!r}")
    realm = cfg["auth"]["token_realm"]
    # Clients fetch tokens from it as given: it must be absolute, and fit inside a quoted header value.
    if realm and (urlsplit(realm).scheme not in ("http", "https") or not urlsplit(realm).netloc
                  or any(c in realm for c in '" \r\n')):
        raise ConfigError(f"[auth] token_realm: expected an absolute http:// or https:// URL, got {realm!r}")
    if bool(storage["s3_access_key"]) != bool(storage["s3_secret_key"]):
        raise ConfigError("[storage] s3_secret_key: s3_access_key and s3_secret_key go together "
                          "(leave both empty for the standard AWS credential chain)")
    _check_bind(cfg["server"]["bind"])
    if bool(cfg["server"]["tls_cert"]) != bool(cfg["server"]["tls_key"]):
        missing = "tls_key" if cfg["server"]["tls_cert"] else "tls_cert"
        raise ConfigError(f"[server] {missing}: tls_cert and tls_key go together (set both to serve HTTPS, "
                          "neither for plain HTTP)")
    cfg["server"]["external_url"] = external_url(cfg["server"]["external_url"])
    proxy_networks(cfg["server"]["trusted_proxies"])
    if cfg["server"]["log_level"].lower() not in LOG_LEVELS:
        raise ConfigError(
            f"[server] log_level: expected one of {', '.join(sorted(LOG_LEVELS))}, "
            f"got {cfg['server']['log_level']!r}"
        )
    database_settings(cfg["database"])


def loopback_only(bind: str) -> bool:
    """Whether only this machine can reach ``bind`` (a loopback address or a unix socket)."""
    if bind.startswith("unix:"):
        return True
    host = bind.rpartition(":")[0].strip("[]")
    return host == "localhost" or host == "::1" or host.startswith("127.")


def external_url(url: str) -> str:
    """``[server] external_url``: how clients reach the registry, ``scheme://host[:port]`` (a slash
    at the end is dropped); empty when not set. The registry is served at the root (``/v2/`` is
    fixed by the distribution spec), so the URL has no path."""
    if not url:
        return ""
    key = "[server] external_url"
    parts = urlsplit(url)
    shown = repr(url) if parts.password is None else "(not shown: it holds credentials)"
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c in url for c in '" \r\n\t'):
        raise ConfigError(f"{key}: expected an http:// or https:// URL such as https://registry.example.com, "
                          f"got {shown}")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"{key}: expected a URL without credentials, got {shown}")
    try:
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        raise ConfigError(f"{key}: the port of {shown} is not a port number") from None
    if parts.path not in ("", "/"):
        raise ConfigError(f"{key}: expected a URL without a path (the registry is served at the root), got {shown}")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ConfigError(f"{key}: expected a URL without a query or fragment, got {shown}")
    return f"{parts.scheme}://{parts.netloc}"
def exit_if_in_use(addresses: list[Any], environ: Mapping[str, str] = os.environ) -> None:
    """Stop with one line naming the setting when another program listens on a ``[server] bind``
    address (gunicorn's own ``(host, port)`` tuples), before gunicorn tries it five times and ends
    with "Can't connect to ('127.0.0.1', 4000)". Sockets handed over by systemd or a re-executed
    gunicorn are this server's own."""
    if environ.get("LISTEN_FDS") or environ.get("GUNICORN_FD"):
        return
    for address in addresses:
        if not isinstance(address, tuple):
            continue  # a unix socket: gunicorn replaces a stale file itself
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    return  # gunicorn says what else is wrong
                host = f"[{address[0]}]" if family == socket.AF_INET6 else address[0]
                print(f"configuration error: [server] bind: {host}:{address[1]} is in use by another program: stop "
                      "it, or set SVC_SERVER_BIND (or [server] bind) to a free address", file=sys.stderr)
                raise SystemExit(2) from None


def proxy_networks(entries: list[str]) -> tuple[IPNetwork, ...]:
    """``[server] trusted_proxies`` as networks: each entry an address or a CIDR network."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ConfigError(f"[server] trusted_proxies: {entry!r} is not an IP address or a network "
                              "such as 10.0.0.0/8") from None
    return tuple(networks)


def _check_bind(bind: str) -> None:
    """host:port, [ipv6]:port or unix:/path, as gunicorn takes them: anything else made gunicorn
    retry a connection to nowhere instead of stopping."""
    if bind.startswith("unix:") and len(bind) > len("unix:"):
        return
    host, sep, port = bind.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    valid_host = bool(host) and all(c.isalnum() or c in ".-:_" for c in host)
    if not (sep and valid_host and port.isdigit() and 0 < int(port) < 65536):
        raise ConfigError(f"[server] bind: expected host:port (e.g. 0.0.0.0:4000), [ipv6]:port or "
                          f"unix:/path, got {bind!r}")


def database_settings(database: Mapping[str, Any]) -> dict[str, Any]:
    """Translate the ``[database]`` table into a Django DATABASES entry (regsite.database_url)."""
    from regsite import database_url

    return database_url.django_settings(database)


def ensure_writable_dir(key: str, path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{key}: cannot create directory {path}: {exc.strerror}") from None
    if not path.is_dir():
        raise ConfigError(f"{key}: {path} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}: directory {path} is not writable")


def ensure_token_storage(path: Path) -> None:
    """The token directory exists, is private to the service (0700) and writable."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
        if st.st_mode & 0o077 and st.st_uid == os.getuid():
            path.chmod(0o700)
    except OSError as exc:
        raise ConfigError(f"[auth] token_storage: cannot create directory {path}: {exc.strerror}") from None
    ensure_writable_dir("[auth] token_storage", path)


def check_htpasswd(cfg: dict[str, dict[str, Any]]) -> None:
    """With authentication on, the server must be able to read its htpasswd file."""
    if not cfg["auth"]["enabled"]:
        return
    path = Path(cfg["auth"]["htpasswd_file"])
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"[auth] htpasswd_file: cannot read {path}: {exc.strerror}") from None


def check_bucket(cfg: dict[str, dict[str, Any]]) -> None:
    """With S3 storage, the bucket exists and takes a write, or the server does not start."""
    if cfg["storage"]["backend"] != "s3":
        return
    import secrets

    from registry.storage import paths
    from registry.storage.driver import StorageError

    storage = cfg["storage"]
    try:
        s3_driver(storage).check(paths.probe(secrets.token_hex(8)))
    except StorageError as exc:
        # The key to fix: a wrong secret is not a problem of the bucket's.
        key = f"s3_{getattr(exc, 'setting', 'bucket')}"
        raise ConfigError(f"[storage] {key}: {exc}") from None


def check_tls(cfg: dict[str, dict[str, Any]]) -> None:
    """With ``tls_cert`` and ``tls_key``, they load as a certificate and its key (regsite.tls)."""
    from regsite import tls

    tls.serving(cfg["server"]["tls_cert"], cfg["server"]["tls_key"])


def s3_driver(storage: Mapping[str, Any]) -> Any:
    """The S3 driver the ``[storage]`` table describes."""
    from registry.storage.s3 import S3Driver

    return S3Driver(storage["s3_bucket"], prefix=storage["s3_prefix"], endpoint=storage["s3_endpoint"] or None,
                    region=storage["s3_region"], access_key=storage["s3_access_key"] or None,
                    secret_key=storage["s3_secret_key"] or None,
                    redirect_endpoint=storage["redirect_endpoint"] or None, timeout=storage["s3_timeout"],
                    copy_timeout=storage["s3_copy_timeout"], max_attempts=storage["s3_max_attempts"])


def resolve_paths(cfg: dict[str, Any], base: Path | None = None) -> dict[str, Any]:
    """The configuration with its relative paths made absolute against the project directory."""
    root = base or BASE_DIR
    for table, key in PATH_KEYS:
        if cfg[table][key]:  # an optional file left empty stays unset
            cfg[table][key] = str(root / cfg[table][key])  # an absolute path stays as it is
    url = cfg["database"]["url"]
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        cfg["database"]["url"] = "sqlite:///" + str(root / url[len("sqlite:///"):])
    return cfg


def load_or_exit(
    environ: Mapping[str, str] | None = None, serving: bool = False
) -> dict[str, Any]:
    """Load and check the configuration; on error print one line and stop the process.

    ``serving`` adds the checks only the server needs: manage.py must run without an htpasswd
    file, since ``manage.py adduser`` is one way to create it.
    """
    try:
        cfg = resolve_paths(load(environ))
        if cfg["storage"]["backend"] == "filesystem":
            ensure_writable_dir("[storage] root", Path(cfg["storage"]["root"]))
        if cfg["auth"]["token_backend"] == "files":
            ensure_token_storage(Path(cfg["auth"]["token_storage"]))
        if serving:
            check_htpasswd(cfg)
            check_bucket(cfg)
            check_tls(cfg)
        db = database_settings(cfg["database"])
        if db["ENGINE"].endswith("sqlite3"):
            ensure_writable_dir("[database] url", Path(db["NAME"]).resolve().parent)
    except ConfigError as exc:
        # One line per mistake: a table's check names every mistake it finds, not just the first.
        for line in str(exc).splitlines():
            print(f"configuration error: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    return cfg


# The configuration the gunicorn master checked and serves: its workers, forked from it, use it as
# it is rather than reading the file themselves, so a SIGHUP with a broken file changes nothing.
_served: dict[str, Any] | None = None


def load_for_master() -> dict[str, Any]:
    """The gunicorn master's configuration (gunicorn.conf.py). At start, as ``load_or_exit``; on a
    reload (SIGHUP) a file or environment with a mistake is reported and the previous configuration
    stays in force: the master exiting would take every worker, and the service, down with it."""
    global _served
    if _served is None:
        _served = load_or_exit(serving=True)
        return _served
    try:
        _served = load_or_exit(serving=True)
    except SystemExit:
        print("configuration error: the reload (SIGHUP) is refused, the previous configuration stays in "
              "force until the file is corrected and the server is sent SIGHUP again", file=sys.stderr)
    return _served


def served() -> dict[str, Any] | None:
    """In a gunicorn worker, the configuration its master checked; None in any other process."""
    return _served


def _register_tables() -> None:
    # Features declare their tables in their own modules, which need the names above.
    from notifications import endpoints
    from regsite import access_config, identity_config, policy_config, proxy_config
    from replication import policies as replication

    access_config.register(LISTS, CROSS_CHECKS)
    identity_config.register(CROSS_CHECKS)
    proxy_config.register(LISTS, LIST_VALIDATORS, LIST_SECRET_KEYS)
    policy_config.register(LISTS, LIST_VALIDATORS, CROSS_CHECKS)
    endpoints.register(LISTS, LIST_VALIDATORS, LIST_SECRET_KEYS)
    replication.register(LISTS, LIST_VALIDATORS, LIST_SECRET_KEYS)


_register_tables()
