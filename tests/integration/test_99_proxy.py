"""Proxies: requests through a real tinyproxy on loopback (CONNECT for https, absolute-form
for http), with and without credentials (in the URL or in proxy_credentials_file), and the
failures of a proxy as ProxyError records."""

import os
import time

import pytest

from origin import BlackHole, free_port


def test_99_01_https_through_connect_and_http_in_absolute_form(
        run_harvestd, tinyproxy, tls_origin, origin, pki):
    proxy = tinyproxy()
    https = [tls_origin.url("/page?title=s%d" % i).replace("127.0.0.1", "localhost")
             for i in range(6)]
    http = [origin.url("/page?title=h%d" % i) for i in range(6)]
    run = run_harvestd(https + http, "--proxy", proxy.url(), "--ca-file", pki.ca_file,
                       "--per-host", "2")
    assert run.rc == 0, run.stderr
    assert len(run.records) == 12
    assert all(r["status"] == "ok" and r["proxy"] == "http://127.0.0.1:%d" % proxy.port
               for r in run.records), run.records
    lines = proxy.requests()
    connects = [l for l in lines if l.startswith("CONNECT localhost:")]
    gets = [l for l in lines if l.startswith("GET http://")]
    # The tunnels go to the origin's name: its certificate was checked against it.
    assert connects and all(l.startswith("CONNECT localhost:%d " % tls_origin.port)
                            for l in connects), lines
    assert len(connects) <= 2, connects  # kept alive: a tunnel per connection, not per page
    # http in absolute form, until tinyproxy shows that it keeps no connection (it closes
    # each after one answer): then through tunnels to the origin, which keep.
    assert gets and all(origin.url("/page") in l for l in gets), lines
    http_tunnels = [l for l in lines if l.startswith("CONNECT 127.0.0.1:%d " % origin.port)]
    assert len(gets) == 6 or http_tunnels, lines
    # The summary line counts the requests through each proxy (stale retries included).
    import re
    m = re.search(r" proxies=http://127\.0\.0\.1:%d\((\d+),0\)" % proxy.port, run.stderr)
    assert m and int(m.group(1)) >= 12, run.stderr


def test_99_02_credentials_are_sent_and_never_shown(run_harvestd, tinyproxy, tls_origin,
                                                     origin, pki):
    proxy = tinyproxy(user="crawler", password="s3cretpw")
    url = "http://crawler:%733cretpw@127.0.0.1:{}".format(proxy.port)  # percent-encoded "s"
    urls = [tls_origin.url("/page?title=a").replace("127.0.0.1", "localhost"),
            origin.url("/page?title=b")]
    run = run_harvestd(urls, "--proxy", url, "--ca-file", pki.ca_file, "-vv")
    assert run.rc == 0, run.stderr
    assert all(r["status"] == "ok" for r in run.records), run.records
    assert "3cretpw" not in run.stderr and all("3cretpw" not in str(r) for r in run.records)
    # Without them: 407, a ProxyError that is not retried.
    bare = "http://127.0.0.1:%d" % proxy.port
    run = run_harvestd(urls, "--proxy", bare, "--ca-file", pki.ca_file, "--retries", "2")
    assert run.rc == 0
    assert [(r["error_type"], r["error"], r["attempts"]) for r in run.records] == \
        [("ProxyError", "proxy_auth_required_407", 1)] * 2


def test_99_03_a_proxy_that_refuses_or_is_absent_is_a_proxy_error(run_harvestd, origin,
                                                                  closed_port):
    closed = closed_port  # nothing listens there
    run = run_harvestd([origin.url("/page?title=x")], "--proxy",
                       "http://127.0.0.1:%d" % closed, "--retries", "0")
    assert run.rc == 0
    r = run.records[0]
    assert (r["status"], r["error_type"], r["error"]) == \
        ("failed", "ProxyError", "proxy_connect_refused"), r
    assert r["proxy"] == "http://127.0.0.1:%d" % closed


def test_99_04_no_proxy_and_none_go_direct(run_harvestd, tinyproxy, origin, tmp_path):
    proxy = tinyproxy()
    conf = tmp_path / "p.conf"
    conf.write_text("proxy = %s\nno_proxy = localhost\n[host \"127.0.0.2\"]\nproxy = none\n"
                    % proxy.url())
    urls = [origin.url("/page?title=via"),
            "http://localhost:%d/page?title=direct" % origin.port]
    run = run_harvestd(urls, "-c", str(conf))
    assert run.rc == 0, run.stderr
    recs = {r["requested_url"]: r for r in run.records}
    assert recs[urls[0]]["proxy"].endswith(":%d" % proxy.port)
    assert "proxy" not in recs[urls[1]] and recs[urls[1]]["status"] == "ok"
    assert len(proxy.requests()) == 1
    # proxy = none in the host's own section, without no_proxy.
    conf.write_text("proxy = %s\n[host \"localhost\"]\nproxy = none\n" % proxy.url())
    run = run_harvestd(urls, "-c", str(conf))
    assert run.rc == 0, run.stderr
    recs = {r["requested_url"]: r for r in run.records}
    assert recs[urls[0]]["proxy"].endswith(":%d" % proxy.port)
    assert "proxy" not in recs[urls[1]] and recs[urls[1]]["status"] == "ok"
    assert len(proxy.requests()) == 2


def test_99_05_bad_proxy_urls_are_refused_with_file_and_line(harvestd, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("concurrency = 4\nproxy = ftp://user:hunter2@p:21\n")
    r = harvestd.command("--check-config", "-c", str(conf))
    assert r.returncode == 2
    assert "bad.conf:2" in r.stderr and "proxy" in r.stderr and "hunter2" not in r.stderr, \
        r.stderr
    assert "user:***@" in r.stderr


def test_99_06_socks5_with_and_without_credentials(run_harvestd, microsocks, tls_origin,
                                                    origin, pki):
    for user in (None, "crawler"):
        proxy = microsocks(user=user, password="s3cretpw" if user else None)
        urls = [tls_origin.url("/page?title=s").replace("127.0.0.1", "localhost"),
                "http://localhost:%d/page?title=h" % origin.port]
        run = run_harvestd(urls, "--proxy", proxy.url(), "--ca-file", pki.ca_file)
        assert run.rc == 0, run.stderr
        assert all(r["status"] == "ok" and r["proxy"] == "socks5://127.0.0.1:%d" % proxy.port
                   for r in run.records), run.records
        assert "3cretpw" not in run.stderr
    # Wrong credentials: the proxy says no.
    run = run_harvestd(urls[1:], "--proxy", "socks5://crawler:nope@127.0.0.1:%d" % proxy.port,
                       "--retries", "0")
    assert [(r["error_type"], r["error"]) for r in run.records] == \
        [("ProxyError", "socks_auth_failed")], run.records


def test_99_07_socks5h_needs_proxy_remote_dns(run_harvestd, harvestd, microsocks, origin,
                                              tmp_path):
    proxy = microsocks()
    url = "http://localhost:%d/page?title=remote" % origin.port
    conf = tmp_path / "h.conf"
    conf.write_text("proxy = %s\n" % proxy.url("socks5h"))
    r = harvestd.command("--check-config", "-c", str(conf))
    assert r.returncode == 2 and "h.conf:1" in r.stderr and "proxy_remote_dns" in r.stderr, \
        r.stderr
    run = run_harvestd([url], "-c", str(conf), "--proxy-remote-dns")
    assert run.rc == 0, run.stderr
    assert run.records[0]["status"] == "ok", run.records
    assert "event=proxy_remote_dns" in run.stderr


def test_99_08_the_guard_checks_a_socks5_target(run_harvestd, counting_socks, origin):
    """socks5: harvestd resolves the target and the guard judges its address: a target the
    guard refuses is refused even through an allowed proxy, and never reaches it."""
    proxy = counting_socks()
    run = run_harvestd(["http://127.0.0.2:%d/page?title=x" % origin.port],
                       "--proxy", proxy.url(), "--allow-addresses", "127.0.0.1/32")
    assert run.rc == 0
    r = run.records[0]
    assert (r["error_type"], r["error"]) == ("BlockedAddress", "blocked_loopback_address"), r
    assert proxy.targets == [], proxy.targets
    # The proxy's own address is judged too: not even a connection to it. (The proxy
    # accepts in rounds of 0.1 s: wait for it to count the first run's connection, and give
    # the second run's a few rounds to show up if there were one.)
    opened = run.summary["connections_opened"]
    deadline = time.monotonic() + 5
    while proxy.connections < opened and time.monotonic() < deadline:
        time.sleep(0.02)
    accepted = proxy.connections
    assert accepted == opened, (accepted, opened)
    run = run_harvestd([origin.url("/page?title=y")], "--proxy", proxy.url(),
                       "--allow-addresses", "")
    assert run.records[0]["error_type"] == "BlockedAddress", run.records
    assert run.summary["connections_opened"] == 0, run.summary
    time.sleep(0.5)
    assert proxy.connections == accepted
    # Allowed, the same proxy is asked for the target.
    run = run_harvestd([origin.url("/page?title=z")], "--proxy", proxy.url(),
                       "--allow-addresses", "127.0.0.1/32")
    assert run.records[0]["status"] == "ok", run.records
    assert proxy.targets == [("127.0.0.1", origin.port)], proxy.targets


@pytest.mark.parametrize("mode,error", [
    ("407-close", "proxy_auth_required_407"),
    ("garbage", "proxy_bad_reply"),
    ("close", "proxy_closed_connection"),
    ("huge", "proxy_reply_too_large"),
])
def test_99_09_a_proxy_that_breaks_the_tunnel(run_harvestd, fault_proxies, tls_origin, pki,
                                              mode, error):
    proxy = fault_proxies(mode)
    url = tls_origin.url("/page?title=t").replace("127.0.0.1", "localhost")
    run = run_harvestd([url], "--proxy", proxy.url(), "--ca-file", pki.ca_file)
    assert run.rc == 0, run.stderr
    r = run.records[0]
    assert (r["status"], r["stage"], r["error_type"], r["error"]) == \
        ("failed", "download", "ProxyError", error), r
    assert tls_origin.tls_full == 0  # nothing reached the origin


def test_99_10_slow_tunnels_cut_replies_and_a_tunnel_closed_mid_tls(
        run_harvestd, fault_proxies, tls_origin, origin, pki):
    slow = fault_proxies("slow", delay=3)
    url = tls_origin.url("/page?title=t").replace("127.0.0.1", "localhost")
    run = run_harvestd([url], "--proxy", slow.url(), "--ca-file", pki.ca_file,
                       "--connect-timeout", "1s")
    r = run.records[0]
    assert (r["error_type"], r["error"]) == ("ProxyError", "proxy_connect_timed_out"), r
    # A SOCKS5 proxy whose replies come a byte at a time still opens the tunnel.
    cut = fault_proxies("socks-cut")
    run = run_harvestd([url, origin.url("/page?title=c")], "--proxy", cut.url("socks5"),
                       "--ca-file", pki.ca_file)
    assert all(r["status"] == "ok" for r in run.records), run.records
    garbage = fault_proxies("socks-garbage")
    run = run_harvestd([url], "--proxy", garbage.url("socks5"), "--ca-file", pki.ca_file)
    assert (run.records[0]["error_type"], run.records[0]["error"]) == \
        ("ProxyError", "socks_bad_reply"), run.records
    # The tunnel opens, then closes under the handshake: the origin's TLS failed.
    mid = fault_proxies("close-in-tls")
    run = run_harvestd([url], "--proxy", mid.url(), "--ca-file", pki.ca_file)
    assert (run.records[0]["error_type"], run.records[0]["error"]) == \
        ("TlsError", "tls_closed_during_handshake"), run.records


@pytest.fixture
def hosts():
    from origin import Origin
    started = []

    def make(n):
        for i in range(n):
            started.append(Origin("host-%d" % i).start())
        return started
    yield make
    for o in started:
        o.stop()


def _per_proxy_targets(proxies, pattern):
    """{proxy port: {target port: requests}} from the request lines the proxies logged."""
    import re
    seen = {}
    for p in proxies:
        counts = {}
        for line in p.requests():
            m = re.match(pattern, line)
            if m:
                counts[int(m.group(1))] = counts.get(int(m.group(1)), 0) + 1
        seen[p.port] = counts
    return seen


def test_99_11_rotation_by_host_keeps_pooling_and_by_request_spreads(
        run_harvestd, tinyproxy, tls_origins, hosts, pki):
    proxies = [tinyproxy() for _ in range(4)]
    origins = [tls_origins("localhost", name="h%d" % i) for i in range(8)]
    urls = ["https://localhost:%d/page?title=p%d" % (o.port, i) for i in range(50)
            for o in origins]
    plist = ", ".join(p.url() for p in proxies)
    run = run_harvestd(urls, "--proxy", plist, "--per-host", "2", "--ca-file", pki.ca_file,
                       timeout=120)
    assert run.rc == 0 and all(r["status"] == "ok" for r in run.records)
    seen = _per_proxy_targets(proxies, r"CONNECT localhost:(\d+) ")
    for o in origins:
        used = [port for port, counts in seen.items() if o.port in counts]
        assert len(used) == 1, (o.port, seen)  # each host through exactly one proxy
        mine = [r for r in run.records if ":%d/" % o.port in r["requested_url"]]
        assert len(mine) == 50 and all(r["proxy"].endswith(":%d" % used[0]) for r in mine)
    s = run.summary
    reused, opened = s["connections_reused"], s["connections_opened"]
    assert reused / (reused + opened) >= 0.9, s

    # Per request, over http (absolute form): an even spread. tinyproxy closes its clients'
    # connections after each answer without saying so; after a few stale connections harvestd
    # stops pooling them.
    for p in proxies:
        p.stop()
    proxies = [tinyproxy() for _ in range(4)]
    plain = hosts(8)
    urls = [o.url("/page?title=p%d" % i) for i in range(50) for o in plain]
    plist = ", ".join(p.url() for p in proxies)
    run = run_harvestd(urls, "--proxy", plist, "--proxy-rotation", "request", timeout=120)
    assert run.rc == 0 and all(r["status"] == "ok" for r in run.records)
    # Requests per proxy, as harvestd counted them (through a tunnel, the proxy logs one
    # CONNECT for many).
    import re
    per = [int(n) for n in re.findall(r"http://127\.0\.0\.1:\d+\((\d+),0\)",
                                       run.stderr.split(" proxies=")[1].split()[0])]
    assert len(per) == 4 and sum(per) >= len(urls), per
    assert all(abs(n - len(urls) / 4) <= 0.1 * len(urls) / 4 for n in per), per
    assert run.summary["stale_retries"] <= 4 * 3 + 2 * 4, run.summary
    assert run.stderr.count("event=proxy_no_keepalive") == 4
    # From then on, http went through tunnels, kept alive.
    tunnels = _per_proxy_targets(proxies, r"CONNECT 127\.0\.0\.1:(\d+) ")
    assert all(sum(c.values()) > 0 for c in tunnels.values()), tunnels
    # Each tunnel carried several requests: the requests harvestd made less the ones the
    # proxies saw in absolute form went through far fewer CONNECTs. (How many went in absolute
    # form before the switch depends on the machine's speed; the summary's totals mix both.)
    absolute = sum(1 for p in proxies for line in p.requests() if line.startswith("GET http://"))
    opened = sum(sum(c.values()) for c in tunnels.values())
    through_tunnels = run.summary["requests"] - run.summary["stale_retries"] - absolute
    assert through_tunnels > opened, (through_tunnels, opened, run.summary)


def test_99_12_a_failing_proxy_is_set_aside_and_counted(run_harvestd, tinyproxy, hosts,
                                                         start_daemon, spool, closed_port):
    """Two proxies, one of them dead: its hosts' retries go to the other, it is set aside
    after three failures and passed over; /metrics counts requests and failures per proxy."""
    import urllib.request
    from harness import wait_complete
    from origin import free_port
    good = tinyproxy()
    dead = "http://127.0.0.1:%d" % closed_port
    # Each host keeps the proxy a hash of its origin (a random port) picks: with 12 hosts,
    # all of them missing the dead one has odds of 1 in 4,096 (6 hosts: 1 in 64, and it came).
    origins = hosts(12)
    urls = [o.url("/page?title=q%d" % i) for i in range(3) for o in origins]
    port = free_port()
    d = start_daemon(proxy="%s, %s" % (dead, good.url()), retries="3", retry_base="20ms",
                     metrics_listen="127.0.0.1:%d" % port)
    spool.drop("p.txt", urls)
    wait_complete(d, spool, ["p.txt"], timeout=30)
    recs = spool.records("p.txt")
    assert len(recs) == len(urls) and all(r["status"] == "ok" for r in recs), \
        [r for r in recs if r["status"] != "ok"][:3]
    assert all(r["proxy"] == "http://127.0.0.1:%d" % good.port for r in recs)
    assert d.events("proxy_set_aside")
    m = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
    assert 'harvestd_proxy_failures_total{proxy="%s"}' % dead in m
    fails = [l for l in m.splitlines()
             if l.startswith('harvestd_proxy_failures_total{proxy="%s"}' % dead)]
    assert int(fails[0].split()[-1]) >= 3
    reqs = [l for l in m.splitlines()
            if l.startswith('harvestd_proxy_requests_total{proxy="%s"}' % good.url())]
    assert int(reqs[0].split()[-1]) >= len(urls)
    assert d.stop() == 0


def test_99_13_http_falls_back_to_absolute_form_where_tunnels_are_refused(
        run_harvestd, tinyproxy, origin):
    """tinyproxy keeps no client connection, so http URLs move to CONNECT tunnels; this one
    allows CONNECT to port 443 only: the refused tunnel sends them back to the absolute form
    (one retry), and every record is ok."""
    proxy = tinyproxy(connect_ports=[443])
    urls = [origin.url("/page?title=f%d" % i) for i in range(30)]
    run = run_harvestd(urls, "--proxy", proxy.url(), "--retries", "2", "--per-host", "1")
    assert run.rc == 0, run.stderr
    assert all(r["status"] == "ok" for r in run.records), \
        [r for r in run.records if r["status"] != "ok"][:3]
    assert "event=proxy_no_keepalive" in run.stderr
    assert run.stderr.count("event=proxy_no_http_tunnel") == 1, run.stderr


# ------------------------------------------------------------- proxy_credentials_file


def _creds_file(tmp_path, text, mode=0o600, name="proxies.cred"):
    path = tmp_path / name
    path.write_text(text)
    os.chmod(str(path), mode)
    return str(path)


def test_99_14_credentials_from_the_file_reach_the_proxies(run_harvestd, tinyproxy, microsocks,
                                                             tls_origin, origin, pki, tmp_path):
    """The file's entries reach an HTTP proxy of a [host] section (its HOST:PORT line,
    percent-decoded) and the global SOCKS5 one (the * line, a password with blanks); a URL's own
    credentials win over the file's. No password in the log or the records."""
    tiny = tinyproxy(user="crawler", password="s3cretpw")
    socks = microsocks(user="sockuser", password="s0cks pass word")
    creds = _creds_file(tmp_path, "# proxies of the test\n\n"
                        "127.0.0.1:%d crawler:%%733cretpw\r\n"
                        "* sockuser:s0cks pass word  \n" % tiny.port)
    conf = tmp_path / "creds.conf"
    conf.write_text("proxy = socks5://127.0.0.1:%d\n"
                    "proxy_credentials_file = %s\n"
                    "[host \"localhost\"]\n"
                    "proxy = http://127.0.0.1:%d\n" % (socks.port, creds, tiny.port))
    via_http = [tls_origin.url("/page?title=a"), "http://localhost:%d/page?title=b" % origin.port]
    via_socks = [origin.url("/page?title=c"), origin.url("/page?title=d")]
    run = run_harvestd(via_http + via_socks, "-c", str(conf), "--ca-file", pki.ca_file, "-vv")
    assert run.rc == 0, run.stderr
    recs = {r["requested_url"]: r for r in run.records}
    assert all(r["status"] == "ok" for r in run.records), run.records
    assert all(recs[u]["proxy"] == "http://127.0.0.1:%d" % tiny.port for u in via_http), recs
    assert all(recs[u]["proxy"] == "socks5://127.0.0.1:%d" % socks.port for u in via_socks), recs
    assert tiny.requests(), "nothing went through tinyproxy"
    for secret in ("3cretpw", "s0cks pass word", "s0cks"):
        assert secret not in run.stderr
        assert all(secret not in str(r) for r in run.records)

    # The command line names the file as well; a URL with credentials of its own keeps them
    # (the file's, wrong for it, are not sent).
    creds = _creds_file(tmp_path, "127.0.0.1:%d crawler:wrong\n" % tiny.port, name="wrong.cred")
    run = run_harvestd(via_http, "--proxy", tiny.url(), "--proxy-credentials-file", creds,
                       "--ca-file", pki.ca_file)
    assert run.rc == 0, run.stderr
    assert [r["status"] for r in run.records] == ["ok", "ok"], run.records
    run = run_harvestd(via_http, "--proxy", tiny.url(with_auth=False),
                       "--proxy-credentials-file", creds, "--ca-file", pki.ca_file,
                       "--retries", "0")
    # Without the URL's, the file's wrong ones are sent: tinyproxy answers 401 to wrong
    # credentials (407 to none, test_99_02), to the CONNECT and to the absolute-form request.
    assert sorted(r["error"] for r in run.records) == ["http_401", "proxy_http_401"], \
        run.records


@pytest.mark.parametrize("mode,says", [(0o644, "its group and others (mode 0644)"),
                                       (0o604, "others (mode 0604)")])
def test_99_15_a_credentials_file_others_may_read_stops_the_start(harvestd, start_daemon,
                                                                   spool, tmp_path, mode, says):
    creds = _creds_file(tmp_path, "* crawler:hunter2pw\n", mode)
    os.makedirs(str(spool.root), exist_ok=True)
    d = start_daemon(ready=False, proxy="http://127.0.0.1:3128", proxy_credentials_file=creds)
    assert d.wait(20) == 2
    message = ("proxy_credentials_file: the proxy credentials file %s is readable by %s: let "
               "only its owner read it (chmod 600)" % (creds, says))
    assert message in d.stderr_text()
    checked = harvestd.command("--check-config", "-c", d.config)
    assert checked.returncode == 2 and message in checked.stderr, checked
    assert "hunter2pw" not in d.stderr_text() + checked.stderr


@pytest.mark.parametrize("lines,line,says", [
    (["# fine", "127.0.0.1:3128 crawler:fine", "127.0.0.1:3129 hunter2pw"], 3,
     "the credentials (***) must be USER:PASSWORD"),
    (["127.0.0.1:3128 crawler:bad%zzhunter2pw"], 1,
     "'crawler:***': the user and the password must be percent-encoded"),
    (["127.0.0.1 crawler:hunter2pw"], 1, "the first field is neither HOST:PORT"),
    (["127.0.0.1:3128 crawler:hunter2pw", "", "127.0.0.1:3128 other:hunter2pw"], 3,
     "a second entry for 127.0.0.1:3128 (the first is on line 1)"),
    (["127.0.0.1:3128 crawler:x", "127.0.0.1:3218 crawler:hunter2pw"], 2,
     "127.0.0.1:3218 matches no proxy of the configuration"),
])
def test_99_16_a_bad_credentials_line_is_named_without_its_password(
        harvestd, run_harvestd, start_daemon, spool, origin, tmp_path, lines, line, says):
    creds = _creds_file(tmp_path, "\n".join(lines) + "\n")
    os.makedirs(str(spool.root), exist_ok=True)
    d = start_daemon(ready=False, proxy="http://127.0.0.1:3128", proxy_credentials_file=creds)
    assert d.wait(20) == 2
    stderr = d.stderr_text()
    where = "%s:%d: " % (creds, line)
    assert "proxy_credentials_file: " + where + says in stderr, stderr
    checked = harvestd.command("--check-config", "-c", d.config)
    assert checked.returncode == 2 and where + says in checked.stderr, checked
    # --once stops before a record is written.
    run = run_harvestd([origin.url("/page?title=x")], "--proxy", "http://127.0.0.1:3128",
                       "--proxy-credentials-file", creds, parse=False)
    assert run.rc == 2 and where + says in run.stderr, run.stderr
    assert not os.path.exists(run.out_path) or os.path.getsize(run.out_path) == 0
    for text in (stderr, checked.stderr, checked.stdout, run.stderr):
        assert "hunter2pw" not in text


def test_99_17_proxy_connections_caps_what_is_open_through_a_proxy(run_harvestd,
                                                                   counting_socks, hosts):
    """One host, per_host 8, through a SOCKS5 proxy: without a cap the proxy sees eight
    connections at once; with proxy_connections = 2, two in all, the other requests waiting
    their turn for them. Eight hosts through two connections: idle connections to other hosts
    are closed to make room, and every record is ok."""
    origins = hosts(8)
    one = [origins[0].url("/page?title=c%d" % i) for i in range(64)]
    args = ["--concurrency", "16", "--per-host", "8"]
    free = counting_socks()
    run = run_harvestd(one, "--proxy", free.url(), *args)
    assert run.rc == 0 and all(r["status"] == "ok" for r in run.records), run.stderr
    assert free.max_open > 2, free.max_open

    capped = counting_socks()
    run = run_harvestd(one, "--proxy", capped.url(), "--proxy-connections", "2", *args)
    assert run.rc == 0 and len(run.records) == len(one), run.stderr
    assert all(r["status"] == "ok" for r in run.records), \
        [r for r in run.records if r["status"] != "ok"][:3]
    assert capped.connections == 2 and capped.max_open == 2, \
        (capped.connections, capped.max_open)

    many = [o.url("/page?title=m%d" % i) for i in range(12) for o in origins]
    capped = counting_socks()
    run = run_harvestd(many, "--proxy", capped.url(), "--proxy-connections", "2", *args)
    assert run.rc == 0 and len(run.records) == len(many), run.stderr
    assert all(r["status"] == "ok" for r in run.records), \
        [r for r in run.records if r["status"] != "ok"][:3]
    assert capped.connections >= 8, capped.connections


def test_99_18_a_request_that_waits_past_its_deadline_for_a_proxy_connection(
        run_harvestd, counting_socks, hosts):
    """proxy_connections = 1 and three pages of 2 s each on three hosts, total_timeout 3 s:
    the first is ok; the second gets the connection with 1 s left and times out; the third
    never gets one: ProxyError no_proxy_connection_within_3s, not held against the proxy."""
    origins = hosts(3)
    urls = [o.url("/hold?key=w%d&max=2&title=W" % i) for i, o in enumerate(origins)]
    proxy = counting_socks()
    run = run_harvestd(urls, "--proxy", proxy.url("socks5"), "--proxy-connections", "1",
                       "--concurrency", "3", "--total-timeout", "3s", "--retries", "0")
    assert run.rc == 0, run.stderr
    kinds = sorted((r["status"], r.get("error_type"), r.get("error")) for r in run.records)
    assert kinds == [("failed", "ProxyError", "no_proxy_connection_within_3s"),
                     ("failed", "TotalTimeout", "request_exceeded_3s"),
                     ("ok", None, None)], kinds
    assert proxy.max_open == 1
    assert "event=proxy_set_aside" not in run.stderr
