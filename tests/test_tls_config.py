"""``[server] tls_cert`` / ``tls_key``: both or neither, checked at start-up with one line naming the key
(a file that cannot be read, no PEM in it, a key that is not the certificate's, a key with a
passphrase), an expired certificate only a warning; and the reload of a changed pair (regsite.tls),
which keeps the previous pair while the new one does not load."""
from __future__ import annotations

import datetime
import logging
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from regsite import config, tls
from tests.support.certs import CA, Issued


@pytest.fixture
def ca(tmp_path: Path) -> CA:
    return CA(tmp_path / "ca")


@pytest.fixture
def issued(ca: CA, tmp_path: Path) -> Issued:
    return ca.issue(tmp_path / "cert.pem", tmp_path / "key.pem")


def load(tmp_path: Path, **env: str) -> dict:
    (tmp_path / "config.toml").touch()
    return config.load({"SVC_CONFIG": str(tmp_path / "config.toml"), **env})


def refused(**env: str) -> str:
    with pytest.raises(config.ConfigError) as caught:
        cfg = config.resolve_paths(config.load({"SVC_CONFIG": os.devnull, **env}))
        config.check_tls(cfg)
    return str(caught.value)


def test_off_by_default(tmp_path) -> None:
    assert (load(tmp_path)["server"]["tls_cert"], load(tmp_path)["server"]["tls_key"]) == ("", "")
    assert config.resolve_paths(load(tmp_path))["server"]["tls_cert"] == ""


def test_relative_paths_are_the_project_directory_s(tmp_path) -> None:
    cfg = config.resolve_paths(load(tmp_path, SVC_SERVER_TLS_CERT="tls/cert.pem", SVC_SERVER_TLS_KEY="/etc/k.pem"))
    assert cfg["server"]["tls_cert"] == str(config.BASE_DIR / "tls/cert.pem")
    assert cfg["server"]["tls_key"] == "/etc/k.pem"


@pytest.mark.parametrize("given, missing", [("SVC_SERVER_TLS_CERT", "tls_key"), ("SVC_SERVER_TLS_KEY", "tls_cert")])
def test_both_or_neither(tmp_path, given, missing) -> None:
    with pytest.raises(config.ConfigError) as caught:
        load(tmp_path, **{given: "/x.pem"})
    assert str(caught.value).startswith(f"[server] {missing}: tls_cert and tls_key go together")


def test_a_good_pair_is_taken_and_its_context_is_modern(ca, issued) -> None:
    certificates = tls.Certificates(str(issued.cert), str(issued.key))
    assert certificates.warnings == []
    assert certificates.context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert certificates.context.options & ssl.OP_NO_RENEGOTIATION
    assert _served_serial(certificates.context, ca.client_context()) == issued.serial


def test_a_missing_file_names_its_key(issued, tmp_path) -> None:
    message = refused(SVC_SERVER_TLS_CERT=str(tmp_path / "nope.pem"), SVC_SERVER_TLS_KEY=str(issued.key))
    assert message == f"[server] tls_cert: cannot read {tmp_path / 'nope.pem'}: No such file or directory"
    message = refused(SVC_SERVER_TLS_CERT=str(issued.cert), SVC_SERVER_TLS_KEY=str(tmp_path))
    assert message == f"[server] tls_key: cannot read {tmp_path}: Is a directory"


def test_a_file_without_pem_names_its_key(issued, tmp_path) -> None:
    der = tmp_path / "cert.der"
    der.write_bytes(x509.load_pem_x509_certificate(issued.cert.read_bytes()).public_bytes(serialization.Encoding.DER))
    assert refused(SVC_SERVER_TLS_CERT=str(der), SVC_SERVER_TLS_KEY=str(issued.key)).startswith(
        f"[server] tls_cert: {der} holds no PEM certificate")
    assert refused(SVC_SERVER_TLS_CERT=str(issued.cert), SVC_SERVER_TLS_KEY=str(issued.cert)).startswith(
        f"[server] tls_key: {issued.cert} holds no PEM private key")


def test_a_key_of_another_certificate_is_refused(ca, issued, tmp_path) -> None:
    other = ca.issue(tmp_path / "other.pem", tmp_path / "other.key")
    message = refused(SVC_SERVER_TLS_CERT=str(issued.cert), SVC_SERVER_TLS_KEY=str(other.key))
    assert message == f"[server] tls_key: {other.key} is not the key of the certificate in {issued.cert}"


def test_a_key_with_a_passphrase_is_refused_without_asking_for_it(issued, tmp_path) -> None:
    key = serialization.load_pem_private_key(issued.key.read_bytes(), None)
    locked = tmp_path / "locked.key"
    locked.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(b"secret")))
    message = refused(SVC_SERVER_TLS_CERT=str(issued.cert), SVC_SERVER_TLS_KEY=str(locked))
    assert message.startswith("[server] tls_key: the key is encrypted")


def test_an_expired_certificate_is_a_warning_only(ca, tmp_path) -> None:
    old = ca.issue(tmp_path / "old.pem", tmp_path / "old.key", days=-2, started_days_ago=10)
    certificates = tls.Certificates(str(old.cert), str(old.key))
    [warning] = certificates.warnings
    assert warning.startswith(f"[server] tls_cert: the certificate in {old.cert} expired on ")
    early = ca.issue(tmp_path / "early.pem", tmp_path / "early.key", started_days_ago=-3)
    assert "is not valid before" in tls.Certificates(str(early.cert), str(early.key)).warnings[0]


def test_the_server_stops_with_one_line(issued, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        config.load_or_exit({"SVC_CONFIG": os.devnull, "SVC_STORAGE_ROOT": str(tmp_path / "r"),
                             "SVC_DATABASE_URL": f"sqlite:///{tmp_path / 'db'}",
                             "SVC_AUTH_TOKEN_STORAGE": str(tmp_path / "t"),
                             "SVC_SERVER_TLS_CERT": str(issued.key), "SVC_SERVER_TLS_KEY": str(issued.key)},
                            serving=True)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("configuration error: [server] tls_cert: ")


@pytest.mark.parametrize("encoded", ["utc", "generalized"])
def test_validity_is_read_from_the_certificate(ca, tmp_path, encoded) -> None:
    days = 30 if encoded == "utc" else 365 * 40  # after 2049: GeneralizedTime (RFC 5280)
    made = ca.issue(tmp_path / "c.pem", tmp_path / "k.pem", days=days)
    certificate = x509.load_pem_x509_certificate(made.cert.read_bytes())
    der = certificate.public_bytes(serialization.Encoding.DER)
    assert tls.validity_of(der) == (certificate.not_valid_before_utc, certificate.not_valid_after_utc)


# -- reloading -----------------------------------------------------------------------------------


def _served_serial(server: ssl.SSLContext, client: ssl.SSLContext) -> int:
    """A handshake in memory: the serial of the certificate the server context presents."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client_side, server_side):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    der = client_side.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_a_replaced_pair_is_loaded_for_new_connections(ca, issued) -> None:
    certificates = tls.Certificates(str(issued.cert), str(issued.key))
    old_context = certificates.context
    assert certificates.refresh(force=True) is False  # nothing changed
    renewed = ca.issue(issued.cert, issued.key)
    assert certificates.refresh(now=certificates._checked + 0.1) is False  # looked at most once a second
    assert certificates.refresh(now=certificates._checked + tls.CHECK_SECONDS) is True
    assert _served_serial(certificates.context, ca.client_context()) == renewed.serial
    assert _served_serial(old_context, ca.client_context()) == issued.serial  # open connections keep theirs


def test_a_pair_that_does_not_load_keeps_the_previous_one_and_is_logged_once(ca, issued, tmp_path, caplog) -> None:
    certificates = tls.Certificates(str(issued.cert), str(issued.key))
    # The certificate is replaced before its key: for a moment they do not match.
    renewed = ca.issue(tmp_path / "next.pem", tmp_path / "next.key")
    os.replace(renewed.cert, issued.cert)
    with caplog.at_level(logging.WARNING, logger="gunicorn.error"):
        assert certificates.refresh(force=True) is False
        assert certificates.refresh(force=True) is False
    assert [r.getMessage() for r in caplog.records] == [
        "TLS certificate not reloaded, the previous one is still served: [server] tls_key: "
        f"{issued.key} is not the key of the certificate in {issued.cert}"]
    assert _served_serial(certificates.context, ca.client_context()) == issued.serial
    os.replace(renewed.key, issued.key)
    assert certificates.refresh(force=True) is True
    assert _served_serial(certificates.context, ca.client_context()) == renewed.serial


def test_a_kubernetes_secret_swapped_by_symlink_is_seen(ca, tmp_path) -> None:
    """A mounted secret: cert.pem -> ..data/cert.pem, ..data -> a timestamped directory that kubelet
    replaces whole by renaming a new symlink over ..data."""
    mount = tmp_path / "secret"
    first_dir = mount / "..2024_01_01"
    first_dir.mkdir(parents=True)
    first = ca.issue(first_dir / "tls.crt", first_dir / "tls.key")
    (mount / "..data").symlink_to(first_dir.name)
    for name in ("tls.crt", "tls.key"):
        (mount / name).symlink_to(f"..data/{name}")
    certificates = tls.Certificates(str(mount / "tls.crt"), str(mount / "tls.key"))
    second_dir = mount / "..2024_02_01"
    second_dir.mkdir()
    second = ca.issue(second_dir / "tls.crt", second_dir / "tls.key")
    (mount / "..data_tmp").symlink_to(second_dir.name)
    os.replace(mount / "..data_tmp", mount / "..data")
    assert certificates.refresh(force=True) is True
    assert _served_serial(certificates.context, ca.client_context()) == second.serial != first.serial


def test_a_sighup_with_a_broken_pair_keeps_the_running_one(ca, issued, tmp_path) -> None:
    first = tls.serving(str(issued.cert), str(issued.key))
    assert first is not None
    issued.key.write_text("not a key")
    again = tls.serving(str(issued.cert), str(issued.key))  # gunicorn.conf.py run again: no exit
    assert again is first and _served_serial(again.context, ca.client_context()) == issued.serial
    assert tls.serving("", "") is None and tls.loaded() is None


def test_an_expired_replacement_is_loaded_and_warned_of(ca, issued, caplog) -> None:
    certificates = tls.Certificates(str(issued.cert), str(issued.key))
    ca.issue(issued.cert, issued.key, days=-1, started_days_ago=5)
    with caplog.at_level(logging.INFO, logger="gunicorn.error"):
        assert certificates.refresh(force=True) is True
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == f"TLS certificate reloaded from {issued.cert}: new connections get it"
    assert "expired on" in messages[1] and caplog.records[1].levelno == logging.WARNING
    assert datetime.datetime.now(datetime.timezone.utc) > tls.validity_of(
        ssl.PEM_cert_to_DER_cert(issued.cert.read_text()))[1]
