"""The origin of the bench's block-page row: hosts that switch to a block page halfway.

Each host is a stdlib HTTP/1.1 server of its own (keep-alive, one thread per connection,
TCP_NODELAY) on a port of its own on 127.0.0.1, which harvestd counts as a host of its own
(scheme + host + port). A host answers its first `switch_after` requests with real pages, each
path with its own title and 2-6 KB of its own text, and every later request with one fixed,
fast `200` "Access denied" page: the same bytes for every URL. It records which paths got a
real page, how many block pages it sent and the time.monotonic() of the first one (the clock
bench.py stamps harvestd's log lines with).

All hosts run in the bench's own process: a few thousand requests at most, where the point is
what harvestd writes and when it decides, not how fast the origin is.
"""

import http.server
import random
import threading
import time

BLOCK_TITLE = "Access denied"
BLOCK_PAGE = (b"<!doctype html><html><head><title>Access denied</title></head>"
              b"<body><h1>Access denied</h1><p>You don't have permission to access this "
              b"server.</p><p>Reference #18.5f2e1002.1700000000</p></body></html>")

WORDS = ("archive batch block body buffer byte cache client connection crawler daemon digest "
         "document domain encoding entry event fetch field filter header host index input "
         "journal latency limit line list loop memory metric node origin output page parser "
         "path pipeline probe queue record redirect request response retry robots schedule "
         "server signal socket source spool state status store stream summary table thread "
         "timer title token verdict worker").split()


def page_title(host, path):
    return "Host %d page %s" % (host, path)


def page_body(host, path):
    """A real page: the same bytes for one (host, path) every time, distinct between paths."""
    rnd = random.Random("%d %s" % (host, path))
    size = rnd.randint(2000, 6000)
    parts = []
    n = 0
    while n < size:
        p = "<p>%s.</p>\n" % " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(20, 60)))
        parts.append(p)
        n += len(p)
    title = page_title(host, path)
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>%s</title></head>"
            "<body><h1>%s</h1>\n%s</body></html>" % (title, title, "".join(parts))).encode()


class Host:
    def __init__(self, index, switch_after):
        self.index = index
        self.switch_after = switch_after
        self.lock = threading.Lock()
        self.served = 0             # requests answered, real and block
        self.block_served = 0       # block pages sent (requests after the switch)
        self.switch_t = None        # time.monotonic() of the first block page
        self.real_paths = set()     # paths whose answer was a real page
        host = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                body = host._answer(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def key(self):
        """The host as harvestd names it in its log lines."""
        return "http://127.0.0.1:%d" % self.port

    def url(self, path):
        return self.key + path

    def _answer(self, path):
        with self.lock:
            self.served += 1
            blocking = self.served > self.switch_after
            if blocking:
                self.block_served += 1
                if self.switch_t is None:
                    self.switch_t = time.monotonic()
            else:
                self.real_paths.add(path)
        return BLOCK_PAGE if blocking else page_body(self.index, path)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Origin:
    """`hosts` hosts, each switching after `switch_after` requests."""

    def __init__(self, hosts, switch_after):
        self.hosts = []
        try:
            for k in range(hosts):
                self.hosts.append(Host(k, switch_after))
        except OSError:
            self.stop()
            raise
        self.by_port = {h.port: h for h in self.hosts}

    def stop(self):
        for h in self.hosts:
            h.stop()
