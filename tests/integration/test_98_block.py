"""Block pages: the per-host block detector against sites that start refusing the crawler.

Each Site is a stdlib HTTP/1.1 server of its own on 127.0.0.1 (a host of its own to harvestd:
another port). It serves real pages, each with its own title and text, until `switch_after`
requests have been answered; then it refuses in the way it was given (one fast "Access
denied" page for every URL, a 403 or 429, or a small page with a request id) for `block_for`
requests (None: for good), then serves real pages again. Every record of a line is checked:
exactly one per line, at most two block pages written `ok` per host, the rest `Blocked`.
"""

import http.server
import json
import re
import socket
import threading

import pytest

BLOCK_PAGE = (b"<!doctype html><html><head><title>Access denied</title></head>"
              b"<body><h1>Access denied</h1><p>You don't have permission.</p></body></html>")

FAST = ("--block-probe-delay", "300ms")


class Site:
    def __init__(self, switch_after=None, mode="same_body", block_for=None, soft404=(),
                 same_for_all=False, page_bytes=6000, host="127.0.0.1"):
        self.switch_after = switch_after
        self.mode = mode
        self.block_for = block_for
        self.soft404 = set(soft404)
        self.same_for_all = same_for_all
        self.page_bytes = page_bytes
        self.lock = threading.Lock()
        self.served = 0
        self.blocked_served = 0
        self.log = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                status, body = site._answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(http.server.ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        self.host = host
        self.server = Server((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "http://%s:%d%s" % (host, self.port, path)

    def _real(self, path):
        if self.same_for_all:
            path = path.split("?")[0]  # a parameter the site ignores
        if path.split("?")[0] in self.soft404:
            return (b"<html><head><title>Not here</title></head><body>"
                    b"<p>We could not find that page.</p></body></html>")
        text = ("<p>%s</p>" % path) * (self.page_bytes // (len(path) + 7) + 1)
        return ("<html><head><title>Page %s</title></head><body>%s</body></html>"
                % (path, text)).encode()

    def _answer(self, path):
        with self.lock:
            self.served += 1
            n = self.served
            self.log.append(path)
            blocking = (self.switch_after is not None and n > self.switch_after and
                        (self.block_for is None or self.blocked_served < self.block_for))
            if blocking:
                self.blocked_served += 1
        if not blocking:
            return 200, self._real(path)
        if self.mode == "same_body":
            return 200, BLOCK_PAGE
        if self.mode in ("403", "429"):
            return int(self.mode), BLOCK_PAGE
        # "ratio": a small challenge page with its own request id each time.
        return 200, (b"<html><head><title>Just a moment...</title></head><body>ray %d"
                     b"</body></html>" % n)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sites():
    made = []

    def make(**kw):
        s = Site(**kw)
        made.append(s)
        return s
    yield make
    for s in made:
        s.stop()


def interleave(*lists):
    out = []
    for i in range(max(len(x) for x in lists)):
        for x in lists:
            if i < len(x):
                out.append(x[i])
    return out


def one_per_line(run, urls):
    assert run.rc == 0, run.stderr
    assert sorted(r["requested_url"] for r in run.records) == sorted(urls)


def by_site(run, site):
    prefix = site.url("/")
    return [r for r in run.records if r["requested_url"].startswith(prefix)]


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_98_01_same_body_for_every_url_blocks_the_host_and_spares_the_others(
        run_harvestd, sites, host):
    """(On an IPv6 address too: the host's key, "http://[::1]:PORT", must be one that parses
    back into its root URL, for its jobs to be held and its probe to go out.)"""
    bad = sites(switch_after=10, host=host)
    good = [sites(), sites()]
    urls = interleave(*[[s.url("/p%d" % i) for i in range(60)] for s in [bad] + good])
    run = run_harvestd(urls, *FAST, "--per-host", "2")
    one_per_line(run, urls)
    recs = by_site(run, bad)
    denied_ok = [r for r in recs if r["status"] == "ok" and r.get("title") == "Access denied"]
    assert len(denied_ok) <= 2, denied_ok
    blocked = [r for r in recs if r.get("error_type") == "Blocked"]
    real = [r for r in recs if r["status"] == "ok" and r["title"].startswith("Page ")]
    assert len(real) == 10
    assert len(real) + len(denied_ok) + len(blocked) == 60, recs
    assert all(r["stage"] == "download" and r["error"] == "same_body_as_3_urls"
               and "title" not in r for r in blocked), blocked
    # Blocked lines after the verdict made no request: the host saw the probe and the pages
    # in flight, not 60.
    assert bad.served < 10 + 2 + 1 + 2 * 2 + 4, bad.served
    for s in good:
        assert all(r["status"] == "ok" for r in by_site(run, s))
    assert "Blocked" in run.summary.get("error_types", {}) or \
        "error_type.Blocked" in run.stderr


@pytest.mark.parametrize("mode", ["403", "429"])
def test_98_02_a_burst_of_refusals_blocks_the_host(run_harvestd, sites, mode):
    bad = sites(switch_after=10, mode=mode)
    good = sites()
    urls = interleave([bad.url("/p%d" % i) for i in range(60)],
                      [good.url("/p%d" % i) for i in range(30)])
    run = run_harvestd(urls, *FAST, "--per-host", "1")
    one_per_line(run, urls)
    recs = by_site(run, bad)
    assert sum(r["status"] == "ok" for r in recs) == 10
    refused = [r for r in recs if r.get("error_type") == "HttpStatus"]
    blocked = [r for r in recs if r.get("error_type") == "Blocked"]
    # Five refusals in the last eight attempts make the burst; the rest never went out.
    assert len(refused) == 5, refused
    assert len(blocked) == 45 and all(r["error"] == "status_burst_%s" % mode for r in blocked)
    assert bad.served <= 10 + 5 + 2, bad.served  # and the probe, and one re-probe
    assert all(r["status"] == "ok" for r in by_site(run, good))


def test_98_03_identical_pages_of_a_site_are_not_a_block(run_harvestd, sites):
    """Soft 404s next to real pages, and a site that ignores a parameter: the probe gets a
    real page back, and every record is ok."""
    soft = sites(soft404=["/gone%d" % i for i in range(30)])
    params = sites(same_for_all=True)
    urls = interleave([soft.url("/p%d" % i) for i in range(20)],
                      [soft.url("/gone%d" % i) for i in range(30)],
                      [params.url("/item?utm=%d" % i) for i in range(40)])
    run = run_harvestd(urls, *FAST)
    one_per_line(run, urls)
    assert all(r["status"] == "ok" for r in run.records), \
        [r for r in run.records if r["status"] != "ok"][:3]
    assert sum(r["title"] == "Not here" for r in run.records) == 30


def test_98_04_template_pages_that_differ_are_never_suspect(run_harvestd, sites):
    site = sites(page_bytes=3000)
    urls = [site.url("/article/%d" % i) for i in range(2000)]
    run = run_harvestd(urls, "--log-level", "info", timeout=120)
    one_per_line(run, urls)
    assert all(r["status"] == "ok" for r in run.records)
    assert "event=host_suspect" not in run.stderr
    assert site.served == 2000  # no probe


def test_98_05_a_host_that_recovers_is_fetched_again(run_harvestd, sites):
    """The block lifts after the first probes: later URLs of the host are ok again."""
    site = sites(switch_after=8, block_for=6)
    urls = [site.url("/p%d" % i) for i in range(80)]
    run = run_harvestd(urls, *FAST, "--per-host", "1", "--host-delay", "100ms",
                       "--log-level", "info")
    one_per_line(run, urls)
    recs = {r["requested_url"]: r for r in run.records}
    seq = [recs[u] for u in urls]
    blocked = [i for i, r in enumerate(seq) if r.get("error_type") == "Blocked"]
    assert blocked, "the host was never blocked"
    after = seq[blocked[-1] + 1:]
    assert len(after) >= 10 and all(r["status"] == "ok" and r["title"].startswith("Page ")
                                    for r in after), after[:3]
    assert "event=host_cleared" in run.stderr
    denied_ok = [r for r in seq if r["status"] == "ok" and r["title"] == "Access denied"]
    assert len(denied_ok) <= 2


def test_98_06_digest_on_request_and_detection_off(run_harvestd, sites):
    bad = sites(switch_after=2)
    urls = [bad.url("/p%d" % i) for i in range(12)]
    off = run_harvestd(urls, "--block-detection=no", "--digest")
    one_per_line(off, urls)
    assert all(r["status"] == "ok" for r in off.records)
    digests = {r["title"]: r["body_digest"] for r in off.records}
    assert re.fullmatch("[0-9a-f]{16}", digests["Access denied"]), digests
    assert sum(r["title"] == "Access denied" for r in off.records) == 10
    assert len(set(r["body_digest"] for r in off.records)) == 3
    on = run_harvestd([bad.url("/q%d" % i) for i in range(5)], *FAST)
    assert all("body_digest" not in r for r in on.records)


def test_98_07_summary_names_the_blocked_host_and_its_sign(run_harvestd, sites):
    bad = sites(switch_after=5)
    urls = [bad.url("/p%d" % i) for i in range(30)]
    run = run_harvestd(urls, *FAST)
    one_per_line(run, urls)
    blocked = sum(r.get("error_type") == "Blocked" for r in run.records)
    assert blocked > 20
    assert " blocked_hosts=http://127.0.0.1:%d(%d,same_body_as_3_urls)" % (bad.port, blocked) \
        in run.stderr, run.stderr


def test_98_08_a_daemon_batch_completes_and_a_restart_fetches_blocked_lines_again(
        start_daemon, spool, sites):
    """The batch with a blocked host completes and its summary names it; a batch interrupted
    after some Blocked records resumes with those lines fetched again, ok once the block has
    lifted."""
    from harness import wait_complete
    bad = sites(switch_after=4)
    good = sites()
    urls = interleave([bad.url("/p%d" % i) for i in range(20)],
                      [good.url("/p%d" % i) for i in range(20)])
    # Paced, so that the second batch is still running when it is killed.
    d = start_daemon(block_probe_delay="300ms", host_delay="150ms")
    spool.drop("a.txt", urls)
    wait_complete(d, spool, ["a.txt"], timeout=30)
    recs = spool.records("a.txt")
    assert sorted(r["requested_url"] for r in recs) == sorted(urls)
    s = spool.summary("a.txt")
    assert s["blocked_hosts"] == [{"host": "http://127.0.0.1:%d" % bad.port,
                                   "records": s["error_types"]["Blocked"],
                                   "sign": "same_body_as_3_urls"}], s
    assert [h["host"] for h in s["top_failing_hosts"]] == ["http://127.0.0.1:%d" % bad.port]
    assert d.events("host_blocked")

    # A slow batch: SIGKILL once some lines are Blocked, lift the block, restart.
    slow = sites(switch_after=4)
    lines = [slow.url("/q%d" % i) for i in range(40)]
    spool.drop("b.txt", lines)
    d.poll_until(lambda: sum(r.get("error_type") == "Blocked"
                             for r in spool.records("b.txt", complete=False)) >= 5, 30,
                 "five Blocked records of b.txt")
    assert not spool.has_summary("b.txt")
    d.kill()
    slow.switch_after = None  # the site lets the crawler in again
    d2 = start_daemon(block_probe_delay="300ms", host_delay="20ms")
    wait_complete(d2, spool, ["b.txt"], timeout=30)
    last = {}
    for r in spool.records("b.txt"):
        last[r["requested_url"]] = r  # for one requested URL the last record wins
    assert sorted(last) == sorted(lines)
    assert all(r["status"] == "ok" for r in last.values()), \
        [r for r in last.values() if r["status"] != "ok"][:3]
    # The block pages written ok before the verdict stay: an ok record is not fetched again.
    assert sum(r["title"] == "Access denied" for r in last.values()) <= 2
    assert spool.summary("b.txt")["resumed"] > 0


def test_98_09_pages_that_collapse_against_the_store(run_harvestd, sites, tmp_path):
    """Re-crawling: the second run's pages come back as small challenge pages, each with its
    own request id (no two alike): under a quarter of their stored size, the host is blocked;
    the store keeps the real pages."""
    site = sites(page_bytes=8000)
    urls = [site.url("/p%d" % i) for i in range(30)]
    state = ("--recrawl", "conditional", "--state-dir", str(tmp_path / "state"))
    first = run_harvestd(urls, *state, *FAST)
    one_per_line(first, urls)
    assert all(r["status"] == "ok" for r in first.records)
    site.switch_after, site.mode = site.served, "ratio"
    second = run_harvestd(urls, *state, *FAST, "--per-host", "1")
    one_per_line(second, urls)
    small_ok = [r for r in second.records if r["status"] == "ok"]
    blocked = [r for r in second.records if r.get("error_type") == "Blocked"]
    assert len(small_ok) <= 2 and all(r["title"] == "Just a moment..." for r in small_ok)
    assert len(small_ok) + len(blocked) == 30
    assert all(r["error"] == "size_collapse" for r in blocked), blocked[:2]
    # A third run after the block lifted: the pages are back, and nothing was stored of the
    # blocked ones (the two written ok were stored: they changed).
    site.switch_after = None
    third = run_harvestd(urls, *state, *FAST)
    one_per_line(third, urls)
    assert all(r["status"] == "ok" and r["title"].startswith("Page ") for r in third.records)
    # The stored bodies of the blocked lines are still the real pages: unchanged now.
    unchanged = [r for r in third.records if r.get("unchanged")]
    assert len(unchanged) == 30 - len(small_ok), (len(unchanged), len(small_ok))


def test_98_10_a_host_section_turns_detection_off_for_one_host(run_harvestd, sites, tmp_path):
    """[host "localhost"] block_detection = no: that host's block pages are written as they
    come (the operator said they are meant to be alike); 127.0.0.1 is still watched."""
    watched, trusted = sites(switch_after=5), sites(switch_after=5)
    conf = tmp_path / "block.conf"
    conf.write_text('block_probe_delay = 300ms\n[host "localhost"]\nblock_detection = no\n')
    urls = interleave([watched.url("/p%d" % i) for i in range(20)],
                      ["http://localhost:%d/p%d" % (trusted.port, i) for i in range(20)])
    run = run_harvestd(urls, "-c", str(conf))
    one_per_line(run, urls)
    mine = [r for r in run.records if "localhost" in r["requested_url"]]
    assert all(r["status"] == "ok" for r in mine)
    assert sum(r["title"] == "Access denied" for r in mine) == 15
    assert sum(r.get("error_type") == "Blocked" for r in by_site(run, watched)) >= 10
