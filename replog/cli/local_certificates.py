"""The certificates of a local cluster started with `--security ssl`, made with the
`cryptography` package: a CA of the cluster's own, a certificate per node and one for clients.

The files (PEM, as the node's `ssl.*` settings and librdkafka's read them) are
`cluster_tls_files`'.

Rules:
- A node's certificate names the hosts its listeners advertise (subject alternative names,
  IP addresses as IP entries), so clients check it for the host they dial, as Kafka's do.
- Made once: a later start reuses every file that is there and valid for at least
  `RENEW_WITHIN` more; what is missing or expiring is made again (all of it when the CA is).
- Keys are ECDSA P-256; certificates carry the key usages and the key identifiers that strict
  verifiers (OpenSSL's X509_STRICT, Java's) ask for.
- Imported only by a start with `--security ssl`: `cryptography` loads with it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from replog.cli.cluster_tls_files import (
    CLIENT_NAME,
    ORGANIZATION,
    ClusterTlsFiles,
    node_common_name,
)
from replog.cli.whole_file import replace_whole
from replog.errors import ReplogError

CA_DAYS = 3650
LEAF_DAYS = 825  # what browsers and most verifiers accept for a leaf
RENEW_WITHIN = datetime.timedelta(days=7)


def ensure_certificates(
    files: ClusterTlsFiles, nodes: Iterable[tuple[int, Sequence[str]]]
) -> list[str]:
    """Make what is missing or expiring (module rules) of `files` for `nodes` (node id, the
    hosts its listeners advertise); returns the paths written. An `OSError` is a
    `ReplogError` naming the path."""
    try:
        return _ensure(files, list(nodes))
    except OSError as exc:
        raise ReplogError(
            f"cannot write the cluster's certificates in {files.directory}: "
            f"{exc.filename or ''} {exc.strerror or exc}".strip()
        ) from None


def _ensure(files: ClusterTlsFiles, nodes: list[tuple[int, Sequence[str]]]) -> list[str]:
    os.makedirs(files.directory, mode=0o700, exist_ok=True)
    written: list[str] = []
    renew_all = not (_valid(files.ca_certificate) and os.path.exists(files.ca_key))
    if renew_all:
        ca = _issue(f"{ORGANIZATION} CA", None, ca=True, days=CA_DAYS)
        replace_whole(files.ca_key, _key_pem(ca), private=True)
        replace_whole(files.ca_certificate, _certificate_pem(ca))
        written += [files.ca_key, files.ca_certificate]
    signer = _signer(files)
    for node_id, hosts in nodes:
        path = files.node_keystore(node_id)
        if renew_all or not _valid(path, hosts):
            write_node_keystore(files, node_id, hosts, signer)
            written.append(path)
    if renew_all or not (_valid(files.client_certificate) and os.path.exists(files.client_key)):
        client = _issue(CLIENT_NAME, signer, days=LEAF_DAYS)
        replace_whole(files.client_key, _key_pem(client), private=True)
        replace_whole(files.client_certificate, _certificate_pem(client))
        written += [files.client_key, files.client_certificate]
    return written


def write_node_keystore(
    files: ClusterTlsFiles,
    node_id: int,
    hosts: Sequence[str],
    signer: _Issued | None = None,
) -> bytes:
    """Write node `node_id`'s keystore anew: a new key, its certificate naming `hosts` signed
    by the cluster's CA (`signer`, else read from `files`), and the CA's certificate; the file
    is replaced whole, so a running node reloads it (a certificate rotation). Returns the new
    certificate (DER)."""
    signer = signer if signer is not None else _signer(files)
    node = _issue(node_common_name(node_id), signer, hosts=hosts, days=LEAF_DAYS)
    chain = _key_pem(node) + _certificate_pem(node) + _certificate_pem(signer)
    replace_whole(files.node_keystore(node_id), chain, private=True)
    return node.certificate.public_bytes(serialization.Encoding.DER)


def _signer(files: ClusterTlsFiles) -> _Issued:
    with open(files.ca_key, "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    with open(files.ca_certificate, "rb") as f:
        ca_certificate = x509.load_pem_x509_certificate(f.read())
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ReplogError(f"{files.ca_key}: not the CA key this cluster made (an EC key)")
    return _Issued(ca_key, ca_certificate)


@dataclass(frozen=True, slots=True)
class _Issued:
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate


def _issue(
    subject: str,
    issuer: _Issued | None,
    *,
    days: int,
    ca: bool = False,
    hosts: Sequence[str] = (),
) -> _Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, subject),
        ]
    )
    issuer_certificate = None if issuer is None else issuer.certificate
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name if issuer_certificate is None else issuer_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # clocks a little apart
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if ca:
        usage = dict.fromkeys(_KEY_USAGES, False) | {"key_cert_sign": True, "crl_sign": True}
    else:
        usage = dict.fromkeys(_KEY_USAGES, False) | {"digital_signature": True}
        purposes = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if hosts:
            purposes.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
        builder = builder.add_extension(x509.ExtendedKeyUsage(purposes), critical=False)
    builder = builder.add_extension(x509.KeyUsage(**usage), critical=True)
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
            critical=False,
        )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(host) for host in hosts]), critical=False
        )
    signer = key if issuer is None else issuer.key
    return _Issued(key, builder.sign(signer, hashes.SHA256()))


_KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _valid(path: str, hosts: Sequence[str] = ()) -> bool:
    """Whether `path` holds a certificate valid for `RENEW_WITHIN` more that names `hosts`."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        certificate = x509.load_pem_x509_certificates(data)[0]  # a keystore's key is skipped
    except (OSError, ValueError, IndexError):
        return False
    now = datetime.datetime.now(datetime.UTC)
    if certificate.not_valid_after_utc - RENEW_WITHIN < now:
        return False
    if not hosts:
        return True
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return all(_general_name(host) in names for host in hosts)


def _key_pem(issued: _Issued) -> bytes:
    return issued.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificate_pem(issued: _Issued) -> bytes:
    return issued.certificate.public_bytes(serialization.Encoding.PEM)
