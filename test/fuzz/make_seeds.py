#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the seed corpora of the bootstrap and parameter fuzz targets (corpus/<target>/); the
# record layout is the one of fuzz_boot_conn.h. Rerun after changing a target's input format.
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SET_MAGIC, STALL = 1, 2
HELLO_ROOT, HELLO_RING, HELLO_P2P = 1, 2, 3


def hello(kind, rank, nranks, port=0):
    addr = struct.pack("<H", 2) + struct.pack(">H", port) + bytes([127, 0, 0, 1])
    return struct.pack("<QIiiI", 0, kind, rank, nranks, 0) + addr.ljust(28, b"\0") + b"\0" * 4


def rec(flags, data):
    assert len(data) < 256
    return bytes([flags, len(data)]) + data


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def root_seeds():
    t = "fuzz_boot_root"
    for n in (1, 2, 4):
        write(t, "ring%d" % n, b"".join(rec(SET_MAGIC, hello(HELLO_ROOT, r, n, 5000 + r)) for r in range(n)))
    good = [rec(SET_MAGIC, hello(HELLO_ROOT, r, 3, 6000 + r)) for r in range(3)]
    write(t, "junk_mix", rec(0, b"GET / HTTP/1.0\r\n\r\n") + good[0] + rec(0, hello(HELLO_ROOT, 1, 3))
          + rec(STALL, b"\x01\x02") + good[1] + rec(SET_MAGIC, hello(HELLO_RING, 2, 3)) + good[2])
    write(t, "missing", good[0] + good[2])
    write(t, "duplicate", good[0] + good[0] + good[1] + good[2])
    write(t, "truncated", rec(SET_MAGIC, hello(HELLO_ROOT, 0, 2)[:30]) + rec(SET_MAGIC | STALL, hello(HELLO_ROOT, 1, 2)[:40]))
    write(t, "bad_nranks", rec(SET_MAGIC, hello(HELLO_ROOT, 0, -1)) + rec(SET_MAGIC, hello(HELLO_ROOT, 5, 2)))


def msg(tag, payload):
    return struct.pack("<iIQ", tag, 0, len(payload)) + payload


def peer_seeds():
    t = "fuzz_boot_peer"
    conn, recv, me = 0x00 | SET_MAGIC, 0x10, 0x20

    def r(peer, tag, size):
        return rec(recv, bytes([peer, tag, size & 0xFF, size >> 8]))

    write(t, "p2p", bytes([4, 0]) + rec(conn, hello(HELLO_P2P, 1, 4) + msg(7, b"abcdefgh")) + r(1, 7, 8))
    write(t, "out_of_order", bytes([4, 0]) + rec(conn, hello(HELLO_P2P, 2, 4) + msg(3, b"x" * 4) + msg(9, b"y" * 16))
          + r(2, 9, 16) + r(2, 3, 4))
    write(t, "size_mismatch", bytes([2, 1]) + rec(conn, hello(HELLO_P2P, 0, 2) + msg(1, b"z" * 12)) + r(0, 1, 8))
    write(t, "truncated_msg", bytes([3, 0]) + rec(conn, hello(HELLO_P2P, 1, 3) + msg(2, b"q" * 40)[:30]) + r(1, 5, 1))
    write(t, "junk_then_peer", bytes([3, 2]) + rec(0, b"\xff" * 56) + rec(conn, hello(HELLO_RING, 0, 3))
          + rec(conn, hello(HELLO_P2P, 2, 3)) + rec(conn, hello(HELLO_P2P, 1, 3) + msg(4, b"ok"))
          + rec(conn, hello(HELLO_P2P, 1, 3)) + r(1, 4, 2))
    write(t, "self", bytes([2, 0]) + rec(me, b"\x05hello") + rec(me, b"\x05hello") + rec(me, b"\x06"))
    write(t, "stall", bytes([2, 0]) + rec(conn | STALL, hello(HELLO_P2P, 1, 2) + msg(1, b"")[:8]) + r(1, 1, 0))


def param_seeds():
    t = "fuzz_param"
    texts = [(0, "1"), (0, "yes"), (0, "0x10"), (0, "4KB"), (0, "-3"), (0, "9223372036854775807"),
             (0, "16G"), (1, "30"), (1, "0"), (1, "abc"), (2, "64M"), (2, "1T"), (3, "true"),
             (3, "2"), (4, "INIT,BOOT"), (4, "^NET, IB"), (5, "eth,ib\0eth0"), (5, "^=lo\0lo"),
             (5, "=eth0\0eth01")]
    for i, (sel, s) in enumerate(texts):
        write(t, "p%02d" % i, bytes([sel]) + s.encode())


root_seeds()
peer_seeds()
param_seeds()
