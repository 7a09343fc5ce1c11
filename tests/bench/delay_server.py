"""A latency-bound origin for the benchmark: every HTTP request is answered after a fixed delay
(100 ms by default) with a small HTML page, on many loopback addresses at once.

One process serves a range of addresses on one port with asyncio (a Protocol, no streams: a
request costs a few tens of microseconds of Python); the benchmark starts several processes so
that the server is never the bottleneck at 10,000 requests/s on two cores. Addresses are
127.0.H.L with ADDRESS(k) below: on Linux the whole 127.0.0.0/8 is local, so each is a distinct
host for the client (its own connection pool and per-host limit) on the same machine.

  python3 delay_server.py --port P --first K --count N [--delay 0.1]

Binds 127.0.x.y:P for k = K .. K+N-1, prints one line "ready <pid>" on stdout once every socket
listens (or "error <text>" and exits 1 if one cannot be bound), serves until SIGTERM/SIGINT, then
prints one JSON line of statistics and exits 0:
  requests        responses sent
  connections     connections accepted
  lag_mean_ms / lag_p99_ms / lag_max_ms
                  how late responses left compared to arrival + delay: the event loop's lag,
                  i.e. how busy this process was (a saturated server shows lag growing to tens
                  of milliseconds)
  stall_p99_ms / stall_max_ms
                  how late a 10 ms ticker ran: time this process was runnable but not running
                  (a busy machine) or stuck in a long callback
  cpu_s, cpu_user_s, cpu_sys_s
                  CPU of this process while serving (on loopback the kernel's TCP work for the
                  peer is partly charged to the sender, so sys is not all the server's own)
  busy_s          the span from the first request to the last response (cpu_s / busy_s is the
                  share of one core this process used)
HTTP/1.1 keep-alive is honoured ("Connection: close" closes after the response); request
bodies are not expected (GET only). Requests pipelined on one connection are answered in order.
"""

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import sys

TITLE = "Latency test page"
BODY = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title></head>"
        "<body><h1>Delayed</h1><p>This page was served after a fixed delay — %s.</p></body>"
        "</html>\n" % (TITLE, "ok")).encode("utf-8")
HEAD = ("HTTP/1.1 200 OK\r\nServer: delay\r\nContent-Type: text/html; charset=utf-8\r\n"
        "Content-Length: %d\r\n" % len(BODY)).encode("ascii")
RESPONSE_KEEP = HEAD + b"Connection: keep-alive\r\n\r\n" + BODY
RESPONSE_CLOSE = HEAD + b"Connection: close\r\n\r\n" + BODY
MAX_HEAD = 64 * 1024
LAG_SAMPLES = 200_000


def address(k):
    """The k-th server address: 127.0.1.1 .. 127.0.1.250, 127.0.2.1 .. (never 127.0.0.x)."""
    return "127.0.%d.%d" % (1 + k // 250, 1 + k % 250)


class Stats:
    def __init__(self):
        self.requests = 0
        self.inflight = 0
        self.connections = 0
        self.lags = []
        self.lag_max = 0.0
        self.first = None
        self.last = None


class DelayProtocol(asyncio.Protocol):
    def __init__(self, loop, stats, delay):
        self.loop = loop
        self.stats = stats
        self.delay = delay
        self.transport = None
        self.buf = b""
        self.pending = []       # (due, keep) for requests not yet answered, in arrival order
        self.closed = False

    def connection_made(self, transport):
        self.transport = transport
        self.stats.connections += 1

    def data_received(self, data):
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    self.transport.close()
                return
            head = self.buf[:end].lower()
            self.buf = self.buf[end + 4:]
            keep = b"connection: close" not in head
            now = self.loop.time()
            if self.stats.first is None:
                self.stats.first = now
            self.stats.inflight += 1
            self.loop.call_at(now + self.delay, self.respond, now, keep)

    def respond(self, arrived, keep):
        self.stats.inflight -= 1
        if self.closed:
            return
        now = self.loop.time()
        lag = now - arrived - self.delay
        st = self.stats
        st.requests += 1
        st.last = now
        if len(st.lags) < LAG_SAMPLES:
            st.lags.append(lag)
        if lag > st.lag_max:
            st.lag_max = lag
        if keep:
            self.transport.write(RESPONSE_KEEP)
        else:
            self.transport.write(RESPONSE_CLOSE)
            self.transport.close()
            self.closed = True

    def connection_lost(self, exc):
        self.closed = True


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


async def ticker(loop, stats, stalls, period=0.01):
    """Measure how late the loop runs a periodic callback while requests are waiting."""
    while True:
        t = loop.time()
        busy = stats.inflight > 0
        await asyncio.sleep(period)
        if busy:
            stalls.append(max(0.0, loop.time() - t - period))


async def serve(args):
    loop = asyncio.get_running_loop()
    stats = Stats()
    servers = []
    for k in range(args.first, args.first + args.count):
        addr = address(k)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((addr, args.port))
        except OSError as e:
            sock.close()
            print("error cannot bind %s:%d: %s" % (addr, args.port, e), flush=True)
            return 1
        sock.listen(4096)
        sock.setblocking(False)
        servers.append(await loop.create_server(
            lambda: DelayProtocol(loop, stats, args.delay), sock=sock, backlog=4096))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    user0, sys0 = cpu_seconds()
    stalls = []
    tick = loop.create_task(ticker(loop, stats, stalls))
    print("ready %d" % os.getpid(), flush=True)
    await stop.wait()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_IGN)   # a second signal must not interrupt the report
    user1, sys1 = cpu_seconds()
    tick.cancel()
    stalls.sort()
    for s in servers:
        s.close()
    lags = sorted(stats.lags)
    busy = (stats.last - stats.first) if stats.first is not None and stats.last is not None else 0.0
    out = {
        "addresses": args.count,
        "requests": stats.requests,
        "connections": stats.connections,
        "lag_mean_ms": round(1000 * sum(lags) / len(lags), 3) if lags else 0.0,
        "lag_p99_ms": round(1000 * lags[int(0.99 * (len(lags) - 1))], 3) if lags else 0.0,
        "lag_max_ms": round(1000 * stats.lag_max, 3),
        "stall_p99_ms": round(1000 * stalls[int(0.99 * (len(stalls) - 1))], 3) if stalls else 0.0,
        "stall_max_ms": round(1000 * stalls[-1], 3) if stalls else 0.0,
        "cpu_s": round(user1 - user0 + sys1 - sys0, 3),
        "cpu_user_s": round(user1 - user0, 3),
        "cpu_sys_s": round(sys1 - sys0, 3),
        "busy_s": round(busy, 3),
    }
    print(json.dumps(out), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=125)
    ap.add_argument("--delay", type=float, default=0.1)
    args = ap.parse_args()
    try:
        rc = asyncio.run(serve(args))
    except KeyboardInterrupt:
        rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
