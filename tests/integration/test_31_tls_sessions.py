"""TLS sessions kept across runs: with re-crawling on (--recrawl conditional --state-dir DIR), a
run stores the TLS session of each host:port in the state store and the next run resumes it
(abbreviated handshakes, counted by the server and by the summary's tls_resumed and
tls_sessions_loaded). Without a store the next run makes full handshakes; a damaged session
in the store is dropped and costs a full handshake, never a record.

The servers are tls.TlsOrigin (ports of 127.0.0.1 named "localhost"; each port is another
session key), which resume by ticket and by session id."""

import re

from harness import assert_ok, by_url

HOSTS = 3
PAGES = 3
# The session's header in the store's value (store.c): what the damage test looks for.
SESSION_MAGIC = b"HVTS\x01\x00\x00\x00"
SESSION_HEADER = 32


def ca_args(pki):
    return ["--ca-file", pki.ca_file]


def origins_and_urls(tls_origins):
    origins = [tls_origins(name="tls-s%d" % i) for i in range(HOSTS)]
    urls = [o.url("/page?title=h%dp%d" % (i, p)) for i, o in enumerate(origins)
            for p in range(PAGES)]
    return origins, urls


def server_counts(origins):
    snaps = [o.snapshot() for o in origins]
    return [(s["tls_full"], s["tls_resumed"]) for s in snaps]


def run_and_check(run_harvestd, pki, urls, *args):
    # One connection per host (keep-alive, --per-host 1): one handshake per host and run.
    run = run_harvestd(urls, *ca_args(pki), "--per-host", "1", *args)
    assert run.rc == 0, run.stderr
    recs = by_url(run.records)
    for url in urls:
        assert_ok(recs[url], re.search(r"title=(\w+)", url).group(1))
    return run


def deltas(before, after):
    return [(f1 - f0, r1 - r0) for (f0, r0), (f1, r1) in zip(before, after)]


def recrawl_args(state):
    return ["--recrawl", "conditional", "--state-dir", str(state)]


def test_31_01_second_run_resumes_every_host_from_the_store(run_harvestd, harvestd, pki,
                                                            tls_origins, tmp_path):
    origins, urls = origins_and_urls(tls_origins)
    state = tmp_path / "state"
    first = run_and_check(run_harvestd, pki, urls, *recrawl_args(state))
    s = first.summary
    assert s["tls_handshakes"] == HOSTS and s["tls_resumed"] == 0, s
    assert s["tls_sessions_loaded"] == 0, s
    assert server_counts(origins) == [(1, 0)] * HOSTS

    # The store holds one session per host:port, apart from the URL entries.
    r = harvestd.command("state", "--state-dir", state, "stats")
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"entries=(\d+) bytes_used=\d+ map_bytes=\d+ tls_sessions=(\d+)\n", r.stdout)
    assert m, r.stdout
    assert (int(m.group(1)), int(m.group(2))) == (len(urls), HOSTS)
    r = harvestd.command("state", "--state-dir", state, "verify")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("sound entries=%d " % len(urls)), r.stdout
    assert r.stdout.rstrip().endswith(" tls_sessions=%d" % HOSTS), r.stdout
    # No session is anywhere but in the store: not in records, not on stderr.
    with open(first.out_path, "rb") as f:
        assert b"HVTS" not in f.read()
    assert "HVTS" not in first.stderr

    before = server_counts(origins)
    second = run_and_check(run_harvestd, pki, urls, *recrawl_args(state))
    s = second.summary
    # Every host's first (and only) connection resumed the stored session.
    assert deltas(before, server_counts(origins)) == [(0, 1)] * HOSTS
    assert s["tls_resumed"] == HOSTS and s["tls_handshakes"] == 0, s
    assert s["tls_sessions_loaded"] == HOSTS, s


def test_31_02_without_the_store_the_next_run_makes_full_handshakes(run_harvestd, pki,
                                                                    tls_origins, tmp_path):
    origins, urls = origins_and_urls(tls_origins)
    state = tmp_path / "state"
    run_and_check(run_harvestd, pki, urls, *recrawl_args(state))

    # Re-crawling off: sessions stay in memory, and a new run has none.
    before = server_counts(origins)
    plain = run_and_check(run_harvestd, pki, urls)
    s = plain.summary
    assert deltas(before, server_counts(origins)) == [(1, 0)] * HOSTS
    assert s["tls_handshakes"] == HOSTS and s["tls_resumed"] == 0, s
    assert "tls_sessions_loaded" not in s, s

    # Another state directory has nothing for these hosts either.
    before = server_counts(origins)
    other = run_and_check(run_harvestd, pki, urls, *recrawl_args(tmp_path / "other"))
    assert deltas(before, server_counts(origins)) == [(1, 0)] * HOSTS
    assert other.summary["tls_sessions_loaded"] == 0


def test_31_03_a_damaged_session_in_the_store_costs_a_full_handshake(run_harvestd, pki,
                                                                     tls_origins, tmp_path):
    origins, urls = origins_and_urls(tls_origins)
    state = tmp_path / "state"
    run_and_check(run_harvestd, pki, urls, *recrawl_args(state))

    # Overwrite the start of every stored session's bytes (mbedtls's serialisation, after our
    # header) in place: LMDB keeps no checksum, so the store stays sound and the values
    # become sessions no build can load.
    data = state / "data.mdb"
    raw = bytearray(data.read_bytes())
    damaged, at = 0, raw.find(SESSION_MAGIC)
    while at >= 0:
        start = at + SESSION_HEADER
        raw[start:start + 48] = b"\xa5" * 48
        damaged += 1
        at = raw.find(SESSION_MAGIC, start)
    assert damaged >= HOSTS
    data.write_bytes(bytes(raw))

    before = server_counts(origins)
    second = run_and_check(run_harvestd, pki, urls, *recrawl_args(state))
    s = second.summary
    assert deltas(before, server_counts(origins)) == [(1, 0)] * HOSTS
    assert s["tls_handshakes"] == HOSTS and s["tls_resumed"] == 0, s
    assert s["tls_sessions_loaded"] == 0, s

    # That run's sessions replaced the damaged ones.
    before = server_counts(origins)
    third = run_and_check(run_harvestd, pki, urls, *recrawl_args(state))
    assert deltas(before, server_counts(origins)) == [(0, 1)] * HOSTS
    assert third.summary["tls_sessions_loaded"] == HOSTS
