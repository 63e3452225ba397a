"""https through the one client (STYLE convention 22): the request goes to the checked
address, and the TLS name (SNI and the certificate check) is still the URL's host name."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from tests.outbound.netns import ROOT


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def write_ca_and_leaf(folder: Path, host: str) -> tuple[Path, Path, Path]:
    """A test CA and a certificate it signed for `host`; return (ca, cert, key) files."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("Parley test CA"))
        .issuer_name(_name("Parley test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


def test_https_to_checked_address_verifies_the_host_names_certificate(tmp_path: Path) -> None:
    ca, cert, key = write_ca_and_leaf(tmp_path, "hooks.test")
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "tests.outbound.tls_probe", str(cert), str(key)],
        cwd=ROOT,
        env={**os.environ, "SSL_CERT_FILE": str(ca)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])

    port_host = found["results"]["hooks.test"]
    assert port_host.startswith("hooks.test:")  # Host is the name, not the address
    assert found["results"]["other.test"] == "OutboundFailed"  # its certificate is not theirs
    assert found["sni"][:2] == ["hooks.test", "other.test"]
