#!/usr/bin/env python3
"""Connection floods against cairnd's NFS or iSCSI listener, from chosen loopback
source addresses (127.0.0.2, 127.0.0.3, ... are all loopback and bindable).

Every connection is probed right after connect: an NFS NULL call, or for iSCSI the
first PDU of a login that announces more to come (C bit), which the target
acknowledges and then waits for. A reply means the daemon admitted the connection;
the end of the stream means it refused it.

  conn_flood.py caps PROTO PORT STATUS GO EXPECT_EVICTED SRC:N [SRC:N...]
      Opens N connections from each SRC in turn and writes to STATUS one line per SRC,
      "SRC admitted A refused R" (and "unanswered U" for connections the daemon did not
      accept within CONN_FLOOD_PROBE_WAIT seconds, default 30), then "evicted E" (admitted connections the daemon
      closed since, waiting up to 30 s for EXPECT_EVICTED of them) and "ready". Then
      holds the rest until file GO exists (at most 600 s), prints "closed at the end:
      N" (admitted connections the daemon closed by then) and exits 0.

  conn_flood.py idle PROTO PORT SRC N TIMEOUT
      Opens N connections from SRC and leaves them idle - for iSCSI, it dribbles their
      logins on, one continuation PDU every 0.3 s - and, for NFS, one more connection
      that sends a NULL call every 0.3 s. Exit 0 once the daemon has closed all N
      within TIMEOUT seconds and the busy one still answers; prints what it saw.
"""
import os
import select
import socket
import struct
import sys
import time

# How long a probe waits for its answer; a connection the daemon has not
# accepted by then (it stays in the listen backlog) counts as unanswered.
PROBE_WAIT = float(os.environ.get("CONN_FLOOD_PROBE_WAIT", "30"))


class Unanswered(Exception):
    pass


def connect(src, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def readable(s, timeout):
    """poll(), not select(): the floods hold more than FD_SETSIZE descriptors."""
    p = select.poll()
    p.register(s, select.POLLIN)
    return bool(p.poll(timeout * 1000))


def recv_exact(s, n, deadline):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unanswered()
        if not readable(s, left):
            continue
        try:
            chunk = s.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


class Nfs:
    xid = 1

    def ask(self, s):
        """Sends a NULL call; True on its reply, False when the stream ended."""
        Nfs.xid += 1
        body = struct.pack(">IIIIIIIIII", Nfs.xid, 0, 2, 100003, 3, 0, 0, 0, 0, 0)
        try:
            s.sendall(struct.pack(">I", 0x80000000 | len(body)) + body)
        except (BrokenPipeError, ConnectionResetError):
            return False
        deadline = time.monotonic() + PROBE_WAIT
        hdr = recv_exact(s, 4, deadline)
        if hdr is None:
            return False
        n = struct.unpack(">I", hdr)[0] & 0x7FFFFFFF
        rep = recv_exact(s, n, deadline)
        if rep is None:
            return False
        if struct.unpack(">I", rep[:4])[0] != Nfs.xid:
            raise RuntimeError("reply to another call")
        return True

    first = ask
    more = ask


class Iscsi:
    def __init__(self):
        self.n = 0

    def login_pdu(self, text):
        self.n += 1
        data = text + b"\0" * (-len(text) % 4)
        bhs = bytearray(48)
        bhs[0] = 0x43                 # immediate Login Request
        bhs[1] = 0x40                 # C: more text follows; CSG 0, NSG 0
        bhs[5:8] = len(text).to_bytes(3, "big")
        bhs[8:14] = (0x80).to_bytes(1, "big") + self.n.to_bytes(5, "big")  # ISID
        bhs[16:20] = self.n.to_bytes(4, "big")                                # ITT
        return bytes(bhs) + data

    def exchange(self, s, text):
        try:
            s.sendall(self.login_pdu(text))
        except (BrokenPipeError, ConnectionResetError):
            return False
        deadline = time.monotonic() + PROBE_WAIT
        bhs = recv_exact(s, 48, deadline)
        if bhs is None:
            return False
        if bhs[0] & 0x3F != 0x23 or bhs[36] != 0:
            raise RuntimeError("unexpected answer %r" % bhs[:4])
        dlen = int.from_bytes(bhs[5:8], "big")
        if dlen and recv_exact(s, dlen + (-dlen % 4), deadline) is None:
            return False
        return True

    def first(self, s):
        return self.exchange(s, b"InitiatorName=iqn.2026-12.org.cairn.test:flo")

    def more(self, s):
        return self.exchange(s, b"o")


def closed(s):
    """Whether the daemon ended the stream (without waiting)."""
    if not readable(s, 0):
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def proto_of(name):
    return Nfs() if name == "nfs" else Iscsi()


def caps(proto, port, status, go, expect_evicted, specs):
    held, pending, lines = [], [], []
    for spec in specs:
        src, n = spec.split(":")
        admitted = refused = unanswered = 0
        for _ in range(int(n)):
            s = connect(src, port)
            try:
                ok = proto.first(s)
            except Unanswered:
                unanswered += 1
                pending.append(s)
                continue
            if ok:
                admitted += 1
                held.append(s)
            else:
                refused += 1
                s.close()
        line = "%s admitted %d refused %d" % (src, admitted, refused)
        if unanswered:
            line += " unanswered %d" % unanswered
        lines.append(line)
    deadline = time.monotonic() + 30
    while True:
        gone = [s for s in held if closed(s)]
        if len(gone) >= expect_evicted or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    lines.append("evicted %d" % len(gone))
    with open(status + ".tmp", "w") as f:
        f.write("\n".join(lines + ["ready"]) + "\n")
    os.rename(status + ".tmp", status)
    deadline = time.monotonic() + 600
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.1)
    print("closed at the end: %d" % sum(1 for s in held if closed(s)))
    return 0


def idle(proto, port, src, n, timeout):
    conns = []
    for _ in range(n):
        s = connect(src, port)
        if not proto.first(s):
            print("connection %d refused" % len(conns))
            return 1
        conns.append(s)
    busy = None
    if isinstance(proto, Nfs):
        busy = connect(src, port)
        if not proto.first(busy):
            print("busy connection refused")
            return 1
    start = time.monotonic()
    open_ = list(conns)
    while open_ and time.monotonic() - start < timeout:
        time.sleep(0.3)
        still = []
        for s in open_:
            if closed(s):
                continue
            # An iSCSI login dribbled on: each PDU restarts the per-PDU timer.
            if isinstance(proto, Iscsi) and not proto.more(s):
                continue
            still.append(s)
        open_ = still
        if busy is not None and not proto.more(busy):
            print("the busy connection was closed after %.1f s" % (time.monotonic() - start))
            return 1
    print("%d of %d idle connections closed in %.1f s" % (n - len(open_), n,
                                                           time.monotonic() - start))
    return 0 if not open_ else 1


def main(argv):
    mode, proto, port = argv[1], proto_of(argv[2]), int(argv[3])
    if mode == "caps":
        return caps(proto, port, argv[4], argv[5], int(argv[6]), argv[7:])
    if mode == "idle":
        return idle(proto, port, argv[4], int(argv[5]), float(argv[6]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
