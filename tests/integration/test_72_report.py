"""`harvestd report`: an output summed up as one HTML page.

A real output (harvestd --once against a local origin: ok pages of many sizes, slow pages,
HTTP errors, a page without a title, a refused port, input errors), with lines no harvestd
wrote appended (not JSON, members of the wrong type, a record full of markup, a line past the
length limit, a last line cut short), is reported on; the page is rendered by headless
Chromium (file:// only, every host name unresolvable, a throwaway profile, no process left
behind) and the numbers of the rendered page are checked against counts the test takes from
the JSONL file itself; a screenshot is kept as BUILD/report.png (BUILD: the directory of
HARVESTD_BIN). Then the command line and exit statuses, and memory on a 200,000-line output.

Chromium runs, where the test may make namespaces (root, as `make check` runs), in network
and PID namespaces of its own: no network at all but a loopback that is down, and every
process it starts ends with it. Elsewhere its flags alone keep it off the network.
"""

import html.parser
import json
import os
import random
import re
import signal
import shutil
import subprocess
import time
import urllib.parse

import pytest

from harness import HARVESTD_BIN, SANITIZER, SLOWDOWN, check_sanitizer

CHROMIUM = "/usr/bin/chromium"
# Network and PID namespaces (the first process's end stops the others), with their own /proc.
UNSHARE = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--"]
LINE_MAX = 32 << 20  # HV_REPORT_LINE_MAX (HV_RECORD_LINE_MAX)
TIME_EDGES = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000]
SIZE_EDGES = [1024 << i for i in range(21)]
INT_MAX = (1 << 53) - 1
STRING_FIELDS = ("requested_url", "url", "title", "stage", "error_type", "error", "fetched_at")
INT_FIELDS = {"http_status": 999, "bytes": INT_MAX, "elapsed_ms": INT_MAX}
SUMMARY_RE = re.compile(r"^harvestd: report (.*): (\d+) records? \((\d+) ok, (\d+) failed\), "
                        r"(\d+) unreadable lines?, (\d+) hosts?( and more)?$", re.M)


# ---------------------------------------------------------------------------- the file's counts


def _reject_constant(name):
    raise ValueError("not JSON: " + name)


def classify(line):
    """What harvestd report should make of one line (bytes, no newline): ("record", rec) or
    (reason, None), by the rules of include/harvestd/report.h."""
    if len(line) > LINE_MAX:
        return "too-long", None
    if not line.strip(b" \t\r"):
        return "empty", None
    try:
        value = json.loads(line.decode("utf-8", "surrogateescape"), parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return "not-json", None
    if not isinstance(value, dict):
        return "not-object", None
    if not isinstance(value.get("requested_url"), str) or value.get("status") not in ("ok", "failed"):
        return "bad-field", None
    for k in STRING_FIELDS:
        if k in value and not isinstance(value[k], str):
            return "bad-field", None
    for k, top in INT_FIELDS.items():
        if k in value:
            v = value[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not 0 <= v <= top:
                return "bad-field", None
            value[k] = int(v)
    return "record", value


def host_of(url):
    """The host a URL is counted under (hv_report_host_of())."""
    m = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)", url)
    if not m:
        return ""
    host = m.group(1).rpartition("@")[2]
    return host.lower() if 0 < len(host) <= 300 else ""


def bucket(edges, v):
    return sum(1 for e in edges if v >= e)


class Counts:
    """Everything the page shows, counted from the file in Python."""

    def __init__(self, data):
        lines = data.split(b"\n")
        last_cut = not data.endswith(b"\n")
        if not last_cut:
            lines = lines[:-1]
        self.records = []
        self.reasons = {}
        for i, line in enumerate(lines):
            why, rec = classify(line)
            if why == "not-json" and last_cut and i == len(lines) - 1:
                why = "cut"
            if rec is not None:
                self.records.append(rec)
            else:
                self.reasons[why] = self.reasons.get(why, 0) + 1
        recs = self.records
        self.ok = sum(1 for r in recs if r["status"] == "ok")
        self.failed = len(recs) - self.ok
        self.unreadable = sum(self.reasons.values())
        self.error_types, self.groups, self.http, self.hosts = {}, {}, {}, {}
        self.time_hist, self.size_hist = {}, {}
        for r in recs:
            bad = r["status"] == "failed"
            if bad:
                t = r.get("error_type", "")
                self.error_types[t] = self.error_types.get(t, 0) + 1
                key = (t, r.get("error", ""))
                self.groups[key] = self.groups.get(key, 0) + 1
            if "http_status" in r:
                self.http[r["http_status"]] = self.http.get(r["http_status"], 0) + 1
            h = self.hosts.setdefault(host_of(r["requested_url"]), [0, 0, 0])
            h[0] += 1
            h[2 if bad else 1] += 1
            if "elapsed_ms" in r:
                b = self.time_hist.setdefault(([0] + TIME_EDGES)[bucket(TIME_EDGES, r["elapsed_ms"])], [0, 0])
                b[bad] += 1
            if "bytes" in r:
                b = self.size_hist.setdefault(([0] + SIZE_EDGES)[bucket(SIZE_EDGES, r["bytes"])], [0, 0])
                b[bad] += 1


# ---------------------------------------------------------------------------- the rendered page


class Element:
    def __init__(self, tag, attrs):
        self.tag = tag
        self.attrs = dict(attrs)
        self.parts = []

    @property
    def text(self):
        return "".join(self.parts)


class Dom(html.parser.HTMLParser):
    """Every element of a page with its attributes and its text (that of its descendants
    included)."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "area", "base", "col", "embed", "source",
            "track", "wbr"}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.stack = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        e = Element(tag, attrs)
        self.elements.append(e)
        if tag not in self.VOID:
            self.stack.append(e)

    def handle_startendtag(self, tag, attrs):
        self.elements.append(Element(tag, attrs))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        for e in self.stack:
            e.parts.append(data)

    def find(self, tag=None, **attrs):
        out = []
        for e in self.elements:
            if tag is not None and e.tag != tag:
                continue
            if all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                out.append(e)
        return out

    def one(self, tag=None, **attrs):
        found = self.find(tag, **attrs)
        assert len(found) == 1, "%d elements %s %r in the page" % (len(found), tag, attrs)
        return found[0]

    def children_text(self, row, tag="td"):
        """The texts of the cells of `row` (a <tr>), in order."""
        i = self.elements.index(row)
        cells = []
        for e in self.elements[i + 1:]:
            if e.tag == "tr":
                break
            if e.tag == tag:
                cells.append(e.text.strip())
        return cells


def number(text):
    """A count as the page writes it ("12,345")."""
    assert re.fullmatch(r"\d{1,3}(,\d{3})*", text), "not a count: %r" % text
    return int(text.replace(",", ""))


def session_pids(sid, marker):
    """Processes of session `sid`, or whose command line holds `marker`."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d, "rb") as f:
                stat = f.read()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        fields = stat.rpartition(b")")[2].split()
        if fields and fields[0] == b"Z":
            continue
        if (len(fields) > 3 and int(fields[3]) == sid) or marker.encode() in cmdline:
            pids.append(int(d))
    return pids


_namespaces = None


def namespaces():
    """UNSHARE when this process may make the namespaces, else []."""
    global _namespaces
    if _namespaces is None:
        _namespaces = []
        if shutil.which("unshare"):
            try:
                probe = subprocess.run(UNSHARE + ["true"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, timeout=30)
                if probe.returncode == 0:
                    _namespaces = UNSHARE
            except (OSError, subprocess.TimeoutExpired):
                pass
    return _namespaces


def run_chromium(tmp_path, page, *args):
    """Run headless Chromium on file://`page` with `args`; returns its stdout. Nothing but that
    file is loaded: no network namespace where one can be made, and no proxy, no host name
    that resolves and background services off in any case; a profile of its own under
    tmp_path. Every process it started is gone when this returns."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail("%s is missing: `make deps` installs it (third_party/packages.txt)" % CHROMIUM)
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    argv = namespaces() + [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-proxy-server",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-default-apps",
            "--disable-extensions", "--disable-domain-reliability", "--disable-breakpad",
            "--no-first-run", "--no-default-browser-check", "--metrics-recording-only",
            "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
            "--hide-scrollbars", "--mute-audio", "--user-data-dir=%s" % profile]
    argv += list(args) + ["file://" + str(page)]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(HOME=str(profile), XDG_CONFIG_HOME=str(profile / "config"),
               XDG_CACHE_HOME=str(profile / "cache"))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=180 * SLOWDOWN)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail("chromium did not finish: %s" % err.decode(errors="replace")[-3000:])
    finally:
        deadline = time.monotonic() + 10
        while True:
            left = session_pids(proc.pid, str(profile))
            if not left:
                break
            if time.monotonic() > deadline:
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                if time.monotonic() > deadline + 5:
                    pytest.fail("chromium processes %r outlived it" % left)
            time.sleep(0.1)
    assert proc.returncode == 0, "chromium exited %d: %s" % (proc.returncode,
                                                            err.decode(errors="replace")[-3000:])
    return out.decode("utf-8")


# ---------------------------------------------------------------------------- tests


def report(harvestd, *args, timeout=120):
    done = harvestd.command("report", *args, timeout=timeout)
    return done


def page_checks(dom, counts, source):
    """The rendered page against the counts of the file."""
    # No element the page did not write itself; the markup of the file is text.
    assert not dom.find("script") and not dom.find("img") and not dom.find("iframe")
    assert not dom.find("b"), "a tag from the file became an element"
    assert dom.find("title")[0].text == "harvestd report: " + source
    assert dom.one(id="source").text == source

    for key, want in (("records", len(counts.records)), ("ok", counts.ok),
                      ("failed", counts.failed), ("unreadable", counts.unreadable),
                      ("hosts", len(counts.hosts))):
        card = dom.one("div", data_total=key)
        assert int(card.attrs["data-n"]) == want, (key, card.attrs, want)
        shown = [e for e in dom.find("div") if e.attrs.get("class") == "v"
                 and dom.elements.index(e) > dom.elements.index(card)][0]
        assert number(shown.text) == want, (key, shown.text, want)

    types = {e.attrs["data-error-type"]: e for e in dom.elements
             if e.tag == "tr" and "data-error-type" in e.attrs and "data-error" not in e.attrs}
    assert set(types) == set(counts.error_types), (sorted(types), counts.error_types)
    for name, n in counts.error_types.items():
        cells = dom.children_text(types[name])
        assert cells[0] == (name or "(none)") and number(cells[1]) == n, (name, cells, n)

    http_rows = {int(e.attrs["data-http-status"]): e for e in dom.find("tr")
                 if "data-http-status" in e.attrs}
    assert set(http_rows) == set(counts.http)
    for code, n in counts.http.items():
        assert number(dom.children_text(http_rows[code])[1]) == n, (code, n)

    host_rows = {e.attrs["data-host"]: e for e in dom.find("tr") if "data-host" in e.attrs}
    assert set(host_rows) == set(counts.hosts), (sorted(host_rows), sorted(counts.hosts))
    for host, (req, ok, failed) in counts.hosts.items():
        cells = dom.children_text(host_rows[host])
        assert cells[0] == (host or "(no host)"), cells
        assert (number(cells[1]), number(cells[2]), number(cells[5])) == (req, ok, failed), \
            (host, cells, (req, ok, failed))
    assert not dom.find("tr", data_other_hosts="1")

    group_rows = {(e.attrs["data-error-type"], e.attrs["data-error"]): e for e in dom.find("tr")
                  if "data-error" in e.attrs}
    assert group_rows.keys() == counts.groups.keys()
    for key, n in counts.groups.items():
        cells = dom.children_text(group_rows[key])
        assert number(cells[0]) == n and cells[1] == (key[0] or "(none)"), (key, cells, n)
        assert cells[2] == (key[1] or "(none)"), (key, cells)

    for svg_id, hist in (("time-histogram", counts.time_hist), ("size-histogram", counts.size_hist)):
        svg = dom.one("svg", id=svg_id)
        i = dom.elements.index(svg)
        shown = {}
        for e in dom.elements[i + 1:]:
            if e.tag == "svg":
                break
            if e.tag == "g" and e.attrs.get("class") == "bucket":
                n = [int(e.attrs["data-ok"]), int(e.attrs["data-failed"])]
                if n != [0, 0]:
                    shown[int(e.attrs["data-lo"])] = n
        assert shown == hist, (svg_id, shown, hist)

    timed = sorted((r["elapsed_ms"] for r in counts.records if "elapsed_ms" in r), reverse=True)
    slow = [int(e.attrs["data-value"]) for e in dom.find("tr") if "data-value" in e.attrs
            and dom.elements.index(e) > dom.elements.index(dom.one("section", id="slowest"))
            and dom.elements.index(e) < dom.elements.index(dom.one("section", id="largest"))]
    assert slow == timed[:20], (slow, timed[:20])
    sized = sorted((r["bytes"] for r in counts.records if "bytes" in r), reverse=True)
    large = [int(e.attrs["data-value"]) for e in dom.find("tr") if "data-value" in e.attrs
             and dom.elements.index(e) > dom.elements.index(dom.one("section", id="largest"))
             and dom.elements.index(e) < dom.elements.index(dom.one("section", id="failures"))]
    assert large == sized[:20], (large, sized[:20])

    reasons = {e.attrs["data-reason"]: int(e.attrs["data-count"]) for e in dom.find("tr")
               if "data-reason" in e.attrs}
    assert reasons == counts.reasons, (reasons, counts.reasons)


def test_72_01_report_of_a_real_run_rendered(harvestd, run_harvestd, fresh_origin, closed_port,
                                             tmp_path):
    o = fresh_origin
    sizes = [300, 1500, 4000, 9000, 20000, 45000, 90000, 200000, 420000, 700000]
    urls = [o.url("/page?title=P%d&size=%d" % (i, s)) for i, s in enumerate(sizes)]
    urls += [o.url("/page?title=Slow%d&delay=0.3" % i) for i in range(2)]
    urls += [o.url("/status/404?n=%d" % i) for i in range(3)] + [o.url("/status/503")] * 2
    urls += [o.url("/notitle?n=%d" % i) for i in range(2)]
    urls += ["http://127.0.0.1:%d/refused-%d" % (closed_port, i) for i in range(2)]
    urls += ["not a url", "ftp://files.test/x",
             o.url("/page?title=%3Cscript%3Ealert(1)%3C/script%3E%20%3Cb%3Ebold%3C/b%3E")]
    run = run_harvestd(urls)
    assert run.rc == 0, run.stderr
    assert len(run.records) == len(urls)
    real = open(run.out_path, "rb").read()
    statuses = {r["status"] for r in run.records}
    assert statuses == {"ok", "failed"}

    # Lines no harvestd wrote, after the run's.
    marked = {"requested_url": "http://evil.test/<script>alert(3)</script>", "status": "failed",
              "stage": "download", "error_type": "<img src=x onerror=alert(4)>",
              "error": "<script>alert(2)</script>", "elapsed_ms": 7}
    extra = [b"not json at all", json.dumps(marked).encode(),
             b'{"requested_url":"http://x.test/","status":"ok","bytes":"12"}', b"[1,2,3]", b"",
             b'{"requested_url":"' + b"a" * (LINE_MAX + 10) + b'","status":"ok"}']
    data = real + b"\n".join(extra) + b'\n{"requested_url":"http://cut'
    out = tmp_path / "run.jsonl"
    out.write_bytes(data)
    counts = Counts(data)
    assert counts.reasons == {"not-json": 1, "bad-field": 1, "not-object": 1, "empty": 1,
                              "too-long": 1, "cut": 1}
    assert len(counts.records) == len(urls) + 1

    done = report(harvestd, str(out))
    assert done.returncode == 0, done.stderr
    page = tmp_path / "run.report.html"
    m = SUMMARY_RE.search(done.stderr)
    assert m, done.stderr
    assert m.group(1) == str(page)
    assert [int(x) for x in m.group(2, 3, 4, 5, 6)] == [len(counts.records), counts.ok,
                                                       counts.failed, counts.unreadable,
                                                       len(counts.hosts)]
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]
    raw = page.read_text("utf-8")
    assert "<script" not in raw.lower()

    dom = Dom(run_chromium(tmp_path, page, "--dump-dom"))
    page_checks(dom, counts, str(out))
    text = dom.one("body").text
    assert "<script>alert(2)</script>" in text and "<img src=x onerror=alert(4)>" in text
    assert "<script>alert(1)</script> <b>bold</b>" in text  # the title, as text

    build = os.path.dirname(os.path.abspath(HARVESTD_BIN))
    shot = os.path.join(build, "report.png")
    if os.path.exists(shot):
        os.unlink(shot)
    run_chromium(tmp_path, page, "--screenshot=%s" % shot, "--window-size=1280,2000")
    with open(shot, "rb") as f:
        png = f.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30000, len(png)
    print("screenshot: %s (%d bytes)" % (shot, len(png)))


def test_72_02_command_line_and_exit_statuses(harvestd, tmp_path):
    rec = b'{"requested_url":"http://a.test/","status":"ok","elapsed_ms":5,"bytes":10}\n'
    src = tmp_path / "a.jsonl"
    src.write_bytes(rec * 3)

    # The input must be readable before anything is created.
    for args in (["missing.jsonl"], [str(tmp_path)], [str(src), "--top", "0"],
                 [str(src), "--hosts", "1001"], [str(src), "--nope"], [], [str(src), str(src)],
                 [str(src), "-o", ""], [str(src), "-o", "x", "-o", "y"]):
        before = sorted(os.listdir(tmp_path))
        done = report(harvestd, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("harvestd: "), done.stderr
        assert sorted(os.listdir(tmp_path)) == before, args

    # Never over the input itself, however it is named.
    for name in (str(src), os.path.join(str(tmp_path), ".", "a.jsonl")):
        done = report(harvestd, str(src), "-o", name)
        assert done.returncode == 2 and "would replace" in done.stderr, done.stderr
        assert src.read_bytes() == rec * 3

    done = report(harvestd, "--help")
    assert done.returncode == 0 and "usage: harvestd report" in done.stdout
    assert "harvestd report OUTPUT.jsonl" in harvestd.command("--help").stdout

    # The default name; an older page is replaced.
    page = tmp_path / "a.report.html"
    page.write_text("old")
    done = report(harvestd, str(src), "--top", "2", "--hosts", "1")
    assert done.returncode == 0, done.stderr
    assert "data-total=\"records\" data-n=\"3\"" in page.read_text()
    other = tmp_path / "plain"
    other.write_bytes(rec)
    assert report(harvestd, str(other)).returncode == 0
    assert (tmp_path / "plain.report.html").is_file()

    # Standard output, and standard input.
    done = report(harvestd, str(src), "-o", "-")
    assert done.returncode == 0 and done.stdout.startswith("<!DOCTYPE html>")
    assert "on standard output" in done.stderr
    argv = [HARVESTD_BIN, "report", "-"]
    piped = subprocess.run(argv, input=rec * 2, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60 * SLOWDOWN)
    check_sanitizer(piped.stderr.decode())
    assert piped.returncode == 0, piped.stderr
    assert b"data-total=\"records\" data-n=\"2\"" in piped.stdout
    assert b"<div class=\"file\" id=\"source\">standard input</div>" in piped.stdout

    # A page that cannot be written: 1, and nothing left behind.
    done = report(harvestd, str(src), "-o", str(tmp_path / "no-such-dir" / "p.html"))
    assert done.returncode == 1 and "cannot create" in done.stderr, done.stderr
    with open("/dev/full", "wb") as full:
        failed = subprocess.run([HARVESTD_BIN, "report", str(src), "-o", "-"], stdout=full,
                                stderr=subprocess.PIPE, timeout=60 * SLOWDOWN)
    check_sanitizer(failed.stderr.decode())
    assert failed.returncode == 1, failed.stderr
    assert b"cannot write standard output" in failed.stderr


def test_72_03_large_output_in_bounded_memory(harvestd, tmp_path):
    """200,000 records of 10,000 hosts and 3,000 kinds of error: past the bounds on hosts and
    failure groups, so the page says so, and the peak RSS stays a small fraction of the file."""
    if not os.access("/usr/bin/time", os.X_OK):
        pytest.fail("/usr/bin/time is missing: `make deps` installs it (package time)")
    rnd = random.Random(72)
    n, nhosts = 200000, 10000
    path = tmp_path / "big.jsonl"
    hosts_seen, groups_seen, failures = [], {}, 0
    host_requests = {}
    with open(path, "w") as f:
        for i in range(n):
            h = "h%d.test" % (i * 7919 % nhosts)
            if h not in host_requests:
                hosts_seen.append(h)
                host_requests[h] = 0
            host_requests[h] += 1
            url = "http://%s/%s/%d?q=%s" % (h, "section/" * 20, i, "x" * 60)
            if i % 3 == 0:
                err = "e%d" % (i // 3 * 7 % 3000)
                groups_seen.setdefault(err, 0)
                groups_seen[err] += 1
                failures += 1
                f.write('{"requested_url":"%s","url":"%s","status":"failed","http_status":503,'
                        '"elapsed_ms":%d,"stage":"download","error_type":"HttpStatus",'
                        '"error":"%s"}\n' % (url, url, rnd.randrange(5, 30000), err))
            else:
                f.write('{"requested_url":"%s","url":"%s","status":"ok","http_status":200,'
                        '"title":"Page %d of the big test output","bytes":%d,"elapsed_ms":%d,'
                        '"fetched_at":"2026-03-01T10:00:00.000Z"}\n'
                        % (url, url, i, rnd.randrange(100, 3 << 20), rnd.randrange(1, 9000)))
    size = os.path.getsize(path)
    rss_file = tmp_path / "rss"
    page = tmp_path / "big.html"
    argv = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file), HARVESTD_BIN, "report", str(path),
            "-o", str(page)]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=600 * SLOWDOWN)
    stderr = done.stderr.decode()
    check_sanitizer(stderr)
    assert done.returncode == 0, stderr
    maxrss_kib = int(rss_file.read_text().split()[-1])
    print("report of %d lines, %d bytes: peak RSS %d KiB" % (n, size, maxrss_kib))
    m = SUMMARY_RE.search(stderr)
    assert m and int(m.group(2)) == n and int(m.group(5)) == 0 and m.group(7), stderr
    assert int(m.group(6)) == 4096

    text = page.read_text()
    kept = hosts_seen[:4096]
    untold = sum(host_requests[h] for h in hosts_seen[4096:])
    shown = sorted(kept, key=lambda h: (-host_requests[h], h))[:50]
    other = re.search(r'<tr class="sum" data-other-hosts="1" data-requests="(\d+)"', text)
    assert other and int(other.group(1)) == n - sum(host_requests[h] for h in shown)
    assert "the %s records of hosts after them" % format(untold, ",") in text
    first_groups = list(groups_seen)[:1024]
    ungrouped = failures - sum(groups_seen[g] for g in first_groups)
    m = re.search(r'<tr class="sum" data-ungrouped="1" data-count="(\d+)">', text)
    assert m and int(m.group(1)) == ungrouped
    assert text.count("<tr data-line=") == 20 + 20  # slowest and largest
    if not SANITIZER:
        assert maxrss_kib * 1024 < size / 4, (maxrss_kib, size)
        assert maxrss_kib < 32 * 1024, maxrss_kib
