"""Conditional re-fetching (recrawl = conditional): a second run over the same list sends the
stored validators, gets 304s and still writes complete records; changed pages, other rules,
no-store, recrawl_min_age, the durability order (store entries only for durable records), a
full store, a corrupt or damaged store, and two daemons sharing one store.

The origin here is a small server of versioned pages: each path has a body, validators and
headers the test sets, and it answers If-None-Match / If-Modified-Since as RFC 9110 says
(or ignores them, for a server that always sends 200). It records the validators of every
request."""

import email.utils
import hashlib
import http.server
import json
import os
import random
import signal
import subprocess
import threading
import urllib.request
import time

import pytest

from harness import (HARVESTD_BIN, SLOWDOWN, check_sanitizer, lmdb_damage_page, lmdb_leaf_pages,
                     lmdb_meta, lmdb_newest, lmdb_set_meta, parse_fetched_at, preload_env,
                     wait_complete)

RECRAWL = ("--recrawl", "conditional")


class Pages(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), PageHandler)
        self.lock = threading.Lock()
        self.pages = {}     # path -> dict(body, etag, last_modified, headers, honour)
        self.log = []       # (path, If-None-Match, If-Modified-Since, status)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.server_address[1], path)

    def put(self, path, title, etag=True, last_modified=True, honour=True, headers=(),
            body=None, extra=""):
        """Serve `path` as a page titled `title`; a new version gets new validators."""
        if body is None:
            body = ("<!doctype html><html><head><title>%s</title></head><body>"
                    "<h1 class=h>%s</h1><p>%s</p></body></html>" % (title, title, extra)).encode()
        with self.lock:
            old = self.pages.get(path)
            version = old["version"] + 1 if old else 1
            self.pages[path] = {
                "body": body, "version": version, "honour": honour, "headers": list(headers),
                "etag": ('"%s-%d"' % (hashlib.sha1(body).hexdigest()[:12], version)
                         if etag else None),
                "last_modified": (email.utils.formatdate(time.time() - 3600 + version, usegmt=True)
                                  if last_modified else None),
            }

    def set_headers(self, path, headers):
        """Change what `path` answers with, not its version (validators stay)."""
        with self.lock:
            self.pages[path]["headers"] = list(headers)

    def requests(self, path=None):
        with self.lock:
            return [r for r in self.log if path is None or r[0] == path]

    def clear(self):
        with self.lock:
            self.log.clear()

    def stop(self):
        self.shutdown()
        self.server_close()
        self.thread.join(5)


class PageHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        path = self.path
        inm = self.headers.get("If-None-Match")
        ims = self.headers.get("If-Modified-Since")
        with srv.lock:
            page = srv.pages.get(path)
            page = dict(page) if page else None
        if page is None and path.startswith("/moved/"):
            status, headers, body = 301, ["Location: /" + path[len("/moved/"):]], b""
        elif page is None:
            status, headers, body = 404, [], b"<title>no</title>"
        else:
            headers = ["Content-Type: text/html; charset=utf-8"] + page["headers"]
            if page["etag"]:
                headers.append("ETag: " + page["etag"])
            if page["last_modified"]:
                headers.append("Last-Modified: " + page["last_modified"])
            fresh = False
            if page["honour"]:
                if inm is not None:
                    fresh = page["etag"] is not None and inm == page["etag"]
                elif ims is not None and page["last_modified"]:
                    fresh = ims == page["last_modified"]
            status, body = (304, b"") if fresh else (200, page["body"])
        with srv.lock:
            srv.log.append((path, inm, ims, status))
        self.send_response(status)
        for h in headers:
            k, v = h.split(": ", 1)
            self.send_header(k, v)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if status != 304:
            self.wfile.write(body)


@pytest.fixture
def pages():
    p = Pages()
    yield p
    p.stop()


def by_requested(records):
    return {r["requested_url"]: r for r in records}


def state_args(tmp_path, *extra):
    return RECRAWL + ("--state-dir", str(tmp_path / "state")) + extra


def test_95_01_second_run_sends_validators_and_writes_complete_304_records(
        run_harvestd, pages, tmp_path):
    pages.put("/both", "Both")
    pages.put("/etag", "Only ETag", last_modified=False)
    pages.put("/lm", "Only Last-Modified", etag=False)
    pages.put("/none", "No validators", etag=False, last_modified=False)
    urls = [pages.url(p) for p in ("/both", "/etag", "/lm", "/none")]
    rules = ("--extract", "h=h1.h")
    first = run_harvestd(urls, *state_args(tmp_path, *rules))
    assert first.rc == 0, first.stderr
    assert all(r["status"] == "ok" and r["http_status"] == 200 for r in first.records)
    for r in first.records:
        assert r["modified_at"] == r["fetched_at"], r
        assert "not_modified" not in r and "unchanged" not in r
    assert "not_modified=0 unchanged=0 from_cache=0" in first.stderr
    assert all(inm is None and ims is None for _, inm, ims, _ in pages.requests())

    pages.clear()
    time.sleep(0.01)
    second = run_harvestd(urls, *state_args(tmp_path, *rules))
    assert second.rc == 0, second.stderr
    seen = {p: (inm, ims, st) for p, inm, ims, st in pages.requests()}
    assert seen["/both"][0] == pages.pages["/both"]["etag"]
    assert seen["/both"][1] == pages.pages["/both"]["last_modified"]
    assert seen["/etag"][:2] == (pages.pages["/etag"]["etag"], None)
    assert seen["/lm"][:2] == (None, pages.pages["/lm"]["last_modified"])
    assert seen["/none"][:2] == (None, None)
    a, b = by_requested(first.records), by_requested(second.records)
    for path in ("/both", "/etag", "/lm"):
        u = pages.url(path)
        assert seen[path][2] == 304
        r = b[u]
        assert r["status"] == "ok" and r["http_status"] == 304 and r["not_modified"] is True, r
        for key in ("url", "title", "fields", "content_type", "bytes", "charset"):
            assert r[key] == a[u][key], (key, r, a[u])
        assert r["modified_at"] == a[u]["modified_at"]
        assert parse_fetched_at(r["fetched_at"]) > parse_fetched_at(a[u]["fetched_at"])
    # A page without validators is fetched again whole, and recognised by its hash.
    r = b[pages.url("/none")]
    assert r["http_status"] == 200 and r["unchanged"] is True and "not_modified" not in r
    assert r["modified_at"] == a[pages.url("/none")]["modified_at"]
    assert "not_modified=3 unchanged=1 from_cache=0" in second.stderr


def test_95_02_a_changed_page_gets_a_fresh_record(run_harvestd, pages, tmp_path):
    pages.put("/a", "Version one")
    pages.put("/b", "Stays")
    urls = [pages.url("/a"), pages.url("/b")]
    first = run_harvestd(urls, *state_args(tmp_path))
    assert first.rc == 0, first.stderr
    pages.put("/a", "Version two")
    second = run_harvestd(urls, *state_args(tmp_path))
    r = by_requested(second.records)
    assert r[urls[0]]["http_status"] == 200 and r[urls[0]]["title"] == "Version two"
    assert "not_modified" not in r[urls[0]] and "unchanged" not in r[urls[0]]
    assert r[urls[0]]["modified_at"] == r[urls[0]]["fetched_at"]
    assert r[urls[1]]["not_modified"] is True and r[urls[1]]["title"] == "Stays"
    # The new version is what is stored now: a third run gets a 304 carrying it.
    pages.clear()
    third = run_harvestd(urls, *state_args(tmp_path))
    r3 = by_requested(third.records)
    assert r3[urls[0]]["not_modified"] is True and r3[urls[0]]["title"] == "Version two"
    assert r3[urls[0]]["modified_at"] == r[urls[0]]["modified_at"]
    assert pages.requests("/a")[0][1] == pages.pages["/a"]["etag"]


def test_95_03_a_server_that_ignores_validators_gives_unchanged(run_harvestd, pages, tmp_path):
    pages.put("/stubborn", "Always 200", honour=False)
    pages.put("/stubborn-changed", "Before", honour=False)
    urls = [pages.url("/stubborn"), pages.url("/stubborn-changed")]
    first = run_harvestd(urls, *state_args(tmp_path))
    assert first.rc == 0, first.stderr
    pages.put("/stubborn-changed", "After", honour=False)
    pages.clear()
    second = run_harvestd(urls, *state_args(tmp_path))
    a, b = by_requested(first.records), by_requested(second.records)
    assert all(inm is not None for _, inm, _, _ in pages.requests()), pages.requests()
    same = b[urls[0]]
    assert same["http_status"] == 200 and same["unchanged"] is True
    assert same["modified_at"] == a[urls[0]]["modified_at"]
    changed = b[urls[1]]
    assert "unchanged" not in changed and changed["title"] == "After"
    assert changed["modified_at"] == changed["fetched_at"]


def test_95_04_other_rules_make_the_request_unconditional(run_harvestd, pages, tmp_path):
    pages.put("/r", "Ruled", extra="<span class=x>X value</span>")
    url = pages.url("/r")
    first = run_harvestd([url], *state_args(tmp_path, "--extract", "h=h1.h"))
    assert first.records[0]["fields"] == {"h": "Ruled"}
    pages.clear()
    second = run_harvestd([url], *state_args(tmp_path, "--extract", "x=span.x"))
    assert pages.requests("/r")[0][1:3] == (None, None), "validators sent under other rules"
    r = second.records[0]
    assert r["http_status"] == 200 and r["fields"] == {"x": "X value"}
    # Same content, other rules: the page did not change.
    assert r["unchanged"] is True
    # The new rules' answer is stored now: the same rules again get a 304 with those fields.
    pages.clear()
    third = run_harvestd([url], *state_args(tmp_path, "--extract", "x=span.x"))
    assert third.records[0]["not_modified"] is True
    assert third.records[0]["fields"] == {"x": "X value"}
    # And title-only runs are a rule set of their own.
    pages.clear()
    fourth = run_harvestd([url], *state_args(tmp_path))
    assert pages.requests("/r")[0][1] is None and "fields" not in fourth.records[0]


def test_95_05_no_store_keeps_a_response_out_of_the_store(run_harvestd, pages, tmp_path):
    pages.put("/private", "Secret", headers=["Cache-Control: private, no-store"])
    pages.put("/later", "Stored first")
    pages.put("/split", "Split header", headers=["Cache-Control: max-age=60",
                                                 "Cache-Control: No-Store"])
    urls = [pages.url("/private"), pages.url("/later"), pages.url("/split")]
    run_harvestd(urls, *state_args(tmp_path))
    # /later now says no-store (on its 304): its stored entry goes.
    pages.set_headers("/later", ["Cache-Control: no-store"])
    pages.clear()
    second = run_harvestd(urls, *state_args(tmp_path))
    sent = {p: inm for p, inm, _, _ in pages.requests()}
    assert sent["/private"] is None and sent["/split"] is None
    assert sent["/later"] is not None  # still stored before this answer
    assert by_requested(second.records)[urls[1]]["not_modified"] is True
    pages.clear()
    run_harvestd(urls, *state_args(tmp_path))
    assert all(inm is None for _, inm, _, _ in pages.requests()), pages.requests()


def test_95_06_recrawl_min_age_answers_from_the_store_without_requests(
        run_harvestd, pages, tmp_path):
    for i in range(20):
        pages.put("/p%d" % i, "Page %d" % i)
    urls = [pages.url("/p%d" % i) for i in range(20)]
    first = run_harvestd(urls, *state_args(tmp_path, "--extract", "h=h1.h"))
    assert first.rc == 0
    pages.clear()
    second = run_harvestd(urls + urls[:3],
                          *state_args(tmp_path, "--extract", "h=h1.h", "--recrawl-min-age", "1h"))
    assert second.rc == 0, second.stderr
    assert pages.requests() == [], "requests made although every entry is young enough"
    a = by_requested(first.records)
    assert len(second.records) == 23
    for r in second.records:
        f = a[r["requested_url"]]
        assert r["from_cache"] is True and r["status"] == "ok"
        for key in ("url", "title", "fields", "http_status", "bytes", "fetched_at",
                    "modified_at"):
            assert r[key] == f[key], key
    assert "from_cache=23" in second.stderr
    # Older than the minimum age: asked again.
    time.sleep(1.1)
    third = run_harvestd(urls[:2],
                         *state_args(tmp_path, "--extract", "h=h1.h", "--recrawl-min-age", "1s"))
    assert all(r.get("not_modified") for r in third.records), third.records


def test_95_07_validators_go_to_the_final_url_after_redirects(run_harvestd, pages, tmp_path):
    pages.put("/target", "Target")
    url = pages.url("/moved/target")
    first = run_harvestd([url], *state_args(tmp_path))
    assert first.records[0]["url"] == pages.url("/target")
    pages.clear()
    second = run_harvestd([url], *state_args(tmp_path))
    log = pages.requests()
    assert [(p, inm is not None) for p, inm, _, _ in log] == [("/moved/target", False),
                                                              ("/target", True)]
    r = second.records[0]
    assert r["not_modified"] is True and r["url"] == pages.url("/target")
    assert r["redirects"] == 1 and r["title"] == "Target"


def test_95_08_only_durable_records_reach_the_store(harvestd, pages, tmp_path, spool,
                                                     start_daemon):
    """The durability order: the output's fsync fails, so none of the written records is
    durable, and the store must hold none of them."""
    for i in range(30):
        pages.put("/d%d" % i, "Durable %d" % i)
    urls = [pages.url("/d%d" % i) for i in range(30)]
    state = tmp_path / "state"
    d = start_daemon(env=preload_env(HV_FAULT_FSYNC="EIO", HV_FAULT_FSYNC_PATH="/out/"),
                     recrawl="conditional", state_dir=str(state), fsync="always")
    spool.drop("d.txt", urls)
    deadline = time.monotonic() + 20 * SLOWDOWN
    while d.running() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert d.wait(timeout=5) == 1
    written = spool.records("d.txt", complete=False)
    assert written, "nothing was written before the failed fsync"
    pages.clear()
    check = harvestd.run(urls, *RECRAWL, "--state-dir", str(state))
    assert check.rc == 0
    leaked = [p for p, inm, ims, _ in pages.requests() if inm or ims]
    assert leaked == [], "stored without a durable record: %r" % leaked


def test_95_09_killed_daemon_never_stores_what_it_did_not_write(harvestd, pages, tmp_path,
                                                                 spool, start_daemon):
    """SIGKILL at random moments while records and store commits interleave: every URL the
    store knows has its ok record in the output that survived."""
    seed = int(os.environ.get("HARVESTD_TEST_SEED", random.randrange(1 << 30)))
    print("seed", seed)
    rnd = random.Random(seed)
    n = 400
    for i in range(n):
        pages.put("/k%d" % i, "Killed %d" % i)
    urls = [pages.url("/k%d" % i) for i in range(n)]
    state = tmp_path / "state"
    d = start_daemon(recrawl="conditional", state_dir=str(state), fsync="interval",
                     fsync_interval="30ms", concurrency=8)
    spool.drop("k.txt", urls)
    time.sleep(rnd.uniform(0.05, 0.4))
    d.kill()
    durable = {r["requested_url"] for r in spool.records("k.txt", complete=False)
               if r["status"] == "ok"}
    pages.clear()
    check = harvestd.run(urls, *RECRAWL, "--state-dir", str(state))
    assert check.rc == 0
    stored = {pages.url(p) for p, inm, ims, _ in pages.requests() if inm or ims}
    assert stored <= durable, "stored without a record: %r" % sorted(stored - durable)[:5]
    print("durable", len(durable), "stored", len(stored))


def test_95_10_a_full_store_stops_storing_and_the_batch_completes(run_harvestd, pages,
                                                                  tmp_path):
    n = 300
    big = "x" * 8000
    for i in range(n):
        pages.put("/f%d" % i, "Full %d" % i, extra=big)
    urls = [pages.url("/f%d" % i) for i in range(n)]
    run = run_harvestd(urls, *state_args(tmp_path, "--extract", "p=p", "--state-max-bytes",
                                         "1m"))
    assert run.rc == 0, run.stderr
    assert len(run.records) == n and all(r["status"] == "ok" for r in run.records)
    warnings = [l for l in run.stderr.splitlines() if "state_store_full" in l]
    assert len(warnings) == 1, run.stderr
    assert str(tmp_path / "state") in warnings[0]
    # What was stored before it filled up still serves.
    pages.clear()
    again = run_harvestd(urls, *state_args(tmp_path, "--extract", "p=p", "--state-max-bytes",
                                           "1m"))
    assert again.rc == 0
    nm = sum(1 for r in again.records if r.get("not_modified"))
    assert 0 < nm < n, nm


def test_95_11_a_corrupt_store_is_a_start_up_error_naming_it(run_harvestd, harvestd, pages,
                                                            tmp_path):
    pages.put("/c", "C")
    state = tmp_path / "state"
    run_harvestd([pages.url("/c")], *state_args(tmp_path))
    with open(state / "data.mdb", "r+b") as f:
        f.write(os.urandom(8192))
    pages.clear()
    bad = run_harvestd([pages.url("/c")], *state_args(tmp_path), parse=False)
    assert bad.rc == 2, bad.stderr
    assert str(state) in bad.stderr and "delete" in bad.stderr, bad.stderr
    assert pages.requests() == []
    # Discarding it as the message says starts afresh.
    os.unlink(state / "data.mdb")
    os.unlink(state / "lock.mdb")
    good = run_harvestd([pages.url("/c")], *state_args(tmp_path))
    assert good.rc == 0 and good.records[0]["http_status"] == 200


def test_95_12_once_needs_a_state_dir(harvestd, pages):
    res = harvestd.command("--once", "/dev/null", "-o", "-", "--recrawl", "conditional")
    assert res.returncode == 2 and "--state-dir" in res.stderr


def test_95_13_two_daemons_share_one_store(harvestd, pages, tmp_path):
    from harness import Spool
    state = tmp_path / "shared-state"
    n = 60
    for i in range(2 * n):
        pages.put("/s%d" % i, "Shared %d" % i)
    lists = [[pages.url("/s%d" % i) for i in range(k * n, (k + 1) * n)] for k in (0, 1)]
    spools, daemons = [], []
    for k in (0, 1):
        sp = Spool(tmp_path / ("spool%d" % k))
        cfg = harvestd.daemon_config(sp.root, {"recrawl": "conditional",
                                               "state_dir": str(state)})
        d = harvestd.start_daemon(cfg)
        d.wait_ready()
        spools.append(sp)
        daemons.append(d)
    for k in (0, 1):
        spools[k].drop("l%d.txt" % k, lists[k])
    for k in (0, 1):
        wait_complete(daemons[k], spools[k], ["l%d.txt" % k], timeout=20)
    for k, d in enumerate(daemons):
        summary = json.loads(open(spools[k].summary_path("l%d.txt" % k)).read())
        assert summary["recrawl"] == {"not_modified": 0, "unchanged": 0, "from_cache": 0}
        d.send_signal(signal.SIGTERM)
        assert d.wait(timeout=20) == 0
    pages.clear()
    both = harvestd.run(lists[0] + lists[1], *RECRAWL, "--state-dir", str(state))
    assert both.rc == 0
    assert sum(1 for r in both.records if r.get("not_modified")) == 2 * n


def test_95_14_state_command_reads_what_a_run_stored(run_harvestd, harvestd, pages, tmp_path):
    pages.put("/cmd", "Command", headers=["Cache-Control: max-age=120"])
    url = pages.url("/cmd")
    first = run_harvestd([url], *state_args(tmp_path, "--extract", "h=h1.h"))
    assert first.rc == 0
    state = str(tmp_path / "state")
    got = harvestd.command("state", "--state-dir", state, "get", url)
    assert got.returncode == 0, got.stderr
    e = json.loads(got.stdout)
    assert e["url"] == url and e["etag"] == pages.pages["/cmd"]["etag"]
    assert e["title"] == "Command" and e["fields"] == {"h": "Command"}
    assert e["http_status"] == 200 and e["max_age"] == 120
    assert e["fetched_at"] == first.records[0]["fetched_at"]
    assert e["body_hash"].startswith("xxh3-128:") and len(e["body_hash"]) == 41
    stats = harvestd.command("state", "--state-dir", state, "--json", "stats")
    assert json.loads(stats.stdout)["entries"] == 1
    # Forgotten: the next request is unconditional.
    assert harvestd.command("state", "--state-dir", state, "forget", url).returncode == 0
    pages.clear()
    run_harvestd([url], *state_args(tmp_path, "--extract", "h=h1.h"))
    assert pages.requests("/cmd")[0][1] is None
    pruned = harvestd.command("state", "--state-dir", state, "--json", "prune",
                              "--older-than", "0s")
    assert json.loads(pruned.stdout) == {"pruned": 1, "entries": 0}


def scrape_metrics(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_95_15_daemon_counts_what_re_crawling_saved(start_daemon, spool, pages, tmp_path):
    from origin import free_port
    n = 12
    for i in range(n):
        pages.put("/m%d" % i, "Metric %d" % i)
    pages.put("/m-cc", "Cached", headers=["Cache-Control: no-store"])
    urls = [pages.url("/m%d" % i) for i in range(n)] + [pages.url("/m-cc")]
    port = free_port()
    d = start_daemon(recrawl="conditional", metrics_listen="127.0.0.1:%d" % port)
    spool.drop("first.txt", urls)
    wait_complete(d, spool, ["first.txt"], timeout=20)
    # Commits follow durability, within the store's commit delay.
    d.poll_until(lambda: scrape_metrics(port)["harvestd_store_entries_written_total"] >= n, 10,
                 "the store's commit")
    m = scrape_metrics(port)
    assert m["harvestd_store_entries"] == n, m
    assert m["harvestd_store_entries_written_total"] == n
    assert m["harvestd_store_entries_not_stored_total"] == 1  # the no-store page
    assert m["harvestd_store_bytes"] > 0 and m["harvestd_store_max_bytes"] == 1 << 30
    assert m["harvestd_recrawl_not_modified_total"] == 0
    first_bytes = m["harvestd_downloaded_bytes_total"]
    # Under the spool's state/ directory by default.
    assert os.path.exists(spool.path("state", "data.mdb"))
    pages.put("/m0", "Metric 0, changed")
    spool.drop("second.txt", urls)
    wait_complete(d, spool, ["second.txt"], timeout=20)
    m = scrape_metrics(port)
    assert m["harvestd_recrawl_not_modified_total"] == n - 1, m
    assert m["harvestd_recrawl_conditional_total"] == n
    body = len(pages.pages["/m1"]["body"])
    assert m["harvestd_recrawl_body_bytes_avoided_total"] >= (n - 1) * (body - 2)
    assert m["harvestd_recrawl_requests_avoided_total"] == 0
    assert m["harvestd_store_full"] == 0 and m["harvestd_store_commit_errors_total"] == 0
    # The 304s brought no body: only the changed page and the no-store one count as
    # downloaded again.
    assert m["harvestd_downloaded_bytes_total"] == \
        first_bytes + len(pages.pages["/m0"]["body"]) + len(pages.pages["/m-cc"]["body"])
    summary = json.loads(open(spool.summary_path("second.txt")).read())
    assert summary["recrawl"] == {"not_modified": n - 1, "unchanged": 0, "from_cache": 0}
    recs = spool.records("second.txt")
    assert sum(1 for r in recs if r.get("not_modified")) == n - 1
    assert d.stop() == 0


def test_95_16_a_damaged_store_is_a_start_up_error_not_a_crash(run_harvestd, start_daemon, pages,
                                                                tmp_path):
    """data.mdb cut short (LMDB would die of SIGBUS at the first lookup that reaches a page past
    its end, at every restart) or a wrong root page (an LMDB assertion): the daemon and --once
    refuse to start, exit 2, naming the directory and what is wrong; no request is made."""
    n = 150
    for i in range(n):
        pages.put("/t%d" % i, "Cut %d" % i, extra="y" * 600)
    urls = [pages.url("/t%d" % i) for i in range(n)]
    state = tmp_path / "state"
    first = run_harvestd(urls, *state_args(tmp_path))
    assert first.rc == 0, first.stderr
    data = state / "data.mdb"
    sound = data.read_bytes()
    page = lmdb_meta(data, 0)["page_size"]
    assert len(sound) > 20 * page

    def cut():
        data.write_bytes(sound[:len(sound) // 2 // page * page])

    def bad_root():
        data.write_bytes(sound)
        lmdb_set_meta(data, lmdb_newest(data), main_root=1)

    for damage, what in ((cut, "cut short"), (bad_root, "names page 1 as the root")):
        damage()
        pages.clear()
        bad = run_harvestd(urls, *state_args(tmp_path), parse=False)
        assert bad.rc == 2, bad.stderr
        line = [l for l in bad.stderr.splitlines() if "state store" in l]
        assert len(line) == 1, bad.stderr
        assert "the state store %s is damaged (" % state in line[0] and what in line[0], line
        assert "delete %s/data.mdb and %s/lock.mdb" % (state, state) in line[0], line
        d = start_daemon(recrawl="conditional", state_dir=str(state), ready=False)
        assert d.wait(timeout=15) == 2
        assert "the state store %s is damaged (" % state in d.stderr_text(), d.stderr_text()
        assert pages.requests() == []
    # Sound again, it serves as before.
    data.write_bytes(sound)
    again = run_harvestd(urls[:5], *state_args(tmp_path))
    assert again.rc == 0 and all(r.get("not_modified") for r in again.records), again.records


def test_95_17_a_failed_lookup_sets_the_store_aside_and_the_batch_completes(
        run_harvestd, start_daemon, spool, pages, tmp_path, harvestd):
    """A leaf page of the store zeroed: the checks at open cannot see it, and LMDB fails the
    lookups that reach it (MDB_CORRUPTED). The daemon warns once, counts it with the failed
    transactions, looks up and stores nothing more, and the batch completes with every record
    ok; `state verify` finds the damage."""
    from origin import free_port
    n = 150
    for i in range(n):
        pages.put("/l%d" % i, "Lookup %d" % i, extra="z" * 600)
    urls = [pages.url("/l%d" % i) for i in range(n)]
    state = tmp_path / "state"
    assert run_harvestd(urls, *state_args(tmp_path)).rc == 0
    data = state / "data.mdb"
    lmdb_damage_page(data, lmdb_leaf_pages(data)[len(lmdb_leaf_pages(data)) // 2], "zero")
    port = free_port()
    d = start_daemon(recrawl="conditional", state_dir=str(state),
                     metrics_listen="127.0.0.1:%d" % port)
    pages.clear()
    spool.drop("l.txt", urls)
    wait_complete(d, spool, ["l.txt"], timeout=30)
    recs = spool.records("l.txt")
    assert len(recs) == n and all(r["status"] == "ok" for r in recs)
    failed = d.events("state_store_failed")
    assert len(failed) == 1, d.stderr_text()
    assert failed[0]["dir"] == str(state) and failed[0]["during"] == "lookup", failed
    # The lookups before the failure (none, when the first read meets the page: lookups go
    # by batches of jobs) were answered 304; after it, every fetch was unconditional.
    conditional = [p for p, inm, ims, _ in pages.requests() if inm or ims]
    assert len(conditional) < n
    assert sum(1 for r in recs if r.get("not_modified")) == len(conditional)
    m = scrape_metrics(port)
    assert m["harvestd_store_commit_errors_total"] == 1
    assert m["harvestd_store_full"] == 0
    assert m["harvestd_store_entries_written_total"] == 0
    assert m["harvestd_store_entries_not_stored_total"] == n
    assert d.stop() == 0
    r = harvestd.command("state", "--state-dir", state, "verify")
    assert r.returncode == 1 and r.stdout.startswith("damaged entries_walked="), r.stdout


@pytest.fixture
def small_state(tmp_path, harvestd):
    """tmp_path/state on a 192 KiB tmpfs (root only, as test_64's small_out); unmounted after
    the test, once its daemons are gone."""
    from harness import small_tmpfs
    with small_tmpfs(tmp_path / "state", "192k", harvestd) as state:
        yield state


def test_95_18_a_full_disk_under_the_store_is_a_full_store(start_daemon, spool, pages,
                                                            small_state):
    """The disk under state_dir fills up (LMDB's writes fail with ENOSPC, or a short write that
    LMDB reports as EIO): logged once as a full store naming the directory and the cause,
    harvestd_store_full 1 (as when state_max_bytes is reached), not a failed store; the
    batch completes with every record ok and what was stored still serves."""
    from origin import free_port
    n = 120
    for i in range(n):
        pages.put("/d%d" % i, "Disk %d %s" % (i, "w" * 3000))
    urls = [pages.url("/d%d" % i) for i in range(n)]
    port = free_port()
    d = start_daemon(recrawl="conditional", state_dir=str(small_state),
                     metrics_listen="127.0.0.1:%d" % port)
    spool.drop("d.txt", urls)
    wait_complete(d, spool, ["d.txt"], timeout=30)
    d.poll_until(lambda: scrape_metrics(port)["harvestd_store_full"] == 1, 10,
                 "the store to fill the disk")
    recs = spool.records("d.txt")
    assert len(recs) == n and all(r["status"] == "ok" for r in recs)
    full = d.events("state_store_full")
    assert len(full) == 1, d.stderr_text()
    assert full[0]["dir"] == str(small_state) and full[0]["cause"] == "no_space_on_device", full
    assert d.events("state_store_failed") == [], d.stderr_text()
    m = scrape_metrics(port)
    assert m["harvestd_store_commit_errors_total"] == 1
    stored = m["harvestd_store_entries_written_total"]
    assert 0 < stored < n
    assert stored + m["harvestd_store_entries_not_stored_total"] == n
    print("stored", stored, "of", n)
    # What was stored before the disk filled serves the next batch (lookups go on).
    pages.clear()
    spool.drop("again.txt", urls)
    wait_complete(d, spool, ["again.txt"], timeout=30)
    assert sum(1 for r in spool.records("again.txt") if r.get("not_modified")) == stored
    assert d.stop() == 0


def test_95_19_an_etag_in_latin_1_is_sent_back_as_it_came_and_shown_as_json(
        run_harvestd, harvestd, pages, tmp_path):
    """A server's ETag with a byte that is not UTF-8 (obs-text): stored as it came and sent
    back byte for byte (the server answers 304), while `state get` shows it as valid JSON."""
    pages.put("/latin", "Latin")
    with pages.lock:
        pages.pages["/latin"]["etag"] = '"caf\xe9-1"'  # sent as the byte 0xe9
    url = pages.url("/latin")
    assert run_harvestd([url], *state_args(tmp_path)).rc == 0
    r = subprocess.run([HARVESTD_BIN, "state", "--state-dir", str(tmp_path / "state"), "get",
                        url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=harvestd.env,
                       timeout=30 * SLOWDOWN)
    check_sanitizer(r.stderr.decode("utf-8", "replace"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.decode("utf-8"))["etag"] == '"caf\ufffd-1"'
    pages.clear()
    again = run_harvestd([url], *state_args(tmp_path))
    assert pages.requests("/latin")[0][1] == '"caf\xe9-1"'
    assert again.records[0]["not_modified"] is True, again.records
