"""The address guard: a connection is made only to a socket address that is allowed, whatever
led to it (an IP literal in any form, a name and every address it has, a redirect hop,
robots.txt). Loopback and the other special ranges are refused by default; --allow-addresses
/ allow_addresses names exceptions, --allow-private-addresses / allow_private_addresses turns
the guard off.

Only loopback is ever used here: no test sends a packet to any other address, not even to see
it refused (the other ranges are the classifier's unit tests). Each server counts the
connections it accepts, so a refusal is proved at the server (none arrived), and each refusal
has its control, the same server reached once it is allowed: a listener that counts nothing
cannot make a test pass. origin.Origin listens on 127.0.0.1 alone; Listener listens on any
loopback address (127.0.0.2, ::1 ...).

Name lookups (localhost too) run in a network namespace of the test's own (netns.py), where
nothing but loopback exists and the test's resolver answers. The servers must then listen
inside it, so this file is also a program: run_in_namespace() starts it there (see main()),
it starts the listeners, runs harvestd and prints what each listener accepted.

The harness allows loopback to every run (ALWAYS_DEFAULTS, DAEMON_DEFAULTS); the tests here
pass --allow-addresses (or allow_addresses) themselves, "" for the guard at its default.
"""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.parse

import pytest

import netns
from harness import (ALWAYS_DEFAULTS, FAST_DEFAULTS, HARVESTD_BIN, SLOWDOWN, assert_failed,
                     assert_key_order, assert_ok, by_url, check_batch, check_sanitizer,
                     parse_log_line, parse_records, parse_summary, refused_config, wait_complete,
                     wait_listening)
from origin import free_port, html_page

# The guard at its default: no exception.
GUARD_DEFAULT = ("--allow-addresses", "")

# Inside a namespace of the test's own every port is free.
NS_PORT = 8080


# ---------------------------------------------------------------------------- servers


class Listener:
    """A TCP listener on `host` (an address of the loopback interface) that counts the
    connections it accepts (connections_accepted, like Origin) and answers one request on each:
    /redirect?to=URL with a 302 to URL, any other target with a page titled `title`; then it
    closes the connection."""

    def __init__(self, host, port=0, title="listener"):
        self.host = host
        self.port = port
        self.title = title
        self.connections_accepted = 0
        self.targets = []
        self._lock = threading.Lock()
        self._sock = None
        self._stopping = threading.Event()
        self._thread = None

    def start(self):
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(64)
        except OSError:
            sock.close()
            raise
        sock.settimeout(0.05)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name="listener-" + self.host,
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._sock is None:
            return
        self._stopping.set()
        self._thread.join(10)
        self._sock.close()
        self._sock = None

    def url(self, path="/"):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "http://%s:%d%s" % (host, self.port, path)

    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self.connections_accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            conn.settimeout(5)
            head = b""
            try:
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    head += chunk
            except OSError:
                return
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            target = parts[1] if len(parts) == 3 else ""
            with self._lock:
                self.targets.append(target)
            split = urllib.parse.urlsplit(target)
            if split.path == "/redirect":
                to = urllib.parse.parse_qs(split.query).get("to", ["/"])[0]
                status, headers, body = "302 Found", ["Location: " + to], b""
            else:
                status, headers, body = "200 OK", ["Content-Type: text/html; charset=utf-8"], \
                    html_page(self.title)
            out = ["HTTP/1.1 " + status] + headers + ["Content-Length: %d" % len(body),
                                                      "Connection: close"]
            try:
                conn.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body)
            except OSError:
                pass


@pytest.fixture
def listeners():
    """listeners(host, title="guard", optional=False) -> a started Listener on a port of the
    kernel's choosing; all are stopped after the test. Where IPv6 loopback is unavailable an
    IPv6 host skips the test, or gives None if `optional`."""
    started = []

    def make(host, title="guard", optional=False):
        try:
            listener = Listener(host, 0, title).start()
        except OSError as e:
            if ":" not in host:
                raise
            if optional:
                return None
            pytest.skip("no IPv6 loopback here: cannot listen on %s: %s" % (host, e))
        started.append(listener)
        return listener

    yield make
    for listener in started:
        listener.stop()


def closed_port_on(host):
    """A TCP port on `host` that nothing listens on (bound, then released)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, 0))
        return s.getsockname()[1]
    finally:
        s.close()


# ---------------------------------------------------------------------------- helpers


def assert_blocked(rec, error):
    """A record of a URL whose every address the guard refused."""
    assert_failed(rec, "download", "BlockedAddress", error)
    assert_key_order(rec)
    assert "http_status" not in rec, rec
    assert rec.get("attempts") == 1, rec


def guard_events(stderr):
    """The event=address_guard_off log lines of `stderr`, parsed."""
    out = []
    for line in stderr.splitlines():
        fields = parse_log_line(line)
        if fields is not None and fields.get("event") == "address_guard_off":
            out.append(fields)
    return out


def with_defaults(args):
    """`args` after the harness's defaults for those options it does not set itself."""
    argv = []
    for opt, value in FAST_DEFAULTS + ALWAYS_DEFAULTS:
        if opt not in args:
            argv += [opt, value]
    return argv + [str(a) for a in args]


class NsRun:
    """What run_in_namespace() saw: harvestd's exit status, records, summary and stderr, and the
    connections each listener accepted (None for one that could not listen)."""

    def __init__(self, rc, records, summary, stderr, accepted):
        self.rc = rc
        self.records = records
        self.summary = summary
        self.stderr = stderr
        self.accepted = accepted


def run_in_namespace(tmp_path, urls, *args, names=None, listen=(), setup=""):
    """Run `harvestd --once` over `urls` with `args` (after the harness's defaults) in a network
    namespace of its own where `names` ({name: [ipv4...]}) resolve (netns.run), with a Listener
    inside on each (host, port, title) of `listen`. Returns an NsRun; its `accepted` maps each
    listener's host to the connections it accepted."""
    # A directory per run: netns.run's files (resolv.conf, the resolver's ready file) must be
    # new each time, or a later run could take the earlier resolver's word that it is ready.
    n = len(list(tmp_path.glob("ns-*"))) + 1
    run_dir = tmp_path / ("ns-%d" % n)
    run_dir.mkdir()
    inp, out = run_dir / "urls.txt", run_dir / "out.jsonl"
    inp.write_text("".join(u + "\n" for u in urls))
    command = [HARVESTD_BIN, "--once", str(inp), "-o", str(out)] + with_defaults(args)
    plan = {"listen": [list(spec) for spec in listen], "command": command}
    print("$ (in a namespace of its own, names %r, listening on %r) %s"
          % (names, list(listen), " ".join(command)))
    done = netns.run([sys.executable, os.path.abspath(__file__), json.dumps(plan)], run_dir,
                     names=names, setup=setup)
    check_sanitizer(done.stderr)
    assert done.returncode == 0, \
        "the namespace's program failed (%d):\n%s" % (done.returncode, done.stderr)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    records = parse_records(out.read_bytes()) if out.exists() else []
    accepted = {spec[0]: count for spec, count in zip(listen, result["accepted"])}
    return NsRun(result["rc"], records, parse_summary(done.stderr), done.stderr, accepted)


def main(argv):
    """The program run_in_namespace() starts inside the namespace: argv[1] is JSON {"listen":
    [[host, port, title], ...], "command": [...]}. It starts the listeners, runs the command
    (whose output goes to this program's stderr) and prints {"rc": N, "accepted": [...]} as the
    last line of its stdout."""
    plan = json.loads(argv[1])
    started = []
    for host, port, title in plan["listen"]:
        try:
            started.append(Listener(host, port, title).start())
        except OSError as e:
            sys.stderr.write("cannot listen on %s port %d: %s\n" % (host, port, e))
            started.append(None)
    try:
        rc = subprocess.run(plan["command"], stdin=subprocess.DEVNULL, stdout=sys.stderr,
                            timeout=50).returncode
    finally:
        for listener in started:
            if listener is not None:
                listener.stop()
    accepted = [None if listener is None else listener.connections_accepted for listener in started]
    print(json.dumps({"rc": rc, "accepted": accepted}), flush=True)


# ---------------------------------------------------------------------------- /metrics

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(port):
    """GET /metrics on 127.0.0.1:port: {(name, ((label, value), ...)): value}."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5 * SLOWDOWN)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        text = resp.read().decode("utf-8")
        assert resp.status == 200, "GET /metrics: %d %r" % (resp.status, text[:300])
    finally:
        conn.close()
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        assert m, "not a sample: %r" % line
        name, labels, value = m.groups()
        samples[(name, tuple(sorted(LABEL_RE.findall(labels or ""))))] = float(value)
    return samples


def sample(samples, name, **labels):
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, "no sample %s%r in /metrics: %r" % (
        name, labels, sorted(k for k in samples if k[0] == name))
    return int(samples[key])


# ---------------------------------------------------------------------------- IP literals

LOOPBACK = "blocked_loopback_address"
UNSPECIFIED = "blocked_unspecified_address"

# id, where the server listens, the host as the URL writes it, the error, the host the record's
# url shows (None: not checked), the allow list of the control that reaches the same server.
LITERALS = [
    ("loopback", "127.0.0.1", "127.0.0.1", LOOPBACK, "127.0.0.1", "127.0.0.1/32"),
    ("loopback-127.0.0.2", "127.0.0.2", "127.0.0.2", LOOPBACK, "127.0.0.2", "127.0.0.2/32"),
    ("ipv6-loopback", "::1", "[::1]", LOOPBACK, "[::1]", "::1/128"),
    # An IPv4-mapped address is judged as the IPv4 address it carries.
    ("ipv4-mapped", "127.0.0.1", "[::ffff:127.0.0.1]", LOOPBACK, None, "127.0.0.1/32"),
    ("ipv4-mapped-hex", "127.0.0.1", "[::ffff:7f00:1]", LOOPBACK, None, "127.0.0.1/32"),
    # Linux connects 0.0.0.0 to 127.0.0.1 and :: to ::1.
    ("unspecified", "127.0.0.1", "0.0.0.0", UNSPECIFIED, "0.0.0.0", "0.0.0.0/32"),
    ("ipv6-unspecified", "::1", "[::]", UNSPECIFIED, "[::]", "::/128"),
    # The forms resolvers accept are read as the dotted quad they stand for.
    ("decimal", "127.0.0.1", "2130706433", LOOPBACK, "127.0.0.1", "127.0.0.1/32"),
    ("hex", "127.0.0.1", "0x7f000001", LOOPBACK, "127.0.0.1", "127.0.0.1/32"),
    ("hex-and-decimal", "127.0.0.1", "0x7f.1", LOOPBACK, "127.0.0.1", "127.0.0.1/32"),
    ("octal", "127.0.0.1", "0177.0.0.1", LOOPBACK, "127.0.0.1", "127.0.0.1/32"),
    ("two-parts", "127.0.0.1", "127.1", LOOPBACK, "127.0.0.1", "127.0.0.1/32"),
    ("three-parts", "127.0.0.1", "127.0.1", LOOPBACK, "127.0.0.1", "127.0.0.1/32"),
    ("trailing-dot", "127.0.0.1", "127.0.0.1.", LOOPBACK, None, "127.0.0.1/32"),
]


@pytest.mark.parametrize("listen,host,error,shown,allow", [c[1:] for c in LITERALS],
                         ids=[c[0] for c in LITERALS])
def test_26_01_default_guard_refuses_loopback_in_every_form(run_harvestd, listeners, listen, host,
                                                            error, shown, allow):
    server = listeners(listen)
    path = "/page?title=guard"
    url = "http://%s:%d%s" % (host, server.port, path)
    run = run_harvestd([url], *GUARD_DEFAULT)
    assert run.rc == 0
    (rec,) = run.records
    assert_blocked(rec, error)
    assert rec["requested_url"] == url
    if shown is not None:
        assert rec["url"] == "http://%s:%d%s" % (shown, server.port, path), rec
    assert run.summary["failed"] == 1
    assert run.summary.get("error_type.BlockedAddress") == 1, run.summary
    assert run.summary["dns_lookups"] == 0, "an IP literal was looked up: %r" % run.summary
    assert server.connections_accepted == 0, "a refused connection reached the server"

    # The control: allowed, the same URL reaches the same server.
    run = run_harvestd([url], "--allow-addresses", allow)
    (rec,) = run.records
    assert_ok(rec, "guard")
    if shown is not None:
        assert rec["url"] == "http://%s:%d%s" % (shown, server.port, path), rec
    assert server.connections_accepted == 1


def test_26_02_every_form_in_one_run(run_harvestd, listeners):
    servers = {"127.0.0.1": listeners("127.0.0.1"), "127.0.0.2": listeners("127.0.0.2")}
    ipv6 = listeners("::1", optional=True)
    if ipv6 is not None:
        servers["::1"] = ipv6
    cases = [c for c in LITERALS if c[1] in servers]
    urls = ["http://%s:%d/page?title=%s" % (c[2], servers[c[1]].port, c[0]) for c in cases]
    run = run_harvestd(urls, *GUARD_DEFAULT)
    assert run.rc == 0
    recs = by_url(run.records)
    assert len(recs) == len(urls)
    for c, url in zip(cases, urls):
        assert_blocked(recs[url], c[3])
    assert run.summary.get("error_type.BlockedAddress") == len(urls), run.summary
    assert run.summary["ok"] == 0
    for host, server in servers.items():
        assert server.connections_accepted == 0, "a refused connection reached %s" % host
    # The control: the same run with every address allowed.
    run = run_harvestd(urls, "--allow-addresses", "127.0.0.0/8, ::1/128, 0.0.0.0/32, ::/128")
    for url in urls:
        assert_ok(by_url(run.records)[url], "guard")
    for host, server in servers.items():
        assert server.connections_accepted >= 1, "no connection reached %s" % host


# ---------------------------------------------------------------------------- names


def test_26_03_names_resolving_to_loopback_are_refused(tmp_path):
    # localhost comes from /etc/hosts where it is there, else from the test's resolver; a name
    # that looks public is no better when its only address is loopback.
    names = {"localhost": ["127.0.0.1"], "www.example.com": ["127.0.0.1"]}
    listen = [("127.0.0.1", NS_PORT, "guard"), ("::1", NS_PORT, "guard")]
    urls = ["http://localhost:%d/page" % NS_PORT, "http://www.example.com:%d/page" % NS_PORT]
    run = run_in_namespace(tmp_path, urls, *GUARD_DEFAULT, names=names, listen=listen)
    assert run.rc == 0, run.stderr
    recs = by_url(run.records)
    assert len(recs) == 2
    for url in urls:
        assert_blocked(recs[url], LOOPBACK)
        assert recs[url]["url"] == url
    assert run.summary.get("error_type.BlockedAddress") == 2, run.summary
    assert run.accepted["127.0.0.1"] == 0, "a refused connection reached 127.0.0.1"
    assert run.accepted["::1"] in (0, None), "a refused connection reached ::1"

    # The control: with loopback allowed both names reach the same listeners.
    run = run_in_namespace(tmp_path, urls, "--allow-addresses", "127.0.0.0/8, ::1/128",
                           names=names, listen=listen)
    assert run.rc == 0, run.stderr
    for url in urls:
        assert_ok(by_url(run.records)[url], "guard")
    assert run.accepted["127.0.0.1"] + (run.accepted["::1"] or 0) >= 2, run.accepted


def test_26_04_only_allowed_addresses_of_a_name_are_tried(tmp_path):
    # Both orders, as glibc may sort them: the refused address is skipped, not fatal.
    names = {"both.test": ["127.0.0.3", "127.0.0.2"],
             "both-reversed.test": ["127.0.0.2", "127.0.0.3"],
             "refused.test": ["127.0.0.3", "127.0.0.4"]}
    listen = [("127.0.0.2", NS_PORT, "at-2"), ("127.0.0.3", NS_PORT, "at-3")]
    both = ["http://both.test:%d/page" % NS_PORT, "http://both-reversed.test:%d/page" % NS_PORT]
    # Nothing listens on 127.0.0.4: the one address tried is refused by the kernel, and that
    # error is the record's, not the guard's.
    refused = "http://refused.test:%d/page" % NS_PORT
    run = run_in_namespace(tmp_path, both + [refused], "--allow-addresses",
                           "127.0.0.2/32,127.0.0.4/32", names=names, listen=listen)
    assert run.rc == 0, run.stderr
    recs = by_url(run.records)
    for url in both:
        assert_ok(recs[url], "at-2")
    assert_failed(recs[refused], "download", "ConnectError")
    assert run.accepted["127.0.0.3"] == 0, "a refused address was connected to"
    assert run.accepted["127.0.0.2"] >= 1

    # Every address refused: BlockedAddress, and no connection anywhere.
    run = run_in_namespace(tmp_path, both, *GUARD_DEFAULT, names=names, listen=listen)
    assert run.rc == 0, run.stderr
    for url in both:
        assert_blocked(by_url(run.records)[url], LOOPBACK)
    assert run.accepted == {"127.0.0.2": 0, "127.0.0.3": 0}, run.accepted

    # The control: the other address allowed, the other listener serves.
    run = run_in_namespace(tmp_path, both, "--allow-addresses", "127.0.0.3", names=names,
                           listen=listen)
    assert run.rc == 0, run.stderr
    for url in both:
        assert_ok(by_url(run.records)[url], "at-3")
    assert run.accepted["127.0.0.2"] == 0
    assert run.accepted["127.0.0.3"] >= 1


# ---------------------------------------------------------------------------- redirects, robots


def test_26_05_redirect_to_a_refused_address(run_harvestd, fresh_origin, listeners):
    target = listeners("127.0.0.2", title="hop")
    url = fresh_origin.url("/redir?" + urllib.parse.urlencode(
        {"code": 302, "to": target.url("/page?title=hop")}))
    run = run_harvestd([url], "--allow-addresses", "127.0.0.1/32")
    assert run.rc == 0
    (rec,) = run.records
    assert_blocked(rec, LOOPBACK)
    assert rec["requested_url"] == url
    assert len(fresh_origin.requests_to("/redir")) == 1, "the allowed first hop was not fetched"
    assert target.connections_accepted == 0, "the refused hop reached its server"
    assert run.summary.get("error_type.BlockedAddress") == 1

    # The control: with all of 127/8 allowed the redirect is followed.
    run = run_harvestd([url], "--allow-addresses", "127.0.0.0/8")
    (rec,) = run.records
    assert_ok(rec, "hop")
    assert rec["redirects"] == 1
    assert rec["url"] == target.url("/page?title=hop")
    assert target.connections_accepted == 1


def test_26_06_redirect_to_a_name_of_a_refused_address(tmp_path):
    # The hop's name is looked up and its address judged like the first URL's.
    names = {"hop.test": ["127.0.0.3"]}
    listen = [("127.0.0.2", NS_PORT, "first"), ("127.0.0.3", NS_PORT, "hop")]
    url = "http://127.0.0.2:%d/redirect?to=%s" % (
        NS_PORT, urllib.parse.quote("http://hop.test:%d/page" % NS_PORT, safe=""))
    run = run_in_namespace(tmp_path, [url], "--allow-addresses", "127.0.0.2/32", names=names,
                           listen=listen)
    assert run.rc == 0, run.stderr
    (rec,) = run.records
    assert_blocked(rec, LOOPBACK)
    assert run.accepted == {"127.0.0.2": 1, "127.0.0.3": 0}, run.accepted

    run = run_in_namespace(tmp_path, [url], "--allow-addresses", "127.0.0.2/32, 127.0.0.3/32",
                           names=names, listen=listen)
    assert run.rc == 0, run.stderr
    (rec,) = run.records
    assert_ok(rec, "hop")
    assert rec["url"] == "http://hop.test:%d/page" % NS_PORT
    assert run.accepted == {"127.0.0.2": 1, "127.0.0.3": 1}, run.accepted


def test_26_07_robots_txt_of_a_refused_host_is_not_fetched(run_harvestd, fresh_origin):
    # Everything disallowed: a robots.txt fetched would make the page RobotsDisallowed.
    fresh_origin.set_robots("User-agent: *\nDisallow: /\n")
    url = fresh_origin.url("/page?title=robots")
    run = run_harvestd([url], "--obey-robots", *GUARD_DEFAULT)
    assert run.rc == 0
    (rec,) = run.records
    assert_blocked(rec, LOOPBACK)
    assert "error_type.RobotsDisallowed" not in run.summary, run.summary
    assert fresh_origin.robots_log == [], "robots.txt was answered"
    assert fresh_origin.connections_accepted == 0, "a refused connection reached the server"

    # The control: allowed, robots.txt is fetched and disallows the page.
    run = run_harvestd([url], "--obey-robots", "--allow-addresses", "127.0.0.1/32")
    (rec,) = run.records
    assert_failed(rec, "download", "RobotsDisallowed", "disallowed_by_robots_txt")
    assert len(fresh_origin.requests_to("/robots.txt")) == 1
    assert fresh_origin.find_request("/page") == []


def test_26_08_refusals_are_not_retried(run_harvestd, fresh_origin):
    # In the same run a connect error on an allowed address is retried: retries are on. Each
    # backoff is 500 ms: a refusal that waited for one would show it in its elapsed_ms.
    blocked = fresh_origin.url("/page?title=never")
    refused = "http://127.0.0.2:%d/page" % closed_port_on("127.0.0.2")
    run = run_harvestd([blocked, refused], "--allow-addresses", "127.0.0.2/32", "--retries", "3",
                       "--retry-base", "500ms", "--retry-max", "500ms")
    assert run.rc == 0
    recs = by_url(run.records)
    assert_blocked(recs[blocked], LOOPBACK)
    assert recs[blocked]["elapsed_ms"] < 400 * SLOWDOWN, recs[blocked]
    assert_failed(recs[refused], "download", "ConnectError")
    assert recs[refused]["attempts"] == 4, recs[refused]
    assert run.summary["retries"] == 3, run.summary
    assert fresh_origin.connections_accepted == 0

    # The control: allowed, the page is fetched at once.
    run = run_harvestd([blocked], "--allow-addresses", "127.0.0.1/32", "--retries", "3")
    assert_ok(run.records[0], "never")
    assert fresh_origin.connections_accepted == 1


# ---------------------------------------------------------------------------- the allow list


@pytest.mark.parametrize("allow", ["127.0.0.1/32", "127.0.0.1", " 127.0.0.1/32 , ::1/128 "],
                         ids=["cidr", "plain-address", "spaces"])
def test_26_09_narrow_allow_list(run_harvestd, fresh_origin, listeners, allow):
    other = listeners("127.0.0.2")
    page = fresh_origin.url("/page?title=allowed")
    mapped = "http://[::ffff:127.0.0.1]:%d/page?title=mapped" % fresh_origin.port
    outside = other.url("/page?title=outside")
    run = run_harvestd([page, mapped, outside], "--allow-addresses", allow)
    assert run.rc == 0
    recs = by_url(run.records)
    assert_ok(recs[page], "allowed")
    # Judged as the IPv4 address it carries, which is allowed.
    assert_ok(recs[mapped], "mapped")
    assert_blocked(recs[outside], LOOPBACK)
    assert fresh_origin.connections_accepted >= 1
    assert other.connections_accepted == 0, "127.0.0.2 is outside the list but was connected to"
    assert run.summary.get("error_type.BlockedAddress") == 1

    # The control: the list grown by 127.0.0.2 reaches that server.
    run = run_harvestd([outside], "--allow-addresses", allow.strip() + ",127.0.0.2/32")
    assert_ok(run.records[0], "guard")
    assert other.connections_accepted == 1


def test_26_10_metrics_count_refusals_by_class(harvestd, fresh_origin, listeners):
    """--once with metrics: while the one allowed page is held, the refusals are counted per
    record and per address class."""
    other = listeners("127.0.0.2")
    blocked = {other.url("/page?title=b1"): LOOPBACK,
               "http://[::ffff:127.0.0.2]:%d/page?title=b2" % other.port: LOOPBACK,
               "http://0.0.0.0:%d/page?title=b3" % fresh_origin.port: UNSPECIFIED}
    held = fresh_origin.url("/hold?key=guard&title=held")
    for _ in range(3):
        port = free_port()
        proc = harvestd.start(list(blocked) + [held], "--allow-addresses", "127.0.0.1/32",
                              "--metrics-listen", "127.0.0.1:%d" % port, "--flush-ms", "20ms")
        try:
            wait_listening(port, lambda: proc.popen.poll() is None)
            break
        except AssertionError:
            if proc.popen.poll() is None or "in use" not in proc.stderr_text():
                raise
    else:
        pytest.fail("no free port for the metrics endpoint")
    proc.poll_until(lambda: (len(proc.complete_lines()) == len(blocked)
                             and fresh_origin.find_request("key=guard")),
                    10, "the refused records and the held request")
    m = scrape(port)
    assert sample(m, "harvestd_record_errors_total", error_type="BlockedAddress") == len(blocked)
    assert sample(m, "harvestd_blocked_addresses_total", **{"class": "loopback"}) == 2
    assert sample(m, "harvestd_blocked_addresses_total", **{"class": "unspecified"}) == 1
    fresh_origin.release("guard")
    run = proc.wait(timeout=20)
    assert run.rc == 0
    recs = by_url(run.records)
    assert_ok(recs[held], "held")
    for url, error in blocked.items():
        assert_blocked(recs[url], error)
    assert other.connections_accepted == 0, "a refused connection reached 127.0.0.2"
    assert fresh_origin.connections_accepted == 1, "0.0.0.0 reached the origin"


def test_26_11_guard_off(run_harvestd, fresh_origin, listeners):
    other = listeners("127.0.0.2")
    urls = [fresh_origin.url("/page?title=off"), other.url("/page?title=x"),
            "http://0.0.0.0:%d/page?title=zero" % fresh_origin.port]
    # With no exception listed, only the switch lets them through.
    run = run_harvestd(urls, *GUARD_DEFAULT, "--allow-private-addresses")
    assert run.rc == 0
    recs = by_url(run.records)
    assert_ok(recs[urls[0]], "off")
    assert_ok(recs[urls[1]], "guard")
    assert_ok(recs[urls[2]], "zero")
    events = guard_events(run.stderr)
    assert len(events) == 1, "expected one event=address_guard_off line:\n%s" % run.stderr
    assert events[0]["level"] == "warning", events

    # Without the switch the guard is on, and says nothing, whether loopback is allowed or not.
    run = run_harvestd(urls[:1], *GUARD_DEFAULT)
    assert_blocked(run.records[0], LOOPBACK)
    assert guard_events(run.stderr) == [], "the guard is on, yet:\n%s" % run.stderr
    run = run_harvestd(urls[:1], "--allow-addresses", "127.0.0.0/8")
    assert_ok(run.records[0], "off")
    assert guard_events(run.stderr) == [], "the guard is on, yet:\n%s" % run.stderr


@pytest.mark.parametrize("value,named", [
    ("10.0.0.0/33", "10.0.0.0/33"), ("banana", "banana"), ("::1/129", "::1/129"),
    ("1.2.3.4/", "1.2.3.4/"), ("127.0.0.1/32, banana", "banana"), ("/8", "/8"),
    ("127.0.0.256", "127.0.0.256"), ("127.0.0.1/x", "127.0.0.1/x")],
    ids=["prefix-33", "word", "prefix-129", "no-prefix-after-slash", "second-entry", "no-address",
         "octet-256", "prefix-not-a-number"])
def test_26_12_bad_allow_list_is_a_usage_error(harvestd, fresh_origin, tmp_path, value, named):
    out = tmp_path / "never.jsonl"
    run = harvestd.run([fresh_origin.url("/page?title=x")], "--allow-addresses", value,
                       out=str(out), parse=False, timeout=10)
    assert run.rc == 2, "exit status %d for --allow-addresses %r" % (run.rc, value)
    message = [line for line in run.stderr.splitlines() if re.search(r"allow[-_]addresses", line)]
    assert message, "no message names allow_addresses:\n%s" % run.stderr
    assert any(named in line for line in message), "no message names %r:\n%s" % (named, run.stderr)
    assert not out.exists() or out.stat().st_size == 0, "records were written"
    assert parse_summary(run.stderr) is None
    assert fresh_origin.connections_accepted == 0


# ---------------------------------------------------------------------------- the daemon


def test_26_13_daemon_refuses_and_counts(start_daemon, spool, fresh_origin, listeners):
    o = fresh_origin
    other = listeners("127.0.0.2")
    lines = [o.url("/page?title=d1"), other.url("/page?title=d2"),
             "http://0.0.0.0:%d/page?title=d3" % o.port]
    port = free_port()
    # allow_addresses left out: the guard at its default (retries too: refusals are final).
    d = start_daemon(allow_addresses=None, metrics_listen="127.0.0.1:%d" % port, flush_ms="20ms")
    wait_listening(port, d.running)
    assert guard_events(d.stderr_text()) == []
    (start,) = d.events("start")
    assert (start["address_guard"], start["allowed_ranges"]) == ("on", "0"), start
    data = spool.drop("a.txt", lines)
    wait_complete(d, spool, ["a.txt"], timeout=10)
    recs = by_url(check_batch(spool, "a.txt", data))
    assert_blocked(recs[lines[0]], LOOPBACK)
    assert_blocked(recs[lines[1]], LOOPBACK)
    assert_blocked(recs[lines[2]], UNSPECIFIED)
    assert spool.summary("a.txt")["error_types"] == {"BlockedAddress": 3}
    m = scrape(port)
    assert sample(m, "harvestd_record_errors_total", error_type="BlockedAddress") == 3
    assert sample(m, "harvestd_blocked_addresses_total", **{"class": "loopback"}) == 2
    assert sample(m, "harvestd_blocked_addresses_total", **{"class": "unspecified"}) == 1
    assert o.connections_accepted == 0 and other.connections_accepted == 0, \
        "a refused connection reached a server"
    assert d.stop() == 0

    # The control: the same lines with their addresses allowed.
    d = start_daemon(allow_addresses="127.0.0.1/32, 127.0.0.2/32, 0.0.0.0/32", retries="0")
    (start,) = d.events("start")
    assert (start["address_guard"], start["allowed_ranges"]) == ("on", "3"), start
    data = spool.drop("b.txt", lines)
    wait_complete(d, spool, ["b.txt"], timeout=10)
    recs = by_url(check_batch(spool, "b.txt", data))
    assert_ok(recs[lines[0]], "d1")
    assert_ok(recs[lines[1]], "guard")
    assert_ok(recs[lines[2]], "d3")
    assert len(o.requests_to("/page")) == 2 and other.connections_accepted == 1
    assert d.stop() == 0


def test_26_14_daemon_guard_off_is_logged(start_daemon, spool, fresh_origin):
    d = start_daemon(allow_addresses=None, allow_private_addresses="yes")
    events = d.events("address_guard_off")
    assert len(events) == 1 and events[0]["level"] == "warning", d.stderr_text()
    (start,) = d.events("start")
    assert start["address_guard"] == "off", start
    url = fresh_origin.url("/page?title=off")
    data = spool.drop("a.txt", [url])
    wait_complete(d, spool, ["a.txt"])
    assert_ok(check_batch(spool, "a.txt", data)[0], "off")
    assert d.stop() == 0


def config_lines(spool):
    return ["# a daemon configuration", "spool_dir = %s" % spool.root, "rescan_interval = 500ms",
            "log_level = info"]


@pytest.mark.parametrize("mode", ["daemon", "check"])
@pytest.mark.parametrize("bad,message", [
    ("allow_addresses = 127.0.0.1/32, 10.0.0.0/33", r"allow_addresses: .*10\.0\.0\.0/33"),
    ("allow_addresses = banana", r"allow_addresses: .*banana"),
    ("allow_private_addresses = maybe", r"allow_private_addresses: 'maybe' is not yes or no")],
    ids=["prefix-33", "word", "bad-bool"])
def test_26_15_bad_config_line_names_file_and_line(harvestd, spool, tmp_path, bad, message, mode):
    lines = config_lines(spool)
    lines.insert(3, bad)
    path = tmp_path / "d.conf"
    path.write_text("\n".join(lines) + "\n")
    rc, stderr = refused_config(harvestd, spool, path, mode)
    assert rc == 2, "exit status %r:\n%s" % (rc, stderr)
    assert re.search(r"^harvestd: %s:4: %s" % (re.escape(str(path)), message), stderr, re.M), stderr


@pytest.mark.parametrize("lines", [["allow_addresses = 127.0.0.1/32, ::1, 10.0.0.0/8",
                                    "allow_private_addresses = no"],
                                   ["allow_addresses =", "allow_private_addresses = yes"]],
                         ids=["list", "empty"])
def test_26_16_good_config_lines_pass_check_config(harvestd, spool, tmp_path, lines):
    path = tmp_path / "d.conf"
    path.write_text("\n".join(config_lines(spool) + lines) + "\n")
    done = harvestd.command("--check-config", "-c", path)
    assert done.returncode == 0, done.stderr
    assert "configuration OK" in done.stdout


# ---------------------------------------------------------------------------- input


# Hosts that look like IPv4 addresses (their last label is a number) but are none.
INVALID_HOSTS = ["1.2.3.4.5", "0x100000000", "256.0.0.1", "4294967296", "127.0.0.1.5",
                 "1.2.3.0x100"]


def test_26_17_invalid_ipv4_looking_hosts_fail_at_input(tmp_path):
    # Looked up, these would send a query: they run where the resolver is the test's, which
    # answers them with 127.0.0.1, where a listener would see the connection.
    urls = ["http://%s:%d/page" % (host, NS_PORT) for host in INVALID_HOSTS]
    names = {host: ["127.0.0.1"] for host in INVALID_HOSTS}
    listen = [("127.0.0.1", NS_PORT, "looked-up")]
    run = run_in_namespace(tmp_path, urls, "--allow-addresses", "127.0.0.0/8", names=names,
                           listen=listen)
    assert run.rc == 0, run.stderr
    recs = by_url(run.records)
    assert len(recs) == len(urls)
    for url in urls:
        assert_failed(recs[url], "input", "InvalidUrl", "invalid_host")
        assert "url" not in recs[url], recs[url]
    assert run.summary.get("error_type.InvalidUrl") == len(urls), run.summary
    assert run.summary["dns_lookups"] == 0, "an invalid host was looked up: %r" % run.summary
    assert run.accepted["127.0.0.1"] == 0


if __name__ == "__main__":
    main(sys.argv)


# ---------------------------------------------------------------------------- happy eyeballs


def test_26_40_happy_eyeballs_starts_the_other_family_after_250ms(tmp_path):
    """A name with an IPv6 address where SYNs go unanswered (a listener on ::1 whose accept
    queue is full: the kernel drops further SYNs) and an IPv4 one that works: the IPv6
    attempt comes first (::1 outranks IPv4 in RFC 6724's table), and the IPv4 one starts
    250 ms later instead of after the connect timeout (RFC 8305)."""
    stuck = ("import socket, time\n"
             "s = socket.socket(socket.AF_INET6)\n"
             "s.bind(('::1', %d))\n"
             "s.listen(0)\n"
             "held = []\n"
             "for _ in range(4):\n"
             "    c = socket.socket(socket.AF_INET6)\n"
             "    c.setblocking(False)\n"
             "    c.connect_ex(('::1', %d))\n"
             "    held.append(c)\n"
             "time.sleep(0.2)\n"
             "open(%r, 'w').close()\n"
             "time.sleep(30)\n")
    script = tmp_path / "stuck.py"
    ready = tmp_path / "stuck.ready"
    script.write_text(stuck % (NS_PORT, NS_PORT, str(ready)))
    # Its output away from the namespace's pipes, which would otherwise stay open, and the run
    # with them, until it ends; it ends with the namespace (netns.UNSHARE).
    # The run starts once the queue is full (a loaded machine may take seconds to get there).
    setup = ("python3 %s >/dev/null 2>&1 </dev/null & "
             "i=0; until [ -e %s ] || [ $i -ge 400 ]; do i=$((i + 1)); sleep 0.05; done"
             % (script, ready))
    names = {"dual.test": ["::1", "127.0.0.1"]}
    url = "http://dual.test:%d/page" % NS_PORT
    run = run_in_namespace(tmp_path, [url], "--connect-timeout", "3s", "-vv", names=names,
                           listen=[("127.0.0.1", NS_PORT, "dual")], setup=setup)
    assert run.rc == 0, run.stderr
    r = run.records[0]
    assert r["status"] == "ok" and r["title"] == "dual", (r, run.stderr[-3000:])
    assert "event=connect_race" in run.stderr  # the second attempt started on the delay
    assert 200 <= r["elapsed_ms"] < 2000, r  # not after the 3 s connect timeout
    assert run.accepted["127.0.0.1"] == 1


def test_26_41_first_refusal_says_how_to_allow_a_range(run_harvestd, listeners):
    """A newcomer trying a local server meets the guard first: the first BlockedAddress of a
    run logs (at the default level) how to let the range through, once; the records are the
    same as before, and a run where nothing is refused says nothing of it."""
    server = listeners("127.0.0.1")
    urls = ["http://127.0.0.1:%d/page?title=h%d" % (server.port, i) for i in range(3)]
    run = run_harvestd(urls, *GUARD_DEFAULT, "--log-level", "notice")
    assert run.rc == 0
    for rec in run.records:
        assert_blocked(rec, "blocked_loopback_address")
    hints = [f for f in map(parse_log_line, run.stderr.splitlines())
             if f is not None and f.get("event") == "address_guard_hint"]
    assert len(hints) == 1, run.stderr
    assert hints[0]["level"] == "notice" and hints[0]["host"] == "127.0.0.1", hints
    assert "--allow-addresses 127.0.0.1/32" in hints[0]["note"], hints
    assert server.connections_accepted == 0

    run = run_harvestd(urls, "--allow-addresses", "127.0.0.1/32", "--log-level", "notice")
    assert all(r["status"] == "ok" for r in run.records), run.records
    assert "address_guard_hint" not in run.stderr
