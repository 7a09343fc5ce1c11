"""A DNS responder for tests that look names up, run inside a private network namespace.

    python3 resolver.py ADDRESS PORT [NAME=IPV4[,IPV4...] ...]

answers A queries for the NAMEs given with their addresses, AAAA queries for them with no
data, and every other query with NXDOMAIN. It prints "ready" once bound and serves until
killed. Standard library only; only what glibc's stub resolver sends is understood (one
question, no EDNS needed in the answer).
"""

import socket
import struct
import sys

NOERROR, NXDOMAIN, FORMERR = 0, 3, 1
TYPE_A, TYPE_AAAA, CLASS_IN = 1, 28, 1


def parse_question(msg):
    """(qname in lower case, qtype, end offset of the question) or None."""
    if len(msg) < 12:
        return None
    qdcount = struct.unpack("!H", msg[4:6])[0]
    if qdcount != 1:
        return None
    labels, i = [], 12
    while i < len(msg):
        n = msg[i]
        i += 1
        if n == 0:
            break
        if n & 0xC0 or i + n > len(msg):
            return None
        labels.append(msg[i:i + n].decode("ascii", "replace").lower())
        i += n
    if i + 4 > len(msg):
        return None
    qtype = struct.unpack("!H", msg[i:i + 2])[0]
    return ".".join(labels), qtype, i + 4


def answer(msg, names):
    q = parse_question(msg)
    flags = 0x8180  # response, recursion desired + available
    if q is None:
        return msg[:2] + struct.pack("!HHHHH", flags | FORMERR, 0, 0, 0, 0)
    name, qtype, end = q
    question = msg[12:end]
    addrs = names.get(name.rstrip("."))
    if addrs is None:
        return msg[:2] + struct.pack("!HHHHH", flags | NXDOMAIN, 1, 0, 0, 0) + question
    records = b""
    count = 0
    for a in addrs:
        if qtype == TYPE_A and ":" not in a:
            records += struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, 5, 4) + socket.inet_aton(a)
            count += 1
        elif qtype == TYPE_AAAA and ":" in a:
            records += (struct.pack("!HHHIH", 0xC00C, TYPE_AAAA, CLASS_IN, 5, 16)
                        + socket.inet_pton(socket.AF_INET6, a))
            count += 1
    return msg[:2] + struct.pack("!HHHHH", flags | NOERROR, 1, count, 0, 0) + question + records


def main(argv):
    address, port = argv[1], int(argv[2])
    names = {}
    for spec in argv[3:]:
        name, _, addrs = spec.partition("=")
        names[name.lower().rstrip(".")] = [a for a in addrs.split(",") if a]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((address, port))
    print("ready", flush=True)
    while True:
        msg, peer = sock.recvfrom(4096)
        sock.sendto(answer(msg, names), peer)


if __name__ == "__main__":
    main(sys.argv)
