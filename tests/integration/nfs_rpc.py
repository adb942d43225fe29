#!/usr/bin/env python3
"""Raw ONC RPC probes of Cairn's NFS server, for the integration tests.

Speaks RFC 5531 record marking and XDR by hand, so it can send what no real
client sends: wrong programs, versions and procedures, bad credentials,
truncated and garbage arguments, absurd fragment headers, half records.

  nfs_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT rpc        RPC-level replies
  nfs_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT hostile    bad input; others still served
  nfs_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT proto      NFSv3/MOUNT details libnfs hides
  nfs_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT savefh F   prints F's handle (hex)
  nfs_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT usefh HEX  GETATTR with a saved handle
  nfs_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT verifier   prints the write verifier
  nfs_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT hammer HEX N
      connects as soon as the NFS port takes connections (the daemon may still be
      starting), then GETATTR and WRITE with a saved handle until N succeeded; every
      answer must be NFS3_OK or NFS3ERR_JUKEBOX (then retried), never STALE
  nfs_rpc.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT watch HEX STOPFILE
      GETATTR with a saved handle over and over until STOPFILE exists; the same rule
Exit 0 when every check holds; "FAIL: ..." and exit 1 otherwise.
"""
import os
import random
import socket
import struct
import subprocess
import sys
import time

NFS, MOUNT, PMAP = 100003, 100005, 100000


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class X:
    """XDR packer/unpacker."""

    def __init__(self, data=b""):
        self.b = bytearray(data)
        self.p = 0

    def u32(self, v):
        self.b += struct.pack(">I", v & 0xFFFFFFFF)
        return self

    def u64(self, v):
        self.b += struct.pack(">Q", v)
        return self

    def opaque(self, d):
        self.u32(len(d))
        self.b += d + b"\0" * ((4 - len(d) % 4) % 4)
        return self

    def fixed(self, d):
        self.b += d + b"\0" * ((4 - len(d) % 4) % 4)
        return self

    def gu32(self):
        if self.p + 4 > len(self.b):
            fail("short reply")
        v = struct.unpack_from(">I", self.b, self.p)[0]
        self.p += 4
        return v

    def gu64(self):
        return self.gu32() << 32 | self.gu32()

    def gopaque(self):
        n = self.gu32()
        d = bytes(self.b[self.p:self.p + n])
        self.p += (n + 3) & ~3
        return d

    def gfixed(self, n):
        d = bytes(self.b[self.p:self.p + n])
        self.p += (n + 3) & ~3
        return d


def auth_sys(uid=0, gid=0, machine=b"probe"):
    body = X().u32(0).opaque(machine).u32(uid).u32(gid).u32(0)
    return bytes(body.b)


class Conn:
    def __init__(self, host, port, reserved=False):
        if not reserved:
            self.s = socket.create_connection((host, port), timeout=20)
        else:
            # A privileged source port (we run as root), as kernel clients use.
            for _ in range(200):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    s.bind(("127.0.0.1", random.randrange(600, 1024)))
                    s.settimeout(20)
                    s.connect((host, port))
                    break
                except OSError:
                    s.close()
            else:
                fail("no free privileged port")
            self.s = s
        self.xid = random.randrange(1, 1 << 30)

    def send_record(self, payload):
        self.s.sendall(struct.pack(">I", 0x80000000 | len(payload)) + payload)

    def recv_record(self):
        data = b""
        while True:
            hdr = self.recvn(4)
            v = struct.unpack(">I", hdr)[0]
            data += self.recvn(v & 0x7FFFFFFF)
            if v & 0x80000000:
                return data

    def recvn(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise EOFError("connection closed")
            b += c
        return b

    def call_raw(self, prog, vers, proc, args=b"", flavor=1, cred=None, rpcvers=2):
        self.xid += 1
        if cred is None:
            cred = auth_sys() if flavor == 1 else b""
        x = X().u32(self.xid).u32(0).u32(rpcvers).u32(prog).u32(vers).u32(proc)
        x.u32(flavor).opaque(cred).u32(0).opaque(b"")
        self.send_record(bytes(x.b) + args)
        r = X(self.recv_record())
        check(r.gu32() == self.xid, "reply xid")
        check(r.gu32() == 1, "not a reply")
        return r

    def call(self, prog, vers, proc, args=b"", **kw):
        """Returns (accept_stat, X positioned at results)."""
        r = self.call_raw(prog, vers, proc, args, **kw)
        stat = r.gu32()
        if stat != 0:
            return ("denied", r)
        r.gu32()
        r.gopaque()  # verifier
        return (r.gu32(), r)

    def close(self):
        self.s.close()


def ctx():
    a = sys.argv
    return a[1], int(a[2]), int(a[3]), int(a[4]), a[5]


def mount(host, mport, path):
    c = Conn(host, mport)
    st, r = c.call(MOUNT, 3, 1, bytes(X().opaque(path.encode()).b))
    check(st == 0, "MNT accept %r" % (st,))
    status = r.gu32()
    check(status == 0, "MNT %s: status %d" % (path, status))
    fh = r.gopaque()
    n = r.gu32()
    flavors = [r.gu32() for _ in range(n)]
    check(1 in flavors, "MNT flavors %r lack AUTH_SYS" % flavors)
    c.close()
    return fh


def fattr(r):
    t, mode, nlink, uid, gid = [r.gu32() for _ in range(5)]
    size, used = r.gu64(), r.gu64()
    r.gu32(), r.gu32()
    fsid, fileid = r.gu64(), r.gu64()
    times = [(r.gu32(), r.gu32()) for _ in range(3)]
    return dict(type=t, mode=mode, nlink=nlink, uid=uid, gid=gid, size=size, fileid=fileid,
                fsid=fsid, times=times)


def post_attr(r):
    return fattr(r) if r.gu32() else None


def wcc(r):
    if r.gu32():
        r.gu64(), r.gu32(), r.gu32(), r.gu32(), r.gu32()
    return post_attr(r)


def lookup(c, dfh, name):
    st, r = c.call(NFS, 3, 3, bytes(X().opaque(dfh).opaque(name.encode()).b))
    check(st == 0, "LOOKUP accept")
    status = r.gu32()
    if status != 0:
        return status, None
    fh = r.gopaque()
    return 0, fh


def getattr_status(c, fh):
    st, r = c.call(NFS, 3, 1, bytes(X().opaque(fh).b))
    check(st == 0, "GETATTR accept %r" % (st,))
    return r.gu32(), r


def mode_rpc():
    host, nport, mport, pport, exp = ctx()
    c = Conn(host, nport)
    check(c.call(NFS, 3, 0)[0] == 0, "NFS NULL")
    check(c.call(NFS, 2, 0)[0] == 2, "NFS v2 must be PROG_MISMATCH")
    st, r = c.call(NFS, 7, 0)
    check(st == 2 and (r.gu32(), r.gu32()) == (3, 4), "PROG_MISMATCH low/high")
    check(c.call(123456, 1, 0)[0] == 1, "unknown program must be PROG_UNAVAIL")
    check(c.call(NFS, 3, 99)[0] == 3, "procedure 99 must be PROC_UNAVAIL")
    check(c.call(NFS, 3, 1, b"\0\0\0")[0] == 4, "truncated GETATTR must be GARBAGE_ARGS")
    check(c.call(NFS, 3, 1, bytes(X().u32(5000).b))[0] == 4, "absurd handle length: GARBAGE_ARGS")
    check(c.call(MOUNT, 3, 0)[0] == 0, "MOUNT on the NFS port")
    # RPCSEC_GSS (6): AUTH_ERROR.
    r = c.call_raw(NFS, 3, 0, flavor=6, cred=b"\0" * 8)
    check(r.gu32() == 1 and r.gu32() == 1, "unknown flavor must be MSG_DENIED/AUTH_ERROR")
    # RPC version 3: RPC_MISMATCH 2..2
    r = c.call_raw(NFS, 3, 0, rpcvers=3)
    check(r.gu32() == 1 and r.gu32() == 0 and r.gu32() == 2 and r.gu32() == 2, "RPC_MISMATCH")
    # AUTH_NONE works for NULL
    check(c.call(NFS, 3, 0, flavor=0)[0] == 0, "AUTH_NONE NULL")
    c.close()

    if pport:
        p = Conn(host, pport)
        st, r = p.call(PMAP, 2, 3, bytes(X().u32(NFS).u32(3).u32(6).u32(0).b))
        check(st == 0 and r.gu32() == nport, "PMAP GETPORT nfs")
        st, r = p.call(PMAP, 2, 3, bytes(X().u32(MOUNT).u32(3).u32(6).u32(0).b))
        check(st == 0 and r.gu32() == mport, "PMAP GETPORT mount")
        st, r = p.call(PMAP, 2, 3, bytes(X().u32(4242).u32(1).u32(6).u32(0).b))
        check(st == 0 and r.gu32() == 0, "PMAP GETPORT unknown")
        st, r = p.call(PMAP, 2, 4)
        progs = set()
        while r.gu32():
            progs.add((r.gu32(), r.gu32(), r.gu32(), r.gu32()))
        check((NFS, 3, 6, nport) in progs and (MOUNT, 3, 6, mport) in progs, "PMAP DUMP %r" % progs)
        for v in (3, 4):
            args = X().u32(NFS).u32(3).opaque(b"tcp").opaque(b"").opaque(b"")
            st, r = p.call(PMAP, v, 3, bytes(args.b))
            ua = r.gopaque().decode()
            parts = ua.split(".")
            check(st == 0 and int(parts[-2]) * 256 + int(parts[-1]) == nport,
                  "rpcbind v%d GETADDR: %s" % (v, ua))
        p.close()

    m = Conn(host, mport)
    st, r = m.call(MOUNT, 3, 5)
    exports = []
    while r.gu32():
        d = r.gopaque().decode()
        groups = []
        while r.gu32():
            groups.append(r.gopaque().decode())
        exports.append((d, groups))
    check(any(d == exp for d, _ in exports), "EXPORT lacks %s: %r" % (exp, exports))
    st, r = m.call(MOUNT, 3, 1, bytes(X().opaque(b"/no/such/export").b))
    check(st == 0 and r.gu32() == 2, "MNT of an unknown path must be MNT3ERR_NOENT")
    mount(host, mport, exp)
    st, r = m.call(MOUNT, 3, 2)
    dumped = []
    while r.gu32():
        dumped.append((r.gopaque().decode(), r.gopaque().decode()))
    check(any(d == exp for _, d in dumped), "DUMP lacks %s: %r" % (exp, dumped))
    check(m.call(MOUNT, 3, 3, bytes(X().opaque(exp.encode()).b))[0] == 0, "UMNT")
    check(m.call(MOUNT, 3, 4)[0] == 0, "UMNTALL")
    st, r = m.call(MOUNT, 3, 2)
    check(r.gu32() == 0, "DUMP after UMNTALL is not empty")
    st, r = m.call(MOUNT, 1, 5)
    check(st == 0, "MOUNT v1 EXPORT")
    m.close()
    print("rpc ok")


def other_client_works(host, nport, rootfh):
    c = Conn(host, nport)
    status, _ = getattr_status(c, rootfh)
    c.close()
    check(status == 0, "a well-behaved client is not served (status %d)" % status)


def expect_closed(s, what):
    s.settimeout(20)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return
    except (ConnectionResetError, BrokenPipeError):
        return
    except socket.timeout:
        fail("%s: connection not closed" % what)


def read3_args(fh, off, count):
    return bytes(X().opaque(fh).u64(off).u32(count).b)


def read3_data(r):
    """The data of a READ reply positioned at its results (status checked)."""
    check(r.gu32() == 0, "READ status")
    post_attr(r)
    count, eof = r.gu32(), r.gu32()
    data = r.gopaque()
    check(len(data) == count, "READ count %d, data %d" % (count, len(data)))
    return data


def lent_reads_queued(host, nport, rootfh, exp):
    """1 MiB READs of a cached file pipelined and left unread, so their replies
    wait in the server's queue with their data lent by the ARC, while another
    connection rewrites the file and a sync frees its old blocks: every reply,
    read at the end, is whole and holds each record as it was either before or
    after its rewrite (the queued replies keep the ARC's buffers)."""
    w = Conn(host, nport)
    name = "lent-%d" % os.getpid()
    sattr = X().u32(0).u32(0).u32(0).u32(0).u32(0).u32(0)
    st, r = w.call(NFS, 3, 8, bytes(X().opaque(rootfh).opaque(name.encode()).u32(0)
                                    .fixed(bytes(sattr.b)).b))
    check(st == 0 and r.gu32() == 0, "CREATE %s" % name)
    status, fh = lookup(w, rootfh, name)
    check(status == 0, "LOOKUP %s" % name)
    mib, rec = 1 << 20, 128 << 10  # the share's recordsize
    text = (b"lent buffers stay held while queued\n" * 30000)[: mib // 2]
    versions = [[os.urandom(mib // 2) + text for _ in range(4)] for _ in range(2)]

    def write_all(v):
        for i, chunk in enumerate(versions[v]):
            st, r = w.call(NFS, 3, 7, bytes(X().opaque(fh).u64(i * mib).u32(mib).u32(2)
                                            .opaque(chunk).b))
            check(st == 0 and r.gu32() == 0, "WRITE %d of version %d" % (i, v))

    # A property change is a sync task: the txg holding the writes syncs (and
    # frees the blocks they replaced, out of the ARC too).
    cli = os.path.join(os.environ["CAIRN_BIN"], "cairn")

    def sync(atime):
        subprocess.run([cli, "set", "atime=" + atime, exp.strip("/")], check=True,
                       stdout=subprocess.DEVNULL)

    write_all(0)
    sync("off")  # clean records, read from their blocks (not dirty copies)
    for _ in range(3):  # into the ARC, then hot (decompressed copies kept)
        for i in range(4):
            st, r = w.call(NFS, 3, 6, read3_args(fh, i * mib, mib))
            check(st == 0 and read3_data(r) == versions[0][i], "READ %d before" % i)
    c = Conn(host, nport)
    n = 24
    xids = {}
    for k in range(n):
        c.xid += 1
        xids[c.xid] = k % 4
        x = X().u32(c.xid).u32(0).u32(2).u32(NFS).u32(3).u32(6).u32(1).opaque(auth_sys())
        x.u32(0).opaque(b"")
        c.send_record(bytes(x.b) + read3_args(fh, (k % 4) * mib, mib))
    write_all(1)
    sync("on")  # the old blocks are freed while their bytes wait unsent
    seen = 0
    for _ in range(n):
        r = X(c.recv_record())
        xid = r.gu32()
        check(xid in xids, "queued READ: unknown xid")
        check(r.gu32() == 1 and r.gu32() == 0, "queued READ: not an accepted reply")
        r.gu32()
        r.gopaque()
        check(r.gu32() == 0, "queued READ: accept status")
        data = read3_data(r)
        i = xids.pop(xid)
        check(len(data) == mib, "queued READ of MiB %d: %d bytes" % (i, len(data)))
        # A READ may overlap the WRITE of its range (a large write lets reads
        # of the file go on), so each record is old or new, never other bytes.
        for j in range(0, mib, rec):
            check(data[j:j + rec] in (versions[0][i][j:j + rec], versions[1][i][j:j + rec]),
                  "queued READ of MiB %d, record at %d: neither the old nor the new bytes"
                  % (i, j))
        seen += 1
    check(seen == n, "queued READs: %d replies" % seen)
    c.close()
    w.close()


def mode_hostile():
    host, nport, mport, pport, exp = ctx()
    rootfh = mount(host, mport, exp)
    # A huge fragment header: closed.
    s = socket.create_connection((host, nport))
    s.sendall(struct.pack(">I", 0x80000000 | 0x7FFFFFFF))
    expect_closed(s, "2 GiB fragment")
    s.close()
    # A record over the 1 MiB + 64 KiB limit built from small fragments: closed.
    s = socket.create_connection((host, nport))
    try:
        for _ in range(40):
            s.sendall(struct.pack(">I", 65536) + b"\0" * 65536)
    except (BrokenPipeError, ConnectionResetError):
        pass
    expect_closed(s, "oversized multi-fragment record")
    s.close()
    # Not a call (a REPLY message type): closed, nothing sent.
    s = socket.create_connection((host, nport))
    s.sendall(struct.pack(">I", 0x80000000 | 8) + struct.pack(">II", 1, 1))
    expect_closed(s, "a reply sent to the server")
    s.close()
    # Slowloris: half a record, left hanging, while others are served.
    slow = [socket.create_connection((host, nport)) for _ in range(20)]
    for s in slow:
        s.sendall(struct.pack(">I", 0x80000000 | 200) + b"\0" * 50)
    other_client_works(host, nport, rootfh)
    # Many calls in flight on one connection, replies read only at the end
    # (backpressure, not a stall of others).
    c = Conn(host, nport)
    for i in range(200):
        c.xid += 1
        x = X().u32(c.xid).u32(0).u32(2).u32(NFS).u32(3).u32(1).u32(1).opaque(auth_sys())
        x.u32(0).opaque(b"").opaque(rootfh)
        c.send_record(bytes(x.b))
    other_client_works(host, nport, rootfh)
    got = set()
    for i in range(200):
        r = X(c.recv_record())
        got.add(r.gu32())
    check(len(got) == 200, "pipelined calls: %d distinct replies" % len(got))
    c.close()
    lent_reads_queued(host, nport, rootfh, exp)
    # Randomized garbage: every reply is well formed or the connection closes;
    # the server keeps serving.
    rnd = random.Random(int(os.environ.get("CAIRN_TEST_SEED", "1")))
    for i in range(300):
        s = socket.create_connection((host, nport))
        s.settimeout(10)
        kind = rnd.randrange(4)
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
        if kind == 0:
            payload = body
        else:
            prog = rnd.choice([NFS, MOUNT, PMAP, rnd.randrange(1 << 32)])
            vers = rnd.choice([1, 2, 3, 4, rnd.randrange(1 << 32)])
            proc = rnd.randrange(25) if kind < 3 else rnd.randrange(1 << 32)
            hdr = X().u32(i).u32(0).u32(2).u32(prog).u32(vers).u32(proc).u32(1).opaque(auth_sys())
            hdr.u32(0).opaque(b"")
            if kind == 2:
                hdr.opaque(rootfh)
            payload = bytes(hdr.b) + body
        try:
            s.sendall(struct.pack(">I", 0x80000000 | len(payload)) + payload)
            hdr = s.recv(4)
            if hdr:
                n = struct.unpack(">I", hdr)[0] & 0x7FFFFFFF
                d = b""
                while len(d) < n:
                    ch = s.recv(n - len(d))
                    if not ch:
                        break
                    d += ch
                check(len(d) == n, "garbage %d: short reply" % i)
        except (ConnectionResetError, BrokenPipeError, socket.timeout):
            pass
        s.close()
    other_client_works(host, nport, rootfh)
    for s in slow:
        s.close()
    print("hostile ok")


def mode_proto():
    host, nport, mport, pport, exp = ctx()
    rootfh = mount(host, mport, exp)
    c = Conn(host, nport)
    # FSINFO
    st, r = c.call(NFS, 3, 19, bytes(X().opaque(rootfh).b))
    check(st == 0 and r.gu32() == 0, "FSINFO")
    post_attr(r)
    rtmax, rtpref, rtmult, wtmax, wtpref, wtmult, dtpref = [r.gu32() for _ in range(7)]
    check(rtmax == 1 << 20 and wtmax == 1 << 20, "FSINFO rtmax/wtmax %d/%d" % (rtmax, wtmax))
    check(rtpref == 131072 and wtpref == 131072, "FSINFO prefs from recordsize: %d" % rtpref)
    maxfile = r.gu64()
    check(maxfile >= 1 << 40, "maxfilesize")
    # PATHCONF
    st, r = c.call(NFS, 3, 20, bytes(X().opaque(rootfh).b))
    check(st == 0 and r.gu32() == 0, "PATHCONF")
    post_attr(r)
    linkmax, namemax = r.gu32(), r.gu32()
    check(namemax == 255, "name_max %d" % namemax)
    # FSSTAT
    st, r = c.call(NFS, 3, 18, bytes(X().opaque(rootfh).b))
    check(st == 0 and r.gu32() == 0, "FSSTAT")
    # garbage handle: BADHANDLE
    status, _ = getattr_status(c, b"\x01" * 12)
    check(status == 10001, "garbage handle: %d, expected BADHANDLE" % status)
    # CREATE EXCLUSIVE twice with the same verifier: same file; another verifier: EXIST
    name = "excl-%d" % os.getpid()
    verf = b"V" * 8
    args = X().opaque(rootfh).opaque(name.encode()).u32(2).fixed(verf)
    st, r = c.call(NFS, 3, 8, bytes(args.b))
    check(st == 0 and r.gu32() == 0, "CREATE EXCLUSIVE")
    st, r = c.call(NFS, 3, 8, bytes(args.b))
    check(st == 0 and r.gu32() == 0, "CREATE EXCLUSIVE retransmission")
    args = X().opaque(rootfh).opaque(name.encode()).u32(2).fixed(b"W" * 8)
    st, r = c.call(NFS, 3, 8, bytes(args.b))
    check(st == 0 and r.gu32() == 17, "CREATE EXCLUSIVE, other verifier: EXIST")
    # GUARDED on an existing name: EXIST
    sattr = X().u32(0).u32(0).u32(0).u32(0).u32(0).u32(0)
    args = X().opaque(rootfh).opaque(name.encode()).u32(1).fixed(bytes(sattr.b))
    st, r = c.call(NFS, 3, 8, bytes(args.b))
    check(st == 0 and r.gu32() == 17, "CREATE GUARDED on an existing name: EXIST")
    # WRITE FILE_SYNC with wcc and the verifier; COMMIT gives the same verifier
    status, fh = lookup(c, rootfh, name)
    check(status == 0, "LOOKUP %s" % name)
    args = X().opaque(fh).u64(0).u32(5).u32(2).opaque(b"hello")
    st, r = c.call(NFS, 3, 7, bytes(args.b))
    check(st == 0 and r.gu32() == 0, "WRITE")
    after = wcc(r)
    check(after and after["size"] == 5, "WRITE wcc post size")
    count, committed = r.gu32(), r.gu32()
    wverf = r.gfixed(8)
    check(count == 5 and committed == 2, "WRITE FILE_SYNC count/committed %d/%d" % (count, committed))
    st, r = c.call(NFS, 3, 21, bytes(X().opaque(fh).u64(0).u32(0).b))
    check(st == 0 and r.gu32() == 0, "COMMIT")
    wcc(r)
    check(r.gfixed(8) == wverf, "COMMIT verifier differs from WRITE's")
    # READ past the end: eof, 0 bytes
    st, r = c.call(NFS, 3, 6, bytes(X().opaque(fh).u64(100).u32(10).b))
    check(st == 0 and r.gu32() == 0, "READ past eof")
    post_attr(r)
    check(r.gu32() == 0 and r.gu32() == 1, "READ past eof: count 0, eof")
    # SETATTR with a wrong ctime guard: NOT_SYNC
    sattr = X().u32(1).u32(0o600).u32(0).u32(0).u32(0).u32(0).u32(0)
    args = X().opaque(fh).fixed(bytes(sattr.b)).u32(1).u32(1).u32(2)
    st, r = c.call(NFS, 3, 2, bytes(args.b))
    check(st == 0 and r.gu32() == 10002, "SETATTR with a stale guard: NOT_SYNC")
    # READDIR with a tiny count: TOOSMALL; READDIRPLUS cookie verifier round trip
    args = X().opaque(rootfh).u64(0).fixed(b"\0" * 8).u32(60)
    st, r = c.call(NFS, 3, 16, bytes(args.b))
    check(st == 0 and r.gu32() == 10005, "READDIR count 60: TOOSMALL")
    args = X().opaque(rootfh).u64(0).fixed(b"\0" * 8).u32(512).u32(1024)
    st, r = c.call(NFS, 3, 17, bytes(args.b))
    check(st == 0 and r.gu32() == 0, "READDIRPLUS")
    post_attr(r)
    cverf = r.gfixed(8)
    last = None
    n = 0
    while r.gu32():
        r.gu64()
        r.gopaque()
        last = r.gu64()
        post_attr(r)
        if r.gu32():
            r.gopaque()
        n += 1
    check(len(r.b) - 4 <= 1024 + 28, "READDIRPLUS reply over maxcount")
    check(n >= 1, "READDIRPLUS returned no entry")
    args = X().opaque(rootfh).u64(last).fixed(cverf).u32(512).u32(4096)
    st, r = c.call(NFS, 3, 17, bytes(args.b))
    check(st == 0 and r.gu32() == 0, "READDIRPLUS continued with the verifier")
    args = X().opaque(rootfh).u64(last).fixed(b"\xde\xad" * 4).u32(512).u32(4096)
    st, r = c.call(NFS, 3, 17, bytes(args.b))
    check(st == 0 and r.gu32() == 10003, "READDIRPLUS with a wrong verifier: BAD_COOKIE")
    # REMOVE, then the handle is stale
    st, r = c.call(NFS, 3, 12, bytes(X().opaque(rootfh).opaque(name.encode()).b))
    check(st == 0 and r.gu32() == 0, "REMOVE")
    status, _ = getattr_status(c, fh)
    check(status == 70, "GETATTR after REMOVE: %d, expected STALE" % status)
    # MKNOD of a bad type: BADTYPE
    args = X().opaque(rootfh).opaque(b"badtype").u32(2)
    st, r = c.call(NFS, 3, 11, bytes(args.b))
    check(st == 0 and r.gu32() == 10007, "MKNOD of a directory: BADTYPE")
    c.close()
    print("proto ok")


def mode_rofs(name):
    host, nport, mport, pport, exp = ctx()
    rootfh = mount(host, mport, exp)
    c = Conn(host, nport)
    status, fh = lookup(c, rootfh, name)
    check(status == 0, "LOOKUP %s: %d" % (name, status))
    for stable in (0, 2):
        args = X().opaque(fh).u64(0).u32(3).u32(stable).opaque(b"abc")
        st, r = c.call(NFS, 3, 7, bytes(args.b))
        check(st == 0 and r.gu32() == 30, "WRITE on a read-only export: not ROFS")
    sattr = X().u32(0).u32(0).u32(0).u32(1).u64(0).u32(0).u32(0)
    st, r = c.call(NFS, 3, 2, bytes(X().opaque(fh).fixed(bytes(sattr.b)).u32(0).b))
    check(st == 0 and r.gu32() == 30, "SETATTR size on a read-only export: not ROFS")
    st, r = c.call(NFS, 3, 12, bytes(X().opaque(rootfh).opaque(name.encode()).b))
    check(st == 0 and r.gu32() == 30, "REMOVE on a read-only export: not ROFS")
    st, r = c.call(NFS, 3, 1, bytes(X().opaque(fh).b))
    check(st == 0 and r.gu32() == 0, "GETATTR on a read-only export")
    print("rofs ok")


def mode_savefh(name):
    host, nport, mport, pport, exp = ctx()
    rootfh = mount(host, mport, exp)
    c = Conn(host, nport)
    status, fh = lookup(c, rootfh, name)
    check(status == 0, "LOOKUP %s: %d" % (name, status))
    print(fh.hex())


def mode_usefh(hexfh, want):
    host, nport, mport, pport, exp = ctx()
    c = Conn(host, nport)
    status, r = getattr_status(c, bytes.fromhex(hexfh))
    check(status == want, "GETATTR with the saved handle: status %d, expected %d" % (status, want))
    print("usefh ok")


def mode_readstat(path):
    """Prints the status of a READ of the first 4 KiB of PATH (a/b/c under the export):
    the NFS3 status itself, which libnfs's pread folds into one error for all."""
    host, nport, mport, pport, exp = ctx()
    fh = mount(host, mport, exp)
    c = Conn(host, nport)
    for name in path.split("/"):
        status, fh = lookup(c, fh, name)
        check(status == 0, "LOOKUP %s: %d" % (name, status))
    st, r = c.call(NFS, 3, 6, read3_args(fh, 0, 4096))
    check(st == 0, "READ accept %r" % (st,))
    status = r.gu32()
    post_attr(r)
    print("READ status %d" % status)


NFS3ERR_JUKEBOX = 10008


def mode_hammer(hexfh, want_ok):
    host, nport, mport, pport, exp = ctx()
    fh = bytes.fromhex(hexfh)
    deadline = time.monotonic() + 120
    while True:
        try:
            c = Conn(host, nport)
            break
        except OSError:
            check(time.monotonic() < deadline, "the NFS port never took a connection")
            time.sleep(0.005)
    ok = jukebox = 0
    i = 0
    while ok < want_ok:
        check(time.monotonic() < deadline, "only %d of %d calls succeeded in time" % (ok, want_ok))
        if i % 2 == 0:
            st, r = c.call(NFS, 3, 1, bytes(X().opaque(fh).b))
            what = "GETATTR"
        else:
            args = X().opaque(fh).u64(0).u32(6).u32(0).opaque(b"hammer")
            st, r = c.call(NFS, 3, 7, bytes(args.b))
            what = "WRITE"
        check(st == 0, "%s accept %r" % (what, st))
        status = r.gu32()
        check(status in (0, NFS3ERR_JUKEBOX),
              "%s with the saved handle right after start: status %d (after %d ok, %d jukebox)"
              % (what, status, ok, jukebox))
        if status == 0:
            ok += 1
            i += 1
        else:
            jukebox += 1
            time.sleep(0.01)
    print("hammer ok: %d ok, %d jukebox" % (ok, jukebox))


def mode_watch(hexfh, stopfile):
    host, nport, mport, pport, exp = ctx()
    fh = bytes.fromhex(hexfh)
    c = Conn(host, nport)
    ok = jukebox = 0
    while not os.path.exists(stopfile):
        st, r = c.call(NFS, 3, 1, bytes(X().opaque(fh).b))
        check(st == 0, "GETATTR accept %r" % (st,))
        status = r.gu32()
        check(status in (0, NFS3ERR_JUKEBOX),
              "GETATTR with the saved handle: status %d (after %d ok, %d jukebox)"
              % (status, ok, jukebox))
        if status == 0:
            ok += 1
        else:
            jukebox += 1
            time.sleep(0.005)
    check(ok > 0, "no GETATTR succeeded")
    print("watch ok: %d ok, %d jukebox" % (ok, jukebox))


def mode_verifier():
    host, nport, mport, pport, exp = ctx()
    rootfh = mount(host, mport, exp)
    c = Conn(host, nport)
    st, r = c.call(NFS, 3, 21, bytes(X().opaque(rootfh).u64(0).u32(0).b))
    check(st == 0 and r.gu32() == 0, "COMMIT on the root")
    wcc(r)
    print(r.gfixed(8).hex())


def mode_mnt(path, want):
    """MNT of path must answer status want; on success the handle must be the
    one LOOKUP gives walking the same components from the export's root."""
    host, nport, mport, pport, exp = ctx()
    m = Conn(host, mport)
    st, r = m.call(MOUNT, 3, 1, bytes(X().opaque(path.encode()).b))
    check(st == 0, "MNT %s accept %r" % (path, st))
    status = r.gu32()
    check(status == want, "MNT %s: status %d, want %d" % (path, status, want))
    m.close()
    if status != 0:
        print("mnt %s status %d" % (path, status))
        return
    fh = r.gopaque()
    norm = "/" + "/".join(n for n in path.split("/") if n and n != ".")
    rest = norm[len(exp):].strip("/") if norm.startswith(exp + "/") else ""
    if rest and ".." not in rest.split("/"):
        c = Conn(host, nport)
        dfh = mount(host, mport, exp)
        for name in rest.split("/"):
            if name and name != ".":
                lst, dfh = lookup(c, dfh, name)
                check(lst == 0, "LOOKUP %s: %d" % (name, lst))
        check(dfh == fh, "MNT %s handle differs from LOOKUP's" % path)
        c.close()
    print(fh.hex())


def mode_secure():
    """The export is `secure`: from a port >= 1024, MNT is MNT3ERR_ACCES and NFS
    calls with a handle NFS3ERR_PERM / NFS4ERR_PERM; from a port < 1024 all work."""
    host, nport, mport, pport, exp = ctx()
    mnt = bytes(X().opaque(exp.encode()).b)
    hi = Conn(host, mport)
    check(hi.s.getsockname()[1] >= 1024, "ephemeral port below 1024")
    st, r = hi.call(MOUNT, 3, 1, mnt)
    status = r.gu32()
    check(st == 0 and status == 13, "MNT from a high port: %r/%d, want MNT3ERR_ACCES" % (st, status))
    hi.close()
    lo = Conn(host, mport, reserved=True)
    st, r = lo.call(MOUNT, 3, 1, mnt)
    status = r.gu32()
    check(st == 0 and status == 0, "MNT from a privileged port: %r/%d" % (st, status))
    fh = r.gopaque()
    lo.close()
    v4 = bytes(X().opaque(b"").u32(0).u32(1).u32(22).opaque(fh).b)  # COMPOUND { PUTFH }
    for reserved, want3, want4 in ((False, 1, 1), (True, 0, 0)):
        c = Conn(host, nport, reserved=reserved)
        status, _ = getattr_status(c, fh)
        check(status == want3, "GETATTR (reserved port %s): %d, want %d" % (reserved, status, want3))
        st, r = c.call(NFS, 4, 1, v4)
        check(st == 0, "COMPOUND accept %r" % (st,))
        status = r.gu32()
        check(status == want4, "PUTFH (reserved port %s): %d, want %d" % (reserved, status, want4))
        c.close()
    print("secure ok")


def main():
    mode = sys.argv[6]
    if mode == "secure":
        mode_secure()
        return
    if mode == "mnt":
        mode_mnt(sys.argv[7], int(sys.argv[8]))
        return
    if mode == "rpc":
        mode_rpc()
    elif mode == "hostile":
        mode_hostile()
    elif mode == "proto":
        mode_proto()
    elif mode == "rofs":
        mode_rofs(sys.argv[7])
    elif mode == "savefh":
        mode_savefh(sys.argv[7])
    elif mode == "readstat":
        mode_readstat(sys.argv[7])
    elif mode == "usefh":
        mode_usefh(sys.argv[7], int(sys.argv[8]) if len(sys.argv) > 8 else 0)
    elif mode == "verifier":
        mode_verifier()
    elif mode == "watch":
        mode_watch(sys.argv[7], sys.argv[8])
    elif mode == "hammer":
        mode_hammer(sys.argv[7], int(sys.argv[8]))
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
