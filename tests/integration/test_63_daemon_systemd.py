"""systemd integration: sd_notify messages (READY, STATUS, STOPPING, WATCHDOG), the journal's
priority prefix on log lines, and the installed unit file."""

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from harness import HARVESTD_BIN, SLOWDOWN, page_urls, parse_log_line, wait_complete

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


class NotifySocket:
    """A unix datagram socket (abstract namespace) standing in for systemd's notify socket;
    keeps every message with its arrival time."""

    def __init__(self):
        self.name = "@harvestd-test-%d-%d" % (os.getpid(), time.monotonic_ns())
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.sock.settimeout(0.05)
        self.messages = []  # (monotonic time, message)
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                for line in data.decode("utf-8", "replace").split("\n"):
                    if line:
                        self.messages.append((time.monotonic(), line))

    def lines(self):
        with self._lock:
            return [m for _, m in self.messages]

    def first(self, prefix):
        """Index of the first message starting with `prefix`, or None."""
        for i, m in enumerate(self.lines()):
            if m.startswith(prefix):
                return i
        return None

    def wait_for(self, message, timeout=2.0):
        """Wait until `message` has been read: one the daemon sent just before it exited may
        still be in the socket's buffer when the test sees the exit."""
        deadline = time.monotonic() + timeout
        while message not in self.lines() and time.monotonic() < deadline:
            time.sleep(0.02)

    def times(self, prefix):
        with self._lock:
            return [t for t, m in self.messages if m.startswith(prefix)]

    def close(self):
        self._stop = True
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def notify_socket():
    s = NotifySocket()
    yield s
    s.close()


def test_63_01_notify_ready_status_stopping(start_daemon, spool, origin, notify_socket):
    n = notify_socket
    # A file waiting at start-up is claimed by the start-up scan, before READY=1.
    os.makedirs(spool.path("incoming"))
    spool.drop("early.txt", [origin.url("/hold?key=notify-early&title=e")])
    d = start_daemon(env={"NOTIFY_SOCKET": n.name}, ready=False)
    d.poll_until(lambda: n.first("READY=1") is not None, 5, lambda: "READY=1 (got %r)" % n.lines())
    assert spool.files("incoming") == [], "READY=1 came before the start-up scan claimed early.txt"
    assert spool.files("active") == ["early.txt"]
    ready = n.first("READY=1")
    d.poll_until(lambda: any(m.startswith("STATUS=") for m in n.lines()[ready:]), 3,
                 lambda: "a STATUS= after READY=1 (got %r)" % n.lines())
    statuses = [m for m in n.lines() if m.startswith("STATUS=")]
    assert all(len(m) > len("STATUS=") for m in statuses), statuses
    origin.release("notify-early")
    wait_complete(d, spool, ["early.txt"], timeout=5)
    assert "STOPPING=1" not in n.lines()
    d.send_signal(signal.SIGINT)
    assert d.wait(timeout=10) == 0
    n.wait_for("STOPPING=1")
    lines = n.lines()
    assert lines.count("READY=1") == 1, lines
    assert lines.count("STOPPING=1") == 1, lines
    assert lines.index("READY=1") < lines.index("STOPPING=1")
    assert not any(m.startswith("WATCHDOG=") for m in lines), "WATCHDOG=1 without WATCHDOG_USEC: %r" % lines


def test_63_02_status_reports_progress(start_daemon, spool, origin, notify_socket):
    n = notify_socket
    d = start_daemon(env={"NOTIFY_SOCKET": n.name}, read_timeout="30s", total_timeout="60s")
    d.poll_until(lambda: n.first("READY=1") is not None, 5, "READY=1")
    before = len(n.lines())
    # The batch runs until the test releases its last page: STATUS= is sent at most once a
    # second, so a batch that came and went within one would show only its end.
    spool.drop("one.txt", page_urls(origin, "s", 3) + [origin.url("/hold?key=notify-status&title=h")])
    # Claiming and completing a batch are reported.
    d.poll_until(lambda: any(m.startswith("STATUS=running: 1 active (one.txt ")
                             for m in n.lines()[before:]), 5,
                 lambda: "a STATUS= with the batch running (got %r)" % n.lines())
    origin.release("notify-status")
    wait_complete(d, spool, ["one.txt"], timeout=5)
    d.poll_until(lambda: any(m.startswith("STATUS=running: 0 active, 1 done")
                             for m in n.lines()[before:]), 5,
                 lambda: "a STATUS= with the batch done (got %r)" % n.lines())
    assert d.stop() == 0
    print("notify messages: %r" % n.lines())


@pytest.mark.parametrize("pid", ["unset", "own", "other"])
def test_63_03_watchdog_pings(harvestd, spool, notify_socket, pid):
    """WATCHDOG_USEC=300000: pings at least every 300 ms when WATCHDOG_PID is unset or names
    the daemon; none when it names another process. The daemon is exec'd by a shell so that
    WATCHDOG_PID can be its own pid ($$)."""
    n = notify_socket
    config = harvestd.daemon_config(spool.root, {})
    env = {"NOTIFY_SOCKET": n.name, "WATCHDOG_USEC": "300000"}
    wrapper = ()
    if pid != "unset":
        value = "$$" if pid == "own" else "1"
        wrapper = ("/bin/sh", "-c", 'export WATCHDOG_PID=%s; exec "$0" "$@"' % value)
    d = harvestd.start_daemon(config, env=env, wrapper=wrapper).wait_ready()
    d.poll_until(lambda: n.first("READY=1") is not None, 5, "READY=1")
    ready_at = n.times("READY=1")[0]
    time.sleep(1.0)
    pings = [t for t in n.times("WATCHDOG=1") if t >= ready_at - 0.5]
    if pid == "other":
        assert pings == [], "WATCHDOG=1 sent although WATCHDOG_PID names another process"
    else:
        assert len(pings) >= 3, "%d WATCHDOG=1 in 1 s with WATCHDOG_USEC=300000" % len(pings)
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert max(gaps) < 0.3 * SLOWDOWN, "watchdog gaps %r" % gaps
    assert d.stop() == 0


def test_63_04_journal_priority_prefix(start_daemon, spool, origin):
    """With JOURNAL_STREAM naming stderr's device and inode, log lines start with the syslog
    priority "<N>" instead of "harvestd: "."""
    d = start_daemon(env=lambda daemon: {"JOURNAL_STREAM": daemon.stderr_dev_ino})
    spool.drop("bin.dat", b"\x00binary")  # a warning (rejected)
    spool.drop("j.txt", page_urls(origin, "j", 2))
    wait_complete(d, spool, ["j.txt"], timeout=5)
    d.poll_until(lambda: "event=rejected" in d.stderr_text() and "event=batch_done" in d.stderr_text(), 3,
                 "the rejected and batch_done events")
    assert d.stop() == 0
    priorities = {"debug": "7", "info": "6", "notice": "5", "warning": "4", "error": "3"}
    seen = set()
    log_lines = [line for line in d.stderr_text().splitlines() if "level=" in line]
    assert log_lines
    for line in log_lines:
        m = re.match(r"^<(\d)>level=(\w+) event=\S+", line)
        assert m, "log line without the journal prefix: %r" % line
        assert priorities[m.group(2)] == m.group(1), line
        assert parse_log_line(line)["level"] == m.group(2)
        seen.add(m.group(2))
    assert {"notice", "warning", "info"} <= seen, seen


def test_63_05_no_prefix_when_journal_stream_is_another_file(start_daemon, spool):
    d = start_daemon(env={"JOURNAL_STREAM": "1:1"})
    assert d.stop() == 0
    log_lines = [line for line in d.stderr_text().splitlines() if "level=" in line]
    assert log_lines and all(line.startswith("harvestd: level=") for line in log_lines), log_lines


def test_63_06_installed_unit_verifies(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    if not HARVESTD_BIN:
        pytest.skip("HARVESTD_BIN is not set")
    bindir = os.path.dirname(HARVESTD_BIN)
    build = os.path.relpath(bindir, REPO)
    if build.startswith(".."):
        pytest.skip("HARVESTD_BIN is not inside the source tree")
    dest = tmp_path / "root"
    # -o: install the binary as it is, never rebuild it from the tests.
    done = subprocess.run(["make", "-s", "-C", REPO, "-o", os.path.join(build, "harvestd"), "install",
                           "DESTDIR=%s" % dest, "BINDIR=%s" % bindir, "BUILD=%s" % build],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert done.returncode == 0, done.stdout.decode(errors="replace")
    unit = dest / "lib" / "systemd" / "system" / "harvestd.service"
    assert unit.is_file(), "make install did not install %s" % unit
    text = unit.read_text()
    assert "@BINDIR@" not in text and "@SYSCONFDIR@" not in text, text
    assert re.search(r"^Type=notify$", text, re.M), text
    assert re.search(r"^ExecStart=%s -c /etc/harvestd/harvestd.conf$" % re.escape(HARVESTD_BIN), text, re.M), text
    assert (dest / "etc" / "harvestd" / "harvestd.conf").is_file()

    def verify(path):
        return subprocess.run(["systemd-analyze", "verify", str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=60)

    done = verify(unit)
    output = done.stdout.decode(errors="replace")
    assert done.returncode == 0, output
    # The verifier does find errors here: a unit whose ExecStart is missing fails.
    broken = tmp_path / "harvestd.service"
    broken.write_text(text.replace("ExecStart=%s" % HARVESTD_BIN, "ExecStart=/nonexistent/harvestd"))
    assert verify(broken).returncode != 0, "systemd-analyze verify accepts anything here"
    # The shipped default configuration passes --check-config apart from its spool_dir.
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    check = subprocess.run([HARVESTD_BIN, "--check-config", "-c", str(dest / "etc" / "harvestd" / "harvestd.conf"),
                            "--spool-dir", str(spool_dir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=20)
    assert check.returncode == 0, check.stdout.decode(errors="replace")


def test_63_07_sigterm_right_after_ready_is_a_clean_stop(harvestd, spool):
    """systemd may stop a service as soon as it reported READY=1: the signal must already be
    handled then (drain, exit 0), not kill the daemon. The signal is sent the moment READY=1
    arrives, 20 times."""
    config = harvestd.daemon_config(spool.root, {"log_level": "notice"})
    name = "@harvestd-ready-%d-%d" % (os.getpid(), time.monotonic_ns())
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind("\0" + name[1:])
        sock.settimeout(5 * SLOWDOWN)
        killed = []
        for i in range(20):
            d = harvestd.start_daemon(config, env={"NOTIFY_SOCKET": name})
            while True:
                try:
                    msg = sock.recv(4096)
                except socket.timeout:
                    pytest.fail("no READY=1 within 5 s\n" + d.stderr_text())
                if b"READY=1" in msg.split(b"\n"):
                    break
            d.send_signal(signal.SIGTERM)
            try:
                rc = d.popen.wait(10 * SLOWDOWN)
            except subprocess.TimeoutExpired:
                pytest.fail("the daemon did not stop after SIGTERM\n" + d.stderr_text())
            d._close_files()
            if rc != 0:
                killed.append((i, rc, d.stderr_text()[-500:]))
            while True:  # drain the messages of this run
                sock.settimeout(0)
                try:
                    sock.recv(4096)
                except (BlockingIOError, socket.timeout):
                    break
            sock.settimeout(5 * SLOWDOWN)
        assert not killed, "%d of 20 daemons did not exit 0 after SIGTERM sent on READY=1: %r" % (len(killed), killed[:3])
    finally:
        sock.close()
