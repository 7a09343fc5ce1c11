"""Real proxies for the integration tests, on loopback.

    Tinyproxy(tmp_dir, user=None, password=None).start()
        Debian's tinyproxy in the foreground (-d) on a free port of 127.0.0.1, allowing only
        127.0.0.1, any CONNECT port, with BasicAuth when a user is given; its log (LogLevel
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


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tinyproxy:
    def __init__(self, tmp_dir, user=None, password=None):
        self.dir = str(tmp_dir)
        os.makedirs(self.dir, exist_ok=True)
        self.user, self.password = user, password
        self.port = _free_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, "tinyproxy.log")
        self.conf_path = os.path.join(self.dir, "tinyproxy.conf")

    def url(self, with_auth=True):
        auth = ("%s:%s@" % (self.user, self.password)) if with_auth and self.user else ""
        return "http://%s127.0.0.1:%d" % (auth, self.port)

    def start(self):
        lines = ["Port %d" % self.port, "Listen 127.0.0.1", "Allow 127.0.0.1", "Timeout 30",
                 "MaxClients 200", "LogFile \"%s\"" % self.log_path, "LogLevel Info",
                 "DisableViaHeader Yes"]
        if self.user:
            lines.append("BasicAuth %s %s" % (self.user, self.password))
        with open(self.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        open(self.log_path, "w").close()
        self.proc = subprocess.Popen([TINYPROXY, "-d", "-c", self.conf_path],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("tinyproxy exited: %s" % open(self.log_path).read()[-2000:])
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("tinyproxy did not listen")

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

    def make(user=None, password=None):
        p = Tinyproxy(tmp_path / ("tinyproxy-%d" % len(made)), user, password).start()
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
        self.port = _free_port()
        self.proc = None

    def url(self, scheme="socks5", with_auth=True):
        auth = ("%s:%s@" % (self.user, self.password)) if with_auth and self.user else ""
        return "%s://%s127.0.0.1:%d" % (scheme, auth, self.port)

    def start(self):
        argv = [MICROSOCKS, "-i", "127.0.0.1", "-p", str(self.port)]
        if self.user:
            argv += ["-u", self.user, "-P", self.password]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("microsocks exited")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("microsocks did not listen")

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
