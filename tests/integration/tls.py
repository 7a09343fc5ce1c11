"""TLS for the integration tests: a throwaway PKI made with the openssl CLI, the scripted origin
served over TLS, and a raw peer that misbehaves during the handshake.

TestPki.create(dir) makes, once per test session (EC P-256 keys, a dozen openssl runs):
  ca.pem                 the test root CA (what the tests pass to --ca-file)
  localhost              CN localhost, SAN DNS:localhost + IP:127.0.0.1, signed by the CA
  localhost-noip         SAN DNS:localhost only (no IP SAN), signed by the CA
  wrong-name             CN and SAN DNS:wrong.example (no IP SAN), signed by the CA
  expired                as "localhost", valid 2020-01-01 .. 2020-02-01 (openssl ca -startdate/-enddate)
  not-yet-valid          as "localhost", valid 2099-01-01 .. 2099-12-31
  self-signed            as "localhost", but self-signed: not chained to the test CA
pki.cert(kind) returns (cert_path, key_path). Only "expired" and "not-yet-valid" need `openssl ca`
(stock openssl 3.0 `x509 -req` cannot set a start date); every CA-signed leaf goes through it so
they all have the same shape.

TlsOrigin is the scripted Origin (same endpoints, same counters) behind TLS: it accepts TCP,
upgrades the stream with StreamWriter.start_tls() and then serves HTTP/1.1 exactly like the plain
origin. TLS 1.2 and newer are accepted, ALPN "http/1.1" is selected when offered, and TLS 1.2
resumption works both by session ID (OpenSSL's server session cache) and by session ticket
(OpenSSL's default). Extra counters: tcp_accepted, tls_full (full handshakes), tls_resumed
(abbreviated ones), tls_failures (handshakes that did not complete), tls_errors (texts of those
failures and of TLS errors on established connections) and tls_sessions: one TlsSession per
completed handshake (negotiated version, ALPN, SNI, resumed).

RawTlsPeer accepts TCP, reads the client's first TLS record (the ClientHello, parsed into a
ClientHello with its SNI, ALPN, versions and ticket/session offers), then misbehaves by `mode`:
  close    close the connection (FIN)
  reset    reset it (RST)
  garbage  answer with a plain-HTTP response, then close
  alert    answer with a fatal TLS alert (handshake_failure), then close
  silent   say nothing until stopped
"""

import asyncio
import datetime
import os
import socket
import ssl
import struct
import subprocess
import threading
import time
from typing import NamedTuple, Optional

from origin import Origin

CA_NAME = "harvestd test root CA"

CA_CONFIG = """\
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = placeholder
[ v3_ca ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ ca ]
default_ca = test_ca
[ test_ca ]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir/issued
serial = $dir/serial
default_md = sha256
policy = policy_any
unique_subject = no
email_in_dn = no
copy_extensions = none
[ policy_any ]
commonName = supplied
[ leaf_localhost ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost, IP:127.0.0.1
[ leaf_localhost_noip ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost
[ leaf_wrong_name ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:wrong.example
[ self_signed ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
subjectAltName = DNS:localhost, IP:127.0.0.1
"""

# kind -> (CN, extensions section, notBefore, notAfter); None dates: yesterday .. in 30 days.
LEAVES = {
    "localhost": ("localhost", "leaf_localhost", None, None),
    "localhost-noip": ("localhost", "leaf_localhost_noip", None, None),
    "wrong-name": ("wrong.example", "leaf_wrong_name", None, None),
    "expired": ("localhost", "leaf_localhost", "20200101000000Z", "20200201000000Z"),
    "not-yet-valid": ("localhost", "leaf_localhost", "20990101000000Z", "20991231000000Z"),
}
KINDS = tuple(LEAVES) + ("self-signed",)


class PkiError(RuntimeError):
    pass


def _openssl(*args, cwd=None):
    try:
        done = subprocess.run(["openssl"] + list(args), cwd=cwd, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    except OSError as e:
        raise PkiError("cannot run openssl: %s" % e)
    if done.returncode != 0:
        raise PkiError("openssl %s failed:\n%s" % (" ".join(args), done.stdout.decode(errors="replace")))
    return done.stdout


def _utc(delta_days):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=delta_days)
    return t.strftime("%Y%m%d%H%M%SZ")


class TestPki:
    """The test PKI in `dir` (see the module docstring)."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory):
        self.dir = str(directory)
        self.ca_file = os.path.join(self.dir, "ca.pem")
        self.ca_key = os.path.join(self.dir, "ca.key")
        self.config = os.path.join(self.dir, "openssl.cnf")

    def cert(self, kind):
        """(certificate PEM path, key PEM path) of a server certificate kind."""
        if kind not in KINDS:
            raise KeyError(kind)
        return (os.path.join(self.dir, kind + ".pem"), os.path.join(self.dir, kind + ".key"))

    @classmethod
    def create(cls, directory):
        pki = cls(directory)
        d = pki.dir
        os.makedirs(os.path.join(d, "issued"), exist_ok=True)
        with open(pki.config, "w") as f:
            f.write(CA_CONFIG.format(dir=d))
        with open(os.path.join(d, "index.txt"), "w"):
            pass
        with open(os.path.join(d, "serial"), "w") as f:
            f.write("1000\n")
        newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        _openssl("req", "-x509", "-config", pki.config, *newkey, "-keyout", pki.ca_key,
                 "-out", pki.ca_file, "-subj", "/CN=" + CA_NAME, "-days", "3650", "-sha256",
                 "-extensions", "v3_ca")
        for kind, (cn, section, start, end) in LEAVES.items():
            cert, key = pki.cert(kind)
            csr = os.path.join(d, kind + ".csr")
            _openssl("req", "-new", "-config", pki.config, *newkey, "-keyout", key, "-out", csr,
                     "-subj", "/CN=" + cn)
            _openssl("ca", "-batch", "-notext", "-config", pki.config, "-cert", pki.ca_file,
                     "-keyfile", pki.ca_key, "-in", csr, "-out", cert, "-extensions", section,
                     "-startdate", start or _utc(-1), "-enddate", end or _utc(30))
        cert, key = pki.cert("self-signed")
        _openssl("req", "-x509", "-config", pki.config, *newkey, "-keyout", key, "-out", cert,
                 "-subj", "/CN=localhost", "-days", "30", "-sha256", "-extensions", "self_signed")
        return pki


# ---------------------------------------------------------------------------- the TLS origin


class TlsSession(NamedTuple):
    """What the server saw of one completed handshake."""
    conn_id: int          # the TCP connection number (1-based, in accept order)
    version: str          # "TLSv1.2", ...
    alpn: Optional[str]   # protocol selected by ALPN, None if the client offered none
    sni: Optional[str]    # server name the client sent, None if it sent none
    resumed: bool
    cipher: str


def server_context(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])

    def on_sni(sslobj, server_name, _ctx):
        sslobj.harvestd_sni = server_name
        return None

    ctx.sni_callback = on_sni
    return ctx


async def _settle_accepts():
    """Let connections accepted a moment ago reach their protocol before the server closes.

    Python 3.11 accepts in one step and builds the transport in a later one, which fails (and
    leaks the accepted socket) if Server.close() ran in between; a few loop iterations let every
    accept already under way finish, so stop() can then close each connection."""
    for _ in range(5):
        await asyncio.sleep(0)


def _mark_shut_down(sslobj):
    """Keep the connection's session resumable by session ID however the client closed it.

    OpenSSL drops a session from the server's cache when the SSL object is freed before
    SSL_shutdown() ran, which asyncio skips when the client closed TCP without a close_notify.
    Servers such as nginx do a "quiet" shutdown then and keep the session; calling unwrap() on the
    finished connection does the same here (its close_notify goes into a memory BIO that is never
    sent again)."""
    try:
        sslobj.unwrap()
    except (ssl.SSLError, OSError, ValueError, AttributeError):
        pass


class TlsOrigin(Origin):
    """The scripted origin over TLS with the server certificate `cert`/`key`. url() builds
    https://HOST:PORT/... with `host` (default "localhost", the name the good certificate holds)."""

    HANDSHAKE_TIMEOUT = 10

    def __init__(self, name, cert, key, host="localhost"):
        self.cert = cert
        self.key = key
        self.host = host
        self.ssl_context = server_context(cert, key)
        self._tcp_seq = 0
        self._raw_transports = set()
        super().__init__(name)

    def reset(self):
        super().reset()
        with self._lock:
            self.tcp_accepted = 0
            self.tls_full = 0
            self.tls_resumed = 0
            self.tls_failures = 0
            self.tls_errors = []
            self.tls_sessions = []

    def snapshot(self):
        snap = super().snapshot()
        with self._lock:
            snap.update(tcp_accepted=self.tcp_accepted, tls_full=self.tls_full,
                        tls_resumed=self.tls_resumed, tls_failures=self.tls_failures,
                        tls_errors=list(self.tls_errors), tls_sessions=list(self.tls_sessions))
        return snap

    def url(self, path_and_query="/", host=None):
        return "https://%s:%d%s" % (host or self.host, self.port, path_and_query)

    async def _shutdown(self):
        await _settle_accepts()
        await super()._shutdown()
        # A connection the server closed waits in the TLS shutdown for the client's close_notify
        # or EOF; its TCP transport is no longer tracked by the origin: close it now.
        for t in self._raw_transports:
            if not t.is_closing():
                t.abort()
        self._raw_transports.clear()
        await asyncio.sleep(0)

    async def _on_client(self, reader, writer):
        task = asyncio.current_task()
        self._tasks.add(task)
        with self._lock:
            self.tcp_accepted += 1
            self._tcp_seq += 1
            seq = self._tcp_seq
        self._raw_transports = {t for t in self._raw_transports if not t.is_closing()}
        self._raw_transports.add(writer.transport)
        try:
            try:
                await writer.start_tls(self.ssl_context, ssl_handshake_timeout=self.HANDSHAKE_TIMEOUT)
            except (OSError, EOFError, asyncio.TimeoutError) as e:  # ssl.SSLError is an OSError
                with self._lock:
                    self.tls_failures += 1
                    self.tls_errors.append("%s: %s" % (type(e).__name__, e))
                writer.transport.abort()
                return
            sslobj = writer.get_extra_info("ssl_object")
            session = TlsSession(seq, sslobj.version(), sslobj.selected_alpn_protocol(),
                                 getattr(sslobj, "harvestd_sni", None), bool(sslobj.session_reused),
                                 (sslobj.cipher() or ("",))[0])
            with self._lock:
                self.tls_sessions.append(session)
                if session.resumed:
                    self.tls_resumed += 1
                else:
                    self.tls_full += 1
        except asyncio.CancelledError:
            writer.transport.abort()
            return
        finally:
            self._tasks.discard(task)
        try:
            await super()._on_client(reader, writer)
        except (ssl.SSLError, OSError) as e:
            # E.g. a request that crossed the server's close_notify on the wire (the race a
            # client's stale-connection retry handles): the connection is gone, nothing to answer.
            with self._lock:
                self.tls_errors.append("after handshake: %s: %s" % (type(e).__name__, e))
        finally:
            _mark_shut_down(sslobj)


# ---------------------------------------------------------------------------- the raw peer


class ClientHello(NamedTuple):
    legacy_version: int             # 0x0303 for TLS 1.2
    supported_versions: tuple       # from the supported_versions extension (TLS 1.3 clients)
    sni: Optional[str]
    alpn: tuple
    session_id: bytes
    session_ticket: Optional[bytes]  # None: no session_ticket extension; b"": empty (new ticket wanted)
    cipher_suites: tuple
    extensions: tuple               # extension type numbers in order

    def max_version(self):
        """The newest protocol version offered, as (major, minor) wire numbers."""
        versions = [v for v in self.supported_versions if (v & 0x0f0f) != 0x0a0a]  # no GREASE
        versions = versions or [self.legacy_version]
        return max(versions)


def parse_client_hello(record):
    """Parse a TLS record holding a ClientHello (the whole handshake message in this record)."""
    if len(record) < 9 or record[0] != 22:
        raise ValueError("not a TLS handshake record: %r" % record[:16])
    body = record[5:5 + struct.unpack("!H", record[3:5])[0]]
    if body[0] != 1:
        raise ValueError("not a ClientHello (handshake type %d)" % body[0])
    hs_len = int.from_bytes(body[1:4], "big")
    m = body[4:4 + hs_len]
    if len(m) != hs_len:
        raise ValueError("ClientHello spans several records")
    pos = 0

    def take(n):
        nonlocal pos
        out = m[pos:pos + n]
        if len(out) != n:
            raise ValueError("truncated ClientHello")
        pos += n
        return out

    def vec(width):
        return take(int.from_bytes(take(width), "big"))

    legacy_version = struct.unpack("!H", take(2))[0]
    take(32)  # random
    session_id = vec(1)
    suites = vec(2)
    cipher_suites = tuple(struct.unpack("!%dH" % (len(suites) // 2), suites))
    vec(1)  # compression methods
    sni, alpn, versions, ticket, ext_types = None, (), (), None, []
    if pos < len(m):
        exts = vec(2)
        p = 0
        while p + 4 <= len(exts):
            etype, elen = struct.unpack("!HH", exts[p:p + 4])
            data = exts[p + 4:p + 4 + elen]
            p += 4 + elen
            ext_types.append(etype)
            if etype == 0 and len(data) >= 5:  # server_name: list of (type, name)
                q = 2
                while q + 3 <= len(data):
                    ntype, nlen = data[q], struct.unpack("!H", data[q + 1:q + 3])[0]
                    if ntype == 0:
                        sni = data[q + 3:q + 3 + nlen].decode("ascii", "replace")
                    q += 3 + nlen
            elif etype == 16 and len(data) >= 2:  # ALPN
                q, names = 2, []
                while q < len(data):
                    n = data[q]
                    names.append(data[q + 1:q + 1 + n].decode("ascii", "replace"))
                    q += 1 + n
                alpn = tuple(names)
            elif etype == 43 and data:  # supported_versions
                versions = tuple(struct.unpack("!%dH" % (data[0] // 2), data[1:1 + data[0]]))
            elif etype == 35:  # session_ticket
                ticket = bytes(data)
    return ClientHello(legacy_version, versions, sni, alpn, bytes(session_id), ticket,
                       cipher_suites, tuple(ext_types))


# A fatal handshake_failure alert in a TLS 1.2 record.
FATAL_ALERT = bytes([21, 3, 3, 0, 2, 2, 40])
PLAIN_HTTP = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: 32\r\n"
              b"Connection: close\r\n\r\n<html><title>plain</title></html>")
MODES = ("close", "reset", "garbage", "alert", "silent")


class _RawPeerProtocol(asyncio.Protocol):
    def __init__(self, peer):
        self.peer = peer
        self.transport = None
        self.buf = b""
        self.done = False

    def connection_made(self, transport):
        self.transport = transport
        self.peer._transports.add(transport)
        with self.peer._lock:
            self.peer.tcp_accepted += 1

    def connection_lost(self, exc):
        self.peer._transports.discard(self.transport)

    def data_received(self, data):
        if self.done:
            return
        self.buf += data
        if len(self.buf) < 5 or len(self.buf) < 5 + struct.unpack("!H", self.buf[3:5])[0]:
            return
        self.done = True
        self.peer._on_hello(self.transport, self.buf)


class RawTlsPeer:
    """A TCP listener on 127.0.0.1 that reads each client's ClientHello and then misbehaves by
    `mode` (see the module docstring). Counters: tcp_accepted, hellos (parsed ClientHello
    objects, in arrival order), errors (ClientHellos that could not be parsed)."""

    def __init__(self, mode="close"):
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode
        self.port = None
        self.tcp_accepted = 0
        self.hellos = []
        self.errors = []
        self._lock = threading.Lock()
        self._loop = None
        self._thread = None
        self._server = None
        self._ready = threading.Event()
        self._start_error = None
        self._transports = set()

    def start(self):
        self._thread = threading.Thread(target=self._run, name="tls-peer-" + self.mode, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("raw TLS peer did not start")
        if self._start_error:
            raise self._start_error
        return self

    def _run(self):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(loop.create_server(
                lambda: _RawPeerProtocol(self), "127.0.0.1", 0, backlog=256))
            self.port = self._server.sockets[0].getsockname()[1]
            self._loop = loop
        except Exception as e:
            self._start_error = e
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def stop(self):
        if self._loop is None:
            return
        loop = self._loop

        async def shutdown():
            await _settle_accepts()
            self._server.close()
            for t in list(self._transports):
                t.abort()
            await asyncio.sleep(0)

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def url(self, path="/", host="localhost"):
        return "https://%s:%d%s" % (host, self.port, path)

    def _on_hello(self, transport, record):
        try:
            hello = parse_client_hello(record)
            with self._lock:
                self.hellos.append(hello)
        except ValueError as e:
            with self._lock:
                self.errors.append(str(e))
        if self.mode == "silent":
            return
        if self.mode == "reset":
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
            return
        if self.mode == "garbage":
            transport.write(PLAIN_HTTP)
        elif self.mode == "alert":
            transport.write(FATAL_ALERT)
        transport.close()  # after the buffered bytes are written


# ---------------------------------------------------------------------------- a Python client


class HttpsResult(NamedTuple):
    status: int
    headers: dict
    body: bytes
    session: object
    session_reused: bool
    version: str
    alpn: Optional[str]


def client_context(cafile=None, max_version=ssl.TLSVersion.TLSv1_2, alpn=("http/1.1",)):
    """A verifying client context like the program's: TLS 1.2 at most, ALPN http/1.1."""
    ctx = ssl.create_default_context(cafile=cafile)
    if max_version is not None:
        ctx.maximum_version = max_version
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def https_get(port, path="/", host="localhost", ctx=None, session=None, timeout=5,
              server_hostname=None):
    """GET path from https://host:port over a fresh connection ("Connection: close"); the TCP
    connection goes to 127.0.0.1. Raises ssl errors as they come."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        tls = ctx.wrap_socket(sock, server_hostname=server_hostname or host, session=session)
    except BaseException:
        sock.close()
        raise
    try:
        tls.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n"
                     % (path, host, port)).encode("latin-1"))
        data = b""
        while True:
            try:
                chunk = tls.recv(65536)
            except ssl.SSLEOFError:
                break
            if not chunk:
                break
            data += chunk
        result_session = tls.session
        reused = tls.session_reused
        version = tls.version()
        alpn = tls.selected_alpn_protocol()
        try:
            tls.unwrap()
        except (OSError, ValueError):
            pass
    finally:
        tls.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return HttpsResult(status, headers, body, result_session, reused, version, alpn)


def wait_for(predicate, timeout=5.0):
    """Poll `predicate()` until true or `timeout` seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.01)
