"""HTTP/2 servers for the integration tests (test_27_http2.py), all on 127.0.0.1, all over the
session's test PKI (tls.TestPki, certificate "localhost"):

    Nginx(tmp_dir, cert, key).start()
        Debian's nginx (nginx-light has the http2 module) in the foreground, as a master and one
        worker, with every path it writes in tmp_dir (config, pid file, error log, temp paths,
        access log). Two TLS servers with `listen ... ssl http2` on free ports: `port` (the
        content server) and `goaway_port` (the same pages, with `keepalive_requests 2`: a
        GOAWAY after every second request on a connection). Document root (NGINX_PAGES):
        /index.html, /pages/a.html, /pages/b.html, /gzip.html (gzip on for text/html), /big.html
        (about 1 MB); /moved answers 301 to /pages/b.html (relative Location), any other path
        404. .url(path, goaway=False), .access() (the access log: one AccessLine per request
        with the port, nginx's connection serial number, the request's number on it, the
        protocol ("HTTP/2.0", "HTTP/1.1"), the status, the URI and the Content-Encoding sent),
        .stop().

    Nghttpd(tmp_dir, cert, key, pages, max_concurrent_streams=4).start()
        nghttp2's nghttpd serving `pages` ({name: bytes}) from a document root in tmp_dir over
        TLS, with -v: its frame log (stdout, in tmp_dir/nghttpd.log) is parsed by .streams():
        per connection ("[id=N]"), the streams opened ("; Open new stream") and closed
        ("stream_id=N closed"), from which .max_open() gives the most streams open at once on
        one connection. .url(name), .stop().

    H2FaultServer(cert=None, key=None, tls=True, mode="normal", ...).start()
        A scripted HTTP/2 server on python3-h2 (asyncio, its own thread) whose behaviour is
        chosen per request path (see H2FaultServer.ROUTES); over TLS it selects ALPN "h2" (or
        what `alpn` allows), cleartext (tls=False) it takes HTTP/2 with prior knowledge (the
        client preface) and anything else as HTTP/1.1. A connection that negotiated
        http/1.1 gets a minimal HTTP/1.1 server: every request a 200 page (title from
        ?title=). mode="no-settings" accepts HTTP/2 connections and never sends a frame.
        Counters (snapshot()): connections (protocol, client SETTINGS, streams, most open at
        once), requests (connection, protocol, stream, path, query, headers), PINGs sent and
        their ACKs, GOAWAYs sent and the streams they left unprocessed, resets the client sent,
        errors of the server's own h2 state machine, DATA bytes sent.

Fixtures (imported by test_27_http2.py): `nginx_h2` (a started Nginx), `nghttpd_h2` (a
factory: nghttpd_h2(pages, max_concurrent_streams=4)), `h2_faults` (a factory:
h2_faults(**options) -> a started H2FaultServer). Every server a test starts is stopped after
it. Tests that need a missing program or python3-h2 are skipped, saying which.
"""

import asyncio
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time
import urllib.parse
from typing import NamedTuple

import pytest

from origin import free_port, html_page

try:
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.exceptions
    import h2.settings
    HAVE_H2 = True
except ImportError:  # python3-h2 is not installed: the fault server's tests are skipped
    HAVE_H2 = False

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
NGHTTPD = shutil.which("nghttpd") or "/usr/bin/nghttpd"

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# HTTP/2 error codes (RFC 9113 section 7) by the names records spell them in.
H2_CODES = {
    "no_error": 0x0, "protocol_error": 0x1, "internal_error": 0x2, "flow_control_error": 0x3,
    "settings_timeout": 0x4, "stream_closed": 0x5, "frame_size_error": 0x6,
    "refused_stream": 0x7, "cancel": 0x8, "compression_error": 0x9, "connect_error": 0xa,
    "enhance_your_calm": 0xb, "inadequate_security": 0xc, "http_1_1_required": 0xd,
}
H2_NAMES = {v: k for k, v in H2_CODES.items()}


def _spawn(name, argv_for_ports, nports, log_path, stdout_path=None):
    """Start `argv_for_ports(ports)` on `nports` free ports of 127.0.0.1 and wait until it
    listens on all of them: (proc, ports). A server that exits (another test took a port
    between the choice and the bind) is started again on other ports."""
    for _ in range(5):
        ports = [free_port() for _ in range(nports)]
        out = open(stdout_path, "ab") if stdout_path else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(argv_for_ports(ports), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT if stdout_path else subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            if stdout_path:
                out.close()
        deadline = time.monotonic() + 10
        waiting = list(ports)
        while waiting and time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", waiting[0]), timeout=1).close()
                waiting.pop(0)
            except OSError:
                time.sleep(0.02)
        time.sleep(0.05)  # a server that could not bind one of them exits at once
        if not waiting and proc.poll() is None:
            return proc, ports
        _terminate(proc)
    log = ""
    for path in (log_path, stdout_path):
        if path and os.path.exists(path):
            with open(path, errors="replace") as f:
                log += f.read()[-2000:]
    raise RuntimeError("%s did not start listening: %s" % (name, log))


def _terminate(proc, sig=signal.SIGTERM):
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------- nginx

NGINX_BIG_SIZE = 1000000

# path -> (title, size) of the pages in the document root (size 0: just the bare page).
NGINX_PAGES = {
    "/index.html": ("Nginx Index", 0),
    "/pages/a.html": ("Page A", 3000),
    "/pages/b.html": ("Page B", 5000),
    "/gzip.html": ("Zipped Over H2", 80000),
    "/big.html": ("Big Page", NGINX_BIG_SIZE),
}

NGINX_CONF = """\
daemon off;
{user}
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{
    worker_connections 512;
}}
http {{
    log_format hv '$server_port $connection $connection_requests "$server_protocol" $status '
                  '"$request_uri" "$sent_http_content_encoding" $body_bytes_sent';
    access_log {dir}/access.log hv;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    types {{
        text/html html;
    }}
    default_type text/plain;
    gzip on;
    gzip_min_length 256;
    absolute_redirect off;
    ssl_certificate {cert};
    ssl_certificate_key {key};

    server {{
        listen 127.0.0.1:{port} ssl http2;
        server_name localhost;
        root {dir}/www;
        location = /moved {{
            return 301 /pages/b.html;
        }}
    }}

    server {{
        listen 127.0.0.1:{goaway_port} ssl http2;
        server_name localhost;
        keepalive_requests 2;
        root {dir}/www;
        location = /moved {{
            return 301 /pages/b.html;
        }}
    }}
}}
"""


class AccessLine(NamedTuple):
    port: int
    connection: int       # nginx's connection serial number
    number: int           # the request's number on its connection (1-based)
    protocol: str         # "HTTP/2.0", "HTTP/1.1"
    status: int
    uri: str
    encoding: str         # Content-Encoding sent ("-": none)
    bytes: int


_ACCESS_RE = re.compile(r'^(\d+) (\d+) (\d+) "([^"]*)" (\d+) "([^"]*)" "([^"]*)" (\d+)$')


class Nginx:
    def __init__(self, tmp_dir, cert, key):
        self.dir = str(tmp_dir)
        self.cert, self.key = cert, key
        self.proc = None
        self.port = self.goaway_port = None
        self.conf_path = os.path.join(self.dir, "nginx.conf")
        self.error_log = os.path.join(self.dir, "error.log")
        self.access_log = os.path.join(self.dir, "access.log")

    def _write_docroot(self):
        for path, (title, size) in NGINX_PAGES.items():
            full = os.path.join(self.dir, "www", path.lstrip("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(html_page(title, size))

    def _argv(self, ports):
        self.port, self.goaway_port = ports
        # As root the master would hand the worker to "nobody", who cannot read the test's
        # private temporary directories.
        user = "user root root;" if os.geteuid() == 0 else ""
        with open(self.conf_path, "w") as f:
            f.write(NGINX_CONF.format(dir=self.dir, user=user, cert=self.cert, key=self.key,
                                      port=ports[0], goaway_port=ports[1]))
        return [NGINX, "-p", self.dir, "-c", self.conf_path, "-e", self.error_log]

    def start(self):
        for sub in ("www", "tmp"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self._write_docroot()
        open(self.access_log, "w").close()
        self.proc, _ = _spawn("nginx", self._argv, 2, self.error_log,
                              os.path.join(self.dir, "nginx.out"))
        return self

    def url(self, path, goaway=False, host="localhost"):
        return "https://%s:%d%s" % (host, self.goaway_port if goaway else self.port, path)

    def access(self):
        """The access log's lines, in order (nginx writes each as its request ends)."""
        out = []
        with open(self.access_log, errors="replace") as f:
            for line in f:
                m = _ACCESS_RE.match(line.rstrip("\n"))
                assert m, "unexpected nginx access log line: %r" % line
                out.append(AccessLine(int(m[1]), int(m[2]), int(m[3]), m[4], int(m[5]), m[6],
                                      m[7], int(m[8])))
        return out

    def stop(self):
        _terminate(self.proc)  # SIGTERM: fast shutdown, the worker with it


@pytest.fixture
def nginx_h2(pki, tmp_path):
    """A started Nginx (see the module docstring) with the test PKI's localhost certificate."""
    if not os.path.exists(NGINX):
        pytest.skip("nginx is not installed (nginx-light)")
    n = Nginx(tmp_path / "nginx", *pki.cert("localhost"))
    os.makedirs(n.dir, exist_ok=True)
    try:
        n.start()
        yield n
    finally:
        n.stop()


# ---------------------------------------------------------------------------- nghttpd

_NGHTTPD_LINE = re.compile(r"^\[id=(\d+)\] \[\s*[\d.]+\] (.*)$")


class Nghttpd:
    def __init__(self, tmp_dir, cert, key, pages, max_concurrent_streams=4):
        self.dir = str(tmp_dir)
        self.cert, self.key = cert, key
        self.pages = dict(pages)
        self.max_concurrent_streams = max_concurrent_streams
        self.docroot = os.path.join(self.dir, "htdocs")
        self.log_path = os.path.join(self.dir, "nghttpd.log")
        self.proc = None
        self.port = None

    def start(self):
        os.makedirs(self.docroot, exist_ok=True)
        for name, body in self.pages.items():
            with open(os.path.join(self.docroot, name), "wb") as f:
                f.write(body)
        open(self.log_path, "w").close()

        def argv(ports):
            self.port = ports[0]
            return [NGHTTPD, "-a", "127.0.0.1", "-d", self.docroot, "-v",
                    "--max-concurrent-streams=%d" % self.max_concurrent_streams,
                    str(ports[0]), self.key, self.cert]
        self.proc, _ = _spawn("nghttpd", argv, 1, self.log_path, self.log_path)
        return self

    def url(self, name, host="localhost"):
        return "https://%s:%d/%s" % (host, self.port, name)

    def streams(self):
        """{connection id: [("open"|"close", stream id), ...]} in the order of the log."""
        out = {}
        current = None  # (connection, stream) of the frame being described
        with open(self.log_path, errors="replace") as f:
            for line in f:
                m = _NGHTTPD_LINE.match(line)
                if m:
                    conn, text = int(m[1]), m[2]
                    closed = re.match(r"stream_id=(\d+) closed", text)
                    if closed:
                        out.setdefault(conn, []).append(("close", int(closed[1])))
                        current = None
                        continue
                    frame = re.search(r"stream_id=(\d+)>", text)
                    current = (conn, int(frame[1])) if frame else None
                    out.setdefault(conn, [])
                elif "; Open new stream" in line and current is not None:
                    out[current[0]].append(("open", current[1]))
        return out

    def max_open(self):
        """{connection id: the most streams open at once on it}, for the connections that
        opened any (not the probe that saw nghttpd listening)."""
        result = {}
        for conn, events in self.streams().items():
            if not events:
                continue
            open_now, most = set(), 0
            for kind, sid in events:
                if kind == "open":
                    open_now.add(sid)
                    most = max(most, len(open_now))
                else:
                    open_now.discard(sid)
            result[conn] = most
        return result

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def paths(self):
        """The :path of every request, in the order nghttpd logged them."""
        with open(self.log_path, errors="replace") as f:
            return re.findall(r"recv \(stream_id=\d+\) :path: (\S+)", f.read())

    def stop(self):
        _terminate(self.proc)


@pytest.fixture
def nghttpd_h2(pki, tmp_path):
    """nghttpd_h2(pages, max_concurrent_streams=4) -> a started Nghttpd; all stopped after."""
    if not os.path.exists(NGHTTPD):
        pytest.skip("nghttpd is not installed (nghttp2-server)")
    started = []

    def make(pages, max_concurrent_streams=4):
        n = Nghttpd(tmp_path / ("nghttpd-%d" % len(started)), *pki.cert("localhost"), pages,
                    max_concurrent_streams)
        os.makedirs(n.dir, exist_ok=True)
        started.append(n)
        return n.start()
    try:
        yield make
    finally:
        for n in started:
            n.stop()


# ---------------------------------------------------------------------------- the fault server


class Request(NamedTuple):
    conn: int             # connection number (1-based, in accept order)
    protocol: str         # "h2" or "http/1.1"
    stream: int           # HTTP/2 stream id (0 for HTTP/1.1)
    method: str
    path: str
    query: dict           # first value of each query parameter
    target: str           # path and query as sent
    headers: list         # [(name, value)] as received (pseudo-fields first for h2), str
    time: float           # time.monotonic() at arrival


def _hpack_int(value, prefix_bits, first_byte=0):
    """An HPACK integer (RFC 7541 5.1) with an N-bit prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte | value])
    out = [first_byte | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7f) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    """A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2): it
    leaves the client's dynamic table alone."""
    return (b"\x00" + _hpack_int(len(name), 7) + name + _hpack_int(len(value), 7) + value)


def frame(ftype, flags, stream_id, payload):
    """A raw HTTP/2 frame (RFC 9113 4.1)."""
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream_id & 0x7fffffff) + payload


FRAME_DATA, FRAME_HEADERS, FRAME_RST, FRAME_GOAWAY, FRAME_WINDOW_UPDATE, FRAME_CONTINUATION = \
    0x0, 0x1, 0x3, 0x7, 0x8, 0x9
FLAG_END_STREAM, FLAG_END_HEADERS = 0x1, 0x4


class _Sending:
    """A response body being sent on a stream, as flow control allows."""

    def __init__(self, body, chunk, end):
        self.body = body
        self.offset = 0
        self.chunk = chunk
        self.end = end            # END_STREAM once the body is out


class _Conn(asyncio.Protocol):
    """One connection of the fault server."""

    def __init__(self, server):
        self.server = server
        self.transport = None
        self.id = 0
        self.kind = None          # "h2", "http/1.1", or None while a cleartext one is sniffed
        self.buf = b""
        self.h2 = None
        self.closed = False
        self.closing = False
        self.timers = []
        self.sending = {}         # stream id -> _Sending
        self.open_streams = set()
        self.goaway_last = None   # last stream id of the GOAWAY we sent
        self.goaway_waiting = []  # (stream id, request) of /goaway-midflight held back
        self.close_when_done = False
        self.ping_seq = 0

    # ---- plumbing

    def connection_made(self, transport):
        self.transport = transport
        self.id = self.server._connection_made(self)
        if self.server.tls:
            sslobj = transport.get_extra_info("ssl_object")
            alpn = sslobj.selected_alpn_protocol() if sslobj is not None else None
            self._begin("h2" if alpn == "h2" else "http/1.1", alpn)

    def data_received(self, data):
        if self.closed:
            return
        if self.kind is None:
            self.buf += data
            if self.buf.startswith(PREFACE) or (len(self.buf) < len(PREFACE) and
                                                PREFACE.startswith(self.buf)):
                if len(self.buf) < len(PREFACE):
                    return
                data, self.buf = self.buf, b""
                self._begin("h2", None)
            else:
                data, self.buf = self.buf, b""
                self._begin("http/1.1", None)
        if self.kind == "h2":
            self._h2_received(data)
        else:
            self._h1_received(data)

    def connection_lost(self, exc):
        self.closed = True
        for t in self.timers:
            t.cancel()
        self.timers = []
        self.sending.clear()
        with self.server._lock:
            self.server.connections[self.id]["closed"] = True
        self.open_streams.clear()
        self.server._forget(self)

    def later(self, delay, fn, *args):
        def run():
            if self.closed or self.closing:
                return
            try:
                fn(*args)
            except h2.exceptions.H2Error as e:  # e.g. the client reset the stream meanwhile
                self.server._error("conn %d: %r" % (self.id, e))
            self.flush()
        self.timers.append(self.server.loop.call_later(delay, run))

    def write(self, data):
        if data and not self.closed and not self.closing:
            self.transport.write(data)

    def close(self):
        if not self.closed and not self.closing:
            self.flush()
            self.closing = True
            self.transport.close()

    def _begin(self, kind, alpn):
        self.kind = kind
        with self.server._lock:
            info = self.server.connections[self.id]
            info["protocol"] = kind
            info["alpn"] = alpn
        if kind != "h2" or self.server.mode == "no-settings":
            return
        cfg = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                        validate_outbound_headers=False,
                                        normalize_outbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.server.max_concurrent_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 1 << 20,
        })
        self.h2.initiate_connection()
        self.flush()
        if self.server.ping_interval:
            self.later(self.server.ping_interval, self._ping)

    # ---- HTTP/2

    def flush(self):
        if self.h2 is not None and not self.closed:
            self.write(self.h2.data_to_send())

    def _h2_received(self, data):
        if self.h2 is None:  # mode "no-settings": take everything, say nothing
            with self.server._lock:
                self.server.connections[self.id]["bytes_received"] += len(data)
            return
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.H2Error as e:
            self.server._error("conn %d: %r" % (self.id, e))
            self.flush()
            self.close()
            return
        for ev in events:
            self._h2_event(ev)
        self.flush()

    def _h2_event(self, ev):
        s = self.server
        if isinstance(ev, h2.events.RequestReceived):
            self._stream_opened(ev.stream_id)
            req = s._record_request(self, ev.stream_id, ev.headers)
            if self.goaway_last is not None and ev.stream_id > self.goaway_last:
                with s._lock:
                    s.after_goaway.append(req)
                return
            try:
                s._dispatch(self, ev.stream_id, req)
            except Exception as e:  # noqa: BLE001 - a bug of the script: say so, reset
                s._error("conn %d stream %d %s: %r" % (self.id, ev.stream_id, req.target, e))
                self.reset(ev.stream_id, H2_CODES["internal_error"])
        elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            if isinstance(ev, h2.events.WindowUpdated):
                with s._lock:
                    s.window_updates.append((self.id, ev.stream_id, ev.delta, time.monotonic()))
            else:
                with s._lock:
                    s.connections[self.id]["settings"].update(
                        {int(k): v.new_value for k, v in ev.changed_settings.items()})
            self.pump()
        elif isinstance(ev, h2.events.StreamReset):
            with s._lock:
                s.client_resets.append((self.id, ev.stream_id, ev.error_code))
            self.sending.pop(ev.stream_id, None)
            self._stream_closed(ev.stream_id)
        elif isinstance(ev, h2.events.PingAckReceived):
            with s._lock:
                s.ping_acks.append((self.id, ev.ping_data, time.monotonic()))
        elif isinstance(ev, h2.events.ConnectionTerminated):
            with s._lock:
                s.client_goaways.append((self.id, ev.error_code, ev.last_stream_id))
            self.close()

    def _stream_opened(self, sid):
        self.open_streams.add(sid)
        with self.server._lock:
            info = self.server.connections[self.id]
            info["streams"] += 1
            info["max_open"] = max(info["max_open"], len(self.open_streams))
            self.server._open_total += 1
            self.server.max_open_total = max(self.server.max_open_total, self.server._open_total)

    def _stream_closed(self, sid):
        if sid in self.open_streams:
            self.open_streams.discard(sid)
            with self.server._lock:
                self.server._open_total -= 1
        if self.close_when_done and not self.sending and \
                not [i for i in self.open_streams if i <= (self.goaway_last or 0)]:
            self.close()

    def _ping(self):
        self.ping_seq += 1
        data = struct.pack(">II", self.id, self.ping_seq)
        try:
            self.h2.ping(data)
        except h2.exceptions.H2Error:
            return
        with self.server._lock:
            self.server.pings_sent.append((self.id, data, time.monotonic()))
        self.flush()
        self.later(self.server.ping_interval, self._ping)

    def respond(self, sid, status=200, body=b"", headers=(), chunk=16384, end=True,
                content_type="text/html; charset=utf-8"):
        """Send a response head and queue `body` (sent as flow control allows, `chunk` bytes
        a frame at most; with end=False the stream stays open after it)."""
        fields = [(b":status", str(status).encode())]
        if content_type:
            fields.append((b"content-type", content_type.encode()))
        if end:
            fields.append((b"content-length", str(len(body)).encode()))
        fields += [(k if isinstance(k, bytes) else k.encode(),
                    v if isinstance(v, bytes) else v.encode()) for k, v in headers]
        if not body and end:
            self.h2.send_headers(sid, fields, end_stream=True)
            self._stream_closed(sid)
            return
        self.h2.send_headers(sid, fields)
        self.sending[sid] = _Sending(body, chunk, end)
        self.pump()

    def reset(self, sid, code):
        self.sending.pop(sid, None)
        try:
            self.h2.reset_stream(sid, code)
        except h2.exceptions.H2Error:
            pass
        self._stream_closed(sid)
        self.flush()

    def raw(self, data):
        """Bytes written as they are, after whatever the state machine has queued."""
        self.flush()
        self.write(data)

    def pump(self):
        """Send what flow control allows, the lowest stream id first. With the server's
        `prime` set, a stream that is not the lowest with data pending gets at most `prime`
        bytes (so one stream at a time gets its body while the others wait with a little)."""
        if self.closed or self.h2 is None:
            return
        prime = self.server.prime
        order = sorted(self.sending)
        sent = 0
        for sid in order:
            st = self.sending.get(sid)
            if st is None:
                continue
            while st.offset < len(st.body):
                try:
                    room = self.h2.local_flow_control_window(sid)
                except h2.exceptions.H2Error:
                    room = 0
                if prime is not None and sid != min(self.sending):
                    room = min(room, prime - st.offset)
                room = min(room, len(st.body) - st.offset)
                if room <= 0:
                    break
                try:
                    while room > 0:
                        n = min(room, st.chunk, self.h2.max_outbound_frame_size)
                        self.h2.send_data(sid, st.body[st.offset:st.offset + n])
                        st.offset += n
                        sent += n
                        room -= n
                except h2.exceptions.H2Error as e:
                    self.server._error("conn %d stream %d: %r" % (self.id, sid, e))
                    self.sending.pop(sid, None)
                    break
            if sid in self.sending and st.offset >= len(st.body):
                del self.sending[sid]
                if st.end:
                    try:
                        self.h2.end_stream(sid)
                    except h2.exceptions.H2Error:
                        pass
                    self._stream_closed(sid)
        with self.server._lock:
            self.server.data_sent += sent
            # Nothing more can go now: every stream with data waits for a WINDOW_UPDATE (or
            # for its turn, with `prime`).
            self.server.stalled[self.id] = bool(self.sending)
        self.flush()

    # ---- HTTP/1.1

    def _h1_received(self, data):
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                self.close()
                return
            headers = []
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers.append((name.strip().lower(), value.strip()))
            req = self.server._record_request(self, 0, [(b":method", parts[0].encode()),
                                                         (b":path", parts[1].encode())] +
                                              [(k.encode(), v.encode()) for k, v in headers])
            title = req.query.get("title") or "Over HTTP/1.1"
            body = html_page(title, int(req.query.get("size", 0) or 0))
            self.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)


class H2FaultServer:
    """See the module docstring. Options:
      cert, key          the server certificate (tls=True)
      tls                TLS with ALPN (`alpn`, in the server's order of preference), or
                         cleartext (prior knowledge: the client preface makes it HTTP/2)
      mode               "normal", or "no-settings" (an HTTP/2 connection never gets a frame)
      max_concurrent_streams  the SETTINGS_MAX_CONCURRENT_STREAMS announced
      ping_interval      seconds between the PINGs sent on each HTTP/2 connection (None: none)
      prime              see _Conn.pump (None: every stream gets what flow control allows)
      goaway_budget      how many connections /goaway-midflight breaks (then it answers)
    """

    ROUTES = {}  # path prefix -> handler name, filled below

    def __init__(self, cert=None, key=None, tls=True, mode="normal", host="localhost",
                 alpn=("h2", "http/1.1"), max_concurrent_streams=100, ping_interval=None,
                 prime=None, goaway_budget=1):
        if not HAVE_H2:
            raise RuntimeError("python3-h2 is not installed")
        self.tls = tls
        self.mode = mode
        self.host = host
        self.max_concurrent_streams = max_concurrent_streams
        self.ping_interval = ping_interval
        self.prime = prime
        self.goaway_budget = goaway_budget
        self.ssl_context = None
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(cert, key)
            ctx.set_alpn_protocols(list(alpn))
            self.ssl_context = ctx
        self._lock = threading.Lock()
        self.loop = None
        self.thread = None
        self.server = None
        self.port = None
        self._conns = set()
        self._counts = {}         # key -> requests seen (for ?key=&times=)
        self.connections = {}     # id -> info dict
        self.requests = []
        self.pings_sent = []      # (conn, data, time)
        self.ping_acks = []       # (conn, data, time)
        self.goaways_sent = []    # (conn, last stream id, code)
        self.goaway_dropped = []  # requests above a GOAWAY's last stream id (never answered)
        self.after_goaway = []    # requests that arrived on a connection after our GOAWAY
        self.client_resets = []   # (conn, stream, code)
        self.window_updates = []  # (conn, stream (0: the connection), increment, time)
        self.client_goaways = []  # (conn, code, last stream id)
        self.errors = []          # the server's own h2 errors
        self.data_sent = 0
        self.stalled = {}         # conn -> data waits for flow control (after the last pump)
        self._open_total = 0
        self.max_open_total = 0

    # ---- life

    def start(self):
        ready = threading.Event()
        failure = []

        def run():
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            try:
                self.server = self.loop.run_until_complete(self.loop.create_server(
                    lambda: _Conn(self), "127.0.0.1", 0, ssl=self.ssl_context,
                    ssl_handshake_timeout=10 if self.ssl_context else None))
                self.port = self.server.sockets[0].getsockname()[1]
            except Exception as e:  # noqa: BLE001 - reported to start()
                failure.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self.loop.close()

        self.thread = threading.Thread(target=run, name="h2-fault-server", daemon=True)
        self.thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self):
        if self.loop is None or self.loop.is_closed():
            return

        async def shutdown():
            self.server.close()
            for _ in range(5):  # accepts under way reach their protocol (see tls.py)
                await asyncio.sleep(0)
            for c in list(self._conns):
                if c.transport is not None:
                    c.transport.abort()
            for _ in range(5):  # connection_lost, which closes the sockets
                await asyncio.sleep(0)
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop)
        self.thread.join(10)

    def url(self, path, host=None):
        scheme = "https" if self.tls else "http"
        return "%s://%s:%d%s" % (scheme, host or self.host, self.port, path)

    # ---- counters (the server's thread writes them under the lock)

    def _connection_made(self, conn):
        with self._lock:
            self._conns.add(conn)
            cid = len(self.connections) + 1
            self.connections[cid] = {"id": cid, "protocol": None, "alpn": None, "streams": 0,
                                     "max_open": 0, "settings": {}, "closed": False,
                                     "bytes_received": 0}
            return cid

    def _forget(self, conn):
        with self._lock:
            self._conns.discard(conn)
            self.stalled.pop(conn.id, None)

    def _error(self, text):
        with self._lock:
            self.errors.append(text)

    def _record_request(self, conn, sid, headers):
        fields = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]
        pseudo = dict(f for f in fields if f[0].startswith(":"))
        target = pseudo.get(":path", "")
        split = urllib.parse.urlsplit(target)
        query = {k: v[0] for k, v in
                 urllib.parse.parse_qs(split.query, keep_blank_values=True).items()}
        req = Request(conn.id, conn.kind, sid, pseudo.get(":method", ""), split.path, query,
                      target, fields, time.monotonic())
        with self._lock:
            self.requests.append(req)
        return req

    def _take(self, req):
        """Whether this request is among the first `times` of its ?key= (all of them without
        a key): the faults that stop after a few requests."""
        times = int(req.query.get("times", 1 << 30))
        key = req.query.get("key", req.target)
        with self._lock:
            n = self._counts.get(key, 0) + 1
            self._counts[key] = n
        return n <= times

    def snapshot(self):
        with self._lock:
            return {
                "connections": {k: dict(v, settings=dict(v["settings"]))
                                for k, v in self.connections.items()},
                "requests": list(self.requests),
                "pings_sent": list(self.pings_sent),
                "ping_acks": list(self.ping_acks),
                "goaways_sent": list(self.goaways_sent),
                "goaway_dropped": list(self.goaway_dropped),
                "after_goaway": list(self.after_goaway),
                "client_resets": list(self.client_resets),
                "window_updates": list(self.window_updates),
                "client_goaways": list(self.client_goaways),
                "errors": list(self.errors),
                "data_sent": self.data_sent,
                "stalled": dict(self.stalled),
                "max_open_total": self.max_open_total,
            }

    def requests_to(self, path, protocol=None):
        with self._lock:
            return [r for r in self.requests if r.path == path and
                    (protocol is None or r.protocol == protocol)]

    def h2_connections(self):
        with self._lock:
            return [c for c in self.connections.values() if c["protocol"] == "h2"]

    # ---- request handling (on the server's thread)

    def _dispatch(self, conn, sid, req):
        for prefix, name in sorted(self.ROUTES.items(), key=lambda kv: -len(kv[0])):
            if req.path == prefix or req.path.startswith(prefix + "/"):
                return getattr(self, name)(conn, sid, req)
        conn.respond(sid, 404, html_page("Not Found"))

    @staticmethod
    def _page(req, default="OK"):
        return html_page(req.query.get("title", default), int(req.query.get("size", 0) or 0))

    def _h_ok(self, conn, sid, req):
        """/ok?title=&size=&delay=: a page, after `delay` seconds."""
        delay = float(req.query.get("delay", 0) or 0)
        if delay:
            conn.later(delay, conn.respond, sid, 200, self._page(req))
        else:
            conn.respond(sid, 200, self._page(req))

    def _h_big(self, conn, sid, req):
        """/big?size=&title=: a large page, sent as flow control allows."""
        conn.respond(sid, 200, html_page(req.query.get("title", "Big"),
                                         int(req.query.get("size", 1 << 20))))

    def _h_rst(self, conn, sid, req):
        """/rst/CODE?when=before|after|mid&key=&times=: RST_STREAM with CODE (a number or a
        name) before the head, after it, or half-way through the body; past `times`, a page."""
        code = req.path.rsplit("/", 1)[1]
        code = H2_CODES[code] if code in H2_CODES else int(code, 0)
        if not self._take(req):
            return conn.respond(sid, 200, self._page(req))
        when = req.query.get("when", "before")
        if when == "before":
            return conn.reset(sid, code)
        body = self._page(req, "reset")
        if when == "after":
            conn.h2.send_headers(sid, [(b":status", b"200"), (b"content-type", b"text/html"),
                                       (b"content-length", str(len(body)).encode())])
            conn.flush()
            return conn.later(0.05, conn.reset, sid, code)
        # mid: half the body, then the reset
        conn.h2.send_headers(sid, [(b":status", b"200"), (b"content-type", b"text/html"),
                                   (b"content-length", str(len(body)).encode())])
        conn.h2.send_data(sid, body[:len(body) // 2])
        conn.flush()
        conn.later(0.05, conn.reset, sid, code)

    def _h_refuse(self, conn, sid, req):
        """/refuse?key=&times=: REFUSED_STREAM the first `times` requests of `key`."""
        if self._take(req):
            return conn.reset(sid, H2_CODES["refused_stream"])
        conn.respond(sid, 200, self._page(req, "accepted"))

    def _h_calm(self, conn, sid, req):
        """/calm?key=&times=: ENHANCE_YOUR_CALM (0xb) the first `times` requests."""
        if self._take(req):
            return conn.reset(sid, H2_CODES["enhance_your_calm"])
        conn.respond(sid, 200, self._page(req, "calmer"))

    def _h_http11(self, conn, sid, req):
        """/http11-required: HTTP_1_1_REQUIRED (0xd) over HTTP/2 (HTTP/1.1 gets a page)."""
        conn.reset(sid, H2_CODES["http_1_1_required"])

    def _h_goaway_midflight(self, conn, sid, req):
        """/goaway-midflight?n=: held until `n` of them (default 4) are open on the connection
        (or 3 s passed), then, on the first `goaway_budget` connections, GOAWAY (NO_ERROR) with
        the last stream id in the middle of them: the streams at or below it are answered,
        those above never are, and the connection is closed once the answers are out. Past the
        budget: a page at once."""
        if self.goaway_budget <= 0 and conn.goaway_last is None:
            return conn.respond(sid, 200, self._page(req))
        conn.goaway_waiting.append((sid, req))
        if len(conn.goaway_waiting) == 1:
            conn.later(3.0, self._goaway_now, conn)
        if len(conn.goaway_waiting) >= int(req.query.get("n", 4)):
            self._goaway_now(conn)

    def _goaway_now(self, conn):
        if not conn.goaway_waiting:
            return
        waiting, conn.goaway_waiting = sorted(conn.goaway_waiting, key=lambda w: w[0]), []
        if self.goaway_budget <= 0:
            for sid, req in waiting:
                conn.respond(sid, 200, self._page(req))
            return
        self.goaway_budget -= 1
        last = waiting[(len(waiting) - 1) // 2][0]
        conn.goaway_last = last
        conn.raw(frame(FRAME_GOAWAY, 0, 0, struct.pack(">II", last, 0)))
        with self._lock:
            self.goaways_sent.append((conn.id, last, 0))
            self.goaway_dropped += [req for sid, req in waiting if sid > last]
        conn.close_when_done = True
        for sid, req in waiting:
            if sid <= last:
                conn.respond(sid, 200, self._page(req))
        conn._stream_closed(0)  # closes now if nothing is left to send

    def _h_goaway_error(self, conn, sid, req):
        """/goaway-error?code=: the head and half the body, then GOAWAY with `code` (default
        INTERNAL_ERROR) naming this stream as processed, then the connection is closed."""
        code = int(req.query.get("code", H2_CODES["internal_error"]))
        body = self._page(req, "goaway")
        conn.h2.send_headers(sid, [(b":status", b"200"), (b"content-type", b"text/html"),
                                   (b"content-length", str(len(body)).encode())])
        conn.h2.send_data(sid, body[:len(body) // 2])
        conn.raw(frame(FRAME_GOAWAY, 0, 0, struct.pack(">II", sid, code)))
        with self._lock:
            self.goaways_sent.append((conn.id, sid, code))
        conn.later(0.05, conn.close)

    def _h_close(self, conn, sid, req):
        """/close?at=before|headers|body: the connection is closed (TLS close_notify and FIN)
        before any answer, inside the head (HEADERS without END_HEADERS), or half-way through
        the body."""
        at = req.query.get("at", "before")
        if at == "headers":
            conn.raw(frame(FRAME_HEADERS, 0, sid,
                           b"\x88" + hpack_literal(b"content-type", b"text/html")))
        elif at == "body":
            body = self._page(req, "cut")
            conn.h2.send_headers(sid, [(b":status", b"200"), (b"content-type", b"text/html"),
                                       (b"content-length", str(len(body)).encode())])
            conn.h2.send_data(sid, body[:len(body) // 2])
        conn.flush()
        conn.later(0.05, conn.close)

    def _h_stall(self, conn, sid, req):
        """/stall: a head, then nothing (the window does not matter: nothing is pending)."""
        conn.h2.send_headers(sid, [(b":status", b"200"), (b"content-type", b"text/html")])
        conn.flush()

    def _h_tiny_data(self, conn, sid, req):
        """/tiny-data?title=&count=: a page of `count` bytes (100,000) in one-byte DATA frames."""
        body = html_page(req.query.get("title", "Tiny"), int(req.query.get("count", 100000)))
        conn.respond(sid, 200, body, chunk=1)

    def _h_header_bomb(self, conn, sid, req):
        """/header-bomb?n=&size=&distinct=0: a head of `n` fields "x-bomb: <size bytes>" (100 of
        4000: about 400 KB decoded). The same field again and again is indexed in the HPACK
        dynamic table, so it costs a byte or two a field on the wire; distinct=1 names each
        field differently (literal, the whole size on the wire)."""
        n, size = int(req.query.get("n", 100)), int(req.query.get("size", 4000))
        distinct = req.query.get("distinct") == "1"
        headers = [("x-bomb-%d" % i if distinct else "x-bomb", "b" * size) for i in range(n)]
        conn.respond(sid, 200, self._page(req, "bomb"), headers=headers)

    def _h_continuation_flood(self, conn, sid, req):
        """/continuation-flood?frames=&size=: HEADERS without END_HEADERS, then `frames`
        CONTINUATION frames (each one literal field of `size` bytes), never END_HEADERS."""
        frames, size = int(req.query.get("frames", 5000)), int(req.query.get("size", 1000))
        out = [frame(FRAME_HEADERS, 0, sid, b"\x88")]
        for i in range(frames):
            out.append(frame(FRAME_CONTINUATION, 0, sid,
                             hpack_literal(b"x-flood-%d" % i, b"f" * size)))
        conn.raw(b"".join(out))

    def _h_bad_hpack(self, conn, sid, req):
        """/bad-hpack: HEADERS whose block indexes far past the tables (COMPRESSION_ERROR)."""
        conn.raw(frame(FRAME_HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, sid,
                       b"\xff\xff\xff\xff\x0f"))

    def _h_oversized_frame(self, conn, sid, req):
        """/oversized-frame: a head, then a DATA frame one byte over the client's
        SETTINGS_MAX_FRAME_SIZE (FRAME_SIZE_ERROR)."""
        conn.h2.send_headers(sid, [(b":status", b"200"), (b"content-type", b"text/html")])
        limit = conn.h2.max_outbound_frame_size
        conn.raw(frame(FRAME_DATA, 0, sid, b"x" * (limit + 1)))

    def _h_window_overflow(self, conn, sid, req):
        """/window-overflow: WINDOW_UPDATE on the connection with the largest increment, which
        takes the client's send window past 2^31-1 (FLOW_CONTROL_ERROR)."""
        conn.raw(frame(FRAME_WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7fffffff)))

    def _h_no_status(self, conn, sid, req):
        """/no-status: a response head without :status (PROTOCOL_ERROR, RFC 9113 8.3.2)."""
        conn.h2.send_headers(sid, [(b"content-type", b"text/html"), (b"content-length", b"0")],
                             end_stream=True)
        conn._stream_closed(sid)
        conn.flush()


H2FaultServer.ROUTES = {
    "/ok": "_h_ok",
    "/big": "_h_big",
    "/rst": "_h_rst",
    "/refuse": "_h_refuse",
    "/calm": "_h_calm",
    "/http11-required": "_h_http11",
    "/goaway-midflight": "_h_goaway_midflight",
    "/goaway-error": "_h_goaway_error",
    "/close": "_h_close",
    "/stall": "_h_stall",
    "/tiny-data": "_h_tiny_data",
    "/header-bomb": "_h_header_bomb",
    "/continuation-flood": "_h_continuation_flood",
    "/bad-hpack": "_h_bad_hpack",
    "/oversized-frame": "_h_oversized_frame",
    "/window-overflow": "_h_window_overflow",
    "/no-status": "_h_no_status",
}


@pytest.fixture
def h2_faults(pki):
    """h2_faults(**options) -> a started H2FaultServer (TLS with the localhost certificate
    unless tls=False); all are stopped after the test."""
    if not HAVE_H2:
        pytest.skip("python3-h2 is not installed")
    started = []

    def make(**options):
        if options.get("tls", True):
            options.setdefault("cert", pki.cert("localhost")[0])
            options.setdefault("key", pki.cert("localhost")[1])
        s = H2FaultServer(**options).start()
        started.append(s)
        return s
    try:
        yield make
    finally:
        for s in started:
            s.stop()
