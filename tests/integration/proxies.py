"""Real proxies for the integration tests, on loopback.

    Tinyproxy(tmp_dir, user=None, password=None, connect_ports=()).start()
        Debian's tinyproxy in the foreground (-d) on a free port of 127.0.0.1, allowing only
        127.0.0.1, any CONNECT port (or only `connect_ports`), with BasicAuth when a user is
        given; its log (LogLevel
        Info: one "Connect (file descriptor N): ..." and one "Request (file descriptor N):
        METHOD TARGET" line per request) in tmp_dir/tinyproxy.log. .port, .url(), .requests()
        (the request lines it logged), .stop().

The `tinyproxy` fixture (imported by conftest.py) yields a started proxy and stops it. Tests
are skipped when tinyproxy is not installed (`make deps` installs it).
"""

import os
import re
import shutil
import socket
import subprocess
import time

import pytest

TINYPROXY = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"


from origin import free_port


def _spawn_listening(name, argv_for_port, log_path=None):
    """Start `argv_for_port(port)` on a free port of 127.0.0.1 until it listens there: (proc,
    port). Another test may take the port between its choice and the bind (tests run several
    at a time): a server that exits, or is gone a moment after the port answered, is started
    again on another port."""
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen(argv_for_port(port), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        time.sleep(0.05)  # a server that could not bind exits at once
        if proc.poll() is None and time.monotonic() < deadline:
            return proc, port
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
    log = open(log_path).read()[-2000:] if log_path else ""
    raise RuntimeError("%s did not start listening: %s" % (name, log))


class Tinyproxy:
    def __init__(self, tmp_dir, user=None, password=None, connect_ports=()):
        self.dir = str(tmp_dir)
        os.makedirs(self.dir, exist_ok=True)
        self.user, self.password = user, password
        self.connect_ports = list(connect_ports)
        self.port = None
        self.proc = None
        self.log_path = os.path.join(self.dir, "tinyproxy.log")
        self.conf_path = os.path.join(self.dir, "tinyproxy.conf")

    def url(self, with_auth=True):
        auth = ("%s:%s@" % (self.user, self.password)) if with_auth and self.user else ""
        return "http://%s127.0.0.1:%d" % (auth, self.port)

    def start(self):
        self.proc, self.port = _spawn_listening("tinyproxy", self._argv, self.log_path)
        return self

    def _argv(self, port):
        lines = ["Port %d" % port, "Listen 127.0.0.1", "Allow 127.0.0.1", "Timeout 30",
                 "MaxClients 200", "LogFile \"%s\"" % self.log_path, "LogLevel Info",
                 "DisableViaHeader Yes"]
        if self.user:
            lines.append("BasicAuth %s %s" % (self.user, self.password))
        lines += ["ConnectPort %d" % p for p in self.connect_ports]
        with open(self.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        open(self.log_path, "w").close()
        return [TINYPROXY, "-d", "-c", self.conf_path]

    def requests(self):
        """The request lines tinyproxy logged ("CONNECT localhost:443 HTTP/1.1", "GET http://...
        HTTP/1.1"), in order."""
        with open(self.log_path, errors="replace") as f:
            return re.findall(r"Request \(file descriptor \d+\): (.*)", f.read())

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def tinyproxy(tmp_path):
    if not os.path.exists(TINYPROXY):
        pytest.skip("tinyproxy is not installed (make deps)")
    made = []

    def make(user=None, password=None, connect_ports=()):
        p = Tinyproxy(tmp_path / ("tinyproxy-%d" % len(made)), user, password,
                      connect_ports).start()
        made.append(p)
        return p
    yield make
    for p in made:
        p.stop()


MICROSOCKS = shutil.which("microsocks") or "/usr/bin/microsocks"


class Microsocks:
    """Debian's microsocks (SOCKS5, RFC 1928/1929) on a free port of 127.0.0.1."""

    def __init__(self, user=None, password=None):
        self.user, self.password = user, password
        self.port = None
        self.proc = None

    def url(self, scheme="socks5", with_auth=True):
        auth = ("%s:%s@" % (self.user, self.password)) if with_auth and self.user else ""
        return "%s://%s127.0.0.1:%d" % (scheme, auth, self.port)

    def start(self):
        self.proc, self.port = _spawn_listening("microsocks", self._argv)
        return self

    def _argv(self, port):
        argv = [MICROSOCKS, "-i", "127.0.0.1", "-p", str(port)]
        if self.user:
            argv += ["-u", self.user, "-P", self.password]
        return argv

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)


@pytest.fixture
def microsocks():
    if not os.path.exists(MICROSOCKS):
        pytest.skip("microsocks is not installed (make deps)")
    made = []

    def make(user=None, password=None):
        p = Microsocks(user, password).start()
        made.append(p)
        return p
    yield make
    for p in made:
        p.stop()


class FaultProxy:
    """A proxy that misbehaves as real ones will not, by `mode` (a stdlib server of the test's
    own on 127.0.0.1):
      407-close     answers a CONNECT with 407, then closes
      garbage       answers a CONNECT with a line that is no HTTP status
      close         closes without a word once the CONNECT arrived
      huge          answers with a reply head that never ends (20 KiB of header lines)
      slow          answers 200 only after `delay` seconds
      close-in-tls  answers 200, then closes as soon as the ClientHello comes through
      socks-cut     a working SOCKS5 proxy (no authentication) that sends its replies one
                    byte at a time, 20 ms apart, then relays to the target
      socks-garbage answers a SOCKS5 greeting with version 4
    .port, .url(scheme), .connections (accepted), .stop()."""

    def __init__(self, mode, delay=0.0):
        import socketserver
        import threading
        self.mode, self.delay = mode, delay
        self.connections = 0
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                proxy.connections += 1
                try:
                    proxy._serve(self.request)
                except OSError:
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, scheme="http"):
        return "%s://127.0.0.1:%d" % (scheme, self.port)

    @staticmethod
    def _read_head(sock):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data

    @staticmethod
    def _recv_exact(sock, n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        return data

    def _serve(self, sock):
        import threading
        mode = self.mode
        if mode.startswith("socks"):
            head = self._recv_exact(sock, 2)
            self._recv_exact(sock, head[1])
            if mode == "socks-garbage":
                sock.sendall(b"\x04\x00")
                return
            self._drip(sock, b"\x05\x00")
            req = self._recv_exact(sock, 4)
            if req[3] == 1:
                host = socket.inet_ntoa(self._recv_exact(sock, 4))
            elif req[3] == 4:
                host = socket.inet_ntop(socket.AF_INET6, self._recv_exact(sock, 16))
            else:
                host = self._recv_exact(sock, self._recv_exact(sock, 1)[0]).decode()
            port = int.from_bytes(self._recv_exact(sock, 2), "big")
            target = socket.create_connection((host, port), timeout=10)
            self._drip(sock, b"\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x00")

            def pipe(a, b):
                try:
                    while True:
                        chunk = a.recv(65536)
                        if not chunk:
                            break
                        b.sendall(chunk)
                except OSError:
                    pass
                finally:
                    try:
                        b.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
            t = threading.Thread(target=pipe, args=(target, sock), daemon=True)
            t.start()
            pipe(sock, target)
            t.join(10)
            target.close()
            return
        self._read_head(sock)
        if mode == "407-close":
            sock.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                         b"Proxy-Authenticate: Basic realm=\"x\"\r\nContent-Length: 0\r\n\r\n")
        elif mode == "garbage":
            sock.sendall(b"SURE THING\r\n\r\n")
        elif mode == "huge":
            for i in range(20):
                sock.sendall(b"HTTP/1.1 200 OK\r\n" if i == 0 else b"X-Pad: " + b"a" * 1017 +
                             b"\r\n")
            time.sleep(2)
        elif mode == "slow":
            time.sleep(self.delay)
            sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            time.sleep(2)
        elif mode == "close-in-tls":
            sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            sock.recv(1)
        # "close": nothing

    @staticmethod
    def _drip(sock, data):
        for b in data:
            sock.sendall(bytes([b]))
            time.sleep(0.02)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fault_proxies():
    made = []

    def make(mode, delay=0.0):
        p = FaultProxy(mode, delay)
        made.append(p)
        return p
    yield make
    for p in made:
        p.stop()


class CountingSocks:
    """A SOCKS5 proxy (no authentication; IPv4 and IPv6 targets) in one thread around one
    selector, that counts what its clients keep open. Each round reads the connections it
    has before it accepts new ones (after a few milliseconds), so that a connection closed
    before another was opened is never counted with it.
    .port, .url(scheme), .connections (accepted), .max_open (most open at once), .targets
    ((host, port) asked for), .stop()."""

    def __init__(self):
        import selectors
        import threading
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.connections = self.open = self.max_open = 0
        self.targets = []  # (host, port) of every request, in order
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def url(self, scheme="socks5"):
        return "%s://127.0.0.1:%d" % (scheme, self.port)

    def _run(self):
        import selectors
        while not self.stopping:
            ready = self.sel.select(0.1)
            accept = False
            for key, _ in ready:
                if key.data is None:
                    accept = True
                elif key.data["client"] is not None:
                    self._readable(key.fileobj, key.data)
            if accept:
                # A close and a later connect may reach the kernel's queues on two CPUs:
                # give a close a moment to land, and read again, before accepting.
                time.sleep(0.005)
                for key, _ in self.sel.select(0):
                    if key.data is not None and key.data["client"] is not None:
                        self._readable(key.fileobj, key.data)
            while accept:
                try:
                    client, _ = self.listener.accept()
                except BlockingIOError:
                    break
                client.setblocking(True)  # reads come when ready; MSG_DONTWAIT drains
                self.sel.register(client, selectors.EVENT_READ,
                                  {"client": client, "target": None, "buf": b"",
                                   "state": "greet"})
                self.connections += 1
                self.open += 1
                self.max_open = max(self.max_open, self.open)

    def _close(self, conn):
        for s in (conn["client"], conn["target"]):
            if s is not None:
                self.sel.unregister(s)
                s.close()
        conn["client"] = conn["target"] = None
        self.open -= 1

    def _readable(self, sock, conn):
        # Read until the socket has nothing more: an end after data is seen in this round.
        flags = 0
        while conn["client"] is not None:
            try:
                data = sock.recv(65536, flags)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._close(conn)
                return
            self._handle(sock, conn, data)
            flags = socket.MSG_DONTWAIT

    def _handle(self, sock, conn, data):
        import selectors
        try:
            if conn["state"] == "relay":
                (conn["target"] if sock is conn["client"] else conn["client"]).sendall(data)
                return
            conn["buf"] += data
            buf = conn["buf"]
            if conn["state"] == "greet":
                if len(buf) < 2 or len(buf) < 2 + buf[1]:
                    return
                conn["client"].sendall(b"\x05\x00")
                conn["buf"], conn["state"] = buf[2 + buf[1]:], "request"
                buf = conn["buf"]
            if len(buf) < 4:
                return
            size = {1: 4, 4: 16}.get(buf[3])
            if size is None:
                self._close(conn)
                return
            if len(buf) < 4 + size + 2:
                return
            host = socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6,
                                    buf[4:4 + size])
            port = int.from_bytes(buf[4 + size:6 + size], "big")
            self.targets.append((host, port))
            conn["target"] = socket.create_connection((host, port), timeout=5)
            conn["target"].setblocking(True)
            self.sel.register(conn["target"], selectors.EVENT_READ, conn)
            conn["client"].sendall(b"\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x00")
            conn["state"] = "relay"
            if buf[6 + size:]:
                conn["target"].sendall(buf[6 + size:])
        except OSError:
            self._close(conn)

    def stop(self):
        self.stopping = True
        self.thread.join(5)
        for key in list(self.sel.get_map().values()):
            if key.data is not None and key.data["client"] is not None:
                self._close(key.data)
        self.listener.close()
        self.sel.close()


@pytest.fixture
def counting_socks():
    made = []

    def make():
        p = CountingSocks()
        made.append(p)
        return p
    yield make
    for p in made:
        p.stop()
