"""TLS, mutual TLS and the shared token from Python: the servers' configs and
tfdata.set_client_security, with certificates made by the openssl CLI (docs/operations.md#security)."""

import shutil
import subprocess

import pytest

import tfdata
from tfdata import Pipeline
from conftest import wait_for

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30)


def _certificates(d):
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc"]
    _openssl("req", "-x509", *key, "-keyout", d / "ca.key", "-out", d / "ca.crt", "-days", "2", "-subj", "/CN=ca")
    for name, usage in (("server", "serverAuth,clientAuth"), ("client", "clientAuth")):
        _openssl("req", *key, "-keyout", d / f"{name}.key", "-out", d / f"{name}.csr", "-subj", f"/CN={name}")
        (d / f"{name}.ext").write_text(f"subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage={usage}\n")
        _openssl("x509", "-req", "-in", d / f"{name}.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", d / f"{name}.ext", "-out", d / f"{name}.crt")
    (d / "token").write_text("python-token\n")
    return {k: str(d / k) for k in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key", "token")}


@pytest.fixture
def files(tmp_path):
    f = _certificates(tmp_path)
    yield f
    tfdata.set_client_security()  # the other tests read in plaintext


def test_a_cluster_over_mutual_tls_with_a_token(files):
    server = dict(tls_cert=files["server.crt"], tls_key=files["server.key"], tls_ca=files["ca.crt"],
                  auth_token_file=files["token"])
    d = tfdata.DispatchServer(host="127.0.0.1", **server)
    w = tfdata.WorkerServer(tfdata.WorkerConfig(dispatcher_address=d.target, host="127.0.0.1",
                                                heartbeat_interval_ms=100, **server))
    try:
        wait_for(lambda: d.num_workers == 1)
        with pytest.raises(tfdata.UnavailableError, match="the server may use TLS"):
            tfdata.register_dataset(d, Pipeline.range(10))
        tfdata.set_client_security(tls_ca=files["ca.crt"], tls_cert=files["client.crt"], tls_key=files["client.key"])
        with pytest.raises(tfdata.UnauthenticatedError, match="missing or wrong auth token"):
            tfdata.register_dataset(d, Pipeline.range(10))
        tfdata.set_client_security(tls_ca=files["ca.crt"], auth_token_file=files["token"])
        with pytest.raises(tfdata.UnavailableError, match="TLS handshake failed"):
            tfdata.register_dataset(d, Pipeline.range(10))  # mutual TLS: no client certificate
        tfdata.set_client_security(tls_ca=files["ca.crt"], tls_cert=files["client.crt"], tls_key=files["client.key"],
                                   auth_token_file=files["token"])
        assert list(Pipeline.range(10).apply(tfdata.distribute("parallel_epochs", d))) == list(range(10))
    finally:
        w.stop()
        d.stop()


def test_bad_files_name_the_field_and_the_file(files):
    with pytest.raises(tfdata.InvalidArgumentError, match=r"tls_key .*client\.key does not match tls_cert"):
        tfdata.DispatchServer(host="127.0.0.1", tls_cert=files["server.crt"], tls_key=files["client.key"])
    with pytest.raises(tfdata.InvalidArgumentError, match="tls_cert and tls_key go together"):
        tfdata.WorkerServer("localhost:1", host="127.0.0.1", tls_cert=files["server.crt"])
    with pytest.raises(tfdata.InvalidArgumentError, match=r"tls_ca /nonexistent\.crt: cannot read"):
        tfdata.set_client_security(tls_ca="/nonexistent.crt")
    with pytest.raises(TypeError, match="auth_token_file: expected a file path"):
        tfdata.set_client_security(auth_token_file=3)
