"""Fixtures of the integration tests; the harness itself lives in harness.py, the scripted
origin in origin.py."""

import os
import socket
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import HARVESTD_BIN, SANITIZER, Harvestd, Spool  # noqa: E402
from origin import BlackHole, Origin, free_port  # noqa: E402
from tls import PkiError, RawTlsPeer, TestPki, TlsOrigin  # noqa: E402


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def harvestd_bin():
    if not HARVESTD_BIN:
        pytest.skip("HARVESTD_BIN is not set: run the suite with `make integration`")
    if not (os.path.isfile(HARVESTD_BIN) and os.access(HARVESTD_BIN, os.X_OK)):
        pytest.skip("HARVESTD_BIN=%s is not an executable file: build it with `make all`" % HARVESTD_BIN)
    return HARVESTD_BIN


@pytest.fixture
def harvestd(harvestd_bin, tmp_path):
    h = Harvestd(tmp_path)
    yield h
    h.cleanup()


@pytest.fixture
def run_harvestd(harvestd):
    """run_harvestd(urls, *args, timeout=60, out=None, fast=True, parse=True) -> Run
    (rc, records, stderr, summary, maxrss_kib, stdout, elapsed, out_path)."""
    return harvestd.run


@pytest.fixture(scope="session")
def origin():
    """One origin shared by the whole test run: for tests that do not assert on its counters."""
    o = Origin("shared").start()
    yield o
    o.stop()


@pytest.fixture
def fresh_origin():
    """An origin of the test's own, with counters that start at zero."""
    o = Origin("test").start()
    yield o
    o.stop()


@pytest.fixture
def other_origin():
    """A second origin of the test's own (another port on 127.0.0.1)."""
    o = Origin("other").start()
    yield o
    o.stop()


@pytest.fixture
def closed_port():
    """A port of 127.0.0.1 that refuses connections for the whole test: a socket bound there
    without listening holds it, so that no other test (they run several at a time) can start
    a server on it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    yield s.getsockname()[1]
    s.close()


@pytest.fixture
def black_hole():
    b = BlackHole().start()
    yield b
    b.stop()


# ---------------------------------------------------------------------------- the spool daemon


@pytest.fixture
def spool(tmp_path):
    """The test's spool directory (tmp_path/spool, with no subdirectories yet)."""
    return Spool(tmp_path / "spool")


@pytest.fixture
def start_daemon(harvestd, spool):
    """start_daemon(*args, spool_dir=None, env=None, user=None, ready=True, **directives) ->
    a Daemon running `harvestd -c CONFIG args...` on a config written for the test's spool
    (or `spool_dir`): harness.DAEMON_DEFAULTS updated with `directives` (None leaves one out).
    With ready=True it returns once the daemon logged its start (after the start-up scan).
    Every daemon still running after the test is killed; the config path is `daemon.config`."""
    def start(*args, spool_dir=None, env=None, user=None, ready=True, **directives):
        config = harvestd.daemon_config(spool_dir or spool.root, directives)
        d = harvestd.start_daemon(config, *args, env=env, user=user)
        d.config = config
        if ready:
            d.wait_ready()
        return d
    return start


# ---------------------------------------------------------------------------- TLS (see tls.py)


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """The test PKI, made once per session: pki.ca_file, pki.cert(kind) -> (cert, key)."""
    try:
        loopback = {a[4][0] for a in socket.getaddrinfo("localhost", None, socket.AF_INET)}
    except OSError:
        loopback = set()
    if "127.0.0.1" not in loopback:
        pytest.fail("the TLS tests need \"localhost\" to resolve to 127.0.0.1 (got %r)" % loopback)
    try:
        return TestPki.create(tmp_path_factory.mktemp("pki"))
    except PkiError as e:
        pytest.fail("cannot make the test PKI (the openssl CLI is needed): %s" % e)


@pytest.fixture
def tls_origins(pki):
    """tls_origins(kind="localhost", host="localhost", name=None) -> a started TlsOrigin serving
    the certificate `kind` (see tls.KINDS) with counters of its own; all are stopped after the
    test."""
    started = []

    def make(kind="localhost", host="localhost", name=None):
        o = TlsOrigin(name or "tls-" + kind, *pki.cert(kind), host=host).start()
        started.append(o)
        return o

    yield make
    for o in started:
        o.stop()


@pytest.fixture
def tls_origin(tls_origins):
    """A TLS origin of the test's own with the good certificate (localhost, IP 127.0.0.1)."""
    return tls_origins("localhost")


@pytest.fixture
def raw_tls_peers():
    """raw_tls_peers(mode) -> a started RawTlsPeer (close, reset, garbage, alert, silent); all are
    stopped after the test."""
    started = []

    def make(mode):
        p = RawTlsPeer(mode).start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


def pytest_report_header(config):
    return "harvestd: %s (sanitizer: %s)" % (HARVESTD_BIN or "<HARVESTD_BIN not set>", SANITIZER or "none")


# The Redis server fixture (tests of the stream source and its commands).
from redisd import redis_server  # noqa: E402,F401
from proxies import counting_socks, fault_proxies, microsocks, tinyproxy  # noqa: E402,F401
