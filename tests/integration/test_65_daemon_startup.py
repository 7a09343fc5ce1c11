"""The daemon's start-up. Without inotify (the host's watch limit used up, no instance left) it
warns once and finds files by the periodic rescan alone. Every other step that cannot succeed
(the config or the CA file unreadable, the metrics address in use, spool directories that
cannot be created, one that cannot be written) exits 2 with one line naming the cause, having
touched nothing and leaked nothing (the harness checks stderr for sanitizer reports and
leftover handles on every exit).

Faults that cannot be made for real come from the fault-injection shim (harness.fault_shim,
preloaded); the others are real: a port bound here, a missing path, a read-only tmpfs (root
only), a file or directory the daemon may not use (by its mode; as root, whom modes do not
stop, the daemon runs as nobody on files root owns)."""

import os
import shutil
import socket
import subprocess
import tempfile

import pytest

from harness import (DAEMON_DEFAULTS, NOBODY, SPOOL_SUBDIRS, Spool, page_urls, preload_env,
                     require_runs_as, wait_complete, write_config)


def expect_startup_failure(d, *fragments, timeout=10):
    """The daemon `d` exits 2 before its start, with exactly one line on stderr that holds every
    fragment (case aside); returns that line."""
    rc = d.wait(timeout=timeout)
    stderr = d.stderr_text()
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert rc == 2, "exit status %d, expected 2 for a start-up failure\n%s" % (rc, stderr)
    assert len(lines) == 1, "a start-up failure says one line, got %d:\n%s" % (len(lines), stderr)
    line = lines[0]
    assert line.startswith("harvestd: ") and "event=start" not in line, line
    for fragment in fragments:
        assert fragment.lower() in line.lower(), "%r does not name %r" % (line, fragment)
    return line


# ---------------------------------------------------------------------------- without inotify


@pytest.mark.parametrize("fault,errno_name,text", [
    ("HV_FAULT_INOTIFY_ADD_WATCH", "ENOSPC", "no space left on device"),
    ("HV_FAULT_INOTIFY_INIT", "EMFILE", "too many open files"),
], ids=["watch-limit", "instance-limit"])
def test_65_01_without_inotify_the_rescan_finds_files(start_daemon, spool, origin, fault,
                                                      errno_name, text):
    """inotify refused (inotify_add_watch: ENOSPC when the host's watch limit is used up;
    inotify_init1: EMFILE): one warning naming the directory and the cause and saying that the
    periodic rescan (rescan_interval) takes over; files dropped before and after the start are
    processed all the same, and the daemon stops cleanly."""
    first = spool.drop("before.txt", page_urls(origin, "before", 2))
    d = start_daemon(env=preload_env(**{fault: errno_name}), rescan_interval="300ms")
    warnings = d.events("watch_unavailable")
    assert len(warnings) == 1, d.stderr_text()
    w = warnings[0]
    assert w["level"] == "warning", w
    assert w["dir"] == spool.path("incoming"), w
    assert text in w["error"].lower() and errno_name in w["error"], w
    assert w["rescan_interval_ms"] == "300", w
    assert "periodic rescan" in w["note"] and "rescan_interval" in w["note"], w
    wait_complete(d, spool, ["before.txt"], timeout=10)
    second = spool.drop("after.txt", page_urls(origin, "after", 2))
    wait_complete(d, spool, ["after.txt"], timeout=10)
    for name, data in (("before.txt", first), ("after.txt", second)):
        assert len(spool.records(name)) == len(data.splitlines())
    assert len(d.events("watch_unavailable")) == 1, "warned more than once"
    assert d.stop() == 0


def test_65_02_a_watch_refused_otherwise_is_a_start_up_failure(start_daemon, spool, origin):
    """A watch refused for another reason than a resource limit (EACCES: incoming/ cannot be
    read, so no rescan could list it either) stops the start: exit 2, one line, nothing
    claimed."""
    spool.drop("waiting.txt", page_urls(origin, "waiting", 1))
    d = start_daemon(env=preload_env(HV_FAULT_INOTIFY_ADD_WATCH="EACCES"), ready=False)
    expect_startup_failure(d, "cannot watch", spool.path("incoming"), "permission denied")
    assert spool.files("incoming") == ["waiting.txt"] and spool.files("active") == []


# -------------------------------------------------------------------------- spool directories


def test_65_03_spool_dir_under_a_missing_path(start_daemon, tmp_path):
    """spool_dir under a path that does not exist: exit 2 naming it and the cause."""
    missing = str(tmp_path / "gone" / "spool")
    d = start_daemon(spool_dir=missing, ready=False)
    expect_startup_failure(d, "spool_dir", missing, "no such file or directory")


@pytest.fixture
def ro_mount(harvestd):
    """ro_mount(path): an empty read-only tmpfs on `path` (root only; skipped where mounting is
    refused), unmounted after the test once its daemons are gone."""
    mounted = []

    def mount(path):
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root")
        os.makedirs(path, exist_ok=True)
        try:
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k,mode=0755", "tmpfs",
                                   path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=30)
        except OSError as e:
            pytest.skip("cannot run mount: %s" % e)
        if done.returncode != 0:
            pytest.skip("cannot mount a tmpfs here: %s" % done.stdout.decode(errors="replace").strip())
        mounted.append(path)
        return path

    yield mount
    harvestd.cleanup()
    for path in mounted:
        if subprocess.run(["umount", path]).returncode != 0:
            subprocess.run(["umount", "-l", path])


def test_65_04_spool_dir_on_a_read_only_file_system(start_daemon, spool, ro_mount):
    """spool_dir exists on a read-only file system, without its subdirectories: exit 2 naming
    the first one and the cause, and what makes a spool read-only under systemd (the unit's
    ReadWritePaths= without it)."""
    ro_mount(spool.root)
    d = start_daemon(ready=False)
    expect_startup_failure(d, "cannot create", spool.path("incoming"), "read-only file system",
                           "under systemd, the unit's ReadWritePaths= must include spool_dir")


def test_65_05_out_on_a_read_only_file_system(start_daemon, spool, origin, ro_mount):
    """out/ cannot be written (a read-only mount): exit 2 naming it and the cause, instead of
    claiming the waiting file and failing on its output."""
    for sub in SPOOL_SUBDIRS:
        os.makedirs(spool.path(sub), exist_ok=True)
    ro_mount(spool.path("out"))
    spool.drop("waiting.txt", page_urls(origin, "waiting", 1))
    d = start_daemon(ready=False)
    expect_startup_failure(d, "cannot write", spool.path("out"), "read-only file system",
                           "ReadWritePaths= must include spool_dir")
    assert spool.files("incoming") == ["waiting.txt"] and spool.files("active") == []


class Denied:
    """A spool and config the daemon may use, but for one path it may not, by its mode. As root
    (whom modes do not stop) the daemon runs as nobody, outside tmp_path (whose parents only
    root may enter), on files nobody owns, but for the denied one, which root keeps."""

    def __init__(self, tmp_path):
        self.as_root = os.geteuid() == 0
        self.user = NOBODY if self.as_root else None
        if self.as_root:
            require_runs_as(NOBODY)
            self.base = tempfile.mkdtemp(prefix="harvestd-startup-")
            os.chmod(self.base, 0o755)
        else:
            self.base = str(tmp_path / "denied")
            os.makedirs(self.base)
        self.spool = Spool(os.path.join(self.base, "spool"))

    def config(self, **directives):
        values = dict(DAEMON_DEFAULTS, spool_dir=self.spool.root)
        values.update(directives)
        return write_config(os.path.join(self.base, "d.conf"), values)

    def deny(self, path):
        """Hand everything under base to the daemon's user, but `path`: a file it may not read
        or a directory it may not write."""
        if self.as_root:
            for dirpath, _, filenames in os.walk(self.base):
                for p in [dirpath] + [os.path.join(dirpath, f) for f in filenames]:
                    if p != path:
                        os.chown(p, NOBODY, NOBODY)
            os.chmod(path, 0o755 if os.path.isdir(path) else 0o600)
        else:
            os.chmod(path, 0o555 if os.path.isdir(path) else 0o000)

    def cleanup(self):
        for dirpath, dirnames, _ in os.walk(self.base):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture
def denied(harvestd, tmp_path):
    d = Denied(tmp_path)
    yield d
    harvestd.cleanup()
    d.cleanup()


def test_65_06_spool_subdirectory_cannot_be_created(harvestd, denied):
    """spool_dir exists but may not be written, and lacks its subdirectories: exit 2 naming the
    first one and the cause."""
    os.makedirs(denied.spool.root, exist_ok=True)
    config = denied.config()
    denied.deny(denied.spool.root)
    d = harvestd.start_daemon(config, user=denied.user)
    expect_startup_failure(d, "cannot create", denied.spool.path("incoming"), "permission denied")
    assert os.listdir(denied.spool.root) == []


@pytest.mark.parametrize("sub", SPOOL_SUBDIRS)
def test_65_07_spool_subdirectory_not_writable(harvestd, denied, origin, sub):
    """Every subdirectory exists, one may not be written (the daemon renames into and out of
    each, and writes out/): exit 2 naming it, nothing claimed."""
    for s in SPOOL_SUBDIRS:
        os.makedirs(denied.spool.path(s))
    denied.spool.drop("waiting.txt", page_urls(origin, "waiting", 1))
    config = denied.config()
    denied.deny(denied.spool.path(sub))
    d = harvestd.start_daemon(config, user=denied.user)
    expect_startup_failure(d, "cannot write", denied.spool.path(sub), "permission denied")
    assert denied.spool.files("incoming") == ["waiting.txt"]
    assert denied.spool.files("active") == []


# ----------------------------------------------------------- config, CA file, metrics address


def test_65_08_metrics_address_in_use(start_daemon, spool, origin):
    """The metrics address is bound already: exit 2 naming the address and the cause, before
    the spool is touched."""
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        listen = "127.0.0.1:%d" % busy.getsockname()[1]
        spool.drop("waiting.txt", page_urls(origin, "waiting", 1))
        d = start_daemon(metrics_listen=listen, ready=False)
        expect_startup_failure(d, "metrics_listen", listen, "address already in use")
    finally:
        busy.close()
    assert spool.files("incoming") == ["waiting.txt"]
    assert [s for s in SPOOL_SUBDIRS if os.path.exists(spool.path(s))] == ["incoming"]


def test_65_09_config_file_missing_or_a_directory(harvestd, tmp_path):
    """-c naming nothing, or a directory (which reads as an empty file): exit 2 naming the
    file and the errno's text."""
    for path, cause in ((str(tmp_path / "no-such.conf"), "no such file or directory"),
                        (str(tmp_path), "is a directory")):
        d = harvestd.start_daemon(path)
        expect_startup_failure(d, "config", path, cause)


def test_65_10_config_file_not_readable(harvestd, denied):
    """A config file the daemon may not read: exit 2 naming it and the cause."""
    config = denied.config()
    denied.deny(config)
    d = harvestd.start_daemon(config, user=denied.user)
    expect_startup_failure(d, "config", config, "permission denied")


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_65_11_ca_file_unreadable(start_daemon, spool, tmp_path, kind):
    """--ca-file naming nothing, or a directory: exit 2 naming the file and the errno's text,
    before the spool is touched."""
    path = str(tmp_path / "no-such-ca.pem") if kind == "missing" else str(tmp_path)
    cause = "no such file or directory" if kind == "missing" else "is a directory"
    d = start_daemon(ca_file=path, ready=False)
    expect_startup_failure(d, "CA", path, cause)
    assert not os.path.exists(spool.path("incoming"))
