#!/usr/bin/python3
"""`make bench`: harvestd's throughput against the limits of the machine, in one table.

Environment (set by the Makefile):
  HARVESTD_BIN    absolute path of build/harvestd
  HARVESTD_TOOLS  directory of the tools built from tests/tools (parse_limit, delay_server)
  BENCH_DIR       work directory: corpus cache, PKI, nginx config and logs, URL lists, outputs,
                  results.json
  QUICK           1 for the short run (smaller corpus and runs)
  BENCH_PHASES    some of "nginx latency stream recrawl block proxy h2 peers" (default: all
                  eight), to measure only those
  BENCH_H2_FLAGS_H1, BENCH_H2_FLAGS_H2
                  the flags that pick the protocol in the h2 phase's two rows (default
                  "--http2 off" and "--http2 auto"); set both to "" for a harvestd without
                  --http2 (the http_version check then fails, the rest still runs)

What it measures (see README.md beside this file for the details and the reasons):
  1. wrk against nginx on the corpus, over HTTP and HTTPS: the fetch limit.
  2. parse_limit (tests/tools/parse_limit.c): gumbo alone on every core: the parse limit.
  3. harvestd --once over HTTP (1k, 20k, 100k URLs) and HTTPS (20k) against the same nginx,
     and over HTTP with an extraction rule that needs the whole tree, on parse_limit's pages;
     then the same rule plus --links on a second corpus of 0.5-2 MB pages (1k and 10k URLs):
     memory on large pages.
  4. harvestd --once against delay_server (tests/tools/delay_server.c: 100 ms per response,
     500 loopback hosts) at --concurrency 1000: the latency bound.
  5. The same latency-bound load through a Redis stream (a redis-server of its own): one
     daemon reading a spool file, one daemon and three daemons consuming the stream, each at
     --concurrency 200: scaling out, and what the stream costs.
  6. Re-crawling: the HTTP run cold, warm (304s) and with a minimum age, over one store.
  7. The block detector: the HTTP title run with it off and on, alternating; and hosts of a
     Python origin (blockorigin.py) that turn to one "Access denied" page halfway: block
     pages written ok, and the time from the switch to harvestd's verdict.
  8. Proxies: the HTTP title run direct, through tinyproxy and through microsocks (SOCKS5),
     alternating; HTTPS direct and through tinyproxy's CONNECT, alternating too.
  9. HTTP/2: the HTTPS title run on one host at --per-host 16 with HTTP/1.1 and with HTTP/2
     (ALPN h2, an nginx with http2 on its TLS port), alternating.
 10. Peers: wrk, harvestd and GNU Wget2 against one nginx of the phase's own: HTTP and HTTPS
     keep-alive, HTTPS with a full handshake per page; and harvestd re-crawling 200 hosts
     (200 ports; QUICK 100) with TLS sessions kept from its previous run.
Each harvestd run is checked record by record (every line ok, with the page's exact title).
The table and the PASS/FAIL targets go to standard output, progress to standard error, and
everything (raw numbers included) to BENCH_DIR/results.json.

Exit status: 0 when every measurement was taken (whatever the targets say, and a run whose
records are not all ok is a FAIL row, not an error); 1 when something broke: a server or tool
that would not start, harvestd exiting non-zero, killed or timed out; 130 on Ctrl-C. nginx and
the delay servers are stopped in every case.
"""

import collections
import ctypes
import datetime
import hashlib
import json
import os
import platform
import re
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import blockorigin  # noqa: E402
import corpus  # noqa: E402

GENERATOR_PKI_VERSION = 1

QUICK = os.environ.get("QUICK", "").strip().lower() in ("1", "yes", "true", "on")

if QUICK:
    CONFIG = {
        "corpus_pages": 2_000,
        "wrk_seconds": 3,
        "parse_pages": 1_000,
        "http_runs": [1_000, 5_000],
        "https_run": 2_000,
        "latency_urls": 5_000,
        "big_runs": [300, 1_500],
        "stream_urls": 6_000,
        "recrawl_urls": 2_000,
        "block_onoff_urls": 5_000,
        "block_hosts": 10,
        "block_urls_per_host": 100,
        "proxy_urls": 5_000,
        "proxy_https_urls": 2_000,
        "h2_urls": 5_000,
        "peers_urls": 5_000,
        "peers_handshake_urls": 500,
        "peers_hosts": 100,
    }
else:
    CONFIG = {
        "corpus_pages": 20_000,
        "wrk_seconds": 10,
        "parse_pages": 3_000,
        "http_runs": [1_000, 20_000, 100_000],
        "https_run": 20_000,
        "latency_urls": 20_000,
        "big_runs": [1_000, 10_000],
        "stream_urls": 20_000,
        "recrawl_urls": 20_000,
        "block_onoff_urls": 20_000,
        "block_hosts": 20,
        "block_urls_per_host": 200,
        "proxy_urls": 20_000,
        "proxy_https_urls": 20_000,
        "h2_urls": 20_000,
        "peers_urls": 20_000,
        "peers_handshake_urls": 2_000,
        "peers_hosts": 200,
    }
CONFIG.update({
    "wrk_threads": 2,
    "wrk_connections": 64,
    # One host on loopback: the whole default concurrency may go to it.
    "nginx_args": ["--concurrency", "32", "--per-host", "32"],
    "latency_args": ["--concurrency", "1000", "--per-host", "4"],
    # The rules run: a field from the last element of every corpus page, so that no page can
    # be settled from a prefix: gumbo builds the whole tree, as parse_limit does.
    "rules_args": ["--extract", "updated=footer.footer p:nth-child(2)"],
    "rules_field": ("updated", "Last updated on "),
    # The big-page runs: distinct pages of 0.5-2 MB (corpus.py's "big" kind; the URLs cycle
    # through them), the rules run's field plus every link (big_args, below), so that the
    # output is large too.
    "big_pages": 300,
    "latency_concurrency": 1000,
    "latency_delay_s": 0.1,
    "latency_hosts": 500,
    # One C delay server serves all 500 hosts with a quarter to a third of a core at 10,000/s.
    "latency_server_procs": 1,
    "selfcheck_seconds": 1 if QUICK else 2,
    # The stream runs: daemons at this concurrency each, against the latency servers.
    "stream_concurrency": 200,
    "stream_daemons": 3,
    # The block-page run: each host switches after half its URLs; a suspect host is probed
    # after this pause (the default, 5 s, would make the run wait for it).
    "block_probe_delay": "1s",
    # tinyproxy serves at most this many client connections at once (harvestd opens 32 with
    # nginx_args; the Debian default, 100, would do, but leaves no room for connections that
    # are closing).
    "proxy_max_clients": 1024,
    # The h2 phase: one host over HTTPS, 16 requests in flight to it: 16 connections with
    # HTTP/1.1, 16 streams on one connection with HTTP/2. The flags that pick the protocol
    # are apart, so that a harvestd without --http2 can still run the phase (see the top).
    "h2_args": ["--concurrency", "32", "--per-host", "16"],
    "h2_flags": {
        "h1": os.environ.get("BENCH_H2_FLAGS_H1", "--http2 off").split(),
        "h2": os.environ.get("BENCH_H2_FLAGS_H2", "--http2 auto").split(),
    },
    # What every ok record's http_version must be on each side.
    "h2_versions": {"h1": "1.1", "h2": "2"},
    # nginx closes an HTTP/2 connection (GOAWAY) after keepalive_requests streams, as it
    # closes an HTTP/1.1 one after that many requests: far above a run's 20,000.
    "h2_keepalive_requests": 100_000,
    # The peers phase: GNU Wget2 fetching the same URL list as harvestd, bodies to /dev/null,
    # HTTP/1.1 with keep-alive, this many threads (its own parallelism: one connection each).
    "peers_wget2_threads": 32,
    "peers_wget2_args": ["-q", "--no-config", "--no-robots", "--no-http2"],
    # harvestd's full-handshake and kept-sessions runs: a new connection for every request.
    "peers_tls_args": ["--http2", "off"],
})
CONFIG["big_args"] = CONFIG["rules_args"] + ["--links"]

TARGETS = {
    "http_pages_per_s": 3000,
    "http_vs_wrk": 0.35,
    "http_cpu_s_per_1k": 0.08,
    "rules_vs_parse": 0.85,
    "https_vs_http": 0.80,
    "latency_vs_bound": 0.90,
    "peak_rss_mib": 40,
    "rss_growth": 0.10,
    "big_rss_growth": 0.10,
    "stream_scaling": 2.7,
    "stream_vs_spool": 0.90,
    "recrawl_warm_vs_cold": 1.5,
    "recrawl_body_bytes": 0.05,
    "block_on_vs_off": 0.97,
    "block_ok_pages_per_host": 2,
    "proxy_http_vs_direct": 0.90,
    "proxy_socks_vs_direct": 0.90,
    "h2_vs_h1": 1.0,
    "h2_cpu_vs_h1": 1.1,
    "h2_connections": (1, 2),
    "peers_http_vs_wget2": 0.7,
    "peers_https_vs_wget2": 0.5,
    "peers_handshake_vs_wget2": 0.3,
    # harvestd's rate with a full handshake per page before the handshakes' public-key steps
    # went to crypto worker threads (one handshake at a time on the loop thread).
    "peers_today_pages_per_s": 200,
    "peers_handshake_vs_today": 2.0,
    "peers_kept_vs_handshake": 3.0,
}

BIG_LABEL = "harvestd HTTP, rules, 0.5-2 MB pages"

# In this order; BENCH_PHASES picks some of them.
PHASES = ("nginx", "latency", "stream", "recrawl", "block", "proxy", "h2", "peers")


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


class BenchError(Exception):
    """The benchmark itself could not measure something."""


# ---- processes we start ----------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _child_setup():
    """In the child before exec: die with the benchmark (SIGTERM when it goes away)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class Children:
    """Every long-lived process the benchmark starts (nginx, delay servers), each in its own
    process group, so that one call stops them all, on success, error or Ctrl-C."""

    def __init__(self):
        self.procs = []

    def popen(self, cmd, **kw):
        p = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_child_setup, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, wait=5.0):
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(self.procs):
            self.stop(p)


CHILDREN = Children()


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(host, port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def command_output(cmd):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        return r.stdout.decode("utf-8", "replace").strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return "unavailable (%s)" % e


# ---- machine facts ---------------------------------------------------------------------------

def machine_facts(harvestd_bin):
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    wrk = command_output(["wrk", "-v"]).splitlines()
    try:
        with open("/proc/loadavg") as f:
            load = [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        load = None
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "memory_gib": round(mem / 1024 ** 3, 1),
        "kernel": platform.release(),
        "harvestd": command_output([harvestd_bin, "--version"]),
        "nginx": command_output(["nginx", "-v"]).replace("nginx version: ", ""),
        "wrk": wrk[0].split(" Copyright")[0] if wrk else "unknown",
        "python": platform.python_version(),
        "load_average_at_start": load,
        "nofile_limit": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
    }


# ---- TLS: a test CA and a server certificate for 127.0.0.1 / localhost --------------------------

def make_pki(d):
    """CA and server certificate (EC P-256) with the openssl CLI; reused while valid."""
    os.makedirs(d, exist_ok=True)
    ca, server, key = (os.path.join(d, n) for n in ("ca.pem", "server.pem", "server.key"))
    stamp = os.path.join(d, "version")
    try:
        with open(stamp) as f:
            fresh = f.read().strip() == str(GENERATOR_PKI_VERSION)
    except OSError:
        fresh = False
    if fresh and all(os.path.exists(p) for p in (ca, server, key)):
        r = subprocess.run(["openssl", "x509", "-checkend", "86400", "-noout", "-in", server],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            return ca, server, key
    log("making a test CA and a server certificate in %s" % d)
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints = critical, CA:FALSE\n"
                "keyUsage = critical, digitalSignature\n"
                "extendedKeyUsage = serverAuth\n"
                "subjectAltName = DNS:localhost, IP:127.0.0.1\n")

    def openssl(*args):
        r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise BenchError("openssl %s failed: %s" % (args[0], r.stdout.decode(errors="replace")))

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", os.path.join(d, "ca.key"), "-out", ca,
            "-days", "3650", "-subj", "/CN=harvestd benchmark CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", *ec, "-keyout", key, "-out", os.path.join(d, "server.csr"),
            "-subj", "/CN=localhost")
    openssl("x509", "-req", "-in", os.path.join(d, "server.csr"), "-CA", ca,
            "-CAkey", os.path.join(d, "ca.key"), "-CAcreateserial", "-out", server,
            "-days", "825", "-sha256", "-extfile", ext)
    with open(stamp, "w") as f:
        f.write("%d\n" % GENERATOR_PKI_VERSION)
    return ca, server, key


# ---- nginx -----------------------------------------------------------------------------------

NGINX_CONF = """\
# Written by tests/bench/bench.py for one benchmark run.
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
worker_rlimit_nofile 8192;

events {{
    worker_connections 4096;
}}

http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    gzip off;
    keepalive_requests {keepalive_requests};
    keepalive_timeout 120s;
    types {{ text/html html; }}
    default_type application/octet-stream;
    charset utf-8;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    ssl_session_timeout 1h;

    server {{
        listen 127.0.0.1:{http_port};
        listen 127.0.0.1:{https_port} ssl{http2};
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {root};
        location / {{ }}
        location /big/ {{ root {big_root}; }}
    }}
}}
"""


class Nginx:
    """`http2`: the TLS port offers h2 (ALPN) as well as http/1.1."""

    def __init__(self, bench_dir, root, big_root, cert, key, http2=False,
                 keepalive_requests=1_000_000):
        self.dir = os.path.join(bench_dir, "nginx")
        self.root = root
        self.big_root = big_root
        self.cert = cert
        self.key = key
        self.http2 = http2
        self.keepalive_requests = keepalive_requests
        self.proc = None
        self.http_port = self.https_port = None

    def start(self):
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        self.http_port = free_port()
        self.https_port = free_port()
        while self.https_port == self.http_port:
            self.https_port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=self.dir, http_port=self.http_port,
                                      https_port=self.https_port, cert=self.cert, key=self.key,
                                      root=self.root, big_root=self.big_root,
                                      http2=" http2" if self.http2 else "",
                                      keepalive_requests=self.keepalive_requests))
        errlog = os.path.join(self.dir, "error.log")
        self.proc = CHILDREN.popen(["nginx", "-e", errlog, "-p", self.dir, "-c", conf],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(self.dir, "stderr.log"), "wb"))
        for port in (self.http_port, self.https_port):
            if not wait_listening("127.0.0.1", port, self.proc):
                raise BenchError("nginx did not start listening on 127.0.0.1:%d (see %s)"
                                 % (port, errlog))

    def stop(self):
        if self.proc is not None:
            CHILDREN.stop(self.proc, signal.SIGTERM)
            self.proc = None

    def error_count(self):
        """Lines of level error or worse in nginx's error log so far."""
        try:
            with open(os.path.join(self.dir, "error.log"), errors="replace") as f:
                return sum(1 for line in f if re.search(r"\[(error|crit|alert|emerg)\]", line))
        except OSError:
            return 0


# ---- proxies: tinyproxy (HTTP, CONNECT) and microsocks (SOCKS5) ------------------------------

TINYPROXY_CONF = """\
# Written by tests/bench/bench.py for one benchmark run.
Port {port}
Listen 127.0.0.1
Allow 127.0.0.1
Timeout 60
MaxClients {max_clients}
LogFile "{dir}/tinyproxy.log"
LogLevel Warning
DisableViaHeader Yes
"""


def proc_cpu_s(pid):
    """User + system CPU seconds of process `pid`, all its threads (the finished ones too), from
    /proc/PID/stat; None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state is field 3, utime and stime fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_children(pid):
    """The pids whose parent is `pid` (nginx's workers)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return out


class Proxy:
    """Debian's tinyproxy (`kind` "http": absolute-form requests and CONNECT) or microsocks
    ("socks5") on a free port of 127.0.0.1, in its own process group. Each is one process
    (a thread per client connection), so cpu_s() is all the proxy's CPU."""

    BINARIES = {"http": "tinyproxy", "socks5": "microsocks"}

    def __init__(self, kind, d):
        self.kind = kind
        self.name = self.BINARIES[kind]
        self.dir = d
        self.proc = None
        self.port = None

    def url(self):
        return "%s://127.0.0.1:%d" % (self.kind, self.port)

    def start(self):
        binary = shutil.which(self.name) or "/usr/bin/" + self.name
        if not os.access(binary, os.X_OK):
            raise BenchError("%s is not installed (listed in third_party/packages.txt; "
                             "`make deps` installs it)" % self.name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        if self.kind == "http":
            conf = os.path.join(self.dir, "tinyproxy.conf")
            with open(conf, "w") as f:
                f.write(TINYPROXY_CONF.format(port=self.port, dir=self.dir,
                                              max_clients=CONFIG["proxy_max_clients"]))
            open(self.log_path(), "w").close()
            cmd = [binary, "-d", "-c", conf]
        else:
            cmd = [binary, "-i", "127.0.0.1", "-p", str(self.port)]
        self.proc = CHILDREN.popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(self.dir, "stderr.log"), "wb"))
        if not wait_listening("127.0.0.1", self.port, self.proc):
            raise BenchError("%s did not start listening on 127.0.0.1:%d (see %s)"
                             % (self.name, self.port, self.dir))

    def log_path(self):
        return os.path.join(self.dir, "tinyproxy.log")

    def cpu_s(self):
        return proc_cpu_s(self.proc.pid) if self.proc is not None else None

    def log_lines(self):
        """tinyproxy's log lines (only warnings and worse at LogLevel Warning)."""
        if self.kind != "http":
            return []
        try:
            with open(self.log_path(), errors="replace") as f:
                return [line.rstrip("\n") for line in f if line.strip()]
        except OSError:
            return []

    def stop(self):
        if self.proc is not None:
            CHILDREN.stop(self.proc, signal.SIGTERM)
            self.proc = None


# ---- the peers phase: an nginx of its own, GNU Wget2 ---------------------------------------

# One nginx for every row of the phase: a keep-alive server (HTTP and HTTPS, as NGINX_CONF's),
# a TLS port with no session cache, no tickets and one request per connection (a full
# handshake per page), and `hosts` TLS ports with the session cache and tickets on and one
# request per connection (the kept-sessions rows: a distinct host:port each). Every request is
# logged, one write(2) a line, so that each client's requests can be counted (Wget2 reports
# none of its own): port, connection serial number, requests on it, status, protocol, TLS
# version, "r" when the TLS session was resumed, body bytes sent, the request URI.
PEERS_NGINX_CONF = """\
# Written by tests/bench/bench.py for one benchmark run (the peers phase).
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
worker_rlimit_nofile 8192;

events {{
    worker_connections 4096;
}}

http {{
    log_format peers '$server_port $connection $connection_requests $status $server_protocol '
                     '$ssl_protocol $ssl_session_reused $body_bytes_sent $request_uri';
    access_log {dir}/access.log peers;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    gzip off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    types {{ text/html html; }}
    default_type application/octet-stream;
    charset utf-8;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    ssl_session_timeout 1h;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    root {root};

    # Keep-alive, HTTP and HTTPS.
    server {{
        listen 127.0.0.1:{http_port};
        listen 127.0.0.1:{https_port} ssl;
        server_name localhost;
    }}

    # A full handshake per page: nothing to resume, a new connection for every request.
    server {{
        listen 127.0.0.1:{full_port} ssl;
        server_name localhost;
        keepalive_requests 1;
        ssl_session_cache off;
        ssl_session_tickets off;
    }}

    # Kept sessions: one host per port, a new connection for every request, sessions
    # resumable (the cache above and tickets; one server block, so one ticket key).
    server {{
{kept_listen}
        server_name localhost;
        keepalive_requests 1;
        ssl_session_tickets on;
    }}
}}
"""


def free_port_run(n):
    """The first of `n` consecutive ports of 127.0.0.1 that are all free now, below the
    ephemeral range where possible (outgoing connections take their ports from it)."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    top = low - n if low - n > 10_000 else 65_535 - n
    base = 20_000 if top > 20_000 else 1_025
    while base <= top:
        held = []
        try:
            for port in range(base, base + n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(s)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    base = port + 1
                    break
            else:
                return base
        finally:
            for s in held:
                s.close()
    raise BenchError("no %d consecutive free ports on 127.0.0.1" % n)


class PeersNginx(Nginx):
    """The peers phase's nginx (PEERS_NGINX_CONF), in BENCH_DIR/nginx-peers/."""

    def __init__(self, bench_dir, root, cert, key, hosts):
        super().__init__(bench_dir, root, None, cert, key)
        self.dir = os.path.join(bench_dir, "nginx-peers")
        self.hosts = hosts
        self.full_port = None
        self.kept_ports = []

    def start(self):
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        base = free_port_run(self.hosts)
        self.kept_ports = list(range(base, base + self.hosts))
        taken = set(self.kept_ports)
        ports = []
        while len(ports) < 3:
            p = free_port()
            if p not in taken:
                taken.add(p)
                ports.append(p)
        self.http_port, self.https_port, self.full_port = ports
        self.access_log = os.path.join(self.dir, "access.log")
        open(self.access_log, "w").close()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(PEERS_NGINX_CONF.format(
                dir=self.dir, http_port=self.http_port, https_port=self.https_port,
                full_port=self.full_port, cert=self.cert, key=self.key, root=self.root,
                kept_listen="\n".join("        listen 127.0.0.1:%d ssl;" % p
                                      for p in self.kept_ports)))
        errlog = os.path.join(self.dir, "error.log")
        self.proc = CHILDREN.popen(["nginx", "-e", errlog, "-p", self.dir, "-c", conf],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(self.dir, "stderr.log"), "wb"))
        for port in ports + [self.kept_ports[0], self.kept_ports[-1]]:
            if not wait_listening("127.0.0.1", port, self.proc):
                raise BenchError("nginx did not start listening on 127.0.0.1:%d (see %s)"
                                 % (port, errlog))

    def log_offset(self):
        try:
            return os.path.getsize(self.access_log)
        except OSError:
            return 0

    def log_lines(self, offset):
        """The access log's lines from byte `offset`, each a dict (PEERS_NGINX_CONF's format)."""
        out = []
        try:
            with open(self.access_log, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return out
        for raw in data.decode("utf-8", "replace").splitlines():
            parts = raw.split(" ", 8)
            if len(parts) != 9:
                continue
            port, conn, creq, status, proto, tls, reused, body, uri = parts
            try:
                out.append({"port": int(port), "conn": int(conn), "status": status,
                            "proto": proto, "tls": tls, "reused": reused == "r",
                            "body_bytes": int(body), "uri": uri})
            except ValueError:
                continue
        return out

    def requests_since(self, offset, ports, n=None, wait=3.0):
        """What nginx logged on `ports` since `offset`. With `n`, the requests are those whose
        URI ends in ?n=I (the numbered lists of the phase): each I in 1..n must have been
        answered 200 exactly once; the log is read until all n are there or `wait` seconds
        have passed (nginx logs a request after its response went out, so the last lines may
        come a moment after the client exits)."""
        ports = set(ports)
        deadline = time.monotonic() + wait
        while True:
            lines = [ln for ln in self.log_lines(offset) if ln["port"] in ports]
            if n is not None:
                lines = [ln for ln in lines if re.search(r"[?&]n=\d+$", ln["uri"])]
            if n is None or len(lines) >= n or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        out = {"requests": len(lines),
               "connections": len({ln["conn"] for ln in lines}),
               "tls_reused": sum(ln["reused"] for ln in lines),
               "body_bytes": sum(ln["body_bytes"] for ln in lines),
               "statuses": dict(collections.Counter(ln["status"] for ln in lines)),
               "protocols": dict(collections.Counter(ln["proto"] for ln in lines)),
               "tls_versions": dict(collections.Counter(ln["tls"] for ln in lines))}
        if n is not None:
            seen = collections.Counter(int(re.search(r"n=(\d+)$", ln["uri"]).group(1))
                                       for ln in lines if ln["status"] == "200")
            out["missing"] = sum(1 for i in range(1, n + 1) if i not in seen)
            out["repeated"] = sum(c - 1 for c in seen.values() if c > 1)
            out["not_200"] = sum(1 for ln in lines if ln["status"] != "200")
        return out


def run_timed(cmd, runs_dir, name, timeout, env=None):
    """One client run, through /usr/bin/time as run_harvestd's (peak RSS), user+system CPU
    from os.wait4(); stderr to runs/NAME.stderr."""
    err_path = os.path.join(runs_dir, name + ".stderr")
    rss_path = os.path.join(runs_dir, name + ".maxrss")
    if os.path.exists(rss_path):
        os.unlink(rss_path)
    timed_out = threading.Event()
    with open(err_path, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_path] + cmd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True, preexec_fn=_child_setup, env=env)

        def on_timeout():
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, on_timeout)
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
        finally:
            timer.cancel()
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    with open(err_path, encoding="utf-8", errors="replace") as f:
        stderr_text = f.read()
    maxrss_kib = None
    try:
        with open(rss_path) as f:
            maxrss_kib = int([ln for ln in f.read().split("\n") if ln.strip()][-1])
    except (OSError, ValueError, IndexError):
        pass
    return {"name": name, "command": cmd, "exit_status": proc.returncode,
            "timed_out": timed_out.is_set(), "wall_s": wall, "cpu_user_s": ru.ru_utime,
            "cpu_sys_s": ru.ru_stime, "peak_rss_kib": maxrss_kib,
            "peak_rss_mib": maxrss_kib / 1024.0 if maxrss_kib is not None else None,
            "stderr_tail": stderr_text[-2000:]}


def wget2_version():
    out = command_output(["wget2", "--version"]).splitlines()
    m = re.search(r"Wget2 (\S+)", out[0]) if out else None
    return m.group(1) if m else "unknown"


# ---- wrk: the fetch limit ----------------------------------------------------------------------

def run_wrk(base_url, paths_file, seconds):
    cmd = ["wrk", "-t%d" % CONFIG["wrk_threads"], "-c%d" % CONFIG["wrk_connections"],
           "-d%ds" % seconds, "--timeout", "5s", "-s", os.path.join(HERE, "rotate.lua"), base_url,
           "--", paths_file]
    log("wrk %s for %d s" % (base_url, seconds))
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        raise BenchError("wrk did not finish: %s" % " ".join(cmd))
    text = r.stdout.decode("utf-8", "replace")
    m = re.search(r"^wrk-json (\{.*\})$", text, re.M)
    if r.returncode != 0 or m is None:
        raise BenchError("wrk failed (exit %d): %s" % (r.returncode, text.strip()[-400:]))
    raw = json.loads(m.group(1))
    secs = raw["duration_us"] / 1e6
    errors = sum(raw[k] for k in ("connect_errors", "read_errors", "write_errors", "status_errors",
                                  "timeouts"))
    return {
        "command": cmd,
        "raw": raw,
        "seconds": secs,
        "pages": raw["requests"],
        "pages_per_s": raw["requests"] / secs if secs > 0 else 0.0,
        "mb_per_s": raw["bytes"] / 1e6 / secs if secs > 0 else 0.0,
        "errors": errors,
        "ok": errors == 0 and raw["requests"] > 0,
        "why": "" if errors == 0 else "%d errors %s" % (
            errors, {k: v for k, v in raw.items() if k.endswith("errors") or k == "timeouts"}),
    }


# ---- parse_limit: the parse limit ------------------------------------------------------------

def run_parse_limit(tools_dir, root, rows, count):
    tool = os.path.join(tools_dir, "parse_limit")
    if not os.access(tool, os.X_OK):
        raise BenchError("%s is missing: build it with `make build/tools/parse_limit`" % tool)
    list_file = os.path.join(os.path.dirname(root), "parse-list.txt")
    with open(list_file, "w") as f:
        for path, _, _ in rows[:count]:
            f.write(os.path.join(root, path.lstrip("/")) + "\n")
    cmd = [tool, "--list", list_file]
    log("parse_limit on %d pages" % count)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if r.returncode != 0:
        raise BenchError("parse_limit failed: %s" % r.stderr.decode(errors="replace"))
    raw = json.loads(r.stdout.decode().strip().splitlines()[-1])
    return {"command": cmd, "raw": raw, "pages": raw["pages"], "seconds": raw["seconds"],
            "pages_per_s": raw["pages_per_s"], "mb_per_s": raw["mb_per_s"],
            "cpu_s_per_1k": 1000.0 * raw["cpu_s"] / raw["pages"], "ok": True, "why": ""}


# ---- harvestd runs ---------------------------------------------------------------------------

def parse_summary(stderr_text):
    for line in reversed(stderr_text.splitlines()):
        if line.startswith("harvestd: summary "):
            out = {}
            for tok in line[len("harvestd: summary "):].split():
                k, sep, v = tok.partition("=")
                if not sep:
                    continue
                try:
                    out[k] = float(v) if "." in v else int(v)
                except ValueError:
                    out[k] = v
            return out
    return None


def check_records(out_path, expected_count, expected_title, field=None, proxy=False,
                  http_version=None):
    """Read harvestd's JSONL output. `expected_count` maps each requested URL to the number of
    input lines that name it, `expected_title(url)` gives the title its page must yield;
    `field`, if given, is (name, prefix): every record's fields[name] must start with prefix.
    `proxy`, unless False, is the `proxy` every record must carry (None: no `proxy` at all).
    `http_version`, if given, is the `http_version` every ok record must carry ("1.1", "2").
    Returns (ok, why, details)."""
    seen = collections.Counter()
    failures = collections.Counter()
    bad_title = 0
    bad_field = 0
    bad_proxy = 0
    bad_version = 0
    versions = collections.Counter()   # http_version of the ok records
    bad_json = 0
    example = None
    records = 0
    statuses = collections.Counter()
    body_bytes = 0      # bytes of the bodies that came over the wire (200s; 304s bring none)
    flags = collections.Counter()
    try:
        f = open(out_path, "rb")
    except OSError as e:
        return False, "no output (%s)" % e.strerror, {}
    with f:
        for line in f:
            records += 1
            try:
                rec = json.loads(line)
            except ValueError:
                bad_json += 1
                continue
            url = rec.get("requested_url")
            seen[url] += 1
            if proxy is not False and rec.get("proxy") != proxy:
                bad_proxy += 1
                if example is None:
                    example = rec
            statuses[rec.get("http_status")] += 1
            for flag in ("not_modified", "unchanged", "from_cache"):
                flags[flag] += rec.get(flag) is True
            if rec.get("http_status") == 200 and not rec.get("from_cache"):
                body_bytes += rec.get("bytes") or 0
            if rec.get("status") != "ok":
                key = "%s/%s" % (rec.get("error_type"), rec.get("error"))
                failures[key] += 1
                if example is None:
                    example = rec
                continue
            versions[rec.get("http_version")] += 1
            if http_version is not None and rec.get("http_version") != http_version:
                bad_version += 1
                if example is None:
                    example = rec
            want = expected_title(url)
            if rec.get("title") != want:
                bad_title += 1
                if example is None:
                    example = rec
            if field is not None:
                value = (rec.get("fields") or {}).get(field[0])
                if not isinstance(value, str) or not value.startswith(field[1]):
                    bad_field += 1
                    if example is None:
                        example = rec
    missing = sum((expected_count - seen).values())
    extra = sum((seen - expected_count).values())
    problems = []
    if failures:
        problems.append("%d failed (%s)" % (sum(failures.values()), ", ".join(
            "%s x%d" % kv for kv in failures.most_common(3))))
    if bad_title:
        problems.append("%d wrong/missing titles" % bad_title)
    if bad_field:
        problems.append("%d wrong/missing fields.%s" % (bad_field, field[0]))
    if bad_proxy:
        problems.append("%d records with proxy other than %s" % (bad_proxy, proxy or "none"))
    if bad_version:
        problems.append("%d ok records with http_version other than %s (%s)" % (
            bad_version, json.dumps(http_version), ", ".join(
                "%s x%d" % (json.dumps(v) if v is not None else "none", c)
                for v, c in versions.most_common(3))))
    if bad_json:
        problems.append("%d lines not JSON" % bad_json)
    if missing:
        problems.append("%d records missing" % missing)
    if extra:
        problems.append("%d unexpected records" % extra)
    details = {"records": records, "failed": dict(failures), "bad_title": bad_title,
               "http_statuses": {str(k): v for k, v in statuses.items()},
               "body_bytes": body_bytes, "flags": dict(flags),
               "bad_field": bad_field, "bad_proxy": bad_proxy,
               "http_versions": {str(k): v for k, v in versions.items()},
               "bad_http_version": bad_version, "bad_json": bad_json, "missing": missing, "extra": extra, "example": example}
    return not problems, "; ".join(problems), details


def run_harvestd(bin_path, runs_dir, name, urls, expected_count, expected_title, extra_args,
                 timeout, field=None, check=None, stderr_line=None):
    """One `harvestd --once` run. The child is started through /usr/bin/time, whose %M is the
    peak RSS of harvestd itself (see README.md: ru_maxrss of a child forked straight from this
    Python process would report this process's size); user+system CPU comes from os.wait4() on
    the time process, which includes harvestd's (time's own share is about a millisecond).
    `check(out_path)`, if given, replaces check_records (and `expected_*` are unused): it
    returns (ok, why, details). `stderr_line(line, t)`, if given, is called from a thread of its
    own with each line of harvestd's stderr as it arrives, `t` the time.monotonic() it was read
    at; harvestd writes each log line with one write(2), so lines come one by one, unbuffered."""
    if check is None:
        def check(path):
            return check_records(path, expected_count, expected_title, field)
    urls_file = os.path.join(runs_dir, name + ".urls")
    out_path = os.path.join(runs_dir, name + ".jsonl")
    err_path = os.path.join(runs_dir, name + ".stderr")
    rss_path = os.path.join(runs_dir, name + ".maxrss")
    with open(urls_file, "w") as f:
        f.writelines(u + "\n" for u in urls)
    for p in (out_path, rss_path):
        if os.path.exists(p):
            os.unlink(p)
    cmd = [bin_path, "--once", urls_file, "-o", out_path] + extra_args
    if "--allow-addresses" not in extra_args:
        cmd += ["--allow-addresses", "127.0.0.0/8"]  # the bench's servers are on loopback
    log("harvestd %s: %d URLs %s" % (name, len(urls), " ".join(extra_args)))
    timed_out = threading.Event()
    with open(err_path, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_path] + cmd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err if stderr_line is None else subprocess.PIPE,
                                start_new_session=True, preexec_fn=_child_setup)
        reader = None
        if stderr_line is not None:
            def read_stderr():
                for raw in iter(proc.stderr.readline, b""):
                    t = time.monotonic()
                    err.write(raw)
                    stderr_line(raw.decode("utf-8", "replace"), t)

            reader = threading.Thread(target=read_stderr, daemon=True)
            reader.start()

        def on_timeout():
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, on_timeout)
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
        finally:
            timer.cancel()
        wall = time.monotonic() - t0
        if reader is not None:
            reader.join(10.0)   # the pipe ends with harvestd (or its kill)
            proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
    with open(err_path, encoding="utf-8", errors="replace") as f:
        stderr_text = f.read()
    maxrss_kib = None
    try:
        with open(rss_path) as f:
            lines = [ln for ln in f.read().split("\n") if ln.strip()]
        maxrss_kib = int(lines[-1])
    except (OSError, ValueError, IndexError):
        pass
    summary = parse_summary(stderr_text)
    n = len(urls)
    res = {
        "name": name,
        "command": cmd,
        "urls": n,
        "exit_status": proc.returncode,
        "wall_s": wall,
        "pages_per_s": n / wall if wall > 0 else 0.0,
        "cpu_user_s": ru.ru_utime,
        "cpu_sys_s": ru.ru_stime,
        "cpu_s_per_1k": 1000.0 * (ru.ru_utime + ru.ru_stime) / n,
        "peak_rss_kib": maxrss_kib,
        "peak_rss_mib": maxrss_kib / 1024.0 if maxrss_kib is not None else None,
        "summary": summary,
        "stderr_tail": stderr_text[-2000:],
    }
    broke = None
    if timed_out.is_set():
        broke = "timed out after %d s (killed)" % timeout
    elif proc.returncode != 0:
        broke = "exit status %d" % proc.returncode
    if broke:
        last = [ln for ln in stderr_text.splitlines() if ln.strip()][-1:]
        res.update(ok=False, broke=True, why=broke + (": " + last[0][:200] if last else ""))
        ok, why, details = check(out_path)
        res["records"] = details
        return res
    ok, why, details = check(out_path)
    res.update(ok=ok, broke=False, why=why, records=details)
    try:
        res["output_bytes"] = os.path.getsize(out_path)
    except OSError:
        res["output_bytes"] = None
    if ok:
        os.unlink(out_path)   # up to 100k records: keep only failing outputs for inspection
    return res


def check_block_switch(out_path, urls, origin):
    """The records of the block-page run, against what each host of `origin` (blockorigin.py)
    served: exactly one record per input line; every path that got a real page `ok` with that
    page's title; every other line either `ok` with the block page's title (a block page written
    ok, counted per host) or failed `Blocked` at the download stage, without a title. Returns
    (ok, why, details), details with the counts of each host."""
    seen = collections.Counter()
    per = {h.index: {"real_ok": 0, "block_ok": 0, "blocked": 0} for h in origin.hosts}
    signs = collections.Counter()
    bad_real = other = bad_json = 0
    example = None
    try:
        f = open(out_path, "rb")
    except OSError as e:
        return False, "no output (%s)" % e.strerror, {}
    with f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                bad_json += 1
                continue
            url = rec.get("requested_url") or ""
            seen[url] += 1
            m = re.match(r"http://127\.0\.0\.1:(\d+)(/.*)$", url)
            host = origin.by_port.get(int(m.group(1))) if m else None
            if host is None:
                other += 1
                example = example or rec
                continue
            counts = per[host.index]
            ok = rec.get("status") == "ok"
            if m.group(2) in host.real_paths:
                if ok and rec.get("title") == blockorigin.page_title(host.index, m.group(2)):
                    counts["real_ok"] += 1
                else:
                    bad_real += 1
                    example = example or rec
            elif ok and rec.get("title") == blockorigin.BLOCK_TITLE:
                counts["block_ok"] += 1
            elif not ok and rec.get("error_type") == "Blocked" and \
                    rec.get("stage") == "download" and "title" not in rec:
                counts["blocked"] += 1
                signs[rec.get("error")] += 1
            else:
                other += 1
                example = example or rec
    expected = collections.Counter(urls)
    missing = sum((expected - seen).values())
    extra = sum((seen - expected).values())
    # Each host must have served exactly its first switch_after requests as real pages, each
    # to a URL of its own (a URL asked twice before the switch would shift the halves).
    short = [h.index for h in origin.hosts if len(h.real_paths) != h.switch_after]
    problems = []
    if bad_real:
        problems.append("%d real pages not ok with their title" % bad_real)
    if other:
        problems.append("%d records neither a real page, an ok block page nor Blocked" % other)
    if bad_json:
        problems.append("%d lines not JSON" % bad_json)
    if missing:
        problems.append("%d records missing" % missing)
    if extra:
        problems.append("%d unexpected records" % extra)
    if short:
        problems.append("hosts %s served fewer distinct real pages than %d" % (
            short[:5], origin.hosts[0].switch_after))
    details = {"records": sum(seen.values()), "hosts": per, "signs": dict(signs),
               "bad_real": bad_real, "other": other, "bad_json": bad_json, "missing": missing,
               "extra": extra, "example": example}
    return not problems, "; ".join(problems), details


def stderr_count(runs_dir, name, text):
    """Lines of run `name`'s stderr that contain `text`."""
    try:
        with open(os.path.join(runs_dir, name + ".stderr"), errors="replace") as f:
            return sum(1 for line in f if text in line)
    except OSError:
        return 0


def cycling_counts(n_urls, base, paths):
    """Input lines cycle through `paths`: how many lines name each URL."""
    q, r = divmod(n_urls, len(paths))
    return collections.Counter({base + p: q + (1 if i < r else 0) for i, p in enumerate(paths)
                                if q + (1 if i < r else 0) > 0})


# ---- the latency-bound run -------------------------------------------------------------------

# The page every delay server answers with (tests/tools/delay_server.c) has this title.
LATENCY_TITLE = "Latency test page"


def latency_address(k):
    """The k-th delay server address, as delay_server maps it: 127.0.1.1 .. 127.0.1.250,
    127.0.2.1 .. (never 127.0.0.x)."""
    return "127.0.%d.%d" % (1 + k // 250, 1 + k % 250)


class DelayServers:
    """delay_server processes sharing the latency hosts (one range of addresses each)."""

    def __init__(self, tool, hosts, procs, delay):
        self.tool = tool
        self.hosts = hosts
        self.nprocs = procs
        self.delay = delay
        self.procs = []
        self.firsts = []
        self.port = None

    def start(self):
        if not os.access(self.tool, os.X_OK):
            raise BenchError("%s is missing: build it with `make build/tools/delay_server`"
                             % self.tool)
        # A port free on the first address is almost surely free on the others (nothing else
        # listens there); if one cannot be bound the servers say so and we try another port.
        errors = []
        for _ in range(2):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((latency_address(0), 0))
            except OSError as e:
                s.close()
                raise BenchError("cannot bind %s: %s (on Linux all of 127.0.0.0/8 is local)"
                                 % (latency_address(0), e))
            self.port = s.getsockname()[1]
            s.close()
            per = -(-self.hosts // self.nprocs)
            errors = []
            for k in range(0, self.hosts, per):
                cmd = [self.tool, "--port", str(self.port), "--first", str(k),
                       "--count", str(min(per, self.hosts - k)), "--delay", str(self.delay)]
                self.procs.append(CHILDREN.popen(cmd, stdin=subprocess.DEVNULL,
                                                 stdout=subprocess.PIPE))
                self.firsts.append(k)
            for p in self.procs:
                line = self._readline(p, 20.0)
                if not line.startswith("ready"):
                    errors.append(line or "no answer")
            if not errors:
                return
            self.stop()
        raise BenchError("delay server: %s" % "; ".join(errors[:3]))

    @staticmethod
    def _readline(p, timeout):
        r, _, _ = select.select([p.stdout], [], [], timeout)
        if not r:
            return ""
        return p.stdout.readline().decode(errors="replace").strip()

    def stop(self):
        """Stop every server; returns their statistics (one dict per process)."""
        stats = []
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
        for p in self.procs:
            line = self._readline(p, 10.0)
            try:
                stats.append(json.loads(line))
            except ValueError:
                pass
            try:
                p.wait(5.0)
            except subprocess.TimeoutExpired:
                pass
            CHILDREN.stop(p)
        self.procs = []
        self.firsts = []
        return stats


def delay_selfcheck(servers, connections, seconds, list_dir):
    """The delay servers' own capacity: one wrk per server process (on its first address), all
    at once, `connections` in total. With every connection busy, capacity = connections / mean
    latency; it must reach the bound connections / delay for the run to measure harvestd."""
    paths_file = os.path.join(list_dir, "selfcheck-paths.txt")
    with open(paths_file, "w") as f:
        f.write("/selfcheck\n")
    per = connections // len(servers.firsts)
    procs = []
    for k in servers.firsts:
        cmd = ["wrk", "-t1", "-c%d" % per, "-d%ds" % seconds, "--timeout", "5s", "-s",
               os.path.join(HERE, "rotate.lua"),
               "http://%s:%d" % (latency_address(k), servers.port), "--", paths_file]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    raws = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        m = re.search(r"^wrk-json (\{.*\})$", out.decode("utf-8", "replace"), re.M)
        if m:
            raws.append(json.loads(m.group(1)))
    if len(raws) != len(procs):
        return {"ok": False, "note": "wrk self-check of the delay server failed"}
    total = per * len(procs)
    mean_latency = sum(r["latency_mean_us"] * r["requests"] for r in raws) / max(
        1, sum(r["requests"] for r in raws)) / 1e6
    errors = sum(r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]
                 for r in raws)
    capacity = total / mean_latency if mean_latency > 0 else 0.0
    rate = sum(r["requests"] / (r["duration_us"] / 1e6) for r in raws)
    bound = total / servers.delay
    ok = errors == 0 and capacity >= 0.95 * bound
    return {"ok": ok, "connections": total, "requests": sum(r["requests"] for r in raws),
            "rate": rate, "latency_mean_ms": 1000 * mean_latency, "capacity": capacity,
            "bound": bound, "errors": errors, "raw": raws,
            "note": "self-check with wrk, %d connections: %s responses/s at %.1f ms mean latency "
                    "-> capacity %s/s (%s)" % (total, fmt_num(rate), 1000 * mean_latency,
                                              fmt_num(capacity),
                                              "ok" if ok else "BELOW the bound")}


def judge_delay_server(stats, delay, concurrency):
    """Did the delay servers hold their side during the harvestd run? A saturated server
    process shows in its CPU share (near a whole core); a busy machine shows in responses that
    leave late, which lowers the bound to concurrency / (delay + lag)."""
    if not stats:
        return {"kept_up": None, "note": "no statistics from the delay servers"}
    n = sum(s["requests"] for s in stats)
    lag_mean = sum(s["lag_mean_ms"] * s["requests"] for s in stats) / max(1, n)
    lag_p99 = max(s["lag_p99_ms"] for s in stats)
    stall_p99 = max(s["stall_p99_ms"] for s in stats)
    cpu_share = max((s["cpu_s"] / s["busy_s"]) if s["busy_s"] > 0 else 0.0 for s in stats)
    effective = concurrency / (delay + lag_mean / 1000.0)
    saturated = cpu_share > 0.8
    late = effective < 0.95 * concurrency / delay
    kept_up = not saturated and not late
    if saturated:
        verdict = "SATURATED (a process used most of a core)"
    elif late:
        verdict = "not saturated, but its replies were late (a busy machine)"
    else:
        verdict = "kept up"
    note = ("during the run: %d processes, %s responses sent %.1f ms late on average "
            "(p99 %.1f ms; loop stalls p99 %.1f ms), busiest process %.0f%% of a core; "
            "effective bound %s/s: %s"
            % (len(stats), fmt_num(n), lag_mean, lag_p99, stall_p99, 100 * cpu_share,
               fmt_num(effective), verdict))
    return {"kept_up": kept_up, "saturated": saturated, "lag_mean_ms": lag_mean, "lag_p99_ms": lag_p99,
            "stall_p99_ms": stall_p99, "cpu_share_max": cpu_share, "effective_bound": effective,
            "note": note, "procs": stats}


# ---- the stream runs --------------------------------------------------------------------------

class RedisProc:
    """A redis-server of the benchmark's own on a free loopback port (no persistence: the runs
    measure harvestd, not Redis's disk)."""

    def __init__(self, binary, d):
        self.binary = binary
        self.dir = d
        self.port = None
        self.proc = None

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.proc = CHILDREN.popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                                    "--dir", self.dir, "--save", "", "--appendonly", "no",
                                    "--daemonize", "no", "--logfile",
                                    os.path.join(self.dir, "redis.log")],
                                   stdin=subprocess.DEVNULL)
        if not wait_listening("127.0.0.1", self.port, self.proc):
            raise BenchError("redis-server did not start (see %s)"
                             % os.path.join(self.dir, "redis.log"))

    def call(self, *args):
        """One command on a fresh connection; the reply's integer or text (None for nil)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            out = b"*%d\r\n" % len(args)
            for a in args:
                data = str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(data), data)
            sock.sendall(out)
            f = sock.makefile("rb")
            line = f.readline()
            if line[:1] == b"-":
                raise BenchError("redis: %s" % line[1:].decode().strip())
            if line[:1] == b":":
                return int(line[1:])
            if line[:1] == b"$":
                size = int(line[1:])
                return None if size < 0 else f.read(size + 2)[:-2].decode()
            return line[1:].decode().strip()

    def stop(self):
        if self.proc is not None:
            CHILDREN.stop(self.proc)
            self.proc = None


def run_daemons(bin_path, runs_dir, name, urls, daemons, concurrency, source, redis):
    """`urls` through `daemons` harvestd daemons, each with its own spool: from a spool file
    (source "spool", one daemon) or from one Redis stream. The clock runs from just before the
    daemons start (the work is already there: the file in incoming/, or the entries enqueued)
    until every record is durable (the spool batch's summary; the stream batch's done count),
    then the daemons are stopped and every record checked (the stream's through
    `harvestd merge`)."""
    base = os.path.join(runs_dir, name)
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    n = len(urls)
    urls_file = os.path.join(base, "urls.txt")
    with open(urls_file, "w") as f:
        f.writelines(u + "\n" for u in urls)
    res = {"name": name, "urls": n, "daemons": daemons, "source": source, "ok": False,
           "broke": False, "why": ""}
    stream = "bench:%s" % name
    if source == "redis":
        redis.call("FLUSHALL")
        t = time.monotonic()
        done = subprocess.run([bin_path, "enqueue", "--redis", redis.url, "--stream", stream,
                               "--batch", name, urls_file], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=300)
        res["enqueue_s"] = time.monotonic() - t
        if done.returncode != 0:
            res.update(broke=True, why="enqueue: exit %d: %s" % (
                done.returncode, done.stderr.decode(errors="replace")[-300:]))
            return res
    procs, errs = [], []
    for i in range(daemons):
        spool = os.path.join(base, "spool-%d" % i)
        os.makedirs(os.path.join(spool, "incoming"))
        conf = os.path.join(base, "daemon-%d.conf" % i)
        lines = ["spool_dir = %s" % spool, "concurrency = %d" % concurrency, "per_host = 4",
                 "allow_addresses = 127.0.0.0/8", "log_level = notice", "retries = 0"]
        if source == "redis":
            lines += ["source = redis", "redis_url = %s" % redis.url,
                      "redis_stream = %s" % stream, "redis_consumer = node-%d" % i]
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        if source == "spool":
            tmp = os.path.join(spool, "incoming", ".urls.tmp")
            shutil.copy(urls_file, tmp)
            os.rename(tmp, os.path.join(spool, "incoming", name + ".txt"))
        errs.append(open(os.path.join(base, "daemon-%d.stderr" % i), "wb"))
    t0 = time.monotonic()
    for i in range(daemons):
        procs.append(CHILDREN.popen([bin_path, "-c", os.path.join(base, "daemon-%d.conf" % i)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=errs[i]))
    summary = os.path.join(base, "spool-0", "out", name + ".txt.summary.json")
    deadline = t0 + 120 + n / 200
    finished = False
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        if source == "spool":
            finished = os.path.exists(summary)
        else:
            finished = int(redis.call("HGET", "%s:batch:%s" % (stream, name), "done") or 0) >= n
        if finished:
            break
        time.sleep(0.02)
    wall = time.monotonic() - t0
    cpu = 0.0
    for p in procs:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
        try:
            _, _, ru = os.wait4(p.pid, 0)
            cpu += ru.ru_utime + ru.ru_stime
        except ChildProcessError:
            pass
        CHILDREN.stop(p)
    for e in errs:
        e.close()
    if not finished:
        res.update(broke=True, why="not finished after %.0f s (a daemon exited: %s)" % (
            wall, [p.returncode for p in procs]))
        return res
    res.update(wall_s=wall, pages_per_s=n / wall, cpu_s=cpu, cpu_s_per_1k=1000.0 * cpu / n)
    if source == "spool":
        out = os.path.join(base, "spool-0", "out", name + ".txt.jsonl")
    else:
        out = os.path.join(base, "merged.jsonl")
        done = subprocess.run([bin_path, "merge", "--batch", name, "-o", out] +
                              [os.path.join(base, "spool-%d" % i) for i in range(daemons)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if done.returncode != 0:
            res.update(why="merge: exit %d: %s" % (done.returncode,
                                                   done.stderr.decode(errors="replace")[-300:]))
            return res
    ok, why, details = check_records(out, collections.Counter(urls), lambda u: LATENCY_TITLE)
    res.update(ok=ok, why=why, records=details)
    if ok:
        shutil.rmtree(base, ignore_errors=True)
    return res


# ---- report ----------------------------------------------------------------------------------

def fmt_num(v, fmt="{:,.0f}"):
    return "-" if v is None else fmt.format(v)


def fmt_ratio(v):
    return "-" if v is None else "{:.0%}".format(v) if v < 1.5 else "{:.1f}x".format(v)


def build_table(rows):
    head = ["run", "URLs", "pages/s", "CPU s/1k", "peak RSS", "vs fetch", "vs parse", "check"]
    lines = []
    for r in rows:
        lines.append([r["label"], fmt_num(r.get("urls")), fmt_num(r.get("pages_per_s")),
                      fmt_num(r.get("cpu_s_per_1k"), "{:.2f}"),
                      fmt_num(r.get("peak_rss_mib"), "{:.1f} MiB"),
                      fmt_ratio(r.get("vs_fetch")), fmt_ratio(r.get("vs_parse")),
                      r["check"] if len(r["check"]) <= 110 else r["check"][:107] + "..."])
    widths = [max(len(str(x[i])) for x in lines + [head]) for i in range(len(head))]

    def fmt_line(cols):
        return "  ".join(str(c).ljust(widths[i]) if i in (0, 7) else str(c).rjust(widths[i])
                         for i, c in enumerate(cols)).rstrip()

    out = [fmt_line(head), "  ".join("-" * w for w in widths)]
    out.extend(fmt_line(cols) for cols in lines)
    return "\n".join(out)


def harvest_row(label, res, check):
    """A table row for a harvestd run; a run that broke (exit status, timeout) shows no figures."""
    row = {"label": label, "urls": res["urls"], "check": check}
    if not res["broke"]:
        row.update(pages_per_s=res["pages_per_s"], cpu_s_per_1k=res["cpu_s_per_1k"],
                   peak_rss_mib=res["peak_rss_mib"], vs_fetch=res.get("vs_fetch"),
                   vs_parse=res.get("vs_parse"))
    return row


class Bench:
    """One benchmark run: the phases in order, each recording its rows; a phase that cannot
    measure records why (a FAIL row, `broken`) and the others still run where they can."""

    def __init__(self, harvestd_bin, tools_dir, bench_dir):
        self.bin = harvestd_bin
        self.tools = tools_dir
        self.dir = bench_dir
        self.runs_dir = os.path.join(bench_dir, "runs")
        self.rows = []
        self.broken = []
        self.results = {"mode": "QUICK" if QUICK else "full", "config": CONFIG,
                        "targets_config": TARGETS}
        self.harvest = {}
        self.recrawl = None
        self.recrawl_note = None
        self.wrk = {}
        self.parse = None
        self.latency = None
        self.delay_notes = []
        self.block_onoff = None
        self.block_switch = None
        self.block_note = None
        self.proxy = None
        self.proxy_log = []
        self.h2 = None
        self.peers = None

    def fail_row(self, label, urls, why):
        self.rows.append({"label": label, "urls": urls, "check": "FAIL: " + why})
        self.broken.append("%s: %s" % (label, why))

    # -- phases

    def prepare(self):
        facts = machine_facts(self.bin)
        self.results["machine"] = facts
        self.header = [
            "harvestd benchmark (%s run), %s" % (self.results["mode"], datetime.datetime.now(
                datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
            "machine: %d CPUs (%d usable), %s, %.1f GiB RAM, Linux %s, load average %s at start"
            % (facts["cpus"], facts["cpus_usable"], facts["cpu_model"], facts["memory_gib"],
               facts["kernel"], "/".join("%.2f" % x for x in facts["load_average_at_start"] or [])
               or "unknown"),
            "software: %s (sha256 %s) | nginx %s | %s | Python %s" % (
                facts["harvestd"], self.results["harvestd_binary"]["sha256"][:12], facts["nginx"],
                facts["wrk"], facts["python"]),
        ]
        t = time.monotonic()
        self.root = os.path.join(self.dir, "corpus")
        self.index = corpus.ensure(self.root, CONFIG["corpus_pages"], log=log)
        sizes = [r[1] for r in self.index]
        self.results["corpus"] = {
            "pages": len(self.index), "bytes": sum(sizes), "median_bytes": statistics.median(sizes),
            "min_bytes": min(sizes), "max_bytes": max(sizes),
            "generator_version": corpus.GENERATOR_VERSION, "seed": corpus.SEED,
            "prepare_s": round(time.monotonic() - t, 2)}
        self.header.append(
            "corpus: %s pages, %.0f MB, %.1f-%.1f KB (median %.1f KB), generator v%d, seed %d"
            % (fmt_num(len(sizes)), sum(sizes) / 1e6, min(sizes) / 1e3, max(sizes) / 1e3,
               statistics.median(sizes) / 1e3, corpus.GENERATOR_VERSION, corpus.SEED))
        self.paths = [r[0] for r in self.index]
        self.titles = {r[0]: r[2] for r in self.index}
        self.paths_file = os.path.join(self.dir, "paths-%d.txt" % len(self.paths))
        with open(self.paths_file, "w") as f:
            f.writelines(p + "\n" for p in self.paths)
        t = time.monotonic()
        self.big_root = os.path.join(self.dir, "corpus-big")
        big = corpus.ensure(self.big_root, CONFIG["big_pages"], log=log, kind="big")
        sizes = [r[1] for r in big]
        self.results["corpus_big"] = {
            "pages": len(big), "bytes": sum(sizes), "mean_bytes": statistics.mean(sizes),
            "min_bytes": min(sizes), "max_bytes": max(sizes),
            "generator_version": corpus.GENERATOR_VERSION, "seed": corpus.SEED,
            "prepare_s": round(time.monotonic() - t, 2)}
        self.header.append(
            "big pages: %s pages, %.0f MB, %.2f-%.2f MB (mean %.2f MB), under /big/"
            % (fmt_num(len(sizes)), sum(sizes) / 1e6, min(sizes) / 1e6, max(sizes) / 1e6,
               statistics.mean(sizes) / 1e6))
        self.big_paths = [r[0] for r in big]
        self.big_sizes = {r[0]: r[1] for r in big}
        self.big_titles = {r[0]: r[2] for r in big}
        self.ca, self.cert, self.key = make_pki(os.path.join(self.dir, "pki"))

    def nginx_phase(self):
        nginx = Nginx(self.dir, self.root, self.big_root, self.cert, self.key)
        try:
            nginx.start()
        except BenchError as e:
            nginx.stop()
            for label in ("wrk HTTP", "wrk HTTPS", "harvestd HTTP", "harvestd HTTPS",
                          "harvestd HTTP, rules", BIG_LABEL):
                self.fail_row(label, None, str(e))
            return
        try:
            self._nginx_runs(nginx)
        finally:
            nginx.stop()

    def _nginx_runs(self, nginx):
        http_base = "http://127.0.0.1:%d" % nginx.http_port
        https_base = "https://127.0.0.1:%d" % nginx.https_port
        self.header.append("nginx: 1 worker, %s and %s; harvestd %s (HTTPS: --ca-file %s)" % (
            http_base, https_base, " ".join(CONFIG["nginx_args"]), self.ca))

        # 1. The fetch limit.
        for scheme, base in (("http", http_base), ("https", https_base)):
            label = "wrk %s (fetch limit)" % scheme.upper()
            errors0 = nginx.error_count()
            try:
                w = run_wrk(base, self.paths_file, CONFIG["wrk_seconds"])
            except BenchError as e:
                self.fail_row(label, None, str(e))
                continue
            self._nginx_errors(nginx, errors0, w)
            self.wrk[scheme] = w
            self.rows.append({"label": label, "urls": w["pages"], "pages_per_s": w["pages_per_s"],
                              "check": "ok" if w["ok"] else "FAIL: " + w["why"]})
            if not w["ok"]:
                self.broken.append("%s: %s" % (label, w["why"]))
        self.results["wrk"] = self.wrk

        # 2. The parse limit (nginx idles meanwhile).
        label = "gumbo parse limit"
        try:
            self.parse = run_parse_limit(self.tools, self.root, self.index,
                                         min(CONFIG["parse_pages"], len(self.index)))
            self.rows.append({"label": "%s (%d threads)" % (label, self.parse["raw"]["threads"]),
                              "urls": self.parse["pages"], "pages_per_s": self.parse["pages_per_s"],
                              "cpu_s_per_1k": self.parse["cpu_s_per_1k"], "check": "ok"})
        except (BenchError, subprocess.TimeoutExpired, ValueError) as e:
            self.fail_row(label, None, str(e))
        self.results["parse_limit"] = self.parse

        # 3. Extraction rules that need the whole tree, on the pages parse_limit parsed, right
        #    after it: the ratio of two neighbouring measurements suffers least from a machine
        #    whose speed drifts (a shared virtual machine does).
        if self.parse:
            n = self.parse["pages"]
            self._nginx_harvest(nginx, "harvestd HTTP, rules", "rules-%d" % n, http_base, n,
                                CONFIG["rules_args"], "http", paths=self.paths[:n],
                                field=CONFIG["rules_field"])
        else:
            self.fail_row("harvestd HTTP, rules", None, "no parse limit to compare with")

        # 4. harvestd against the same nginx, titles only.
        for n in CONFIG["http_runs"]:
            self._nginx_harvest(nginx, "harvestd HTTP", "http-%d" % n, http_base, n, [], "http")
        self._nginx_harvest(nginx, "harvestd HTTPS", "https-%d" % CONFIG["https_run"], https_base,
                            CONFIG["https_run"], ["--ca-file", self.ca], "https")

        # 5. Memory on big pages, last, so as not to come between the runs compared above. No
        #    ratio: wrk and the parse limit were measured on the small pages. The timeout allows
        #    4 MB/s, as 120 s + 1 s per 100 pages does for the small ones.
        for n in CONFIG["big_runs"]:
            q, r = divmod(n, len(self.big_paths))
            size = q * sum(self.big_sizes.values()) + sum(
                self.big_sizes[p] for p in self.big_paths[:r])
            res = self._nginx_harvest(nginx, BIG_LABEL, "big-%d" % n, http_base, n,
                                      CONFIG["big_args"], "http", paths=self.big_paths,
                                      field=CONFIG["rules_field"], titles=self.big_titles,
                                      timeout=120 + size // 4_000_000, ratios=False)
            res["page_bytes"] = size

    def _nginx_errors(self, nginx, before, res):
        """A run during which nginx logged errors did not measure harvestd (or wrk) alone."""
        new = nginx.error_count() - before
        res["nginx_errors"] = new
        if new > 0:
            text = "nginx logged %d errors (%s)" % (new, os.path.join(nginx.dir, "error.log"))
            res["ok"] = False
            res["why"] = ((res["why"] + "; ") if res.get("why") else "") + text
            self.broken.append(text)

    def _nginx_harvest(self, nginx, label, name, base, n, extra, scheme, paths=None, field=None,
                       titles=None, timeout=None, ratios=True):
        paths = paths or self.paths
        urls = [base + paths[i % len(paths)] for i in range(n)]
        cut = len(base)
        titles = titles or self.titles
        errors0 = nginx.error_count()
        res = run_harvestd(self.bin, self.runs_dir, name, urls, cycling_counts(n, base, paths),
                           lambda u: titles.get(u[cut:]), CONFIG["nginx_args"] + extra,
                           timeout=timeout or 120 + n // 100, field=field)
        self._nginx_errors(nginx, errors0, res)
        wrk = self.wrk.get(scheme)
        rate = res["pages_per_s"]
        res["vs_fetch"] = rate / wrk["pages_per_s"] if ratios and wrk and wrk["pages_per_s"] \
            else None
        res["vs_parse"] = rate / self.parse["pages_per_s"] if ratios and self.parse else None
        self.harvest[name] = res
        if res["broke"]:
            self.broken.append("%s %d: %s" % (label, n, res["why"]))
        self.rows.append(harvest_row(label, res, "ok" if res["ok"] else "FAIL: " + res["why"]))
        return res

    def latency_phase(self):
        conc = CONFIG["latency_concurrency"]
        delay = CONFIG["latency_delay_s"]
        hosts = CONFIG["latency_hosts"]
        bound = conc / delay
        n = CONFIG["latency_urls"]
        label = "harvestd %d hosts x %d ms" % (hosts, round(delay * 1000))
        self.rows.append({"label": "bound: %d in flight / %d ms" % (conc, round(delay * 1000)),
                          "pages_per_s": bound, "check": "concurrency/latency"})
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard != resource.RLIM_INFINITY and hard < conc + 64:
            self.fail_row(label, n, "open-file hard limit %d < %d" % (hard, conc + 64))
            return
        servers = DelayServers(os.path.join(self.tools, "delay_server"), hosts,
                               CONFIG["latency_server_procs"], delay)
        try:
            servers.start()
        except BenchError as e:
            self.fail_row(label, n, str(e))
            return
        try:
            log("delay servers: %d hosts (%s..%s) on port %d, %d processes" % (
                hosts, latency_address(0), latency_address(hosts - 1), servers.port,
                len(servers.procs)))
            check = delay_selfcheck(servers, conc, CONFIG["selfcheck_seconds"], self.runs_dir)
            self.delay_notes.append(check["note"])
            # The self-check's own statistics are not the run's: restart the servers afresh.
            servers.stop()
            servers.start()
            urls = ["http://%s:%d/p/%d" % (latency_address(k % hosts), servers.port, k)
                    for k in range(n)]
            res = run_harvestd(self.bin, self.runs_dir, "latency-%d" % n, urls,
                               collections.Counter(urls), lambda u: LATENCY_TITLE,
                               CONFIG["latency_args"], timeout=120 + n // 100)
        finally:
            judged = judge_delay_server(servers.stop(), delay, conc)
        self.delay_notes.append(judged["note"])
        res.update(vs_fetch=res["pages_per_s"] / bound, bound=bound, delay_server=judged,
                   delay_selfcheck=check)
        self.latency = res
        self.harvest["latency"] = res
        if res["broke"]:
            self.broken.append("%s: %s" % (label, res["why"]))
        status = "ok" if res["ok"] else "FAIL: " + res["why"]
        if judged.get("saturated"):
            status += " (delay server saturated: effective bound %s/s)" % fmt_num(
                judged["effective_bound"])
        elif judged["kept_up"] is False:
            status += " (delay server replies %.1f ms late: effective bound %s/s)" % (
                judged["lag_mean_ms"], fmt_num(judged["effective_bound"]))
        self.rows.append(harvest_row(label, res, status))

    # -- the stream runs

    def stream_phase(self):
        conc = CONFIG["stream_concurrency"]
        delay = CONFIG["latency_delay_s"]
        hosts = CONFIG["latency_hosts"]
        n = CONFIG["stream_urls"]
        k = CONFIG["stream_daemons"]
        labels = ["harvestd daemon, spool file, c=%d" % conc,
                  "harvestd daemon, redis stream, c=%d" % conc,
                  "harvestd %d daemons, redis stream, c=%d each" % (k, conc)]
        redis_bin = shutil.which("redis-server")
        if redis_bin is None:
            for label in labels:
                self.fail_row(label, n, "redis-server is not installed (`make deps`)")
            return
        servers = DelayServers(os.path.join(self.tools, "delay_server"), hosts,
                               CONFIG["latency_server_procs"], delay)
        redis = None
        try:
            servers.start()
            redis = RedisProc(redis_bin, os.path.join(self.runs_dir, "redis"))
            redis.start()
            urls = ["http://%s:%d/p/%d" % (latency_address(i % hosts), servers.port, i)
                    for i in range(n)]
            runs = [("spool", 1), ("redis", 1), ("redis", k)]
            for (source, daemons), label in zip(runs, labels):
                name = "stream-%s-%d" % (source, daemons)
                res = run_daemons(self.bin, self.runs_dir, name, urls, daemons, conc, source,
                                  redis)
                self.harvest[name] = res
                self.rows.append({"label": label, "urls": n, "pages_per_s": res.get("pages_per_s"),
                                  "cpu_s_per_1k": res.get("cpu_s_per_1k"),
                                  "vs_fetch": (res["pages_per_s"] / (daemons * conc / delay)
                                               if res.get("pages_per_s") else None),
                                  "check": "ok" if res["ok"] else "FAIL: " + res["why"]})
                if res.get("broke"):
                    self.broken.append("%s: %s" % (label, res["why"]))
        except BenchError as e:
            self.fail_row(labels[0], n, str(e))
        finally:
            if redis is not None:
                redis.stop()
            judged = judge_delay_server(servers.stop(), delay, k * conc)
            self.delay_notes.append("stream runs: " + judged["note"])

    # -- conditional re-fetching

    def recrawl_phase(self):
        """The 20k-URL HTTP run three times over one store: cold (empty store), warm (nginx
        answers every conditional request 304: `etag on` is its default for static files),
        and warm with recrawl_min_age, which makes no request at all."""
        n = CONFIG["recrawl_urls"]
        labels = ["harvestd HTTP, recrawl off", "harvestd HTTP, recrawl cold",
                  "harvestd HTTP, recrawl warm (304s)", "harvestd HTTP, recrawl min age 1h"]
        nginx = Nginx(self.dir, self.root, self.big_root, self.cert, self.key)
        try:
            nginx.start()
        except BenchError as e:
            for label in labels:
                self.fail_row(label, n, str(e))
            nginx.stop()
            return
        try:
            base = "http://127.0.0.1:%d" % nginx.http_port
            state = os.path.join(self.runs_dir, "recrawl-state")
            shutil.rmtree(state, ignore_errors=True)
            args = ["--recrawl", "conditional", "--state-dir", state]
            # The big-page runs before this phase pushed the corpus out of the page cache: a
            # first pass, not reported, brings it back, so that the runs compared below all
            # find nginx serving from memory.
            urls = [base + self.paths[i % len(self.paths)] for i in range(n)]
            run_harvestd(self.bin, self.runs_dir, "recrawl-warmup-%d" % n, urls,
                         cycling_counts(n, base, self.paths), lambda u: None,
                         CONFIG["nginx_args"], timeout=120 + n // 100)
            runs = [("recrawl-off-%d" % n, []), ("recrawl-cold-%d" % n, args),
                    ("recrawl-warm-%d" % n, args),
                    ("recrawl-cached-%d" % n, args + ["--recrawl-min-age", "1h"])]
            for (name, extra), label in zip(runs, labels):
                res = self._nginx_harvest(nginx, label, name, base, n, extra, "http")
                if not extra:
                    continue
                st = subprocess.run([self.bin, "state", "--state-dir", state, "--json",
                                     "stats"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    timeout=60)
                try:
                    res["store"] = json.loads(st.stdout)
                except ValueError:
                    res["store"] = None
        finally:
            nginx.stop()
        off, cold, warm, cached = (self.harvest.get(name) for name, _ in runs)
        if all(r and not r["broke"] for r in (off, cold, warm, cached)):
            cb = cold["records"]["body_bytes"]
            wb = warm["records"]["body_bytes"]
            store = cold.get("store") or {}
            self.recrawl = {"cold": cold, "warm": warm, "cached": cached,
                            "speedup": warm["pages_per_s"] / cold["pages_per_s"],
                            "body_ratio": wb / cb if cb else None}
            self.recrawl_note = (
                "recrawl: off %s pages/s; cold %s pages/s (%.0f%% of off), %s MB of bodies, store %s entries in %s MB; warm "
                "%s pages/s (%.2fx), %s 304s, %s MB of bodies (%.1f%% of cold), 0 requests "
                "avoided; min age 1h: %s pages/s, %s requests avoided" % (
                    fmt_num(off["pages_per_s"]), fmt_num(cold["pages_per_s"]),
                    100.0 * cold["pages_per_s"] / off["pages_per_s"], fmt_num(cb / 1e6, "{:,.1f}"),
                    fmt_num(store.get("entries")),
                    fmt_num((store.get("bytes_used") or 0) / 1e6, "{:,.1f}"),
                    fmt_num(warm["pages_per_s"]), self.recrawl["speedup"],
                    fmt_num(warm["records"]["flags"].get("not_modified", 0)),
                    fmt_num(wb / 1e6, "{:,.2f}"), 100.0 * (wb / cb if cb else 0),
                    fmt_num(cached["pages_per_s"]),
                    fmt_num(cached["records"]["flags"].get("from_cache", 0))))

    # -- the block detector

    def block_phase(self):
        self._block_on_off()
        self._block_switch()

    def _block_on_off(self):
        """The HTTP title run with block detection off and on, alternating off/on/off/on so
        that the machine's drift hits both alike; each side's best run is compared. Every
        corpus page is distinct, so no host may become suspect."""
        n = CONFIG["block_onoff_urls"]
        labels = {"off": "harvestd HTTP, block detection off",
                  "on": "harvestd HTTP, block detection on"}
        nginx = Nginx(self.dir, self.root, self.big_root, self.cert, self.key)
        try:
            nginx.start()
        except BenchError as e:
            for label in labels.values():
                self.fail_row(label, n, str(e))
            nginx.stop()
            return
        runs = {"off": [], "on": []}
        try:
            base = "http://127.0.0.1:%d" % nginx.http_port
            cut = len(base)
            urls = [base + self.paths[i % len(self.paths)] for i in range(n)]
            counts = cycling_counts(n, base, self.paths)

            def title(u):
                return self.titles.get(u[cut:])

            # As in the recrawl phase: a first pass, not reported, brings the corpus into the
            # page cache, so that the first run compared does not measure the disk.
            run_harvestd(self.bin, self.runs_dir, "block-warmup-%d" % n, urls, counts,
                         lambda u: None, CONFIG["nginx_args"], timeout=120 + n // 100)
            for i, mode in enumerate(("off", "on", "off", "on")):
                name = "block-%s-%d-%d" % (mode, n, i // 2 + 1)
                extra = ["--log-level", "info"] + (["--block-detection=no"] if mode == "off"
                                                   else [])
                errors0 = nginx.error_count()
                res = run_harvestd(self.bin, self.runs_dir, name, urls, counts, title,
                                   CONFIG["nginx_args"] + extra, timeout=120 + n // 100)
                self._nginx_errors(nginx, errors0, res)
                res["host_suspect_lines"] = stderr_count(self.runs_dir, name, "event=host_suspect")
                if res["host_suspect_lines"]:
                    res["ok"] = False
                    res["why"] = ((res["why"] + "; ") if res["why"] else "") + \
                        "%d event=host_suspect lines (see %s.stderr)" % (
                            res["host_suspect_lines"], os.path.join(self.runs_dir, name))
                self.harvest[name] = res
                runs[mode].append(res)
                if res["broke"]:
                    self.broken.append("%s %d: %s" % (labels[mode], n, res["why"]))
        finally:
            nginx.stop()
        best = {}
        for mode, label in labels.items():
            done = [r for r in runs[mode] if not r["broke"]]
            rates = " and ".join(fmt_num(r["pages_per_s"]) for r in done)
            if len(done) < 2:   # the broken runs are in self.broken already
                self.rows.append({"label": label, "urls": n, "check": "FAIL: " + (
                    "; ".join(r["why"] for r in runs[mode] if r["broke"]) or "not run")})
                continue
            best[mode] = max(done, key=lambda r: r["pages_per_s"])
            whys = [r["why"] for r in done if not r["ok"]]
            check = ("FAIL: " + "; ".join(whys)) if whys else "ok"
            check += " (best of 2: %s pages/s)" % rates
            if mode == "on" and not whys:
                check = "ok, no host_suspect (best of 2: %s pages/s)" % rates
            row = harvest_row(label, best[mode], check)
            row["label"] = label + " (best of 2)"
            self.rows.append(row)
        if "off" in best and "on" in best:
            self.block_onoff = {
                "urls": n, "off": best["off"], "on": best["on"],
                "ok": all(r["ok"] for r in runs["off"] + runs["on"]),
                "ratio": best["on"]["pages_per_s"] / best["off"]["pages_per_s"],
                "runs": {m: [r["pages_per_s"] for r in runs[m]] for m in runs}}

    def _block_switch(self):
        """Hosts that turn to one "Access denied" page halfway (blockorigin.py): how many block
        pages harvestd writes `ok` before its verdict, how long the verdict takes after the
        switch, and how many requests each host still gets after it. harvestd's warning
        `event=host_blocked host=URL` is timestamped as it arrives on its stderr."""
        hosts = CONFIG["block_hosts"]
        per_host = CONFIG["block_urls_per_host"]
        switch_after = per_host // 2
        n = hosts * per_host
        delay = CONFIG["block_probe_delay"]
        label = "harvestd %d hosts block halfway, probe %s" % (hosts, delay)
        try:
            origin = blockorigin.Origin(hosts, switch_after)
        except OSError as e:
            self.fail_row(label, n, "block origin: %s" % e)
            return
        events = []   # (time.monotonic(), event, host, line)

        def on_line(line, t):
            m = re.search(r"event=(host_\w+) host=(\S+)", line)
            if m:
                events.append((t, m.group(1), m.group(2), line.strip()))

        try:
            # Interleaved: every host's first URL, then every host's second, ...
            urls = [h.url("/docs/page-%d.html" % i) for i in range(per_host) for h in origin.hosts]
            name = "block-switch-%d" % n
            res = run_harvestd(self.bin, self.runs_dir, name, urls, None, None,
                               ["--log-level", "info", "--block-probe-delay", delay],
                               timeout=120 + n // 100,
                               check=lambda path: check_block_switch(path, urls, origin),
                               stderr_line=on_line)
        finally:
            origin.stop()
        self.harvest[name] = res
        if res["broke"]:
            self.broken.append("%s: %s" % (label, res["why"]))
            self.rows.append(harvest_row(label, res, "FAIL: " + res["why"]))
            return
        per = res["records"].get("hosts", {})
        stats = []
        wrong = []
        for h in origin.hosts:
            first = {}
            for t, ev, key, _ in events:
                if key == h.key:
                    first.setdefault(ev, t)
            c = per.get(h.index, {})
            st = {"host": h.key, "switch_t": h.switch_t, "real_served": len(h.real_paths),
                  "requests_after_switch": h.block_served,
                  "lines_after_switch": per_host - len(h.real_paths),
                  "block_ok": c.get("block_ok"), "blocked_records": c.get("blocked"),
                  "real_ok": c.get("real_ok"), "blocked": "host_blocked" in first,
                  "cleared": "host_cleared" in first,
                  "suspect_ms": None, "verdict_ms": None}
            if h.switch_t is not None:
                if "host_suspect" in first:
                    st["suspect_ms"] = 1000 * (first["host_suspect"] - h.switch_t)
                if "host_blocked" in first:
                    st["verdict_ms"] = 1000 * (first["host_blocked"] - h.switch_t)
            early = h.switch_t is None or (st["suspect_ms"] or 0) < 0 or \
                (st["verdict_ms"] or 0) < 0
            if ("host_suspect" in first or "host_blocked" in first) and early:
                wrong.append(h.key)
            stats.append(st)
        not_blocked = [st["host"] for st in stats if not st["blocked"]]
        problems = [res["why"]] if res["why"] else []
        if not_blocked:
            problems.append("%d of %d hosts never blocked" % (len(not_blocked), hosts))
        if wrong:
            problems.append("%d hosts suspect or blocked before their switch" % len(wrong))
        cleared = [st["host"] for st in stats if st["cleared"]]
        if cleared:
            problems.append("%d hosts cleared" % len(cleared))
        res["ok"] = res["ok"] and not problems
        res["why"] = "; ".join(problems)
        verdicts = [st["verdict_ms"] for st in stats if st["verdict_ms"] is not None]
        suspects = [st["suspect_ms"] for st in stats if st["suspect_ms"] is not None]
        after = [st["requests_after_switch"] for st in stats]
        block_ok = [st["block_ok"] or 0 for st in stats]
        self.block_switch = bs = {
            "ok": res["ok"], "hosts": hosts, "urls_per_host": per_host,
            "switch_after": switch_after, "probe_delay": delay,
            "hosts_blocked": hosts - len(not_blocked), "block_ok_max": max(block_ok),
            "block_ok_total": sum(block_ok),
            "blocked_records": sum(st["blocked_records"] or 0 for st in stats),
            "signs": res["records"].get("signs", {}),
            "real_ok": sum(st["real_ok"] or 0 for st in stats),
            "real_served": sum(st["real_served"] for st in stats),
            "verdict_ms_median": statistics.median(verdicts) if verdicts else None,
            "verdict_ms_max": max(verdicts) if verdicts else None,
            "suspect_ms_median": statistics.median(suspects) if suspects else None,
            "gap_ms": [st["verdict_ms"] - st["suspect_ms"] for st in stats
                       if "verdict_ms" in st and "suspect_ms" in st],
            "requests_after_median": statistics.median(after), "requests_after_max": max(after),
            "requests_after_total": sum(after),
            "lines_after_total": sum(st["lines_after_switch"] for st in stats),
            "per_host": stats, "events": [(round(t, 4), ev, key) for t, ev, key, _ in events]}
        res["block"] = bs
        if res["ok"]:
            check = "ok; block pages ok max %d/host (%d in all); switch -> verdict median %s ms, " \
                    "max %s ms" % (bs["block_ok_max"], bs["block_ok_total"],
                                   fmt_num(bs["verdict_ms_median"]), fmt_num(bs["verdict_ms_max"]))
        else:
            check = "FAIL: " + res["why"]
        self.rows.append(harvest_row(label, res, check))
        self.block_note = (
            "block pages: %d hosts x %d URLs (interleaved), each answering its first %d requests "
            "with real pages (2-6 KB) and every later one with one %d-byte 'Access denied' 200; "
            "harvestd at its defaults with --block-probe-delay %s (default 5 s) --log-level info: "
            "%d/%d hosts blocked (%s), %s real pages ok of %s served, %s block pages ok (max %d "
            "per host), %s Blocked; switch -> suspect median %s ms, switch -> verdict median %s "
            "ms, max %s ms (host_blocked lines timestamped as they arrive); suspect -> verdict "
            "%s-%s ms; requests after the "
            "switch per host median %s, max %d, %s in all for %s lines (%s saved)" % (
                hosts, per_host, switch_after, len(blockorigin.BLOCK_PAGE), delay,
                bs["hosts_blocked"], hosts,
                ", ".join("%s x%d" % kv for kv in sorted(bs["signs"].items())) or "no Blocked",
                fmt_num(bs["real_ok"]), fmt_num(bs["real_served"]), fmt_num(bs["block_ok_total"]),
                bs["block_ok_max"], fmt_num(bs["blocked_records"]),
                fmt_num(bs["suspect_ms_median"]), fmt_num(bs["verdict_ms_median"]),
                fmt_num(bs["verdict_ms_max"]),
                fmt_num(min(bs["gap_ms"]) if bs["gap_ms"] else None, "{:.0f}"),
                fmt_num(max(bs["gap_ms"]) if bs["gap_ms"] else None, "{:.0f}"),
                fmt_num(bs["requests_after_median"], "{:g}"),
                bs["requests_after_max"], fmt_num(bs["requests_after_total"]),
                fmt_num(bs["lines_after_total"]),
                fmt_num(bs["lines_after_total"] - bs["requests_after_total"])))

    # -- proxies

    PROXY_LABELS = {("http", "direct"): "harvestd HTTP, direct",
                    ("http", "http"): "harvestd HTTP, via tinyproxy",
                    ("http", "socks5"): "harvestd HTTP, via microsocks (SOCKS5)",
                    ("https", "direct"): "harvestd HTTPS, direct",
                    ("https", "http"): "harvestd HTTPS, via tinyproxy (CONNECT)"}

    def proxy_phase(self):
        """The HTTP title run direct, through tinyproxy (absolute-form requests over pooled
        connections to the proxy) and through microsocks (SOCKS5), alternating direct, http,
        socks, direct, http, socks so that a machine whose speed drifts hits the three alike;
        then HTTPS direct and through tinyproxy (CONNECT), alternating too. Each row shows its
        side's best run. On 2 cores the proxy competes with harvestd and nginx for the CPU: its
        CPU seconds (and nginx's worker's) are read from /proc before and after each run."""
        counts = {"http": CONFIG["proxy_urls"], "https": CONFIG["proxy_https_urls"]}
        nginx = Nginx(self.dir, self.root, self.big_root, self.cert, self.key)
        proxies = {kind: Proxy(kind, os.path.join(self.dir, "proxy", kind))
                   for kind in ("http", "socks5")}
        runs = {key: [] for key in self.PROXY_LABELS}
        try:
            try:
                nginx.start()
                for p in proxies.values():
                    p.start()
            except BenchError as e:
                for key, label in self.PROXY_LABELS.items():
                    self.fail_row(label, counts[key[0]], str(e))
                return
            workers = proc_children(nginx.proc.pid)
            bases = {"http": "http://127.0.0.1:%d" % nginx.http_port,
                     "https": "https://127.0.0.1:%d" % nginx.https_port}
            self.header.append("proxies: tinyproxy %s (MaxClients %d, LogLevel Warning), "
                               "microsocks %s" % (proxies["http"].url(),
                                                  CONFIG["proxy_max_clients"],
                                                  proxies["socks5"].url()))
            # As in the block phase: a first pass, not reported, brings the corpus into the
            # page cache, so that the first run compared does not measure the disk.
            n = counts["http"]
            base = bases["http"]
            run_harvestd(self.bin, self.runs_dir, "proxy-warmup-%d" % n,
                         [base + self.paths[i % len(self.paths)] for i in range(n)],
                         cycling_counts(n, base, self.paths), lambda u: None,
                         CONFIG["nginx_args"], timeout=120 + n // 100)
            order = [("http", m) for _ in range(2) for m in ("direct", "http", "socks5")] + \
                [("https", m) for _ in range(2) for m in ("direct", "http")]
            for scheme, mode in order:
                key = (scheme, mode)
                runs[key].append(self._proxy_run(
                    nginx, workers, proxies.get(mode), scheme, bases[scheme], counts[scheme],
                    len(runs[key]) + 1))
        finally:
            for p in proxies.values():
                p.stop()
            nginx.stop()
        self._proxy_rows(runs, counts)

    def _proxy_run(self, nginx, workers, proxy, scheme, base, n, k):
        """One run of the proxy phase: `proxy` None goes direct, and then no record may carry
        `proxy`; through a proxy every record must carry its URL."""
        cut = len(base)
        urls = [base + self.paths[i % len(self.paths)] for i in range(n)]
        counts = cycling_counts(n, base, self.paths)
        extra = list(CONFIG["nginx_args"])
        if scheme == "https":
            extra += ["--ca-file", self.ca]
        want = None
        if proxy is not None:
            want = proxy.url()
            extra += ["--proxy", want]
        name = "proxy-%s-%s-%d-%d" % (scheme, proxy.kind if proxy else "direct", n, k)

        def check(path):
            return check_records(path, counts, lambda u: self.titles.get(u[cut:]), proxy=want)

        errors0 = nginx.error_count()
        log0 = len(proxy.log_lines()) if proxy else 0
        proxy0 = proxy.cpu_s() if proxy else None
        nginx0 = [proc_cpu_s(w) for w in workers]
        res = run_harvestd(self.bin, self.runs_dir, name, urls, None, None, extra,
                           timeout=120 + n // 100, check=check)
        proxy1 = proxy.cpu_s() if proxy else None
        nginx1 = [proc_cpu_s(w) for w in workers]
        res["proxy"] = want
        res["proxy_cpu_s"] = proxy1 - proxy0 if proxy1 is not None and proxy0 is not None \
            else None
        res["nginx_cpu_s"] = sum(b - a for a, b in zip(nginx0, nginx1)
                                 if a is not None and b is not None) if workers else None
        if proxy is not None:
            if proxy.proc.poll() is not None:
                res["ok"] = False
                res["why"] = ((res["why"] + "; ") if res["why"] else "") + \
                    "%s exited (status %s)" % (proxy.name, proxy.proc.returncode)
                self.broken.append("%s: %s exited during %s" % (name, proxy.name, name))
            # Only the lines of the runs: at start-up tinyproxy warns that no User is set and
            # logs wait_listening()'s probe as a client that closed before its request.
            res["proxy_log_lines"] = proxy.log_lines()[log0:]
            self.proxy_log.extend(res["proxy_log_lines"])
        self._nginx_errors(nginx, errors0, res)
        self.harvest[name] = res
        if res["broke"]:
            self.broken.append("%s %d: %s" % (self.PROXY_LABELS[(scheme, proxy.kind if proxy
                                                                  else "direct")], n, res["why"]))
        return res

    def _proxy_rows(self, runs, counts):
        """One row per (scheme, route), its best run; the proxied rows against the direct one
        of their scheme."""
        self.proxy = {}
        best = {}
        for key, label in self.PROXY_LABELS.items():
            done = [r for r in runs[key] if not r["broke"]]
            if len(done) < 2:   # the broken runs are in self.broken already
                self.rows.append({"label": label, "urls": counts[key[0]], "check": "FAIL: " + (
                    "; ".join(r["why"] for r in runs[key] if r["broke"]) or "not run")})
                continue
            b = best[key] = max(done, key=lambda r: r["pages_per_s"])
            direct = best.get((key[0], "direct"))
            ratio = b["pages_per_s"] / direct["pages_per_s"] if direct and key[1] != "direct" \
                else None
            whys = [r["why"] for r in done if not r["ok"]]
            summ = b.get("summary") or {}
            parts = []
            if ratio is not None:
                parts.append("{:.0%} of direct".format(ratio))
            conns = "conns %s opened, %s reused" % (fmt_num(summ.get("connections_opened")),
                                                    fmt_num(summ.get("connections_reused")))
            if summ.get("stale_retries"):
                conns += " (%s stale)" % fmt_num(summ["stale_retries"])
            parts.append(conns)
            if key[1] != "direct":
                parts.append("%s CPU %s s" % (Proxy.BINARIES[key[1]],
                                              fmt_num(b["proxy_cpu_s"], "{:.2f}")))
            # Every run's rate is in the note: the check column is cut at 110 characters.
            check = ("FAIL: " + "; ".join(whys)) if whys else "ok; " + "; ".join(parts)
            if whys:
                check += "; " + "; ".join(parts)
            row = harvest_row(label + " (best of 2)", b, check)
            self.rows.append(row)
            self.proxy[key] = {"best": b, "ratio": ratio, "ok": not whys and len(done) == 2,
                               "rates": [r["pages_per_s"] for r in runs[key]],
                               "urls": counts[key[0]]}

    # -- HTTP/2

    H2_LABELS = {"h1": "harvestd HTTPS, HTTP/1.1 (per_host 16)",
                 "h2": "harvestd HTTPS, HTTP/2 (per_host 16)"}

    def h2_phase(self):
        """The HTTPS title run on one host, 16 requests in flight to it, with HTTP/1.1 (16
        connections) and with HTTP/2 (ALPN h2: 16 streams on one connection), against an
        nginx whose TLS port offers h2; after an unreported warm-up, h1, h2, h1, h2, so that a
        machine whose speed drifts hits both alike. Each row shows its side's best run. No wrk
        row: wrk speaks only HTTP/1.1."""
        n = CONFIG["h2_urls"]
        nginx = Nginx(self.dir, self.root, self.big_root, self.cert, self.key, http2=True,
                      keepalive_requests=CONFIG["h2_keepalive_requests"])
        runs = {"h1": [], "h2": []}
        try:
            try:
                nginx.start()
            except BenchError as e:
                for label in self.H2_LABELS.values():
                    self.fail_row(label, n, str(e))
                return
            workers = proc_children(nginx.proc.pid)
            base = "https://127.0.0.1:%d" % nginx.https_port
            self.header.append("h2: nginx with http2 on %s (keepalive_requests %d); harvestd %s "
                               "--ca-file, HTTP/1.1 %s, HTTP/2 %s" % (
                                   base, CONFIG["h2_keepalive_requests"],
                                   " ".join(CONFIG["h2_args"]),
                                   " ".join(CONFIG["h2_flags"]["h1"]) or "(no flag)",
                                   " ".join(CONFIG["h2_flags"]["h2"]) or "(no flag)"))
            # As in the block phase: a first pass, not reported, brings the corpus into the
            # page cache (and the TLS code into memory), so that the first run compared does
            # not measure the disk.
            run_harvestd(self.bin, self.runs_dir, "h2-warmup-%d" % n,
                         [base + self.paths[i % len(self.paths)] for i in range(n)],
                         cycling_counts(n, base, self.paths), lambda u: None,
                         CONFIG["h2_args"] + CONFIG["h2_flags"]["h1"] + ["--ca-file", self.ca],
                         timeout=120 + n // 100)
            for mode in ("h1", "h2", "h1", "h2"):
                runs[mode].append(self._h2_run(nginx, workers, mode, base, n,
                                               len(runs[mode]) + 1))
        finally:
            nginx.stop()
        self._h2_rows(runs, n)

    def _h2_run(self, nginx, workers, mode, base, n, k):
        """One run of the h2 phase: every record checked as in the other rows, and every ok
        one must carry the side's http_version; nginx's worker CPU is read around it."""
        cut = len(base)
        urls = [base + self.paths[i % len(self.paths)] for i in range(n)]
        counts = cycling_counts(n, base, self.paths)
        extra = CONFIG["h2_args"] + CONFIG["h2_flags"][mode] + ["--ca-file", self.ca]
        version = CONFIG["h2_versions"][mode]
        name = "h2-%s-%d-%d" % (mode, n, k)

        def check(path):
            return check_records(path, counts, lambda u: self.titles.get(u[cut:]),
                                 http_version=version)

        errors0 = nginx.error_count()
        nginx0 = [proc_cpu_s(w) for w in workers]
        res = run_harvestd(self.bin, self.runs_dir, name, urls, None, None, extra,
                           timeout=120 + n // 100, check=check)
        nginx1 = [proc_cpu_s(w) for w in workers]
        res["nginx_cpu_s"] = sum(b - a for a, b in zip(nginx0, nginx1)
                                 if a is not None and b is not None) if workers else None
        res["http_version_wanted"] = version
        self._nginx_errors(nginx, errors0, res)
        self.harvest[name] = res
        if res["broke"]:
            self.broken.append("%s %d: %s" % (self.H2_LABELS[mode], n, res["why"]))
        return res

    @staticmethod
    def _h2_conns(res):
        """harvestd's connection counts from its summary line (keys it may not print: None)."""
        summ = res.get("summary") or {}
        return {k: summ.get(k) for k in ("connections_opened", "connections_reused",
                                         "connections_h2", "streams_h2", "tls_handshakes",
                                         "tls_resumed", "stale_retries", "retries")}

    def _h2_rows(self, runs, n):
        """One row per side, its best run; the HTTP/2 row against the HTTP/1.1 one."""
        self.h2 = {"urls": n, "runs": runs}
        best = {}
        for mode, label in self.H2_LABELS.items():
            done = [r for r in runs[mode] if not r["broke"]]
            if len(done) < 2:   # the broken runs are in self.broken already
                self.rows.append({"label": label, "urls": n, "check": "FAIL: " + (
                    "; ".join(r["why"] for r in runs[mode] if r["broke"]) or "not run")})
                continue
            b = best[mode] = max(done, key=lambda r: r["pages_per_s"])
            h1 = best.get("h1")
            ratio = b["pages_per_s"] / h1["pages_per_s"] if mode == "h2" and h1 else None
            # Both runs failing alike (a harvestd without the field) say it once.
            whys = list(dict.fromkeys(r["why"] for r in done if not r["ok"]))
            c = self._h2_conns(b)
            parts = []
            if ratio is not None:
                parts.append("{:.0%} of HTTP/1.1".format(ratio))
            parts.append("conns %s opened, %s h2; %s h2 streams" % (
                fmt_num(c["connections_opened"]), fmt_num(c["connections_h2"]),
                fmt_num(c["streams_h2"])))
            # Every run's rate is in the note: the check column is cut at 110 characters.
            check = ("FAIL: " + "; ".join(whys) + "; ") if whys else \
                "ok, http_version %s; " % CONFIG["h2_versions"][mode]
            self.rows.append(harvest_row(label + " (best of 2)", b, check + "; ".join(parts)))
            self.h2[mode] = {"best": b, "ratio": ratio, "ok": not whys and len(done) == 2,
                             "rates": [r["pages_per_s"] for r in runs[mode]],
                             "connections_opened": [self._h2_conns(r)["connections_opened"]
                                                    for r in done]}

    def _h2_note(self):
        """The h2 rows' note: every run's rate and connections, and the CPU of harvestd and of
        nginx's worker per 1,000 pages in each side's best run."""
        h = self.h2
        if not h or not any(m in h for m in ("h1", "h2")):
            return None
        names = {"h1": "HTTP/1.1", "h2": "HTTP/2"}
        rates, cpu, conns = [], [], []
        for mode in ("h1", "h2"):
            side = h.get(mode)
            if not side:
                continue
            rates.append("%s %s" % (names[mode], " and ".join(fmt_num(r) for r in side["rates"])))
            b = side["best"]
            k = 1000.0 / b["urls"]
            text = "%s %s/%s" % (names[mode], fmt_num(b["cpu_s_per_1k"], "{:.3f}"),
                                 fmt_num(b["nginx_cpu_s"] * k if b["nginx_cpu_s"] is not None
                                         else None, "{:.3f}"))
            if mode == "h2" and h.get("h1"):
                text += " (harvestd x%.2f)" % (b["cpu_s_per_1k"] /
                                               h["h1"]["best"]["cpu_s_per_1k"])
            cpu.append(text)
            per_run = []
            for r in h["runs"][mode]:
                if r["broke"]:
                    per_run.append("broke")
                    continue
                c = self._h2_conns(r)
                t = "%s opened, %s reused, %s h2, %s h2 streams, %s TLS handshakes (%s resumed)" % (
                    fmt_num(c["connections_opened"]), fmt_num(c["connections_reused"]),
                    fmt_num(c["connections_h2"]), fmt_num(c["streams_h2"]),
                    fmt_num(c["tls_handshakes"]), fmt_num(c["tls_resumed"]))
                if c["stale_retries"]:
                    t += ", %s stale retries" % fmt_num(c["stale_retries"])
                if c["retries"]:
                    t += ", %s retries" % fmt_num(c["retries"])
                per_run.append(t)
            conns.append("%s: %s" % (names[mode], "; ".join(per_run)))
        return ("h2: %s URLs of one host over HTTPS, %s, runs alternating HTTP/1.1 (%s) and "
                "HTTP/2 (%s) twice after an unreported warm-up: pages/s %s; CPU s/1k of the best "
                "runs, harvestd/nginx: %s | connections per run, %s" % (
                    fmt_num(h["urls"]), " ".join(CONFIG["h2_args"]),
                    " ".join(CONFIG["h2_flags"]["h1"]) or "no flag",
                    " ".join(CONFIG["h2_flags"]["h2"]) or "no flag",
                    "; ".join(rates), ", ".join(cpu), " | ".join(conns)))

    # -- peers: wrk, harvestd and GNU Wget2 on one nginx

    PEERS_MODES = ("http", "https", "full")
    PEERS_MODE_NAMES = {"http": "HTTP keep-alive", "https": "HTTPS keep-alive",
                        "full": "HTTPS full handshakes"}
    PEERS_CLIENT_NAMES = {"wrk": "wrk", "harvestd": "harvestd", "wget2": "Wget2"}
    PEERS_KEPT_LABEL = "peers: harvestd HTTPS kept sessions, 2nd run"

    def _peers_label(self, client, mode):
        return "peers: %s %s" % (self.PEERS_CLIENT_NAMES[client], self.PEERS_MODE_NAMES[mode])

    def peers_phase(self):
        """wrk, harvestd and Wget2 against one nginx of the phase's own (PEERS_NGINX_CONF), in
        three sections: HTTP keep-alive, HTTPS keep-alive, HTTPS with a full handshake per page.
        In each: wrk for wrk_seconds, then harvestd, Wget2, harvestd, Wget2 on the same
        numbered URL list (?n=I on every line, so that Wget2 fetches every line), each row its
        side's best run. Then the kept-sessions rows: harvestd twice over one --state-dir on
        `peers_hosts` TLS ports (one page each), the second run the row; twice, each pair on a
        fresh state directory."""
        counts = {"http": CONFIG["peers_urls"], "https": CONFIG["peers_urls"],
                  "full": CONFIG["peers_handshake_urls"]}
        hosts = CONFIG["peers_hosts"]
        self.peers = {"urls": counts, "hosts": hosts, "wrk": {}, "wrk_rows": {},
                      "runs": {(c, m): [] for c in ("harvestd", "wget2") for m in self.PEERS_MODES},
                      "kept_pairs": []}
        wget2_missing = None if shutil.which("wget2") else \
            "wget2 is not installed (listed in third_party/packages.txt; `make deps` installs it)"
        nginx = PeersNginx(self.dir, self.root, self.cert, self.key, hosts)
        try:
            try:
                nginx.start()
            except BenchError as e:
                for mode in self.PEERS_MODES:
                    for client in ("wrk", "harvestd", "wget2"):
                        self.fail_row(self._peers_label(client, mode), counts[mode], str(e))
                self.fail_row(self.PEERS_KEPT_LABEL, hosts, str(e))
                return
            workers = proc_children(nginx.proc.pid)
            bases = {"http": "http://127.0.0.1:%d" % nginx.http_port,
                     "https": "https://127.0.0.1:%d" % nginx.https_port,
                     "full": "https://127.0.0.1:%d" % nginx.full_port}
            ports = {"http": nginx.http_port, "https": nginx.https_port, "full": nginx.full_port}
            sizes = {r[0]: r[1] for r in self.index}
            home = os.path.join(self.dir, "peers", "wget2-home")
            os.makedirs(home, exist_ok=True)
            env = dict(os.environ, HOME=home)   # Wget2's HSTS/HPKP/OCSP files go there
            self.peers["wget2_version"] = wget2_version() if not wget2_missing else None
            self.header.append(
                "peers: nginx with an access log, keep-alive %s and %s, full handshakes %s "
                "(keepalive_requests 1, no session cache or tickets), %d kept-session ports "
                "%d-%d (cache and tickets, keepalive_requests 1); harvestd %s (full handshakes "
                "and kept sessions also %s; --tls-workers default, one per CPU); Wget2 %s: "
                "wget2 %s --max-threads=%d [--ca-certificate=CA] -O /dev/null -i LIST" % (
                    bases["http"], bases["https"], bases["full"], hosts, nginx.kept_ports[0],
                    nginx.kept_ports[-1], " ".join(CONFIG["nginx_args"]),
                    " ".join(CONFIG["peers_tls_args"]), self.peers["wget2_version"] or "missing",
                    " ".join(CONFIG["peers_wget2_args"]), CONFIG["peers_wget2_threads"]))
            # As in the other phases: a first pass, not reported, brings the corpus into the
            # page cache, so that the first run compared does not measure the disk.
            n = counts["http"]
            run_harvestd(self.bin, self.runs_dir, "peers-warmup-%d" % n,
                         [bases["http"] + self.paths[i % len(self.paths)] for i in range(n)],
                         cycling_counts(n, bases["http"], self.paths), lambda u: None,
                         CONFIG["nginx_args"], timeout=120 + n // 100)
            for mode in self.PEERS_MODES:
                n = counts[mode]
                urls = ["%s%s?n=%d" % (bases[mode], self.paths[(i - 1) % len(self.paths)], i)
                        for i in range(1, n + 1)]
                list_file = os.path.join(self.runs_dir, "peers-%s-%d.list" % (mode, n))
                with open(list_file, "w") as f:
                    f.writelines(u + "\n" for u in urls)
                want_bytes = sum(sizes[self.paths[(i - 1) % len(self.paths)]]
                                 for i in range(1, n + 1))
                self._peers_wrk(nginx, mode, bases[mode], ports[mode])
                for k in (1, 2):
                    self.peers["runs"][("harvestd", mode)].append(
                        self._peers_harvestd(nginx, workers, mode, urls, ports[mode], k))
                    if wget2_missing:
                        continue
                    self.peers["runs"][("wget2", mode)].append(
                        self._peers_wget2(nginx, workers, mode, list_file, n, ports[mode], env,
                                          k, want_bytes))
            for k in (1, 2):
                self.peers["kept_pairs"].append(self._peers_kept(nginx, workers, k))
        finally:
            nginx.stop()
        self._peers_rows(wget2_missing)

    def _peers_wrk(self, nginx, mode, base, port):
        label = self._peers_label("wrk", mode)
        errors0 = nginx.error_count()
        offset = nginx.log_offset()
        try:
            w = run_wrk(base, self.paths_file, CONFIG["wrk_seconds"])
        except BenchError as e:
            self.peers["wrk_rows"][mode] = {"label": label, "urls": None,
                                            "check": "FAIL: " + str(e)}
            self.broken.append("%s: %s" % (label, e))
            return
        # wrk stops with requests in flight: let nginx finish (and log) them before the next run.
        time.sleep(0.5)
        w["nginx_log"] = nginx.requests_since(offset, [port], wait=0)
        self._nginx_errors(nginx, errors0, w)
        self.peers["wrk"][mode] = w
        log_ = w["nginx_log"]
        detail = "%s conns%s" % (fmt_num(log_["connections"]), self._peers_tls_text(log_))
        self.peers["wrk_rows"][mode] = {
            "label": label, "urls": w["pages"], "pages_per_s": w["pages_per_s"],
            "check": ("ok; " if w["ok"] else "FAIL: " + w["why"] + "; ") + detail}
        if not w["ok"]:
            self.broken.append("%s: %s" % (label, w["why"]))

    @staticmethod
    def _peers_tls_text(log_):
        tls = [v for v in log_.get("tls_versions", {}) if v != "-"]
        return (", " + "/".join(sorted(tls))) if tls else ""

    def _peers_harvestd(self, nginx, workers, mode, urls, port, k):
        n = len(urls)
        cut = len(urls[0]) - len(urls[0].split("/", 3)[3]) - 1   # scheme://host:port
        name = "peers-harvestd-%s-%d-%d" % (mode, n, k)
        extra = list(CONFIG["nginx_args"])
        if mode != "http":
            extra += ["--ca-file", self.ca]
        if mode == "full":
            extra += CONFIG["peers_tls_args"]
        counts = collections.Counter(urls)

        def check(path):
            return check_records(path, counts,
                                 lambda u: self.titles.get(u[cut:].split("?", 1)[0]))

        errors0 = nginx.error_count()
        offset = nginx.log_offset()
        nginx0 = [proc_cpu_s(w) for w in workers]
        res = run_harvestd(self.bin, self.runs_dir, name, urls, None, None, extra,
                           timeout=120 + (n // 10 if mode == "full" else n // 100), check=check)
        nginx1 = [proc_cpu_s(w) for w in workers]
        res["nginx_cpu_s"] = sum(b - a for a, b in zip(nginx0, nginx1)
                                 if a is not None and b is not None) if workers else None
        res["nginx_log"] = nginx.requests_since(offset, [port], n=n)
        self._nginx_errors(nginx, errors0, res)
        self.harvest[name] = res
        if res["broke"]:
            self.broken.append("%s %d: %s" % (self._peers_label("harvestd", mode), n, res["why"]))
        return res

    def _peers_wget2(self, nginx, workers, mode, list_file, n, port, env, k, want_bytes):
        """One Wget2 run over the numbered list: it reports nothing itself, so nginx's log says
        whether every line was fetched (200, exactly once, HTTP/1.1, every body whole: nginx
        sent `want_bytes` of bodies in all)."""
        name = "peers-wget2-%s-%d-%d" % (mode, n, k)
        cmd = ["wget2"] + CONFIG["peers_wget2_args"] + [
            "--max-threads=%d" % CONFIG["peers_wget2_threads"]]
        if mode != "http":
            cmd.append("--ca-certificate=" + self.ca)
        cmd += ["-O", "/dev/null", "-i", list_file]
        log("wget2 %s: %d URLs" % (name, n))
        errors0 = nginx.error_count()
        offset = nginx.log_offset()
        nginx0 = [proc_cpu_s(w) for w in workers]
        timeout = 120 + (n // 10 if mode == "full" else n // 100)
        res = run_timed(cmd, self.runs_dir, name, timeout, env=env)
        nginx1 = [proc_cpu_s(w) for w in workers]
        res["nginx_cpu_s"] = sum(b - a for a, b in zip(nginx0, nginx1)
                                 if a is not None and b is not None) if workers else None
        wall = res["wall_s"]
        res.update(urls=n, pages_per_s=n / wall if wall > 0 else 0.0,
                   cpu_s_per_1k=1000.0 * (res["cpu_user_s"] + res["cpu_sys_s"]) / n)
        log_ = res["nginx_log"] = nginx.requests_since(offset, [port], n=n)
        problems = []
        res["broke"] = res["timed_out"] or res["exit_status"] != 0
        if res["timed_out"]:
            problems.append("timed out after %d s (killed)" % timeout)
        elif res["exit_status"] != 0:
            last = [ln for ln in res["stderr_tail"].splitlines() if ln.strip()][-1:]
            problems.append("exit status %d%s" % (res["exit_status"],
                                                  ": " + last[0][:160] if last else ""))
        if log_["missing"]:
            problems.append("%d of %d lines not answered 200 at nginx" % (log_["missing"], n))
        if log_["not_200"]:
            problems.append("%d requests not 200 (%s)" % (log_["not_200"], log_["statuses"]))
        if log_["repeated"]:
            problems.append("%d lines fetched more than once" % log_["repeated"])
        if log_["body_bytes"] != want_bytes:
            problems.append("nginx sent {:,} bytes of bodies, not {:,}".format(
                log_["body_bytes"], want_bytes))
        other = {p: c for p, c in log_["protocols"].items() if p != "HTTP/1.1"}
        if other:
            problems.append("requests not HTTP/1.1: %s" % other)
        res["ok"] = not problems
        res["why"] = "; ".join(problems)
        self._nginx_errors(nginx, errors0, res)
        if res["broke"]:
            self.broken.append("%s %d: %s" % (self._peers_label("wget2", mode), n, res["why"]))
        return res

    def _peers_kept(self, nginx, workers, k):
        """Two harvestd runs over one fresh --state-dir on the kept-session ports, one page
        per host:port; the second re-crawls (conditional requests) and may resume the TLS
        sessions the first one kept."""
        ports = nginx.kept_ports
        base = "https://127.0.0.1:%d"
        urls = ["%s%s" % (base % p, self.paths[i % len(self.paths)]) for i, p in enumerate(ports)]
        counts = collections.Counter(urls)
        state = os.path.join(self.runs_dir, "peers-kept-state-%d" % k)
        shutil.rmtree(state, ignore_errors=True)
        extra = CONFIG["nginx_args"] + CONFIG["peers_tls_args"] + [
            "--ca-file", self.ca, "--recrawl", "conditional", "--state-dir", state]

        def check(path):
            return check_records(path, counts, lambda u: self.titles.get(
                "/" + u.split("/", 3)[3]))

        pair = {}
        for which in ("first", "second"):
            name = "peers-kept-%d-%s-%d" % (len(urls), which, k)
            errors0 = nginx.error_count()
            offset = nginx.log_offset()
            nginx0 = [proc_cpu_s(w) for w in workers]
            res = run_harvestd(self.bin, self.runs_dir, name, urls, None, None, extra,
                               timeout=120 + len(urls) // 10, check=check)
            nginx1 = [proc_cpu_s(w) for w in workers]
            res["nginx_cpu_s"] = sum(b - a for a, b in zip(nginx0, nginx1)
                                     if a is not None and b is not None) if workers else None
            time.sleep(0.2)   # the last requests' log lines
            res["nginx_log"] = nginx.requests_since(offset, ports, wait=0)
            self._nginx_errors(nginx, errors0, res)
            self.harvest[name] = res
            if res["broke"]:
                self.broken.append("%s (%s run %d): %s" % (self.PEERS_KEPT_LABEL, which, k,
                                                          res["why"]))
            pair[which] = res
        return pair

    @staticmethod
    def _peers_tls(res):
        summ = res.get("summary") or {}
        return summ.get("tls_resumed"), summ.get("tls_handshakes")

    def _peers_rows(self, wget2_missing):
        """Per section: wrk's row, then harvestd's and Wget2's (each its best of 2, against
        wrk's rate in "vs fetch"); then the kept-sessions row (the best second run)."""
        p = self.peers
        p["best"] = {}
        for mode in self.PEERS_MODES:
            wrk = p["wrk"].get(mode)
            for client in ("harvestd", "wget2"):
                runs = p["runs"][(client, mode)]
                done = [r for r in runs if not r["broke"]]
                if len(done) < 2:
                    continue
                b = max(done, key=lambda r: r["pages_per_s"])
                b["vs_fetch"] = b["pages_per_s"] / wrk["pages_per_s"] \
                    if wrk and wrk["pages_per_s"] else None
                whys = list(dict.fromkeys(r["why"] for r in done if not r["ok"]))
                p["best"][(client, mode)] = {"best": b, "ok": not whys, "whys": whys,
                                             "rates": [r["pages_per_s"] for r in runs]}
        for mode in self.PEERS_MODES:
            if mode in p["wrk_rows"]:
                self.rows.append(p["wrk_rows"][mode])
            for client in ("harvestd", "wget2"):
                label = self._peers_label(client, mode)
                side = p["best"].get((client, mode))
                if client == "wget2" and wget2_missing:
                    self.fail_row(label, p["urls"][mode], wget2_missing)
                    continue
                if not side:   # the broken runs are in self.broken already
                    self.rows.append({"label": label, "urls": p["urls"][mode], "check": "FAIL: " + (
                        "; ".join(r["why"] for r in p["runs"][(client, mode)] if r["broke"])
                        or "not run")})
                    continue
                b = side["best"]
                log_ = b["nginx_log"]
                parts = ["ok" if side["ok"] else "FAIL: " + "; ".join(side["whys"])]
                if client == "harvestd":
                    w2 = p["best"].get(("wget2", mode))
                    if w2:
                        parts.append("{:.2f}x Wget2".format(b["pages_per_s"] /
                                                             w2["best"]["pages_per_s"]))
                    if mode == "full":
                        parts.append("{:.2f}x today's {}".format(
                            b["pages_per_s"] / TARGETS["peers_today_pages_per_s"],
                            TARGETS["peers_today_pages_per_s"]))
                    summ = b.get("summary") or {}
                    conns = "%s conns" % fmt_num(summ.get("connections_opened"))
                    if mode != "http":
                        conns += ", %s handshakes (%s resumed)" % (
                            fmt_num(summ.get("tls_handshakes")), fmt_num(summ.get("tls_resumed")))
                    parts.append(conns + self._peers_tls_text(log_))
                    self.rows.append(harvest_row(label + " (best of 2)", b, "; ".join(parts)))
                else:
                    parts.append("%s/%s lines 200 once at nginx, %s MB, %s conns%s" % (
                        fmt_num(log_["requests"] - log_["not_200"] - log_["repeated"]),
                        fmt_num(b["urls"]), fmt_num(log_["body_bytes"] / 1e6),
                        fmt_num(log_["connections"]),
                        self._peers_tls_text(log_)))
                    if log_.get("tls_reused"):
                        parts.append("%s resumed" % fmt_num(log_["tls_reused"]))
                    self.rows.append({"label": label + " (best of 2)", "urls": b["urls"],
                                      "pages_per_s": b["pages_per_s"],
                                      "cpu_s_per_1k": b["cpu_s_per_1k"],
                                      "peak_rss_mib": b["peak_rss_mib"],
                                      "vs_fetch": b.get("vs_fetch"),
                                      "check": "; ".join(parts)})
        # The kept-sessions row: the best of the second runs.
        pairs = [pr for pr in p["kept_pairs"] if pr.get("second") and not pr["second"]["broke"]]
        if not p["kept_pairs"]:
            return   # nginx did not start: failed above
        if not pairs:
            self.rows.append({"label": self.PEERS_KEPT_LABEL, "urls": p["hosts"],
                              "check": "FAIL: " + ("; ".join(
                                  r["why"] for pr in p["kept_pairs"] for r in pr.values()
                                  if r["broke"]) or "not run")})
            return
        best = max(pairs, key=lambda pr: pr["second"]["pages_per_s"])
        b = best["second"]
        resumed, handshakes = self._peers_tls(b)
        full = p["best"].get(("harvestd", "full"))
        whys = list(dict.fromkeys(r["why"] for pr in p["kept_pairs"] for r in pr.values()
                                  if not r["ok"]))
        p["kept"] = {"best": b, "first": best["first"], "ok": not whys,
                     "first_rates": [pr["first"]["pages_per_s"] for pr in p["kept_pairs"]
                                     if pr.get("first")],
                     "second_rates": [pr["second"]["pages_per_s"] for pr in p["kept_pairs"]
                                      if pr.get("second")],
                     "tls_resumed": resumed, "tls_handshakes": handshakes,
                     "ratio": b["pages_per_s"] / full["best"]["pages_per_s"] if full else None}
        if resumed is None:
            tls = "no tls_resumed in harvestd's summary (handshakes %s)" % fmt_num(handshakes)
        elif resumed == 0:
            tls = "resumed NO session: tls_resumed 0, tls_handshakes %s" % fmt_num(handshakes)
        else:
            tls = "tls_resumed %s, tls_handshakes %s" % (fmt_num(resumed), fmt_num(handshakes))
        parts = ["FAIL: " + "; ".join(whys) if whys else "ok", tls]
        if p["kept"]["ratio"] is not None:
            parts.append("{:.2f}x full handshakes".format(p["kept"]["ratio"]))
        self.rows.append(harvest_row(self.PEERS_KEPT_LABEL + " (best of 2)", b, "; ".join(parts)))

    def _peers_note(self):
        p = getattr(self, "peers", None)
        if not p or not p.get("best"):
            return None
        sections = []
        for mode in self.PEERS_MODES:
            rates, cpu = [], []
            for client in ("harvestd", "wget2"):
                side = p["best"].get((client, mode))
                if not side:
                    continue
                name = self.PEERS_CLIENT_NAMES[client]
                rates.append("%s %s" % (name, " and ".join(fmt_num(r) for r in side["rates"])))
                b = side["best"]
                cpu.append("%s %s/%s" % (name, fmt_num(b["cpu_s_per_1k"], "{:.3f}"), fmt_num(
                    1000.0 * b["nginx_cpu_s"] / b["urls"] if b.get("nginx_cpu_s") is not None
                    else None, "{:.3f}")))
            w = p["wrk"].get(mode)
            sections.append("%s (%s URLs): pages/s %s%s; CPU s/1k of the best runs, client/"
                            "nginx: %s" % (
                                self.PEERS_MODE_NAMES[mode], fmt_num(p["urls"][mode]),
                                "; ".join(rates),
                                "; wrk %s MB/s" % fmt_num(w["mb_per_s"]) if w else "",
                                ", ".join(cpu)))
        kept = p.get("kept")
        if kept:
            runs = []
            for pr in p["kept_pairs"]:
                texts = []
                for which in ("first", "second"):
                    r = pr.get(which)
                    if not r or r["broke"]:
                        texts.append("%s broke" % which)
                        continue
                    resumed, handshakes = self._peers_tls(r)
                    texts.append("%s %s pages/s (%s handshakes, %s resumed; nginx: %s "
                                 "resumed, statuses %s)" % (
                                     which, fmt_num(r["pages_per_s"]), fmt_num(handshakes),
                                     fmt_num(resumed), fmt_num(r["nginx_log"]["tls_reused"]),
                                     r["nginx_log"]["statuses"]))
                runs.append(", ".join(texts))
            sections.append("kept sessions (%d hosts, one page each, --recrawl conditional, one "
                            "--state-dir per pair): %s" % (p["hosts"], " | ".join(runs)))
        return ("peers: wrk once, then harvestd and Wget2 alternating twice per section after an "
                "unreported warm-up, the rows each side's best: " + " | ".join(sections))

    # -- targets and report

    def targets(self):
        out = []

        def target(name, ok, value):
            out.append({"target": name, "pass": bool(ok), "value": value})

        http_key = "http-%d" % (20_000 if 20_000 in CONFIG["http_runs"] else CONFIG["http_runs"][-1])
        http = self.harvest.get(http_key)
        https = self.harvest.get("https-%d" % CONFIG["https_run"])
        wrk = self.wrk.get("http")
        name = "HTTP keep-alive title extraction >= {:,} pages/s".format(TARGETS["http_pages_per_s"])
        if http:
            target(name, http["ok"] and http["pages_per_s"] >= TARGETS["http_pages_per_s"],
                   "{:,.0f} pages/s ({} URLs{})".format(http["pages_per_s"], fmt_num(http["urls"]),
                                                        "" if http["ok"] else ", run FAILED"))
        else:
            target(name, False, "not measured")
        name = "HTTP >= {:.0%} of wrk's HTTP rate".format(TARGETS["http_vs_wrk"])
        if http and wrk:
            target(name, http["ok"] and http["vs_fetch"] >= TARGETS["http_vs_wrk"],
                   "{:.1%} ({:,.0f} / {:,.0f})".format(http["vs_fetch"], http["pages_per_s"],
                                                       wrk["pages_per_s"]))
        else:
            target(name, False, "not measured")
        name = "CPU per 1,000 pages <= {:.2f} s on the HTTP title rows".format(
            TARGETS["http_cpu_s_per_1k"])
        titles_runs = [(n, self.harvest.get("http-%d" % n)) for n in CONFIG["http_runs"]]
        if all(r and not r["broke"] for _, r in titles_runs):
            target(name, all(r["ok"] and r["cpu_s_per_1k"] <= TARGETS["http_cpu_s_per_1k"]
                             for _, r in titles_runs),
                   "; ".join("{:.3f} s ({} URLs{})".format(r["cpu_s_per_1k"], fmt_num(n),
                                                          "" if r["ok"] else ", run FAILED")
                             for n, r in titles_runs))
        else:
            target(name, False, "not measured (a run broke)")
        name = "HTTPS >= {:.0%} of the HTTP rate".format(TARGETS["https_vs_http"])
        if http and https:
            ratio = https["pages_per_s"] / http["pages_per_s"]
            target(name, http["ok"] and https["ok"] and ratio >= TARGETS["https_vs_http"],
                   "{:.1%} ({:,.0f} / {:,.0f})".format(ratio, https["pages_per_s"],
                                                       http["pages_per_s"]))
        else:
            target(name, False, "not measured")
        rules = self.harvest.get("rules-%d" % self.parse["pages"]) if self.parse else None
        name = "extraction rules (whole tree) >= {:.0%} of the gumbo parse limit".format(
            TARGETS["rules_vs_parse"])
        if rules and not rules["broke"]:
            target(name, rules["ok"] and rules["vs_parse"] >= TARGETS["rules_vs_parse"],
                   "{:.1%} ({:,.0f} / {:,.0f} pages/s{})".format(
                       rules["vs_parse"], rules["pages_per_s"], self.parse["pages_per_s"],
                       "" if rules["ok"] else ", run FAILED"))
        else:
            target(name, False, "not measured")
        lat = self.latency
        name = "latency-bound >= {:.0%} of concurrency/latency".format(TARGETS["latency_vs_bound"])
        if lat:
            target(name, lat["ok"] and lat["vs_fetch"] >= TARGETS["latency_vs_bound"],
                   "{:.1%} ({:,.0f} of {:,.0f} pages/s)".format(lat["vs_fetch"], lat["pages_per_s"],
                                                                lat["bound"]))
        else:
            target(name, False, "not measured")
        spool1 = self.harvest.get("stream-spool-1")
        redis1 = self.harvest.get("stream-redis-1")
        redisk = self.harvest.get("stream-redis-%d" % CONFIG["stream_daemons"])
        name = "{} daemons on one stream >= {}x one daemon".format(CONFIG["stream_daemons"],
                                                                 TARGETS["stream_scaling"])
        if redis1 and redisk and redis1["ok"] and redisk["ok"]:
            ratio = redisk["pages_per_s"] / redis1["pages_per_s"]
            target(name, ratio >= TARGETS["stream_scaling"],
                   "{:.2f}x ({:,.0f} vs {:,.0f} pages/s)".format(ratio, redisk["pages_per_s"],
                                                                 redis1["pages_per_s"]))
        else:
            target(name, False, "not measured (a run failed)")
        name = "one daemon through Redis >= {:.0%} of it reading a spool file".format(
            TARGETS["stream_vs_spool"])
        if redis1 and spool1 and redis1["ok"] and spool1["ok"]:
            ratio = redis1["pages_per_s"] / spool1["pages_per_s"]
            target(name, ratio >= TARGETS["stream_vs_spool"],
                   "{:.1%} ({:,.0f} vs {:,.0f} pages/s)".format(ratio, redis1["pages_per_s"],
                                                               spool1["pages_per_s"]))
        else:
            target(name, False, "not measured (a run failed)")
        # The big-page runs have a memory target of their own (below).
        default_runs = [r for k, r in self.harvest.items()
                        if k != "latency" and
                        not k.startswith(("big-", "stream-", "block-switch-"))]
        rss = [r["peak_rss_mib"] for r in default_runs if r["peak_rss_mib"] is not None and r["ok"]]
        name = "peak RSS <= {} MiB at default limits".format(TARGETS["peak_rss_mib"])
        if rss and len(rss) == len(default_runs):
            target(name, max(rss) <= TARGETS["peak_rss_mib"],
                   "{:.1f} MiB (largest of the {} nginx runs on the corpus)".format(max(rss),
                                                                                len(rss)))
        else:
            target(name, False, "not measured (a run failed)")
        self._growth_target(target, "", "http", CONFIG["http_runs"], TARGETS["rss_growth"])
        self._growth_target(target, "big pages: ", "big", CONFIG["big_runs"],
                            TARGETS["big_rss_growth"])
        rc = self.recrawl
        name = "recrawl: warm run (304s) >= {:.1f}x the cold run's pages/s".format(
            TARGETS["recrawl_warm_vs_cold"])
        if rc:
            target(name, rc["cold"]["ok"] and rc["warm"]["ok"] and
                   rc["speedup"] >= TARGETS["recrawl_warm_vs_cold"],
                   "{:.2f}x ({:,.0f} / {:,.0f})".format(rc["speedup"], rc["warm"]["pages_per_s"],
                                                       rc["cold"]["pages_per_s"]))
        else:
            target(name, False, "not measured")
        name = "recrawl: warm run transfers <= {:.0%} of the cold run's body bytes".format(
            TARGETS["recrawl_body_bytes"])
        if rc and rc["body_ratio"] is not None:
            target(name, rc["body_ratio"] <= TARGETS["recrawl_body_bytes"],
                   "{:.2%} ({:,} / {:,} bytes)".format(
                       rc["body_ratio"], rc["warm"]["records"]["body_bytes"],
                       rc["cold"]["records"]["body_bytes"]))
        else:
            target(name, False, "not measured")
        bo = self.block_onoff
        name = "block detection on vs off >= {:.0%}".format(TARGETS["block_on_vs_off"])
        if bo:
            target(name, bo["ok"] and bo["ratio"] >= TARGETS["block_on_vs_off"],
                   "{:.1%} ({:,.0f} / {:,.0f} pages/s, best of 2 each{})".format(
                       bo["ratio"], bo["on"]["pages_per_s"], bo["off"]["pages_per_s"],
                       "" if bo["ok"] else ", a run FAILED"))
        else:
            target(name, False, "not measured")
        bs = self.block_switch
        name = "block pages written ok <= {} per host (hosts that switch halfway)".format(
            TARGETS["block_ok_pages_per_host"])
        if bs:
            target(name, bs["ok"] and bs["block_ok_max"] <= TARGETS["block_ok_pages_per_host"],
                   "max {} ({} in all, {}/{} hosts blocked{})".format(
                       bs["block_ok_max"], bs["block_ok_total"], bs["hosts_blocked"], bs["hosts"],
                       "" if bs["ok"] else ", run FAILED"))
        else:
            target(name, False, "not measured")
        px = self.proxy or {}
        for kind, tkey, what in (("http", "proxy_http_vs_direct", "tinyproxy"),
                                 ("socks5", "proxy_socks_vs_direct", "microsocks (SOCKS5)")):
            name = "HTTP titles through {} >= {:.0%} of direct".format(what, TARGETS[tkey])
            via, direct = px.get(("http", kind)), px.get(("http", "direct"))
            if via and direct:
                target(name, via["ok"] and direct["ok"] and via["ratio"] >= TARGETS[tkey],
                       "{:.1%} ({:,.0f} / {:,.0f} pages/s, best of 2 each{})".format(
                           via["ratio"], via["best"]["pages_per_s"],
                           direct["best"]["pages_per_s"],
                           "" if via["ok"] and direct["ok"] else ", a run FAILED"))
            else:
                target(name, False, "not measured")
        h2 = self.h2 or {}
        h1s, h2s = h2.get("h1"), h2.get("h2")
        both_ok = bool(h1s and h2s and h1s["ok"] and h2s["ok"])
        failed = "" if both_ok else ", a run FAILED"
        name = "HTTPS one host, per_host 16: HTTP/2 >= {:.1f}x the HTTP/1.1 pages/s".format(
            TARGETS["h2_vs_h1"])
        if h1s and h2s:
            ratio = h2s["best"]["pages_per_s"] / h1s["best"]["pages_per_s"]
            target(name, both_ok and ratio >= TARGETS["h2_vs_h1"],
                   "{:.2f}x ({:,.0f} / {:,.0f} pages/s, best of 2 each{})".format(
                       ratio, h2s["best"]["pages_per_s"], h1s["best"]["pages_per_s"], failed))
        else:
            target(name, False, "not measured")
        name = "HTTPS one host, per_host 16: HTTP/2 CPU per page <= {:.1f}x HTTP/1.1's".format(
            TARGETS["h2_cpu_vs_h1"])
        if h1s and h2s:
            ratio = h2s["best"]["cpu_s_per_1k"] / h1s["best"]["cpu_s_per_1k"]
            target(name, both_ok and ratio <= TARGETS["h2_cpu_vs_h1"],
                   "{:.2f}x ({:.3f} / {:.3f} s per 1,000 pages, the rows' runs{})".format(
                       ratio, h2s["best"]["cpu_s_per_1k"], h1s["best"]["cpu_s_per_1k"], failed))
        else:
            target(name, False, "not measured")
        lo, hi = TARGETS["h2_connections"]
        name = "HTTPS one host, per_host 16: HTTP/2 opens {}-{} connections".format(lo, hi)
        if h2s:
            opened = h2s["connections_opened"]
            known = [c for c in opened if c is not None]
            if len(known) == len(opened):
                target(name, h2s["ok"] and all(lo <= c <= hi for c in known),
                       "{} (connections_opened of each HTTP/2 run{})".format(
                           " and ".join(fmt_num(c) for c in known),
                           "" if h2s["ok"] else ", a run FAILED"))
            else:
                target(name, False, "not measured (no connections_opened in harvestd's summary)")
        else:
            target(name, False, "not measured")
        self._peers_targets(target)
        return out

    def _peers_targets(self, target):
        p = self.peers or {}
        best = p.get("best") or {}
        for mode, key in (("http", "peers_http_vs_wget2"), ("https", "peers_https_vs_wget2"),
                          ("full", "peers_handshake_vs_wget2")):
            name = "peers: harvestd {} >= {:.1f}x Wget2's pages/s".format(
                self.PEERS_MODE_NAMES[mode], TARGETS[key])
            hv, wg = best.get(("harvestd", mode)), best.get(("wget2", mode))
            if hv and wg:
                ratio = hv["best"]["pages_per_s"] / wg["best"]["pages_per_s"]
                both = hv["ok"] and wg["ok"]
                target(name, both and ratio >= TARGETS[key],
                       "{:.2f}x ({:,.0f} / {:,.0f} pages/s, best of 2 each{})".format(
                           ratio, hv["best"]["pages_per_s"], wg["best"]["pages_per_s"],
                           "" if both else ", a run FAILED"))
            else:
                target(name, False, "not measured")
        today = TARGETS["peers_today_pages_per_s"]
        name = ("peers: harvestd HTTPS full handshakes >= {:.1f}x today's rate ({} pages/s, "
                "measured before the crypto workers)").format(TARGETS["peers_handshake_vs_today"],
                                                             today)
        hv = best.get(("harvestd", "full"))
        if hv:
            ratio = hv["best"]["pages_per_s"] / today
            target(name, hv["ok"] and ratio >= TARGETS["peers_handshake_vs_today"],
                   "{:.2f}x ({:,.0f} / {} pages/s, best of 2{})".format(
                       ratio, hv["best"]["pages_per_s"], today,
                       "" if hv["ok"] else ", a run FAILED"))
        else:
            target(name, False, "not measured")
        name = "peers: kept sessions (2nd run) >= {:.1f}x the full-handshake row's pages/s".format(
            TARGETS["peers_kept_vs_handshake"])
        kept = p.get("kept")
        if kept and hv:
            ok = kept["ok"] and hv["ok"]
            target(name, ok and kept["ratio"] >= TARGETS["peers_kept_vs_handshake"],
                   "{:.2f}x ({:,.0f} / {:,.0f} pages/s; tls_resumed {} of tls_handshakes {}{}{})"
                   .format(kept["ratio"], kept["best"]["pages_per_s"], hv["best"]["pages_per_s"],
                           fmt_num(kept["tls_resumed"]), fmt_num(kept["tls_handshakes"]),
                           ": no session resumed" if not kept["tls_resumed"] else "",
                           "" if ok else ", a run FAILED"))
        else:
            target(name, False, "not measured")

    def _peers_results(self):
        """The peers phase for results.json: every run with its raw numbers (names for the
        harvestd runs, which are under "harvestd" too)."""
        p = self.peers
        if not p:
            return None

        def side_key(k):
            return "%s-%s" % k

        out = {"urls": p["urls"], "hosts": p["hosts"], "wget2_version": p.get("wget2_version"),
               "wrk": p["wrk"],
               "runs": {side_key(k): [r["name"] if k[0] == "harvestd" else r for r in v]
                        for k, v in p["runs"].items()},
               "best": {side_key(k): {"best": v["best"]["name"], "ok": v["ok"],
                                      "rates": v["rates"]}
                        for k, v in (p.get("best") or {}).items()},
               "kept_pairs": [{w: r["name"] for w, r in pr.items()} for pr in p["kept_pairs"]]}
        kept = p.get("kept")
        if kept:
            out["kept"] = {k: (v["name"] if k in ("best", "first") else v)
                           for k, v in kept.items()}
        return out

    @staticmethod
    def _proxy_ceiling(direct, via):
        """What the proxy's own CPU leaves on this machine: the rate against direct that the
        proxied run would reach if harvestd cost what it costs direct, with the cores the
        proxied run kept busy (harvestd, the proxy and nginx's worker): busy cores / (harvestd
        direct + proxy + nginx per page)."""
        d, v = direct, via
        if d.get("nginx_cpu_s") is None or v.get("nginx_cpu_s") is None or \
                v.get("proxy_cpu_s") is None or not d.get("pages_per_s"):
            return ""
        kd, kv = 1000.0 / d["urls"], 1000.0 / v["urls"]
        d_busy = (d["cpu_s_per_1k"] + d["nginx_cpu_s"] * kd) * d["pages_per_s"] / 1000.0
        v_busy = (v["cpu_s_per_1k"] + (v["proxy_cpu_s"] + v["nginx_cpu_s"]) * kv) * \
            v["pages_per_s"] / 1000.0
        floor = d["cpu_s_per_1k"] + (v["proxy_cpu_s"] + v["nginx_cpu_s"]) * kv
        return "; cores busy %.2f direct, %.2f proxied: with harvestd at its direct cost, " \
            "%.0f%% of direct" % (d_busy, v_busy,
                                  100.0 * v_busy * 1000.0 / floor / d["pages_per_s"])

    def _proxy_note(self):
        """The proxy rows' note: every run's rate, and the CPU of the three processes (harvestd,
        the proxy, nginx's worker) per 1,000 pages in each side's best run."""
        px = self.proxy or {}
        parts = []
        for scheme, modes in (("http", ("direct", "http", "socks5")),
                              ("https", ("direct", "http"))):
            sides = [(m, px.get((scheme, m))) for m in modes]
            sides = [(m, v) for m, v in sides if v]
            if not sides:
                continue
            direct = px.get((scheme, "direct"))
            names = {"direct": "direct", "http": "tinyproxy", "socks5": "microsocks"}
            rates = "; ".join("%s %s" % (names[m], " and ".join(fmt_num(r) for r in v["rates"]))
                              for m, v in sides)
            cpu = []
            for m, v in sides:
                b = v["best"]
                k = 1000.0 / b["urls"]
                summ = b.get("summary") or {}
                text = "%s %s/%s/%s" % (
                    names[m], fmt_num(b["cpu_s_per_1k"], "{:.3f}"),
                    fmt_num(b["proxy_cpu_s"] * k if b["proxy_cpu_s"] is not None else None,
                            "{:.3f}"),
                    fmt_num(b["nginx_cpu_s"] * k if b["nginx_cpu_s"] is not None else None,
                            "{:.3f}"))
                if m != "direct" and direct:
                    text += " (harvestd x%.2f%s)" % (
                        b["cpu_s_per_1k"] / direct["best"]["cpu_s_per_1k"],
                        self._proxy_ceiling(direct["best"], b))
                extra = []
                if summ.get("stale_retries"):
                    extra.append("%s stale retries" % fmt_num(summ["stale_retries"]))
                if summ.get("retries"):
                    extra.append("%s retries" % fmt_num(summ["retries"]))
                if scheme == "https":
                    extra.append("%s TLS handshakes, %s resumed" % (
                        fmt_num(summ["tls_handshakes"]), fmt_num(summ.get("tls_resumed"))))
                if extra:
                    text += " [%s]" % ", ".join(extra)
                cpu.append(text)
            parts.append("%s %s URLs, pages/s %s; CPU s/1k of the best runs, harvestd/proxy/"
                         "nginx: %s" % (scheme.upper(), fmt_num(sides[0][1]["urls"]), rates,
                                        ", ".join(cpu)))
        if not parts:
            return None
        note = "proxies: runs alternating (HTTP direct/tinyproxy/microsocks twice after an " \
            "unreported warm-up, then HTTPS direct/tinyproxy twice): " + " | ".join(parts)
        if self.proxy_log:
            note += " | tinyproxy logged %d warnings or worse during the runs, the first: %s" % (
                len(self.proxy_log), self.proxy_log[0][:160])
        return note

    def _growth_target(self, target, prefix, key, runs, limit):
        """Peak RSS of the largest of `runs` (URL counts of the runs named KEY-N) against the
        smallest's, the runs between shown too."""
        small = self.harvest.get("%s-%d" % (key, runs[0]))
        large = self.harvest.get("%s-%d" % (key, runs[-1]))
        name = "{}RSS at {} URLs within {:.0%} of RSS at {} URLs".format(
            prefix, fmt_num(runs[-1]), limit, fmt_num(runs[0]))
        if small and large and small["ok"] and large["ok"] and small["peak_rss_kib"] \
                and large["peak_rss_kib"]:
            growth = large["peak_rss_kib"] / small["peak_rss_kib"] - 1.0
            mids = [(n, self.harvest.get("%s-%d" % (key, n), {}).get("peak_rss_mib"))
                    for n in runs[1:-1]]
            between = ["{} URLs: {:.1f} MiB".format(fmt_num(n), m) for n, m in mids if m is not None]
            target(name, abs(growth) <= limit,
                   "{:+.1%} ({:.1f} vs {:.1f} MiB{})".format(
                       growth, large["peak_rss_mib"], small["peak_rss_mib"],
                       "".join("; " + b for b in between)))
        else:
            target(name, False, "not measured (a run failed)")

    def report(self, started):
        targets = self.targets()
        table = build_table(self.rows)
        lines = list(self.header) + ["", table, "", "targets:"]
        for tg in targets:
            lines.append("  %s  %s: %s" % ("PASS" if tg["pass"] else "FAIL", tg["target"],
                                           tg["value"]))
        lines.append("")
        notes = []
        if self.wrk:
            notes.append("fetch limit: wrk -t%d -c%d -d%ds rotating over the corpus: %s" % (
                CONFIG["wrk_threads"], CONFIG["wrk_connections"], CONFIG["wrk_seconds"],
                ", ".join("%s %s MB/s" % (k.upper(), fmt_num(w["mb_per_s"]))
                          for k, w in self.wrk.items())))
        if self.parse:
            notes.append("parse limit: gumbo only, %d threads, %.1f MB/s" % (
                self.parse["raw"]["threads"], self.parse["mb_per_s"]))
        for note in self.delay_notes:
            notes.append("delay server: " + note)
        if self.recrawl_note:
            notes.append(self.recrawl_note)
        if self.block_onoff:
            bo = self.block_onoff
            notes.append("block detection: %s URLs from nginx, runs alternating off/on/off/on "
                         "after an unreported warm-up, --log-level info: off %s pages/s, on %s "
                         "pages/s; the rows show each side's best" % (
                             fmt_num(bo["urls"]),
                             " and ".join(fmt_num(v) for v in bo["runs"]["off"]),
                             " and ".join(fmt_num(v) for v in bo["runs"]["on"])))
        if self.block_note:
            notes.append(self.block_note)
        proxy_note = self._proxy_note()
        if proxy_note:
            notes.append(proxy_note)
        h2_note = self._h2_note()
        if h2_note:
            notes.append(h2_note)
        peers_note = self._peers_note()
        if peers_note:
            notes.append(peers_note)
        big = [(n, self.harvest.get("big-%d" % n)) for n in CONFIG["big_runs"]]
        big = [(n, r) for n, r in big if r and not r["broke"]]
        if big:
            notes.append("big pages: " + "; ".join(
                "%s URLs, %s MB of pages in %.0f s (%.1f MB/s), %s MB of records" % (
                    fmt_num(n), fmt_num(r["page_bytes"] / 1e6), r["wall_s"],
                    r["page_bytes"] / 1e6 / r["wall_s"],
                    fmt_num(r["output_bytes"] / 1e6 if r["output_bytes"] else None))
                for n, r in big))
        notes.append("pages/s: URLs / wall time of the harvestd process (start-up and exit "
                     "included); CPU: user+sys per 1,000 pages; RSS: /usr/bin/time %M")
        notes.append("vs fetch: harvestd / wrk on the same scheme (latency run: / concurrency/"
                     "latency; peers rows: the client / wrk in the same section); vs parse: "
                     "harvestd / gumbo parse limit")
        lines.extend(notes)
        total = time.monotonic() - started
        lines.append("benchmark wall time %.0f s; raw numbers in %s" % (
            total, os.path.join(self.dir, "results.json")))
        if self.broken:
            lines.append("BROKEN: " + "; ".join(self.broken))
        text = "\n".join(lines)
        print(text, flush=True)
        self.results.update(header=self.header, rows=self.rows, targets=targets, table=table,
                            text=text, notes=notes, broken=self.broken, harvestd=self.harvest,
                            proxy_log=self.proxy_log, peers=self._peers_results(),
                            h2={m: {k: (v["name"] if k == "best" else v) for k, v in side.items()}
                                for m, side in (self.h2 or {}).items() if m in ("h1", "h2")},
                            wall_s=round(total, 1), finished_at=datetime.datetime.now(
                                datetime.timezone.utc).isoformat())
        tmp = os.path.join(self.dir, "results.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.results, f, indent=1, ensure_ascii=False, default=str)
            f.write("\n")
        os.replace(tmp, os.path.join(self.dir, "results.json"))


def main():
    started = time.monotonic()
    harvestd_bin = os.environ.get("HARVESTD_BIN", "")
    tools_dir = os.environ.get("HARVESTD_TOOLS", "")
    bench_dir = os.environ.get("BENCH_DIR", "")
    if not (harvestd_bin and tools_dir and bench_dir):
        raise BenchError("HARVESTD_BIN, HARVESTD_TOOLS and BENCH_DIR must be set "
                         "(run `make bench`)")
    if not os.access(harvestd_bin, os.X_OK):
        raise BenchError("%s is not executable" % harvestd_bin)
    for tool in ("nginx", "wrk", "openssl"):
        if shutil.which(tool) is None:
            raise BenchError("%s is not installed (listed in third_party/packages.txt; "
                             "`make deps` installs it)" % tool)
    if not os.access("/usr/bin/time", os.X_OK):
        raise BenchError("/usr/bin/time is not installed (Debian package `time`; `make deps`)")
    os.umask(0o022)   # nginx's worker (user nobody when started as root) reads the corpus
    os.makedirs(os.path.join(bench_dir, "runs"), exist_ok=True)

    # Every run measures the same binary even if build/ is rebuilt meanwhile: run a copy.
    snap_dir = os.path.join(bench_dir, "bin")
    os.makedirs(snap_dir, exist_ok=True)
    snap = os.path.join(snap_dir, "harvestd")
    shutil.copy2(harvestd_bin, snap + ".tmp")
    os.replace(snap + ".tmp", snap)
    with open(snap, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()

    bench = Bench(snap, tools_dir, bench_dir)
    bench.results["harvestd_binary"] = {"source": harvestd_bin, "copy": snap, "sha256": digest}
    phases = os.environ.get("BENCH_PHASES", "").replace(",", " ").split() or list(PHASES)
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        raise BenchError("unknown BENCH_PHASES %s (known: %s)" % (" ".join(unknown),
                                                                  " ".join(PHASES)))
    bench.prepare()
    for phase in PHASES:
        if phase in phases:
            getattr(bench, phase + "_phase")()
    bench.report(started)
    return 1 if bench.broken else 0


def _on_signal(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)   # even if started with it ignored
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    rc = 1
    try:
        rc = main()
    except BenchError as e:
        print("bench: error: %s" % e, file=sys.stderr)
        rc = 1
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        rc = 130
    finally:
        CHILDREN.stop_all()
    sys.exit(rc)
