"""Test certificates, made with the `cryptography` package: a CA, and certificates it signs for
a server (127.0.0.1 and localhost) and for clients, written as the PEM files Kafka's PEM
settings name (a keystore: key and chain in one file; a truststore: the CA)."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ONE_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    def key_pem(self, password: bytes | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password)
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "replog tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _issue(
    subject: str,
    issuer: Issued | None,
    *,
    ca: bool = False,
    hosts: tuple[str, ...] = (),
    expired: bool = False,
) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    start, end = (now - 3 * ONE_DAY, now - ONE_DAY) if expired else (now - ONE_DAY, now + ONE_DAY)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer.certificate.subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    signer = issuer.key if issuer else key
    return Issued(key, builder.sign(signer, hashes.SHA256()))


@dataclass(frozen=True)
class Pki:
    """A CA and what it signed, as PEM files in `directory`."""

    directory: Path
    ca: Issued

    @classmethod
    def create(cls, directory: Path) -> Pki:
        directory.mkdir(parents=True, exist_ok=True)
        pki = cls(directory, _issue("replog test CA", None, ca=True))
        (directory / "ca.pem").write_bytes(pki.ca.certificate_pem())
        return pki

    @property
    def truststore(self) -> Path:
        return self.directory / "ca.pem"

    def keystore(
        self,
        name: str,
        hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
        password: bytes | None = None,
        expired: bool = False,
    ) -> Path:
        """A PEM keystore for `name` (key, then its certificate and the CA's), signed by the
        CA: `<name>.pem`; its key and certificate alone are `<name>.key`, `<name>.crt`."""
        issued = _issue(name, self.ca, hosts=hosts, expired=expired)
        (self.directory / f"{name}.key").write_bytes(issued.key_pem(password))
        (self.directory / f"{name}.crt").write_bytes(issued.certificate_pem())
        path = self.directory / f"{name}.pem"
        path.write_bytes(
            issued.key_pem(password) + issued.certificate_pem() + self.ca.certificate_pem()
        )
        return path


def presented_certificate_to(
    address: str, ca: Path, certificate: Path, alpn: str | None, key: Path | None = None
) -> bytes:
    """The certificate (DER) the TLS listener at `address` presents to a client trusting `ca`
    and presenting `certificate` (its key in `key`, or in the same file), with `alpn` offered
    (gRPC's listeners speak h2)."""
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(certificate), None if key is None else str(key))
    if alpn is not None:
        context.set_alpn_protocols([alpn])
    host, port = address.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=10) as sock,
        context.wrap_socket(sock, server_hostname=host) as tls,
    ):
        presented = tls.getpeercert(binary_form=True)
    assert presented is not None
    return presented
