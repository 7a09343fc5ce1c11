"""A real redis-server for the integration tests, and a minimal client to look at it.

    RedisServer(tmp_dir, appendonly=False, fsync_always=False, options=(), password=None,
                users=(), tls=None)
        .start()     redis-server on a free port of 127.0.0.1, its files in tmp_dir; returns
                     once it answers PING (a port taken meanwhile is retried with another)
                     password: the default user's (--requirepass); users: ACL rules, one
                     user each ("alice on >secret ~* &* +@all", --user); tls: (cert, key,
                     ca) PEM paths: the port speaks TLS only (--tls-port, --port 0), clients
                     need no certificate (--tls-auth-clients no)
        .stop()      SHUTDOWN (NOSAVE unless appendonly) and wait; idempotent
        .kill()      SIGKILL and wait
        .restart()   start again on the same port and directory (after kill or stop)
        .spawn()     the same, without waiting: the server may still be loading its data
                     (answering -LOADING); .wait_ready() waits for its PONG
        .client()    a RespClient connected to it (logged in as the default user)
        .port, .url  ("redis://127.0.0.1:PORT", no user or password; with tls
                     "rediss://localhost:PORT", the name the test certificates hold)
        .url_for(user=None, password=None, db=None, host=None)  the URL with them
                     (percent-encoded), and another host name
    RespClient(port, timeout=10, user=None, password=None, ca_file=None).call(*args) -> str |
                     int | list | None  (RESP2; bulk and simple strings decoded as UTF-8 with
                     surrogateescape; an error reply raises RedisError, one inside an array is
                     returned as a RedisError); with a password, AUTH [user] password first;
                     with ca_file, over TLS (the certificate must be of that CA, for any
                     name)

The `redis_server` fixture (imported by conftest.py) yields a started server in
tmp_path/"redis" and stops it after the test. Tests are skipped when redis-server is not
installed (`make deps` installs it). The server never saves (--save ''), binds 127.0.0.1 only
and logs to tmp_dir/redis.log, whose tail is in the error when it does not start. `options`
are more `--name value` arguments of redis-server (e.g. "--key-load-delay", "100").

A broken or hostile server, for what no redis-server would send:

    ScriptedRedis(answers).start()   a RESP server on a free port of 127.0.0.1 (stdlib
                     socketserver, a thread per connection) that answers each command from
                     `answers`, by "NAME FIRST-ARGUMENT" ("TYPE harvestd:urls", "XINFO
                     CONSUMERS") if there, else by its name: bytes sent as they are, or a
                     function given the socket and the server (flood() makes one); "+OK"
                     for a command that is in neither
        .stop(), .port, .url, .floods (bytes of filler each flood() answer sent, once done)
    flood(header)    an answer that sends `header` (one announcing more than harvestd takes)
                     and then filler until the client goes away (or 1 GiB)
"""

import atexit
import os
import urllib.parse
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import threading
import time

import pytest

from origin import free_port

REDIS_SERVER = os.environ.get("HARVESTD_REDIS_SERVER") or shutil.which("redis-server") or ""

START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0

# Servers still running when the interpreter exits (a test run interrupted) are killed.
_running = set()


@atexit.register
def _kill_leftovers():
    for server in list(_running):
        try:
            server.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


class RedisError(Exception):
    """An error reply (-ERR ..., -WRONGTYPE ...): str(e) is its text."""


def _encode(arg):
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, (bytearray, memoryview)):
        return bytes(arg)
    return str(arg).encode("utf-8", "surrogateescape")


class RespClient:
    """One blocking RESP2 connection to 127.0.0.1:port."""

    def __init__(self, port, timeout=10, user=None, password=None, ca_file=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ca_file is not None:
            ctx = ssl.create_default_context(cafile=ca_file)
            ctx.check_hostname = False  # the tests' own look at any server of the test CA
            try:
                self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")
            except BaseException:
                self.sock.close()
                raise
        self.file = self.sock.makefile("rb")
        if password is not None:
            try:
                self.call("AUTH", *([user] if user else []), password)
            except BaseException:
                self.close()
                raise

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            data = _encode(a)
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self.sock.sendall(b"".join(out))
        reply = self._read()
        if isinstance(reply, RedisError):
            raise reply
        return reply

    def _line(self):
        line = self.file.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("redis closed the connection")
        return line[:-2]

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode("utf-8", "surrogateescape")
        if kind == b"-":
            return RedisError(rest.decode("utf-8", "surrogateescape"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)
            if len(data) != n + 2:
                raise ConnectionError("redis closed the connection")
            return data[:-2].decode("utf-8", "surrogateescape")
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise ConnectionError("not a RESP2 reply: %r" % line[:100])

    def close(self):
        try:
            self.file.close()
        finally:
            self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RedisServer:
    """A redis-server process of the test's own."""

    def __init__(self, tmp_dir, appendonly=False, fsync_always=False, options=(), password=None,
                 users=(), tls=None):
        self.dir = str(tmp_dir)
        self.appendonly = appendonly
        self.fsync_always = fsync_always
        self.options = [str(o) for o in options]
        self.password = password
        self.users = tuple(users)
        self.tls = tls
        self.port = free_port()
        self.proc = None

    @property
    def url(self):
        return self.url_for()

    def url_for(self, user=None, password=None, db=None, host=None):
        """The server's URL with a user and a password (percent-encoded), a database, and a
        host name other than the default (127.0.0.1; localhost with TLS)."""
        scheme, default_host = ("rediss", "localhost") if self.tls else ("redis", "127.0.0.1")
        auth = ""
        if user is not None or password is not None:
            auth = "%s:%s@" % (urllib.parse.quote(user or "", safe=""),
                               urllib.parse.quote(password or "", safe=""))
        return "%s://%s%s:%d%s" % (scheme, auth, host or default_host, self.port,
                                   "" if db is None else "/%d" % db)

    @property
    def log_path(self):
        return os.path.join(self.dir, "redis.log")

    def argv(self):
        if self.tls:
            cert, key, ca = self.tls
            argv = [REDIS_SERVER, "--port", "0", "--tls-port", str(self.port),
                    "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca,
                    "--tls-auth-clients", "no"]
        else:
            argv = [REDIS_SERVER, "--port", str(self.port)]
        argv += ["--bind", "127.0.0.1", "--dir", self.dir, "--save", "", "--appendonly",
                 "yes" if self.appendonly else "no"]
        if self.fsync_always:
            argv += ["--appendfsync", "always"]
        if self.password is not None:
            argv += ["--requirepass", self.password]
        for rules in self.users:
            argv += ["--user"] + rules.split()
        argv += self.options
        argv += ["--daemonize", "no", "--protected-mode", "yes", "--logfile", self.log_path]
        return argv

    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def start(self):
        """Start (the port is kept when it was started before); returns self."""
        if not REDIS_SERVER:
            pytest.skip("redis-server is not installed (make deps installs it)")
        if self.running():
            return self
        os.makedirs(self.dir, exist_ok=True)
        # A fresh port may be taken between choosing it and the server binding it: choose
        # another then, unless this is a restart, which must keep its port.
        attempts = 1 if self.proc is not None else 5
        for attempt in range(attempts):
            if attempt > 0:
                self.port = free_port()
            if self._start_once():
                return self
        raise RuntimeError("redis-server did not start on 127.0.0.1:%d:\n%s"
                           % (self.port, self.log_tail()))

    def _start_once(self):
        self._spawn()
        if self.wait_ready(raise_error=False):
            return True
        self.kill()
        return False

    def _spawn(self):
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _running.add(self)

    def spawn(self):
        """Start again on the same port and directory (after kill() or stop()) without waiting:
        a server with data may answer -LOADING for a while. Returns self."""
        if self.running():
            raise RuntimeError("spawn() of a redis-server that is still running")
        self._spawn()
        return self

    def wait_ready(self, timeout=START_TIMEOUT, raise_error=True):
        """Wait until the server answers PING with PONG (its data loaded); True then. False
        (or, with raise_error, RuntimeError) when it exits or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                _running.discard(self)
                break
            try:
                with self.client(timeout=2) as c:
                    if c.call("PING") == "PONG":
                        return True
            except (OSError, RedisError):  # not listening yet, or -LOADING
                pass
            time.sleep(0.02)
        if raise_error:
            raise RuntimeError("redis-server on 127.0.0.1:%d not ready:\n%s"
                               % (self.port, self.log_tail()))
        return False

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SHUTDOWN (NOSAVE unless appendonly) and wait for the process; idempotent."""
        if not self.running():
            self._reap()
            return
        try:
            with self.client(timeout=5) as c:
                if self.appendonly:
                    c.call("SHUTDOWN")
                else:
                    c.call("SHUTDOWN", "NOSAVE")
        except (OSError, RedisError):
            pass  # the server closes the connection instead of answering
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reap()

    def kill(self):
        """SIGKILL and wait."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap()

    def _reap(self):
        if self.proc is not None:
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        _running.discard(self)

    def restart(self):
        """Start again on the same port and directory (after kill() or stop())."""
        if self.running():
            raise RuntimeError("restart() of a redis-server that is still running")
        return self.start()

    def client(self, timeout=10):
        return RespClient(self.port, timeout=timeout, password=self.password,
                          ca_file=self.tls[2] if self.tls else None)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


@pytest.fixture
def redis_server(tmp_path):
    """A started redis-server of the test's own (files in tmp_path/"redis"), always stopped."""
    if not REDIS_SERVER:
        pytest.skip("redis-server is not installed (make deps installs it)")
    server = RedisServer(tmp_path / "redis")
    try:
        server.start()
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------- a scripted server


def flood(header, limit=1 << 30):
    """An answer: `header`, then filler until the client goes away or `limit` bytes went."""
    chunk = b"x" * 65536

    def answer(sock, server):
        sent = 0
        try:
            sock.sendall(header)
            while sent < limit:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the client closed the connection: what is wanted
        with server.lock:
            server.floods.append(sent)
        raise ConnectionError("flooded")  # nothing more on this connection

    return answer


class _Handler(socketserver.StreamRequestHandler):
    def _command(self):
        """The next command as a list of bytes (a RESP array of bulk strings), or None at EOF."""
        line = self.rfile.readline()
        if not line.startswith(b"*"):
            return None
        args = []
        for _ in range(int(line[1:])):
            head = self.rfile.readline()
            if not head.startswith(b"$"):
                return None
            data = self.rfile.read(int(head[1:]) + 2)
            args.append(data[:-2])
        return args

    def handle(self):
        server = self.server.owner
        self.request.settimeout(30)
        with server.lock:
            server.connections.append(self.request)
        try:
            while True:
                args = self._command()
                if not args:
                    return
                name = args[0].decode("ascii", "replace").upper()
                first = (name + " " + args[1].decode("utf-8", "replace")).upper() \
                    if len(args) > 1 else None
                answer = server.answers.get(first, server.answers.get(name, b"+OK\r\n"))
                if callable(answer):
                    answer(self.request, server)
                else:
                    self.request.sendall(answer)
        except (OSError, ValueError):
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class ScriptedRedis:
    """See the module's docstring."""

    def __init__(self, answers):
        self.answers = {k.upper(): v for k, v in answers.items()}
        self.lock = threading.Lock()
        self.floods = []
        self.connections = []
        self._server = None
        self._thread = None
        self.port = None

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def start(self):
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self.lock:
            for sock in self.connections:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join(5)
        self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
