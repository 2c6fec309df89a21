"""guardhost mcp in front of servers that speak the streamable HTTP
transport (--upstream URL): the SDK's client over stdio to the proxy, the
proxy over HTTP to a server of the same SDK and to npm's server-everything,
compared with the SDK's client over HTTP to the server directly."""

import datetime
import ipaddress
import subprocess

import pytest

from mcp.shared.exceptions import MCPError

from conftest import (
    client,
    denying,
    dump,
    elicited_ada,
    http_server,
    proxy_command,
    sampled,
    sdk_http_server,
    server_command,
    text_of,
)
from test_proxy import the_one
from test_real_servers import npm_server

pytestmark = pytest.mark.anyio

DENY_WRITES = denying("write_file", "get-env")


async def test_calls_streams_and_denials_over_http(write_config, tmp_path):
    config = write_config(DENY_WRITES)
    target = tmp_path / "written.txt"
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    callbacks = {"sampling_callback": sampled, "elicitation_callback": elicited_ada}
    with http_server(sdk_http_server) as url:
        async with client(url, **callbacks) as direct, client(proxy_command(config, upstream=url), **callbacks) as proxied:
            assert proxied.protocol_version == direct.protocol_version
            denied = await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
            assert denied.is_error and text_of(denied).startswith("Guardrail denied: tool 'write_file'")
            for name, args in [("echo", {"text": "héllo"}), ("add", {"a": 2, "b": 40})]:
                assert dump(await proxied.call_tool(name, args)) == dump(await direct.call_tool(name, args))
            assert text_of(await proxied.call_tool("count", {"n": 3}, progress_callback=on_progress)) == "counted to 3"
            assert progress == [1, 2, 3]
            assert text_of(await proxied.call_tool("sample", {"prompt": "hi"})) == "model said: sampled"
            assert text_of(await proxied.call_tool("confirm", {"question": "name?"})) == "user said: Ada"
            assert dump(await proxied.read_resource("note://greeting")) == dump(await direct.read_resource("note://greeting"))
            listed = [t.name for t in (await proxied.list_tools()).tools]
            assert "write_file" not in listed and "echo" in listed
    assert not target.exists()


async def test_an_unreachable_upstream_answers_each_request_with_an_error(write_config):
    config = write_config(DENY_WRITES)
    with http_server(sdk_http_server) as url:
        pass  # started and stopped: nothing listens there now
    with pytest.raises(BaseException) as raised:
        async with client(proxy_command(config, upstream=url)):
            pass
    error = the_one(raised.value, MCPError)
    assert error.error.code == -32000 and "could not answer: cannot connect" in error.error.message


async def test_everything_server_over_http(write_config):
    command = npm_server("server-everything", "streamableHttp")
    config = write_config(DENY_WRITES)

    def everything(port):
        return ["env", f"PORT={port}", *command]

    with http_server(everything) as url:
        async with client(url) as direct, client(proxy_command(config, upstream=url)) as proxied:
            # Before any list: decided and denied for the model to read.
            denied = await proxied.call_tool("get-env", {})
            assert denied.is_error and "Guardrail denied: tool 'get-env'" in text_of(denied)
            for name, args in [("echo", {"message": "héllo"}), ("get-sum", {"a": 2, "b": 3}), ("get-tiny-image", {})]:
                assert dump(await proxied.call_tool(name, args)) == dump(await direct.call_tool(name, args)), name


def certificates(folder, names):
    """A CA, and a server certificate it signed for `names` (DNS names or
    IP addresses), with the server's key: three PEM files in `folder`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def signed(subject, key, issuer, issuer_key, *extensions):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = signed("guardhost test CA", ca_key, "guardhost test CA", ca_key, (x509.BasicConstraints(ca=True, path_length=None), True))
    sans = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    cert = signed(
        names[0],
        key,
        "guardhost test CA",
        ca_key,
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (x509.SubjectAlternativeName(sans), False),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def https_server(cert, key):
    """The test server over TLS, for http_server."""
    return lambda port: server_command("--https", str(port), str(cert), str(key))


async def test_an_https_upstream_is_reached_over_tls_with_its_certificate_checked(write_config, tmp_path):
    ca, cert, key = certificates(tmp_path, ["127.0.0.1"])
    target = tmp_path / "written.txt"
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    with http_server(https_server(cert, key), scheme="https") as url:
        # Trusted through mcp.ca_file (relative to the config's folder).
        config = write_config(DENY_WRITES + "    mcp: {ca_file: ca.pem}\n")
        async with client(proxy_command(config, upstream=url)) as proxied:
            denied = await proxied.call_tool("write_file", {"path": str(target), "content": "x"})
            assert denied.is_error and text_of(denied).startswith("Guardrail denied: tool 'write_file'")
            for n in range(3):
                assert text_of(await proxied.call_tool("echo", {"text": f"héllo {n}"})) == f"héllo {n}"
            assert text_of(await proxied.call_tool("count", {"n": 3}, progress_callback=on_progress)) == "counted to 3"
            assert progress == [1, 2, 3]
        assert not target.exists()

        # The system's roots alone do not know the test CA: every request
        # is answered with the handshake's failure.
        untrusted = write_config(DENY_WRITES, name="untrusted.yaml")
        with pytest.raises(BaseException) as raised:
            async with client(proxy_command(untrusted, upstream=url)):
                pass
        error = the_one(raised.value, MCPError).error
        assert error.code == -32000 and "TLS with 127.0.0.1" in error.message, error.message
        assert "invalid peer certificate" in error.message and "UnknownIssuer" in error.message, error.message


async def test_a_certificate_for_another_host_is_refused(write_config, tmp_path):
    ca, cert, key = certificates(tmp_path, ["other.example"])
    with http_server(https_server(cert, key), scheme="https") as url:
        config = write_config(DENY_WRITES + "    mcp: {ca_file: ca.pem}\n")
        with pytest.raises(BaseException) as raised:
            async with client(proxy_command(config, upstream=url)):
                pass
    error = the_one(raised.value, MCPError).error
    assert error.code == -32000 and "invalid peer certificate" in error.message, error.message
    assert "NotValidForName" in error.message or "not valid for name" in error.message, error.message


def test_a_ca_file_that_cannot_be_read_stops_the_start(write_config):
    config = write_config(DENY_WRITES + "    mcp: {ca_file: missing.pem}\n")
    run = subprocess.run(
        proxy_command(config, upstream="https://127.0.0.1:9/mcp"), capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 2, run.stderr
    assert "cannot read mcp.ca_file" in run.stderr and "missing.pem" in run.stderr, run.stderr


def test_an_upstream_token_variable_that_is_unset_stops_the_start(write_config):
    config = write_config(DENY_WRITES)
    command = [*proxy_command(config, upstream="https://127.0.0.1:9/mcp"), "--upstream-token-env", "GUARDHOST_TEST_UNSET"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert run.returncode == 2, run.stderr
    assert "--upstream-token-env: the environment variable GUARDHOST_TEST_UNSET is unset or empty" in run.stderr
