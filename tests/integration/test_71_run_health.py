"""Run health: the ratios a run is watched by (README, "Run health"). The --once summary line
and the daemon's summary file carry ok_ratio, the status codes, the mean and median size of the
ok pages, the requests per second and the hosts with the most failures; /metrics carries the
same figures for the last minute. The Grafana dashboard and the alerting rules in conf/ use only
metric names that a real daemon's scrape has, and promtool finds that scrape clean."""

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from harness import (MEDIAN_ERROR, SLOWDOWN, check_batch, check_median, host_key,
                     parse_records, wait_complete, wait_listening)
from origin import free_port
from test_70_observability import Metrics, get, start_once_with_metrics

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DASHBOARD = os.path.join(REPO, "conf", "grafana-dashboard.json")
ALERTS = os.path.join(REPO, "conf", "harvestd-alerts.yml")
PROMTOOL = os.environ.get("HARVESTD_PROMTOOL") or shutil.which("promtool") or ""

needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="promtool not installed (make deps installs prometheus)")

# The block detector's figures, which the dashboard and the rules use (README, "Run health").
BLOCK_METRICS = {"harvestd_block_hosts", "harvestd_block_verdicts_total",
                 "harvestd_block_probes_total", "harvestd_block_records_held"}

SIZES = [2000, 3000, 3500, 5000, 60000]


def run_urls(o, other, closed):
    """Five pages of SIZES and a 404 on `o`, two 503s on `other`, three URLs of a host that
    refuses connections, and a line that is no URL: 12 records, 5 ok, failing hosts 3/2/1."""
    urls = [o.url("/page?title=p%d&size=%d" % (i, n)) for i, n in enumerate(SIZES)]
    urls += [o.url("/status/404")]
    urls += [other.url("/status/503?n=%d" % i) for i in range(2)]
    urls += ["http://127.0.0.1:%d/down%d" % (closed, i) for i in range(3)]
    urls += ["not a url"]
    return urls


def want_top(o, other, closed):
    return [("http://127.0.0.1:%d" % closed, 3, "ConnectError"),
            (host_key(other.url("/")), 2, "HttpStatus"),
            (host_key(o.url("/")), 1, "HttpStatus")]


def parse_top(text):
    """"host(n,type);host(n,type)" of the summary line as [(host, n, type)]."""
    out = []
    for part in text.split(";"):
        m = re.match(r"^(\S+)\((\d+),(\w+)\)$", part)
        assert m, "bad top_failing_hosts entry %r in %r" % (part, text)
        out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def test_71_01_once_summary_shows_run_health(harvestd, fresh_origin, other_origin, closed_port):
    o, other = fresh_origin, other_origin
    urls = run_urls(o, other, closed_port)
    run = harvestd.run(urls)
    assert run.rc == 0, run.stderr
    assert len(run.records) == len(urls)
    s = run.summary
    assert s["records"] == 12 and s["ok"] == 5, s
    assert s["ok_ratio"] == 0.417, s
    assert s["http_statuses"] == "200:5,404:1,503:2", s
    sizes = sorted(r["bytes"] for r in run.records if r["status"] == "ok")
    assert sizes == SIZES
    assert s["ok_body_bytes_mean"] == sum(SIZES) // len(SIZES), s
    check_median(s["ok_body_bytes_median"], SIZES)
    # The requests the origins saw; the refused connections carried none.
    seen = len(o.snapshot()["requests"]) + len(other.snapshot()["requests"])
    assert seen == 8
    assert s["requests"] == seen, s
    assert abs(s["requests_per_s"] - s["requests"] / s["elapsed_s"]) <= 0.05 + s["requests_per_s"] * 0.02, s
    assert parse_top(s["top_failing_hosts"]) == want_top(o, other, closed_port), s


def test_71_02_once_requests_count_every_attempt(harvestd, fresh_origin):
    """Retries and redirect hops are requests too: requests/s counts what the sites see."""
    o = fresh_origin
    urls = [o.url("/redirect/3"), o.url("/status/503?r")]
    run = harvestd.run(urls, "--retries", "2", "--retry-base", "50ms")
    assert run.rc == 0, run.stderr
    by = {r["requested_url"]: r for r in run.records}
    assert by[urls[0]]["redirects"] == 3
    assert by[urls[1]]["attempts"] == 3
    assert len(o.snapshot()["requests"]) == 7
    assert run.summary["requests"] == 7, run.summary
    assert run.summary["records"] == 2
    assert run.summary["ok_ratio"] == 0.5
    assert parse_top(run.summary["top_failing_hosts"]) == [(host_key(o.url("/")), 1, "HttpStatus")]


def test_71_03_daemon_summary_file_has_run_health(start_daemon, spool, fresh_origin, other_origin,
                                                  closed_port):
    o, other = fresh_origin, other_origin
    d = start_daemon(retries="0", obey_robots="no")  # no robots.txt request refused first
    urls = run_urls(o, other, closed_port)
    data = spool.drop("h.txt", urls)
    wait_complete(d, spool, ["h.txt"], timeout=15)
    check_batch(spool, "h.txt", data)  # the summary against the records (harness)
    s = spool.summary("h.txt")
    assert s["ok_ratio"] == 0.417, s
    assert s["http_statuses"] == {"200": 5, "404": 1, "503": 2}, s
    assert s["ok_body_bytes_mean"] == sum(SIZES) // len(SIZES), s
    assert abs(s["ok_body_bytes_median"] - 3500) < 3500 * MEDIAN_ERROR, s
    assert s["requests"] == 8, s
    assert s["top_failing_hosts"] == [{"host": h, "failed": n, "error_type": t}
                                      for h, n, t in want_top(o, other, closed_port)], s
    # The whole summary is pretty-printed JSON whose new numbers print as written.
    text = open(spool.summary_path("h.txt"), encoding="utf-8").read()
    assert re.search(r'"ok_ratio":\s*0\.417,', text), text
    assert d.stop() == 0


def test_71_04_daemon_summary_of_an_empty_batch(start_daemon, spool):
    d = start_daemon()
    spool.drop("empty.txt", ["# nothing here", ""])
    wait_complete(d, spool, ["empty.txt"], timeout=10)
    s = spool.summary("empty.txt")
    assert s["records"] == 0
    assert s["ok_ratio"] is None and s["ok_body_bytes_median"] is None, s
    assert s["requests"] == 0 and s["top_failing_hosts"] == [], s
    assert d.stop() == 0


def test_71_05_metrics_last_minute(harvestd, fresh_origin, closed_port):
    """While a run holds its last request, /metrics shows the last minute's figures of what was
    written: records by status, the ok ratio, status classes, the sizes and requests/s; and the
    totals Prometheus computes ratios from."""
    o = fresh_origin
    urls = [o.url("/page?title=m%d&size=%d" % (i, n)) for i, n in enumerate(SIZES)]
    urls += [o.url("/status/404?m"), o.url("/status/503?m")]
    urls += ["http://127.0.0.1:%d/m" % closed_port]
    urls += [o.url("/hold?key=m&title=held&size=100000")]
    started = time.monotonic()
    proc, port = start_once_with_metrics(harvestd, urls, "--flush-ms", "20ms")
    proc.poll_until(lambda: len(proc.complete_lines()) == len(urls) - 1 and o.find_request("key=m"),
                    10, "every record but the held one")
    r = get(port)
    assert r.status == 200
    elapsed = time.monotonic() - started
    m = Metrics(r.body.decode("utf-8"))
    records = parse_records(proc.output_bytes())
    assert len(records) == len(urls) - 1

    assert m.int("harvestd_last_minute_records", status="ok") == 5
    assert m.int("harvestd_last_minute_records", status="failed") == 3
    assert abs(m.value("harvestd_last_minute_ok_ratio") - 5 / 8) < 1e-6
    for c, want in ((1, 0), (2, 5), (3, 0), (4, 1), (5, 1)):
        assert m.int("harvestd_last_minute_http_responses", **{"class": "%dxx" % c}) == want, m.text
    assert m.value("harvestd_last_minute_ok_body_bytes_mean") == sum(SIZES) / len(SIZES)
    check_median(m.value("harvestd_last_minute_ok_body_bytes_median"), SIZES)
    # The origin saw 7 requests (the held one's record is not written yet), over the seconds
    # since the process started (a whole number of them, no more than elapsed + 2).
    requests = len(o.snapshot()["requests"]) - 1
    assert requests == 7
    rps = m.value("harvestd_last_minute_requests_per_second")
    assert requests / (int(elapsed) + 2) - 1e-6 <= rps <= requests / max(1, int(elapsed) - 1) + 1e-6, \
        (rps, elapsed)
    assert m.int("harvestd_requests_total") == 8  # the held request was sent

    assert m.types["harvestd_ok_body_bytes"] == "histogram"
    assert m.int("harvestd_ok_body_bytes_count") == 5
    assert m.int("harvestd_ok_body_bytes_sum") == sum(SIZES)
    for le, want in (("1024", 0), ("4096", 3), ("16384", 4), ("65536", 5), ("+Inf", 5)):
        assert m.int("harvestd_ok_body_bytes_bucket", le=le) == want, m.text

    o.release("m")
    run = proc.wait(timeout=20)
    assert run.rc == 0


def test_71_06_metrics_last_minute_absent_values_without_records(harvestd, fresh_origin):
    """Before any record, the ratios have no value: the families are there, their samples not
    (a ratio of nothing is neither 0 nor 1)."""
    o = fresh_origin
    proc, port = start_once_with_metrics(harvestd, [o.url("/hold?key=z&title=z")])
    proc.poll_until(lambda: o.find_request("key=z"), 10, "the held request")
    m = Metrics(get(port).body.decode("utf-8"))
    for name in ("harvestd_last_minute_ok_ratio", "harvestd_last_minute_ok_body_bytes_mean",
                 "harvestd_last_minute_ok_body_bytes_median"):
        assert m.types.get(name) == "gauge", name
        assert not m.series(name), "%s has a value without records:\n%s" % (name, m.text)
    assert m.int("harvestd_last_minute_records", status="ok") == 0
    assert m.value("harvestd_last_minute_requests_per_second") == 0
    o.release("z")
    assert proc.wait(timeout=20).rc == 0


# ---------------------------------------------------------------------------- dashboard and rules


def dashboard_exprs():
    """Every PromQL expression of the dashboard: panel targets (rows included) and the
    variables' queries."""
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    assert dash.get("schemaVersion", 0) >= 36, dash.get("schemaVersion")
    names = [v["name"] for v in dash["templating"]["list"]]
    assert "datasource" in names, names
    ds = [v for v in dash["templating"]["list"] if v["name"] == "datasource"][0]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus", ds
    exprs = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                assert t.get("datasource", {}).get("uid") == "${datasource}", (p["title"], t)
                exprs.append(t["expr"])
    walk(dash["panels"])
    for v in dash["templating"]["list"]:
        q = v.get("query")
        if v["type"] == "query":
            exprs.append(q["query"] if isinstance(q, dict) else q)
    return exprs


def rules_exprs():
    yaml = pytest.importorskip("yaml")
    with open(ALERTS, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


METRIC_RE = re.compile(r"\bharvestd_[A-Za-z0-9_:]*")


def used_metrics():
    """{metric family: where} over the dashboard's and the rules' expressions; a histogram's
    _bucket, _sum and _count series count as their family."""
    used = {}
    for where, exprs in (("dashboard", dashboard_exprs()), ("rules", rules_exprs())):
        for e in exprs:
            for name in METRIC_RE.findall(e):
                used.setdefault(name, set()).add(where)
    return used


def scraped_families(m):
    """Names a query can use on this scrape: every family with a TYPE line (a gauge whose value
    is undefined now has no sample but is there), and a histogram's series names."""
    names = set(m.types)
    for name, kind in m.types.items():
        if kind == "histogram":
            names |= {name + "_bucket", name + "_sum", name + "_count"}
    names |= {k[0] for k in m.samples}
    return names


@pytest.fixture
def full_daemon(start_daemon, spool, redis_server, fresh_origin):
    """A daemon with every source and re-crawling on (so Redis and store figures exist), having
    completed one spool batch; yields its scrape's text."""
    port = free_port()
    d = start_daemon(source="spool, redis", redis_url=redis_server.url, redis_consumer="health",
                     recrawl="conditional", metrics_listen="127.0.0.1:%d" % port)
    wait_listening(port, d.running)
    o = fresh_origin
    spool.drop("f.txt", [o.url("/page?title=f%d&size=3000" % i) for i in range(3)]
               + [o.url("/status/404?f")])
    wait_complete(d, spool, ["f.txt"], timeout=15)
    assert len(spool.records("f.txt")) == 4
    d.poll_until(lambda: Metrics(get(port).body.decode()).value("harvestd_redis_up") == 1, 10,
                 "Redis up")
    text = get(port).body.decode("utf-8")
    yield text
    assert d.stop() == 0


def test_71_07_dashboard_and_rules_use_metrics_a_daemon_has(full_daemon):
    """Every harvestd_* name in the dashboard's and the rules' expressions is in a real scrape
    (the block detector's, checked apart below, excepted)."""
    m = Metrics(full_daemon)
    have = scraped_families(m)
    used = used_metrics()
    assert len(used) >= 15, sorted(used)
    # Names the rules are about must be there: the figures asked for.
    for name in ("harvestd_last_minute_ok_ratio", "harvestd_last_minute_ok_body_bytes_mean",
                 "harvestd_ok_body_bytes_sum", "harvestd_event_loop_lag_seconds",
                 "harvestd_redis_up", "harvestd_store_full", "harvestd_batches_active",
                 "harvestd_records_total", "harvestd_block_hosts"):
        assert name in used, "%s is used by neither the dashboard nor the rules" % name
    missing = {n: sorted(w) for n, w in used.items() if n not in have and n not in BLOCK_METRICS}
    assert not missing, "used but not on /metrics: %r" % missing


def test_71_08_block_detector_metrics_are_on_the_page(full_daemon):
    """The block detector's metrics, used by the dashboard and the rules, are on /metrics
    (and harvestd_record_errors_total has error_type="Blocked")."""
    m = Metrics(full_daemon)
    have = scraped_families(m)
    used = used_metrics()
    assert BLOCK_METRICS <= set(used), sorted(used)
    missing = sorted(BLOCK_METRICS - have)
    assert not missing, "the block detector's metrics are not on /metrics: %r" % missing
    assert ("error_type", "Blocked") in {l for k in m.series("harvestd_record_errors_total") for l in k}


@needs_promtool
def test_71_09_promtool_finds_a_real_scrape_clean(full_daemon, tmp_path):
    scrape = tmp_path / "scrape.txt"
    scrape.write_text(full_daemon, encoding="utf-8")
    with open(scrape, "rb") as f:
        p = subprocess.run([PROMTOOL, "check", "metrics"], stdin=f, capture_output=True, timeout=30)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), \
        "promtool check metrics:\n%s%s" % (p.stdout.decode(), p.stderr.decode())


@needs_promtool
def test_71_10_rules_and_dashboard_queries_are_valid_promql(tmp_path):
    """promtool checks the rules file, and every dashboard query (Grafana's variables replaced
    by values) as the expression of a recording rule."""
    p = subprocess.run([PROMTOOL, "check", "rules", ALERTS], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for i, e in enumerate(dashboard_exprs()):
        if e.startswith("label_values("):
            e = re.sub(r"^label_values\((\w+),\s*\w+\)$", r"\1", e)
        e = e.replace("$__rate_interval", "5m").replace("$instance", ".*")
        assert "$" not in e, e
        lines += ["      - record: dashboard:q%d" % i, "        expr: %s" % json.dumps(e)]
    rules = tmp_path / "dashboard-rules.yml"
    rules.write_text("\n".join(lines) + "\n", encoding="utf-8")
    p = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode() + rules.read_text()
