"""A certificate authority of the test's own making, the server certificates it issues, and what a
TLS client is served (``served_certificate``): for the registry's ``[server] tls_cert``."""
from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.timezone.utc)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass
class Issued:
    cert: Path
    key: Path
    serial: int


@dataclass
class CA:
    """A self-signed CA in ``directory`` (``ca.crt``), issuing server certificates."""

    directory: Path
    key: ec.EllipticCurvePrivateKey = field(init=False)
    certificate: x509.Certificate = field(init=False)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.certificate = (
            x509.CertificateBuilder().subject_name(_name("registry test CA")).issuer_name(_name("registry test CA"))
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW - datetime.timedelta(days=1)).not_valid_after(NOW + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256()))
        self.cert_file.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    @property
    def cert_file(self) -> Path:
        return self.directory / "ca.crt"

    def issue(self, cert: Path, key: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
              days: float = 30, started_days_ago: float = 1, new_key: bool = True) -> Issued:
        """Write a server certificate for ``hosts`` (addresses or names) and its key (kept when
        ``new_key`` is false and ``key`` exists). Written in place, as an operator's copy would."""
        if new_key or not key.exists():
            private = ec.generate_private_key(ec.SECP256R1())
            key.write_bytes(_key_pem(private))
        else:
            private = serialization.load_pem_private_key(key.read_bytes(), None)  # type: ignore[assignment]
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        serial = x509.random_serial_number()
        issued = (
            x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(self.certificate.subject)
            .public_key(private.public_key()).serial_number(serial)
            .not_valid_before(NOW - datetime.timedelta(days=started_days_ago))
            .not_valid_after(NOW + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256()))
        cert.write_bytes(issued.public_bytes(serialization.Encoding.PEM))
        return Issued(cert, key, serial)

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert_file))


def served_certificate(host: str, port: int, ca: CA, timeout: float = 10) -> x509.Certificate:
    """The certificate a new TLS connection to ``host:port`` is served (verified against ``ca``)."""
    with socket.create_connection((host, port), timeout=timeout) as raw:
        with ca.client_context().wrap_socket(raw, server_hostname=host) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def tls_env(issued: Issued) -> dict[str, Any]:
    """The server's environment for ``issued``."""
    return {"SVC_SERVER_TLS_CERT": str(issued.cert), "SVC_SERVER_TLS_KEY": str(issued.key)}
