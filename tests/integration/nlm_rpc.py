#!/usr/bin/env python3
"""A raw NLM/NSM client (NFSv3 locking) for the integration tests, with a small
server of its own standing for the client host's portmapper, lock manager and
statd (the server calls back: NLM_GRANTED, *_RES, SM_NOTIFY).

  nlm_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT locks NAME
      two owners on two hosts: TEST/LOCK/UNLOCK conflicts, shared vs exclusive,
      splitting, 32-bit (v3) and 64-bit (v4) ranges, locks to the end of the file,
      SHARE/UNSHARE, FREE_ALL, a stale handle; NLM over UDP (the portmapper names the
      NFS port for it, and UDP locks conflict with TCP ones); then an NFSv4.1 client
      on the same file: v3 and v4 locks conflict both ways.
  nlm_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT blocking NAME CBPORT
      blocked LOCKs granted by an NLM_GRANTED call to the lock manager found through
      the portmapper on CBPORT (ours): after an NLM unlock, after an NFSv4 unlock;
      CANCEL takes a blocked request out; TEST_MSG answered by a TEST_RES call.
  nlm_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT hold NAME
      owner A locks [0,100) of NAME; prints the server's NSM state number.
  nlm_rpc.py HOST 0 0 0 EXPORT reclaim NAME CBPORT PORTSFILE OLDSTATE [MONNAME [SOURCE]]
      (before the server restarts) listens on CBPORT, waits for PORTSFILE
      ("NFSPORT MOUNTPORT PMAPPORT"), expects SM_NOTIFY with an odd state above
      OLDSTATE naming the server MONNAME (default HOST: the address the lock was
      taken through, as a client's statd knows the server) and sent from the
      address SOURCE (default HOST), then in grace: new locks and TESTs get
      DENIED_GRACE_PERIOD, A's reclaim is granted; after grace B's lock conflicts
      with A's reclaimed one.
Exit 0 when every check holds; "FAIL: ..." and exit 1 otherwise.
"""
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs_rpc import X, Conn, auth_sys, check, fail, lookup, mount  # noqa: E402

NLM, NSM, PMAP = 100021, 100024, 100000
GRANTED, DENIED, NOLOCKS, BLOCKED, GRACE, STALE_FH, FAILED = 0, 1, 2, 3, 4, 7, 9
P_TEST, P_LOCK, P_CANCEL, P_UNLOCK, P_GRANTED, P_TEST_MSG = 1, 2, 3, 4, 5, 6
P_TEST_RES, P_SHARE, P_UNSHARE, P_FREE_ALL = 11, 20, 21, 23
EOF_LEN = 0


class UdpConn:
    """Calls over UDP, as a lockd speaking UDP makes them: one datagram each way
    (the same call() as Conn's, so an Owner works over it)."""

    def __init__(self, host, port):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.settimeout(10)
        self.dest = (host, port)
        self.xid = 0x7000000
        self.last = None

    def call(self, prog, vers, proc, args=b"", cred=None, resend=False):
        if not resend:
            self.xid += 1
            cred = auth_sys() if cred is None else cred
            self.last = bytes(X().u32(self.xid).u32(0).u32(2).u32(prog).u32(vers).u32(proc)
                              .u32(1).opaque(cred).u32(0).opaque(b"").b) + args
        self.s.sendto(self.last, self.dest)
        r = X(self.s.recvfrom(65536)[0])
        check(r.gu32() == self.xid and r.gu32() == 1, "UDP reply header")
        if r.gu32() != 0:
            return ("denied", r)
        r.gu32(), r.gopaque()
        return r.gu32(), r

    def close(self):
        self.s.close()


class Owner:
    def __init__(self, conn, host, svid):
        self.c, self.host, self.svid = conn, host, svid
        self.oh = ("%d@%s" % (svid, host)).encode()
        self.cookie = 0
        self.cred = None        # AUTH_SYS body; None: root

    def alock(self, fh, off, length, vers=4):
        x = X().opaque(self.host.encode()).opaque(fh).opaque(self.oh).u32(self.svid)
        return x.u64(off).u64(length) if vers == 4 else x.u32(off).u32(length)

    def nextcookie(self):
        self.cookie += 1
        return struct.pack(">II", self.svid, self.cookie)

    def _res(self, proc, args, vers=4):
        st, r = self.c.call(NLM, vers, proc, bytes(args.b), cred=self.cred)
        check(st == 0, "NLM proc %d not accepted: %r" % (proc, st))
        cookie = r.gopaque()
        return cookie, r

    def test(self, fh, excl, off, length, vers=4):
        x = X().opaque(self.nextcookie()).u32(excl)
        x.fixed(bytes(self.alock(fh, off, length, vers).b))
        _, r = self._res(P_TEST, x, vers)
        stat = r.gu32()
        if stat != DENIED:
            return stat, None
        h = dict(excl=r.gu32(), svid=r.gu32(), oh=r.gopaque())
        if vers == 4:
            h["off"], h["len"] = r.gu64(), r.gu64()
        else:
            h["off"], h["len"] = r.gu32(), r.gu32()
        return stat, h

    def lock(self, fh, excl, off, length, block=False, reclaim=False, vers=4):
        x = X().opaque(self.nextcookie()).u32(block).u32(excl)
        x.fixed(bytes(self.alock(fh, off, length, vers).b)).u32(reclaim).u32(3)
        _, r = self._res(P_LOCK, x, vers)
        return r.gu32()

    def cancel(self, fh, excl, off, length):
        x = X().opaque(self.nextcookie()).u32(1).u32(excl)
        x.fixed(bytes(self.alock(fh, off, length).b))
        _, r = self._res(P_CANCEL, x)
        return r.gu32()

    def unlock(self, fh, off, length, vers=4):
        x = X().opaque(self.nextcookie()).fixed(bytes(self.alock(fh, off, length, vers).b))
        _, r = self._res(P_UNLOCK, x, vers)
        return r.gu32()

    def share(self, fh, mode, access, unshare=False):
        x = X().opaque(self.nextcookie()).opaque(self.host.encode()).opaque(fh).opaque(self.oh)
        x.u32(mode).u32(access).u32(0)
        _, r = self._res(P_UNSHARE if unshare else P_SHARE, x)
        stat = r.gu32()
        r.gu32()
        return stat


def expect(got, want, what):
    check(got == want, "%s: status %r, not %r" % (what, got, want))


def setup(name):
    host, nport, mport, pport, exp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), sys.argv[5]
    root = mount(host, mport, exp)
    c = Conn(host, nport)
    st, fh = lookup(c, root, name)
    check(st == 0, "LOOKUP %s: %d" % (name, st))
    return host, nport, pport, exp, c, fh


def getport(host, pport, prog, vers, prot=6):
    c = Conn(host, pport)
    st, r = c.call(PMAP, 2, 3, bytes(X().u32(prog).u32(vers).u32(prot).u32(0).b))
    check(st == 0, "GETPORT accepted")
    p = r.gu32()
    c.close()
    return p


def mode_locks(name):
    host, nport, pport, exp, c, fh = setup(name)
    for v in (1, 3, 4):
        check(getport(host, pport, NLM, v) == nport, "portmapper: NLM v%d not on the NFS port" % v)
    check(getport(host, pport, NSM, 1) == nport, "portmapper: NSM not on the NFS port")
    st, _ = c.call(NLM, 2, 0)
    check(st == 2, "NLM version 2 is not PROG_MISMATCH: %r" % (st,))
    a, b = Owner(c, "client-a", 1), Owner(Conn(host, nport), "client-b", 2)

    expect(a.lock(fh, 1, 0, 100), GRANTED, "A: exclusive [0,100)")
    expect(a.lock(fh, 1, 0, 100), GRANTED, "A: the same lock again (a retransmission)")
    st, h = b.test(fh, 1, 50, 10)
    expect(st, DENIED, "B: TEST exclusive [50,60)")
    check(h == dict(excl=1, svid=1, oh=a.oh, off=0, len=100), "TEST holder %r" % h)
    expect(b.test(fh, 0, 100, EOF_LEN)[0], GRANTED, "B: TEST shared from 100 to the end")
    expect(b.lock(fh, 1, 50, 10), DENIED, "B: exclusive [50,60) under A's")
    expect(b.lock(fh, 0, 99, 1), DENIED, "B: shared byte 99 under A's exclusive")
    # A downgrades: readers share.
    expect(a.lock(fh, 0, 0, 100), GRANTED, "A: downgrade [0,100) to shared")
    expect(b.lock(fh, 0, 10, 10), GRANTED, "B: shared [10,20) beside A's shared")
    expect(a.lock(fh, 1, 0, 5), GRANTED, "A: exclusive [0,5) outside B's range")
    expect(a.lock(fh, 1, 0, 20), DENIED, "A: exclusive [0,20) over B's shared [10,20)")
    expect(b.unlock(fh, 0, EOF_LEN), GRANTED, "B: unlock everything")
    # A splits: [0,5) excl, [5,100) shared; unlocking [40,60) leaves [5,40) and [60,100).
    expect(a.unlock(fh, 40, 20), GRANTED, "A: unlock [40,60)")
    expect(b.lock(fh, 1, 45, 10), GRANTED, "B: exclusive [45,55) in the hole A left")
    expect(b.lock(fh, 1, 30, 5), DENIED, "B: exclusive [30,35) on A's remaining left part")
    expect(b.lock(fh, 1, 60, 1), DENIED, "B: exclusive byte 60 on A's remaining right part")
    st, h = b.test(fh, 1, 0, 1)
    check(st == DENIED and h["excl"] == 1 and h["off"] == 0 and h["len"] == 5,
          "TEST of byte 0 names A's exclusive [0,5): %r %r" % (st, h))
    expect(b.unlock(fh, 0, EOF_LEN), GRANTED, "B: unlock everything")

    # 32-bit versions; a length of 0 reaches the end of any file in either.
    expect(a.lock(fh, 1, 1000, EOF_LEN, vers=3), GRANTED, "A (v3): exclusive from 1000 on")
    st, h = b.test(fh, 0, 1 << 40, 1)
    check(st == DENIED and h["off"] == 1000 and h["len"] == 0,
          "v4 TEST at 2^40 under A's v3 lock to the end: %r %r" % (st, h))
    st, h = b.test(fh, 0, 4000, 10, vers=1)
    check(st == DENIED and h["off"] == 1000 and h["len"] == 0, "v1 TEST: %r %r" % (st, h))
    expect(b.lock(fh, 1, 500, 500, vers=3), GRANTED, "B (v3): [500,1000) just below A's")
    expect(a.unlock(fh, 1000, EOF_LEN, vers=3), GRANTED, "A (v3): unlock from 1000 on")
    expect(b.lock(fh, 1, (1 << 63), 1 << 10), GRANTED, "B (v4): a lock above 2^63")
    st, h = a.test(fh, 1, (1 << 63) + 5, 1)
    check(st == DENIED and h["off"] == 1 << 63 and h["len"] == 1 << 10,
          "v4 TEST names the 64-bit range: %r %r" % (st, h))
    expect(b.unlock(fh, 0, EOF_LEN), GRANTED, "B: unlock everything")

    # SHARE: A reads and denies writers.
    expect(a.share(fh, 2, 1), GRANTED, "A: SHARE access read, deny write")
    expect(b.share(fh, 0, 2), DENIED, "B: SHARE access write against A's deny write")
    expect(b.share(fh, 0, 1), GRANTED, "B: SHARE access read")
    expect(a.share(fh, 2, 1, unshare=True), GRANTED, "A: UNSHARE")
    expect(b.share(fh, 0, 3), GRANTED, "B: SHARE access read/write after A's UNSHARE")
    expect(b.share(fh, 0, 3, unshare=True), GRANTED, "B: UNSHARE")

    # Host A restarted: its sm-notify asks the portmapper for NSM over UDP and sends
    # SM_NOTIFY over UDP; A's locks go. NFS itself is not served over UDP.
    expect(a.lock(fh, 1, 0, 100), GRANTED, "A: exclusive [0,100) before its restart")
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(10)

    def udp_call(port, prog, vers, proc, args):
        xid = 0x5eed0000 + proc
        u.sendto(bytes(X().u32(xid).u32(0).u32(2).u32(prog).u32(vers).u32(proc)
                       .u32(0).opaque(b"").u32(0).opaque(b"").b) + args, (host, port))
        r = X(u.recvfrom(65536)[0])
        check(r.gu32() == xid and r.gu32() == 1 and r.gu32() == 0, "UDP reply header")
        r.gu32(), r.gopaque()
        return r.gu32(), r
    st, r = udp_call(pport, PMAP, 2, 3, bytes(X().u32(NSM).u32(1).u32(17).u32(0).b))
    check(st == 0, "UDP GETPORT accepted")
    uport = r.gu32()
    check(uport == nport, "NSM over UDP is on port %d, not the NFS port" % uport)
    st, r = udp_call(pport, PMAP, 2, 3, bytes(X().u32(100003).u32(3).u32(17).u32(0).b))
    check(st == 0 and r.gu32() == 0, "the portmapper offers NFS over UDP")
    st, _ = udp_call(nport, 100003, 3, 0, b"")
    check(st == 1, "NFS NULL over UDP: accept %r, not PROG_UNAVAIL" % st)
    st, _ = udp_call(uport, NSM, 1, 6, bytes(X().opaque(b"client-a").u32(9).b))
    check(st == 0, "SM_NOTIFY over UDP accepted")
    u.close()
    expect(b.lock(fh, 1, 0, 40), GRANTED, "B: exclusive [0,40) after A's SM_NOTIFY over UDP")
    expect(b.unlock(fh, 0, EOF_LEN), GRANTED, "B: unlock everything")

    # NLM over UDP: the portmapper names the NFS port for it, and a UDP owner's locks
    # are the same locks as TCP owners' (one table).
    for v in (1, 3, 4):
        check(getport(host, pport, NLM, v, prot=17) == nport,
              "portmapper: NLM v%d over UDP not on the NFS port" % v)
    cu = UdpConn(host, nport)
    cc = Owner(cu, "client-c", 3)
    expect(cc.lock(fh, 1, 200, 100), GRANTED, "C over UDP: exclusive [200,300)")
    st, h = b.test(fh, 1, 250, 10)
    check(st == DENIED and h and h["svid"] == 3 and h["off"] == 200,
          "B (TCP): TEST under C's UDP lock: %r %r" % (st, h))
    expect(b.lock(fh, 0, 250, 10), DENIED, "B (TCP): shared [250,260) under C's UDP lock")
    st, r = cu.call(NLM, 4, P_LOCK, b"", resend=True)
    check(st == 0 and (r.gopaque(), r.gu32())[1] == GRANTED,
          "C's LOCK datagram again (a retransmission): %r" % (st,))
    expect(cc.lock(fh, 0, 400, 10, vers=3), GRANTED, "C over UDP (v3, 32-bit): shared [400,410)")
    expect(b.lock(fh, 1, 405, 1, vers=3), DENIED, "B (TCP, v3): exclusive byte 405 under C's")
    expect(cc.unlock(fh, 0, EOF_LEN), GRANTED, "C over UDP: unlock everything")
    expect(b.lock(fh, 1, 250, 10), GRANTED, "B (TCP): exclusive [250,260) after C's UDP unlock")
    expect(cc.test(fh, 1, 0, EOF_LEN)[0], DENIED, "C over UDP: TEST under B's lock")
    expect(b.unlock(fh, 0, EOF_LEN), GRANTED, "B: unlock everything")
    cu.close()

    # FREE_ALL: host A restarted; its locks go. Only A's own address may say so.
    expect(a.lock(fh, 1, 0, 100), GRANTED, "A: exclusive [0,100) again")
    other = Conn.__new__(Conn)
    other.s = socket.create_connection((host, nport), timeout=20, source_address=("127.0.0.2", 0))
    other.xid = 1
    for proc, prog, vers in ((P_FREE_ALL, NLM, 4), (6, NSM, 1)):
        st, _ = other.call(prog, vers, proc, bytes(X().opaque(b"client-a").u32(7).b))
        check(st == 0, "FREE_ALL / SM_NOTIFY from elsewhere accepted")
    other.close()
    expect(b.lock(fh, 1, 0, 40), DENIED, "B: A's lock after FREE_ALL/SM_NOTIFY from another address")
    st, _ = c.call(NLM, 4, P_FREE_ALL, bytes(X().opaque(b"client-a").u32(7).b))
    check(st == 0, "FREE_ALL accepted")
    expect(b.lock(fh, 1, 0, 40), GRANTED, "B: exclusive [0,40) after A's FREE_ALL")

    # Locking needs read permission (or ownership), as Linux's lockd asks.
    def chmod(mode):
        x = X().opaque(fh).u32(1).u32(mode).u32(0).u32(0).u32(0).u32(0).u32(0).u32(0)
        st, r = c.call(100003, 3, 2, bytes(x.b))
        check(st == 0 and r.gu32() == 0, "SETATTR mode %o" % mode)
    u = Owner(Conn(host, nport), "client-u", 5)
    u.cred = auth_sys(uid=4321, gid=4321)
    chmod(0o600)
    expect(u.lock(fh, 0, 0, 1), FAILED, "uid 4321: LOCK of a 0600 root file")
    expect(u.test(fh, 0, 0, 1)[0], FAILED, "uid 4321: TEST of a 0600 root file")
    expect(u.lock(fh, 0, 0, 1, vers=3), NOLOCKS, "uid 4321 (v3): LOCK of a 0600 root file")
    expect(u.unlock(fh, 0, 1), GRANTED, "uid 4321: UNLOCK (of nothing) is harmless")
    chmod(0o644)
    expect(u.lock(fh, 1, 5000, 1), GRANTED, "uid 4321: LOCK once it may read")
    expect(u.unlock(fh, 5000, 1), GRANTED, "uid 4321: UNLOCK")

    bad = bytearray(fh)
    bad[-1] ^= 0xFF
    expect(b.lock(bytes(bad), 1, 0, 1), STALE_FH, "LOCK with a damaged handle")
    st, _ = c.call(NLM, 4, P_LOCK, b"\0\0\0\x10")
    check(st == 4, "truncated LOCK arguments: accept %r, not GARBAGE_ARGS" % (st,))

    # NFSv4 on the same file: the one lock table.
    import nfs4_rpc as v4
    cl = v4.Client(host, nport, "nlm-test-v4").connect()
    st, osid, _ = cl.open(exp, name, False)
    check(st == 0, "v4 OPEN: %d" % st)
    PUT = v4.Op(v4.OP_PUTFH, X().opaque(fh).b)
    st, res = cl.compound([PUT, v4.op_lock(v4.WRITE_LT, 20, 10, osid, cl.clientid, b"v4lo")])
    check(st == v4.DENIED, "v4 LOCK [20,30) under B's NLM lock [0,40): %d, not DENIED" % st)
    d = res[-1][1]
    check(d["offset"] == 0 and d["length"] == 40 and d["clientid"] == 0 and
          d["owner"].startswith(b"nlm:client-b:2"), "v4 DENIED names the NLM lock: %r" % d)
    expect(b.unlock(fh, 0, EOF_LEN), GRANTED, "B: unlock everything")
    lsid = cl.ok([PUT, v4.op_lock(v4.WRITE_LT, 20, 10, osid, cl.clientid, b"v4lo")],
                 "v4 LOCK [20,30) once B let go")[-1]
    st, h = a.test(fh, 0, 25, 1)
    check(st == DENIED and h["off"] == 20 and h["len"] == 10 and h["oh"] == b"v4lo",
          "NLM TEST under the v4 lock: %r %r" % (st, h))
    expect(a.lock(fh, 0, 0, EOF_LEN), DENIED, "NLM shared lock of the whole file under v4's")
    expect(a.lock(fh, 0, 30, EOF_LEN), GRANTED, "NLM shared lock from 30 on, beside v4's")
    cl.ok([PUT, v4.op_locku(v4.WRITE_LT, lsid, 20, 10)], "v4 LOCKU")
    st, res = cl.compound([PUT, v4.op_lock(v4.WRITE_LT, 40, 1, osid, cl.clientid, b"v4lo2")])
    check(st == v4.DENIED, "v4 LOCK of byte 40 under A's NLM shared lock: %d" % st)
    cl.ok([PUT, v4.op_close(osid)], "v4 CLOSE")
    cl.goodbye()
    expect(a.unlock(fh, 0, EOF_LEN), GRANTED, "A: unlock everything")
    print("locks ok")


class Peer:
    """The client host's side: portmapper, lock manager and statd on one port.
    GETPORT answers this port for NLM and NSM; calls are recorded."""

    def __init__(self, port):
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", port))
        self.ls.listen(16)
        self.port = port
        self.calls = []          # (prog, vers, proc, X of args, the caller's address)
        self.cv = threading.Condition()
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            s, _ = self.ls.accept()
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def serve(self, s):
        def recvn(n):
            b = b""
            while len(b) < n:
                c = s.recv(n - len(b))
                if not c:
                    raise EOFError
                b += c
            return b
        try:
            while True:
                rec = b""
                while True:
                    v = struct.unpack(">I", recvn(4))[0]
                    rec += recvn(v & 0x7FFFFFFF)
                    if v & 0x80000000:
                        break
                x = X(rec)
                xid, _, _, prog, vers, proc = [x.gu32() for _ in range(6)]
                x.gu32(), x.gopaque(), x.gu32(), x.gopaque()
                body = X()
                if prog == PMAP and proc == 3:
                    p, v2 = x.gu32(), x.gu32()
                    body.u32(self.port if p in (NLM, NSM) else 0)
                elif prog == NLM and proc == P_GRANTED:
                    body.opaque(X(rec[x.p:]).gopaque()).u32(GRANTED)
                with self.cv:
                    if prog != PMAP:
                        self.calls.append((prog, vers, proc, X(rec[x.p:]), s.getpeername()[0]))
                    self.cv.notify_all()
                reply = X().u32(xid).u32(1).u32(0).u32(0).opaque(b"").u32(0)
                out = bytes(reply.b) + bytes(body.b)
                s.sendall(struct.pack(">I", 0x80000000 | len(out)) + out)
        except (EOFError, OSError):
            s.close()

    def wait(self, prog, proc, what, timeout=30):
        """The first recorded call of prog/proc (removed), waiting up to timeout."""
        end = time.time() + timeout
        with self.cv:
            while True:
                for i, cl in enumerate(self.calls):
                    if cl[0] == prog and cl[2] == proc:
                        return self.calls.pop(i)
                left = end - time.time()
                if left <= 0:
                    fail("no %s call from the server within %d s" % (what, timeout))
                self.cv.wait(left)


def granted_args(x):
    cookie = x.gopaque()
    excl = x.gu32()
    caller, fh, oh, svid = x.gopaque(), x.gopaque(), x.gopaque(), x.gu32()
    return dict(cookie=cookie, excl=excl, fh=fh, oh=oh, svid=svid, off=x.gu64(), len=x.gu64())


def mode_blocking(name, cbport):
    peer = Peer(cbport)
    host, nport, pport, exp, c, fh = setup(name)
    a, b = Owner(c, "client-a", 1), Owner(Conn(host, nport), "client-b", 2)
    d = Owner(Conn(host, nport), "client-d", 4)
    expect(a.lock(fh, 1, 0, 100), GRANTED, "A: exclusive [0,100)")
    expect(b.lock(fh, 1, 50, 10, block=True), BLOCKED, "B: blocking exclusive [50,60)")
    expect(b.lock(fh, 1, 50, 10, block=True), BLOCKED, "B: the same blocked request again")
    expect(a.unlock(fh, 0, EOF_LEN), GRANTED, "A: unlock")
    g = granted_args(peer.wait(NLM, P_GRANTED, "NLM_GRANTED")[3])
    check(g["svid"] == 2 and g["oh"] == b.oh and g["off"] == 50 and g["len"] == 10 and
          g["excl"] == 1 and g["fh"] == fh, "NLM_GRANTED arguments %r" % g)
    st, h = a.test(fh, 1, 55, 1)
    check(st == DENIED and h["svid"] == 2, "B holds [50,60) after the grant: %r %r" % (st, h))
    # Waiting on an NFSv4 lock: granted once v4 lets go (its unlock is not an NLM event).
    import nfs4_rpc as v4
    cl = v4.Client(host, nport, "nlm-block-v4").connect()
    st, osid, _ = cl.open(exp, name, False)
    check(st == 0, "v4 OPEN: %d" % st)
    PUT = v4.Op(v4.OP_PUTFH, X().opaque(fh).b)
    lsid = cl.ok([PUT, v4.op_lock(v4.WRITE_LT, 200, 100, osid, cl.clientid, b"v4lo")],
                 "v4 LOCK [200,300)")[-1]
    expect(a.lock(fh, 0, 250, 10, block=True), BLOCKED, "A: blocking shared [250,260) on v4's")
    cl.ok([PUT, v4.op_locku(v4.WRITE_LT, lsid, 200, 100)], "v4 LOCKU")
    g = granted_args(peer.wait(NLM, P_GRANTED, "NLM_GRANTED after the v4 unlock")[3])
    check(g["svid"] == 1 and g["off"] == 250 and g["excl"] == 0, "NLM_GRANTED %r" % g)
    cl.ok([PUT, v4.op_close(osid)], "v4 CLOSE")
    cl.goodbye()
    expect(a.unlock(fh, 0, EOF_LEN), GRANTED, "A: unlock")
    # CANCEL: A's blocked request goes; D's, granted in the same pass, proves it.
    expect(b.lock(fh, 1, 0, 100), GRANTED, "B: exclusive [0,100)")
    expect(a.lock(fh, 1, 0, 10, block=True), BLOCKED, "A: blocking [0,10)")
    expect(d.lock(fh, 1, 80, 10, block=True), BLOCKED, "D: blocking [80,90)")
    expect(a.cancel(fh, 1, 0, 10), GRANTED, "A: CANCEL of its blocked [0,10)")
    expect(a.cancel(fh, 1, 0, 10), DENIED, "A: CANCEL of nothing")
    expect(b.unlock(fh, 0, EOF_LEN), GRANTED, "B: unlock")
    g = granted_args(peer.wait(NLM, P_GRANTED, "NLM_GRANTED for D")[3])
    check(g["svid"] == 4, "the grant went to D: %r" % g)
    expect(b.test(fh, 1, 0, 10)[0], GRANTED, "nobody holds [0,10): A's request was cancelled")
    # TEST_MSG: the answer comes as a TEST_RES call.
    st, r = c.call(NLM, 4, P_TEST_MSG, bytes(X().opaque(b"msgcookie").u32(1)
                                              .fixed(bytes(a.alock(fh, 85, 1).b)).b))
    check(st == 0, "TEST_MSG accepted")
    x = peer.wait(NLM, P_TEST_RES, "TEST_RES")[3]
    check(x.gopaque() == b"msgcookie" and x.gu32() == DENIED and x.gu32() == 1 and
          x.gu32() == 4, "TEST_RES says D's exclusive lock denies")
    expect(d.unlock(fh, 0, EOF_LEN), GRANTED, "D: unlock")
    print("blocking ok")


def nsm_stat(host, port):
    c = Conn(host, port)
    st, r = c.call(NSM, 1, 1, bytes(X().opaque(b"client-a").b))
    check(st == 0, "SM_STAT accepted")
    check(r.gu32() == 0, "SM_STAT succeeds")
    s = r.gu32()
    c.close()
    return s


def mode_hold(name):
    host, nport, pport, exp, c, fh = setup(name)
    a = Owner(c, "client-a", 1)
    expect(a.lock(fh, 1, 0, 100), GRANTED, "A: exclusive [0,100)")
    s = nsm_stat(host, nport)
    check(s % 2 == 1, "NSM state %d is even while the server is up" % s)
    print(s)


def mode_reclaim(name, cbport, portsfile, old, monname=None, source=None):
    peer = Peer(cbport)
    open(portsfile + ".ready", "w").close()
    end = time.time() + 120
    while not os.path.exists(portsfile):
        check(time.time() < end, "no %s" % portsfile)
        time.sleep(0.1)
    time.sleep(0.1)
    ports = open(portsfile).read().split()
    sys.argv[2:5] = ports
    call = peer.wait(NSM, 6, "SM_NOTIFY")
    x, sender = call[3], call[4]
    mon, state = x.gopaque(), x.gu32()
    check(state % 2 == 1 and state > old, "SM_NOTIFY state %d after %d" % (state, old))
    # What a client's statd checks: mon_name and the sender both the server it monitors.
    want = (monname or sys.argv[1]).encode()
    check(mon == want, "SM_NOTIFY names %r, not %r" % (mon, want))
    check(sender == (source or sys.argv[1]), "SM_NOTIFY sent from %s, not %s" %
          (sender, source or sys.argv[1]))
    host, nport, pport, exp, c, fh = setup(name)
    check(nsm_stat(host, nport) == state, "SM_STAT agrees with SM_NOTIFY")
    a, b = Owner(c, "client-a", 1), Owner(Conn(host, nport), "client-b", 2)
    expect(b.lock(fh, 1, 200, 10), GRACE, "B: a new lock in grace")
    expect(b.test(fh, 1, 200, 10)[0], GRACE, "B: TEST in grace")
    expect(a.lock(fh, 1, 0, 100, reclaim=True), GRANTED, "A: reclaim of [0,100) in grace")
    end = time.time() + 120
    while True:
        st = b.lock(fh, 1, 50, 10)
        if st != GRACE:
            break
        check(time.time() < end, "grace did not end within 120 s")
        time.sleep(0.5)
    expect(st, DENIED, "B: exclusive [50,60) after grace, under A's reclaimed lock")
    expect(a.lock(fh, 1, 0, 100, reclaim=True), GRACE, "A: a reclaim after grace")
    expect(a.unlock(fh, 0, EOF_LEN), GRANTED, "A: unlock")
    expect(b.lock(fh, 1, 50, 10), GRANTED, "B: exclusive [50,60) once A let go")
    expect(b.unlock(fh, 0, EOF_LEN), GRANTED, "B: unlock")
    print("reclaim ok")


def main():
    mode = sys.argv[6]
    if mode == "locks":
        mode_locks(sys.argv[7])
    elif mode == "blocking":
        mode_blocking(sys.argv[7], int(sys.argv[8]))
    elif mode == "hold":
        mode_hold(sys.argv[7])
    elif mode == "reclaim":
        mode_reclaim(sys.argv[7], int(sys.argv[8]), sys.argv[9], int(sys.argv[10]),
                     *sys.argv[11:13])
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
