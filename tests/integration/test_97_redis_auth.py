"""Redis with a password, an ACL user: the daemon (source = redis) and the enqueue and status
commands against a real redis-server of the test's own on 127.0.0.1 (redisd.py), started with
`requirepass` (the default user's password) and an ACL user alice.

What is checked: each logs in (AUTH, before anything else) with the password of the URL,
percent-decoded, or of a password file (redis_password_file, --redis-password-file), as the
default user or as alice, on the URL's database; a password the server refuses stops the
daemon (exit 1) and fails the commands (exit 1), naming AUTH and the server's words; no
password where one is needed is as clear; a password file others may read, or that is not
there, stops the start (exit 2) naming the file.

No password, of the URL or of a file, ever shows: logs, fatal errors, the commands' messages
and --check-config show the URL with *** in its place.

Over TLS (rediss://, a redis-server with --tls-port only and a certificate of the test PKI,
tls.py): the daemon with ca_file = the test CA, the commands with --ca-file; without it the
certificate is untrusted, with another host name it does not match, and insecure = yes takes
any; a command of more than a megabyte (an enqueue chunk) goes through the session's bounded
buffer.
"""

import os
import signal

import pytest

from redisd import REDIS_SERVER, RedisServer
from test_90_enqueue import run, write
from test_92_stream import all_records, batch_hash, pending_total, wait_for, xadd_lines

pytestmark = pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")

# Every character that needs percent-encoding in a URL's user information, and a few more.
# Each password has "S3cret" in it, and the wrong one "Wr0ng": neither may show anywhere.
DEFAULT_PW = "dflt S3cret@/:%#;?x"
ALICE_PW = "alice-S3cret;#@:/"
WRONG_PW = "Wr0ng-pa55"


def assert_no_secret(text):
    for word in ("S3cret", "Wr0ng"):
        assert word not in text, text


@pytest.fixture
def tls_redis(tmp_path, pki):
    """As auth_redis, over TLS only, with the test PKI's certificate for localhost."""
    cert, key = pki.cert("localhost")
    server = RedisServer(tmp_path / "redis-tls", password=DEFAULT_PW,
                         users=["alice on >%s ~* &* +@all" % ALICE_PW],
                         tls=(cert, key, pki.ca_file))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def auth_redis(tmp_path):
    """A redis-server with requirepass DEFAULT_PW and the ACL user alice (ALICE_PW)."""
    server = RedisServer(tmp_path / "redis-auth", password=DEFAULT_PW,
                         users=["alice on >%s ~* &* +@all" % ALICE_PW])
    try:
        server.start()
        yield server
    finally:
        server.stop()


def stream_config(url, **directives):
    values = {"source": "redis", "redis_url": url, "fsync": "always", "redis_consumer": "n"}
    values.update(directives)
    return values


def password_file(tmp_path, password, mode=0o600, name="redis-password"):
    path = tmp_path / name
    path.write_text(password + "\n")
    os.chmod(path, mode)
    return str(path)


def client_users(client):
    """The user of each client connection (CLIENT LIST), but the asking one's."""
    users = []
    for line in client.call("CLIENT", "LIST").splitlines():
        fields = dict(f.split("=", 1) for f in line.split(" ") if "=" in f)
        if fields.get("cmd") != "client|list":
            users.append(fields.get("user"))
    return users


# ---------------------------------------------------------------------------- the daemon


def test_97_01_the_daemon_logs_in_with_the_urls_password(auth_redis, start_daemon, spool, origin):
    # The default user's password, with every awkward character percent-encoded, on db 1.
    c = auth_redis.client()
    c.call("SELECT", 1)
    lines = xadd_lines(c, "pw", [origin.url("/page?title=p%d" % i) for i in range(5)])
    d = start_daemon(**stream_config(auth_redis.url_for(password=DEFAULT_PW, db=1)))
    wait_for(lambda: batch_hash(c, "pw").get("done", 0) == 5, 30, "5 acknowledgements", [d])
    assert pending_total(c) == 0
    assert sorted(client_users(c)) == ["default", "default"]  # the read and write links
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    err = d.stderr_text()
    assert "event=redis_up link=read url=redis://:***@127.0.0.1:%d/1 " % auth_redis.port in err
    assert_no_secret(err)
    recs = all_records([spool.root], "pw")
    assert sorted(r["line"] for r in recs) == sorted(lines)
    assert all(r["status"] == "ok" for r in recs)


def test_97_02_the_daemon_logs_in_as_an_acl_user(auth_redis, start_daemon, spool, origin):
    c = auth_redis.client()
    xadd_lines(c, "acl", [origin.url("/page?title=a%d" % i) for i in range(5)])
    d = start_daemon(**stream_config(auth_redis.url_for(user="alice", password=ALICE_PW)))
    wait_for(lambda: batch_hash(c, "acl").get("done", 0) == 5, 30, "5 acknowledgements", [d])
    assert sorted(client_users(c)) == ["alice", "alice"]
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    assert len(all_records([spool.root], "acl")) == 5
    err = d.stderr_text()
    assert "event=stream_start url=redis://alice:***@127.0.0.1:%d " % auth_redis.port in err
    assert_no_secret(err)


@pytest.mark.parametrize("user,password", [(None, WRONG_PW), ("alice", DEFAULT_PW),
                                           ("bob", ALICE_PW)])
def test_97_03_a_refused_password_stops_the_daemon(auth_redis, start_daemon, user, password):
    d = start_daemon(ready=False, **stream_config(auth_redis.url_for(user=user, password=password)))
    assert d.wait(20) == 1
    err = d.stderr_text()
    assert "event=fatal" in err
    said = "AUTH as %s refused" % user if user else "AUTH refused"
    shown = "redis://%s:***@127.0.0.1:%d" % (user or "", auth_redis.port)
    assert ("redis_url %s: %s: WRONGPASS invalid username-password pair or user is disabled."
            % (shown, said)) in err
    assert err.count("event=redis_fatal") == 1  # not retried
    assert_no_secret(err)


def test_97_04_no_password_where_one_is_needed_stops_the_daemon(auth_redis, start_daemon):
    d = start_daemon(ready=False, **stream_config(auth_redis.url))
    assert d.wait(20) == 1
    err = d.stderr_text()
    assert "event=fatal" in err and "NOAUTH Authentication required." in err


# ---------------------------------------------------------------------------- the commands


def test_97_05_enqueue_and_status_log_in(harvestd, auth_redis, tmp_path):
    path = write(tmp_path, "urls.txt", "http://a.test/1\nhttp://a.test/2\n")
    for user, password, db in ((None, DEFAULT_PW, None), ("alice", ALICE_PW, 4)):
        url = auth_redis.url_for(user=user, password=password, db=db)
        done = run(harvestd, "enqueue", "--redis", url, "--batch", "b", path)
        assert done.returncode == 0, done
        assert done.stdout == ("harvestd: enqueued batch b on harvestd:urls: 2 lines added "
                               "(0 already there), total 2\n")
        st = run(harvestd, "status", "--redis", url, "--batch", "b")
        assert st.returncode == 3, st  # nothing done yet
        assert st.stdout.startswith("batch b: added 2 total 2 done 0 pending 0 ")
    with auth_redis.client() as c:
        assert c.call("XLEN", "harvestd:urls") == 2
        c.call("SELECT", 4)
        assert c.call("XLEN", "harvestd:urls") == 2


def test_97_06_enqueue_and_status_with_a_refused_password_exit_1(harvestd, auth_redis, tmp_path):
    path = write(tmp_path, "urls.txt", "http://a.test/1\n")
    for user in (None, "alice"):
        url = auth_redis.url_for(user=user, password=WRONG_PW)
        shown = "redis://%s:***@127.0.0.1:%d" % (user or "", auth_redis.port)
        for args in (["enqueue", "--redis", url, path], ["status", "--redis", url]):
            done = run(harvestd, *args)
            assert done.returncode == 1, done
            assert done.stdout == ""
            assert done.stderr == ("harvestd: redis: AUTH: WRONGPASS invalid username-password "
                                   "pair or user is disabled. (%s)\n" % shown), done
    with auth_redis.client() as c:
        assert c.call("DBSIZE") == 0


# ---------------------------------------------------------------------------- the password file


def test_97_07_the_daemon_reads_the_password_file(auth_redis, start_daemon, spool, origin,
                                                   tmp_path):
    # The file's password wins over the URL's (wrong here); the URL still names the user.
    c = auth_redis.client()
    xadd_lines(c, "file", [origin.url("/page?title=f%d" % i) for i in range(5)])
    path = password_file(tmp_path, ALICE_PW)
    url = auth_redis.url_for(user="alice", password=WRONG_PW)
    d = start_daemon(**stream_config(url, redis_password_file=path))
    wait_for(lambda: batch_hash(c, "file").get("done", 0) == 5, 30, "5 acknowledgements", [d])
    assert sorted(client_users(c)) == ["alice", "alice"]
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    assert len(all_records([spool.root], "file")) == 5
    assert "url=redis://alice:***@127.0.0.1:%d " % auth_redis.port in d.stderr_text()
    assert_no_secret(d.stderr_text())
    # No user in the URL: the file's password logs in as the default user.
    path = password_file(tmp_path, DEFAULT_PW, name="default-password")
    d = start_daemon(**stream_config(auth_redis.url, redis_password_file=path))
    wait_for(lambda: sorted(client_users(c)) == ["default", "default"], 20, "two connections",
             [d])
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0


@pytest.mark.parametrize("mode,says", [(0o644, "its group and others (mode 0644)"),
                                       (0o640, "its group (mode 0640)"),
                                       (0o604, "others (mode 0604)")])
def test_97_08_a_password_file_others_may_read_is_refused(harvestd, auth_redis, start_daemon,
                                                          spool, tmp_path, mode, says):
    path = password_file(tmp_path, DEFAULT_PW, mode)
    message = ("redis_password_file: the password file %s is readable by %s: let only its owner "
               "read it (chmod 600)" % (path, says))
    d = start_daemon(ready=False, **stream_config(auth_redis.url, redis_password_file=path))
    assert d.wait(20) == 2
    assert message in d.stderr_text()
    os.makedirs(str(spool.root), exist_ok=True)
    checked = harvestd.command("--check-config", "-c", d.config)
    assert checked.returncode == 2, checked
    assert message in checked.stderr
    urls = write(tmp_path, "urls.txt", "http://a.test/1\n")
    for args in (["enqueue", urls], ["status"]):
        done = run(harvestd, *args, "--redis", auth_redis.url, "--redis-password-file", path)
        assert done.returncode == 2, done
        assert done.stderr == "harvestd: the password file %s is readable by %s: let only its " \
                              "owner read it (chmod 600)\n" % (path, says)
    with auth_redis.client() as c:
        assert c.call("DBSIZE") == 0


def test_97_09_a_password_file_that_cannot_be_read_stops_the_start(harvestd, auth_redis,
                                                                   start_daemon, tmp_path):
    missing = str(tmp_path / "no-such-file")
    d = start_daemon(ready=False, **stream_config(auth_redis.url, redis_password_file=missing))
    assert d.wait(20) == 2
    assert ("redis_password_file: cannot read the password file %s: no such file or directory"
            % missing) in d.stderr_text()
    done = run(harvestd, "status", "--redis", auth_redis.url, "--redis-password-file", missing)
    assert done.returncode == 2, done
    assert done.stderr == ("harvestd: cannot read the password file %s: no such file or "
                           "directory\n" % missing)
    # A user with no password anywhere cannot log in: said before connecting.
    url = auth_redis.url_for(user="alice", password="")
    d = start_daemon(ready=False, **stream_config(url))
    assert d.wait(20) == 2
    assert "redis_url: '%s': user alice has no password" % url in d.stderr_text()


def test_97_10_enqueue_and_status_read_the_password_file(harvestd, auth_redis, tmp_path):
    urls = write(tmp_path, "urls.txt", "http://a.test/1\nhttp://a.test/2\n")
    path = password_file(tmp_path, ALICE_PW)
    url = auth_redis.url_for(user="alice", password="")
    done = run(harvestd, "enqueue", "--redis", url, "--redis-password-file", path, "--batch",
               "b", urls)
    assert done.returncode == 0, done
    st = run(harvestd, "status", "--redis=" + url, "--redis-password-file=" + path, "--json")
    assert st.returncode == 3, st
    assert '"added":2,"total":2' in st.stdout


# ---------------------------------------------------------------------------- TLS


def tls_failures(d):
    return [e for e in d.events("redis_tls_failed")]


def test_97_11_the_daemon_over_tls_with_the_test_ca(tls_redis, start_daemon, spool, origin, pki,
                                                     tmp_path):
    c = tls_redis.client()
    xadd_lines(c, "tls", [origin.url("/page?title=t%d" % i) for i in range(5)])
    # An ACL user whose password is in the URL.
    d = start_daemon(ca_file=pki.ca_file,
                     **stream_config(tls_redis.url_for(user="alice", password=ALICE_PW)))
    wait_for(lambda: batch_hash(c, "tls").get("done", 0) == 5, 30, "5 acknowledgements", [d])
    assert sorted(client_users(c)) == ["alice", "alice"]
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    assert len(all_records([spool.root], "tls")) == 5
    assert tls_failures(d) == []
    assert "url=rediss://alice:***@localhost:%d " % tls_redis.port in d.stderr_text()
    assert_no_secret(d.stderr_text())
    # The default user, its password in a file; the certificate's IP address, no name.
    xadd_lines(c, "tls2", [origin.url("/page?title=u%d" % i) for i in range(5)])
    path = password_file(tmp_path, DEFAULT_PW)
    d = start_daemon(ca_file=pki.ca_file, redis_password_file=path,
                     **stream_config(tls_redis.url_for(host="127.0.0.1")))
    wait_for(lambda: batch_hash(c, "tls2").get("done", 0) == 5, 30, "5 acknowledgements", [d])
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0


def test_97_12_without_the_ca_the_certificate_is_untrusted(tls_redis, start_daemon, origin):
    # The system's trust store does not know the test CA: each link says why it cannot
    # connect, at every attempt, and the daemon keeps trying (a certificate may be mended).
    c = tls_redis.client()
    xadd_lines(c, "untrusted", [origin.url("/page?title=x")])
    d = start_daemon(**stream_config(tls_redis.url_for(password=DEFAULT_PW)))
    d.poll_until(lambda: len(tls_failures(d)) >= 3, 10, "three refused handshakes")
    ev = tls_failures(d)[0]
    assert ev["err"] == "HV_ECERT" and ev["tls_error"] == "certificate_untrusted", ev
    assert ev["level"] == "warning"
    assert ev["url"] == "rediss://:***@localhost:%d" % tls_redis.port, ev
    assert batch_hash(c, "untrusted").get("done", 0) == 0
    assert "event=redis_up" not in d.stderr_text()
    d.send_signal(signal.SIGTERM)
    assert d.wait() == 0
    assert_no_secret(d.stderr_text())


def test_97_13_another_host_name_does_not_match(tmp_path, pki, start_daemon, origin):
    # A certificate of the test CA, for wrong.example: trusted, but not localhost's.
    cert, key = pki.cert("wrong-name")
    server = RedisServer(tmp_path / "redis-wrong", tls=(cert, key, pki.ca_file)).start()
    try:
        c = server.client()
        xadd_lines(c, "wrong", [origin.url("/page?title=w%d" % i) for i in range(3)])
        d = start_daemon(ca_file=pki.ca_file, **stream_config(server.url))
        d.poll_until(lambda: len(tls_failures(d)) >= 2, 10, "two refused handshakes")
        ev = tls_failures(d)[0]
        assert ev["err"] == "HV_ECERT" and ev["tls_error"] == "certificate_hostname_mismatch", ev
        d.send_signal(signal.SIGTERM)
        assert d.wait() == 0
        assert batch_hash(c, "wrong").get("done", 0) == 0
        # insecure = yes takes it, as it takes any certificate for https.
        d = start_daemon(insecure="yes", **stream_config(server.url))
        wait_for(lambda: batch_hash(c, "wrong").get("done", 0) == 3, 30, "3 acknowledgements",
                 [d])
        d.send_signal(signal.SIGTERM)
        assert d.wait() == 0
        assert tls_failures(d) == []
    finally:
        server.stop()


def test_97_14_enqueue_and_status_over_tls(harvestd, tls_redis, pki, tmp_path):
    urls = write(tmp_path, "urls.txt", "http://a.test/1\nhttp://a.test/2\n")
    path = password_file(tmp_path, ALICE_PW)
    url = tls_redis.url_for(user="alice", password="")
    login = ["--redis", url, "--redis-password-file", path]
    done = run(harvestd, "enqueue", *login, "--ca-file", pki.ca_file, "--batch", "b", urls)
    assert done.returncode == 0, done
    st = run(harvestd, "status", *login, "--ca-file=" + pki.ca_file, "--batch", "b")
    assert st.returncode == 3, st
    assert st.stdout.startswith("batch b: added 2 total 2 ")
    # The system's trust store: refused, and said.
    for args in (["enqueue", *login, "--batch", "c", urls], ["status", *login]):
        done = run(harvestd, *args)
        assert done.returncode == 1, done
        assert done.stderr == ("harvestd: redis: cannot connect to %s: certificate verification "
                               "failed: certificate_untrusted (HV_ECERT)\n" % url), done
    # --insecure takes any certificate, and says so.
    done = run(harvestd, "status", *login, "--insecure", "--batch", "b")
    assert done.returncode == 3, done
    assert done.stderr == ("harvestd: warning: --insecure: the Redis server's certificate is "
                           "NOT verified\n")
    with tls_redis.client() as c:
        assert c.call("XLEN", "harvestd:urls") == 2


def test_97_15_a_command_over_a_megabyte_goes_over_tls(harvestd, tls_redis, pki, tmp_path):
    # Lines of 4000 bytes: enqueue's chunks are a megabyte (CHUNK_BYTES) of URLs, each chunk
    # one EVALSHA, more than the TLS session's outbound buffer holds at once.
    lines = ["http://big.test/%d/%s" % (i, "x" * 3980) for i in range(600)]
    urls = write(tmp_path, "big.txt", "\n".join(lines) + "\n")
    path = password_file(tmp_path, DEFAULT_PW)
    done = run(harvestd, "enqueue", "--redis", tls_redis.url, "--redis-password-file", path,
               "--ca-file", pki.ca_file, "--batch", "big", urls)
    assert done.returncode == 0, done
    assert done.stdout == ("harvestd: enqueued batch big on harvestd:urls: 600 lines added "
                           "(0 already there), total 600\n")
    with tls_redis.client() as c:
        got = c.call("XRANGE", "harvestd:urls", "-", "+")
        assert [dict(zip(e[1][0::2], e[1][1::2]))["url"] for e in got] == lines


# ---------------------------------------------------------------------------- masking


def test_97_16_check_config_shows_the_url_masked(harvestd, spool, tmp_path):
    os.makedirs(str(spool.root), exist_ok=True)
    conf = tmp_path / "h.conf"
    # A URL that does not parse is quoted in the error, its password masked.
    conf.write_text("spool_dir = %s\nsource = redis\nredis_url = redis://alice:S3cret@h/99999\n"
                    % spool.root)
    r = harvestd.command("--check-config", "-c", conf)
    assert r.returncode == 2, r
    assert ("%s:3: redis_url: 'redis://alice:***@h/99999' is not a redis://HOST[:PORT][/DB] URL"
            % conf) in r.stderr
    assert_no_secret(r.stdout + r.stderr)
    # Given on the command line too (the directive as an option).
    r = harvestd.command("--check-config", "-c", conf, "--redis-url", "http://:Wr0ng@h")
    assert r.returncode == 2, r
    assert "redis_url: 'http://:***@h' is not a redis://HOST[:PORT][/DB] URL" in r.stderr
    assert_no_secret(r.stdout + r.stderr)
    # One without a ':' (a password to redis-cli) is hidden whole.
    conf.write_text("spool_dir = %s\nsource = redis\nredis_url = rediss://S3cret@h\n"
                    % spool.root)
    r = harvestd.command("--check-config", "-c", conf)
    assert r.returncode == 2, r
    assert "'rediss://***@h': the part before '@' needs a ':'" in r.stderr
    assert_no_secret(r.stdout + r.stderr)
    # A good one: nothing of it shown.
    conf.write_text("spool_dir = %s\nsource = redis\nredis_url = rediss://alice:S3cret@h:6380/2\n"
                    % spool.root)
    r = harvestd.command("--check-config", "-c", conf)
    assert r.returncode == 0, r
    assert_no_secret(r.stdout + r.stderr)


def test_97_17_command_usage_errors_show_the_url_masked(harvestd, tmp_path):
    path = write(tmp_path, "u.txt", "http://u.test/\n")
    for args in (["enqueue", "--redis", "redis://alice:S3cret@h:0", path],
                 ["status", "--redis", "redis://:S3cret@h?db=1"],
                 ["status", "--redis", "redis://S3cret@h"]):
        done = run(harvestd, *args)
        assert done.returncode == 2, done
        assert "***@h" in done.stderr, done
        assert_no_secret(done.stdout + done.stderr)
