"""A certificate's subject as the text Kafka's SSL principal is built from: Java's
`X500Principal.getName()` (RFC 2253), read from the certificate's DER bytes.

Rules (Java's X500Name and AVA, as Kafka 4.4.0's JVM prints them):
- Relative distinguished names in reverse of their order in the certificate, joined by ",";
  the attributes of a multi-valued one in their encoded order, joined by "+".
- An attribute RFC 2253 names (CN, C, L, ST, O, OU, STREET, DC, UID) with a string value is
  `KEYWORD=value`, with each of `, = + < > # ; " \\` escaped by a backslash, a NUL as `\\00`,
  and leading and trailing spaces escaped; any other attribute (an email address, a serial
  number) is `dotted.oid=#` and the hex of its value's DER encoding.
- Bytes that are not a certificate raise `InvalidCertificateError` naming what is wrong.
"""

from __future__ import annotations

from replog.errors import InvalidCertificateError

SEQUENCE, SET, OID, CONTEXT_0 = 0x30, 0x31, 0x06, 0xA0
KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types -> their text encodings.
STRING_TYPES = {
    0x0C: "utf-8",  # UTF8String
    0x12: "ascii",  # NumericString
    0x13: "ascii",  # PrintableString
    0x14: "latin-1",  # T61String, as Java reads it
    0x16: "ascii",  # IA5String
    0x1A: "ascii",  # VisibleString
    0x1C: "utf-32-be",  # UniversalString
    0x1E: "utf-16-be",  # BMPString
}
ESCAPED = set(',=+<>#;"\\')


def _element(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at `at`."""
    if at + 2 > len(data):
        raise InvalidCertificateError(f"DER element at byte {at} is cut short")
    tag, length = data[at], data[at + 1]
    start = at + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or start + count > len(data):
            raise InvalidCertificateError(f"DER element at byte {at} has a bad length")
        length = int.from_bytes(data[start : start + count], "big")
        start += count
    if start + length > len(data):
        raise InvalidCertificateError(f"DER element at byte {at} runs past the end")
    return tag, start, start + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, content start, content end, element start) of each element in start..end."""
    found = []
    while start < end:
        tag, content, stop = _element(data, start)
        found.append((tag, content, stop, start))
        start = stop
    return found


def _expect(tag: int, wanted: int, what: str) -> None:
    if tag != wanted:
        raise InvalidCertificateError(f"{what}: expected DER tag {wanted:#x}, got {tag:#x}")


def _oid(raw: bytes) -> str:
    identifiers, value = [], 0
    for byte in raw:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            identifiers.append(value)
            value = 0
    if not identifiers or value:
        raise InvalidCertificateError(f"an object identifier of bytes {raw.hex()} is cut short")
    top = min(identifiers[0] // 40, 2)  # the first two arcs share one identifier
    return ".".join(map(str, [top, identifiers[0] - 40 * top, *identifiers[1:]]))


def _escaped(text: str) -> str:
    chars = "".join("\\00" if c == "\0" else f"\\{c}" if c in ESCAPED else c for c in text)
    lead = len(chars) - len(chars.lstrip(" \r"))
    trail = len(chars.rstrip(" \r"))
    return "".join(f"\\{c}" if i < lead or i >= trail else c for i, c in enumerate(chars))


def _attribute(data: bytes, start: int, end: int) -> str:
    parts = _children(data, start, end)
    if len(parts) != 2:
        raise InvalidCertificateError("a subject attribute is not a type and a value")
    (oid_tag, oid_start, oid_end, _), (value_tag, value_start, value_end, value_at) = parts
    _expect(oid_tag, OID, "a subject attribute's type")
    oid = _oid(data[oid_start:oid_end])
    keyword, encoding = KEYWORDS.get(oid), STRING_TYPES.get(value_tag)
    if keyword is not None and encoding is not None:
        try:
            return f"{keyword}={_escaped(data[value_start:value_end].decode(encoding))}"
        except UnicodeDecodeError:
            raise InvalidCertificateError(f"{keyword} is not valid {encoding}") from None
    return f"{keyword or oid}=#{data[value_at:value_end].hex()}"


def subject_name(certificate: bytes) -> str:
    """The RFC 2253 subject of the DER `certificate`, as Java prints it."""
    tag, start, end = _element(certificate, 0)
    _expect(tag, SEQUENCE, "the certificate")
    tag, start, end = _element(certificate, start)
    _expect(tag, SEQUENCE, "the certificate's signed part")
    fields = _children(certificate, start, end)
    if fields and fields[0][0] == CONTEXT_0:
        fields = fields[1:]  # the version
    if len(fields) < 5:
        raise InvalidCertificateError("the certificate's signed part has no subject")
    tag, start, end, _ = fields[4]  # serial, signature algorithm, issuer, validity, subject
    _expect(tag, SEQUENCE, "the subject")
    names = []
    for rdn_tag, rdn_start, rdn_end, _ in _children(certificate, start, end):
        _expect(rdn_tag, SET, "a relative distinguished name")
        attributes = _children(certificate, rdn_start, rdn_end)
        for attribute_tag, *_ in attributes:
            _expect(attribute_tag, SEQUENCE, "a subject attribute")
        names.append("+".join(_attribute(certificate, s, e) for _, s, e, _ in attributes))
    return ",".join(reversed(names))
