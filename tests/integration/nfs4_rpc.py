#!/usr/bin/env python3
"""A raw NFSv4.1 client (RFC 8881) for the integration tests: sessions and the
operations libnfs 4.0, which speaks only NFSv4.0, cannot send.

  nfs4_rpc.py HOST NFSPORT EXPORT OWNER session
      EXCHANGE_ID, CREATE_SESSION, SEQUENCE; RECLAIM_COMPLETE, then again
      (COMPLETE_ALREADY); DESTROY_CLIENTID while a session lives (CLIENTID_BUSY);
      DESTROY_SESSION, after which SEQUENCE on it is BADSESSION; DESTROY_CLIENTID,
      after which CREATE_SESSION and DESTROY_CLIENTID with its id are STALE_CLIENTID.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER lockt NAME
      client OWNER-a opens NAME and write-locks [0,100); client OWNER-b's LOCKT sees
      the conflict (DENIED, with the holder's range, type and owner) for a write
      test in [50,60) and a read test of byte 0, none in [100,110) or from 100 to
      the end; the holder's own LOCKT sees none; after LOCKU nobody sees one;
      a zero length is INVAL.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER open NAME STATUS
      OPEN (create) NAME must answer STATUS (0, or 10013 for GRACE); the client is
      left in place (its record kept) with its session destroyed.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER reclaim-complete
      a restarted client says RECLAIM_COMPLETE, which ends the server's grace
      period once every client of the previous run has said it.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER syncwrite NAME
      RECLAIM_COMPLETE, OPEN (create) NAME, then FILE_SYNC4 WRITEs of 64 KiB records
      until killed; prints each record's index once the reply says FILE_SYNC4.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER verify NAME N
      RECLAIM_COMPLETE, then records 0..N-1 of NAME read back with their pattern.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER reads NAME M
      OPEN NAME (read), then M READs of 4 KiB at offset 0, each in a COMPOUND of its
      own (SEQUENCE, PUTFH, READ), then CLOSE: exactly M READ operations on NAME.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER removed-open NAME
      client OWNER-a opens NAME, writes and write-locks it; client OWNER-b REMOVEs it:
      a still READs and WRITEs it through its stateid; b creates NAME anew and locks
      it (no inherited lock); b RENAMEs a new file over NAME while a has that one
      open too (pynfs RNM21): a's open of it stays readable; a closes both.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER courtesy NAME LEASE
      the export's lease_time attribute is LEASE; client OWNER-a opens and write-locks
      NAME and goes silent; client OWNER-b's LOCK is DENIED, then (polling, bounded)
      granted once a's lease is over; a's SEQUENCE then finds its session gone
      (BADSESSION: its state was revoked).

  nfs4_rpc.py HOST NFSPORT EXPORT OWNER hold NAME
      RECLAIM_COMPLETE, OPEN (create) NAME for reading and writing and a FILE_SYNC4
      WRITE of "held"; prints NAME's file handle (hex) and exits with the file
      still open, as a client whose server is about to die.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER reclaim HEXFH
      the same client after its server was replaced (a restart or a takeover):
      OPEN CLAIM_PREVIOUS of the handle is granted in the grace period, READ with
      the reclaimed stateid gives back "held", a new client's OPEN (CLAIM_NULL)
      meanwhile gets GRACE; then RECLAIM_COMPLETE and CLOSE.

OWNER is the client owner id: a client restarted with the same OWNER is the same
client to the server (a new verifier), which is how grace ends early.
Exit 0 when every check holds; "FAIL: ..." and exit 1 otherwise.
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs_rpc import NFS, X, Conn, check, fail  # noqa: E402

OP_CLOSE, OP_GETFH, OP_LOCK, OP_LOCKT, OP_LOCKU, OP_LOOKUP = 4, 10, 12, 13, 14, 15
OP_OPEN, OP_PUTFH, OP_PUTROOTFH, OP_READ, OP_WRITE = 18, 22, 24, 25, 38
OP_EXCHANGE_ID, OP_CREATE_SESSION, OP_DESTROY_SESSION = 42, 43, 44
OP_SEQUENCE, OP_DESTROY_CLIENTID, OP_RECLAIM_COMPLETE = 53, 57, 58
OP_GETATTR, OP_REMOVE, OP_RENAME, OP_SAVEFH = 9, 28, 29, 32
OK, DENIED, GRACE, STALE_CLIENTID, INVAL = 0, 10010, 10013, 10022, 22
OP_ILLEGAL, ILLEGAL = 10044, 10044   # the operation number and status
BADSESSION, COMPLETE_ALREADY, CLIENTID_BUSY = 10052, 10054, 10074
READ_LT, WRITE_LT = 1, 2
FILE_SYNC4 = 2
REC = 65536


def stateid(r):
    return (r.gu32(), r.gfixed(12))


def put_stateid(x, sid):
    x.u32(sid[0]).fixed(sid[1])


def denied(r):
    return dict(offset=r.gu64(), length=r.gu64(), type=r.gu32(), clientid=r.gu64(),
                owner=r.gopaque())


def skip_chan(r):
    for _ in range(6):
        r.gu32()
    for _ in range(r.gu32()):
        r.gu32()


class Op:
    """One operation of a COMPOUND: its number, encoded arguments and a parser of
    its result body (called with the status; returns the value to keep)."""

    def __init__(self, num, args=b"", parse=None):
        self.num, self.args, self.parse = num, bytes(args), parse


def op_seq(sessionid, seqid):
    def parse(r, st):
        if st == OK:
            r.gfixed(16)
            for _ in range(5):
                r.gu32()
    return Op(OP_SEQUENCE, X().fixed(sessionid).u32(seqid).u32(0).u32(0).u32(0).b, parse)


def op_lookup_path(path):
    ops = [Op(OP_PUTROOTFH)]
    for comp in [c for c in path.split("/") if c]:
        ops.append(Op(OP_LOOKUP, X().opaque(comp.encode()).b))
    return ops


def op_getfh():
    return Op(OP_GETFH, b"", lambda r, st: r.gopaque() if st == OK else None)


def op_open(clientid, owner, name, create, access=3):
    x = X().u32(0).u32(access).u32(0).u64(clientid).opaque(owner)
    if create:
        x.u32(1).u32(0).u32(0).opaque(b"")   # OPEN4_CREATE, UNCHECKED4, empty fattr4
    else:
        x.u32(0)                             # OPEN4_NOCREATE
    x.u32(0).opaque(name.encode())           # CLAIM_NULL

    def parse(r, st):
        if st != OK:
            return None
        sid = stateid(r)
        r.gu32(), r.gu64(), r.gu64()         # change_info4
        r.gu32()                             # rflags
        for _ in range(r.gu32()):
            r.gu32()                         # attrset
        check(r.gu32() == 0, "OPEN granted a delegation")
        return sid
    return Op(OP_OPEN, x.b, parse)


def op_open_previous(clientid, owner, access=3):
    """OPEN CLAIM_PREVIOUS of the current filehandle (a reclaim after a server restart)."""
    x = X().u32(0).u32(access).u32(0).u64(clientid).opaque(owner)
    x.u32(0)                                 # OPEN4_NOCREATE
    x.u32(1).u32(0)                          # CLAIM_PREVIOUS, OPEN_DELEGATE_NONE
    return Op(OP_OPEN, x.b, op_open(clientid, owner, "", False, access).parse)


def op_close(sid):
    x = X().u32(0)
    put_stateid(x, sid)
    return Op(OP_CLOSE, x.b, lambda r, st: stateid(r) if st == OK else None)


def op_lock(locktype, off, length, open_sid, clientid, lock_owner):
    x = X().u32(locktype).u32(0).u64(off).u64(length).u32(1).u32(0)
    put_stateid(x, open_sid)
    x.u32(0).u64(clientid).opaque(lock_owner)
    return Op(OP_LOCK, x.b, lambda r, st: stateid(r) if st == OK else
              denied(r) if st == DENIED else None)


def op_lockt(locktype, off, length, clientid, lock_owner):
    x = X().u32(locktype).u64(off).u64(length).u64(clientid).opaque(lock_owner)
    return Op(OP_LOCKT, x.b, lambda r, st: denied(r) if st == DENIED else None)


def op_locku(locktype, lock_sid, off, length):
    x = X().u32(locktype).u32(0)
    put_stateid(x, lock_sid)
    x.u64(off).u64(length)
    return Op(OP_LOCKU, x.b, lambda r, st: stateid(r) if st == OK else None)


def op_write(sid, off, data, stable=FILE_SYNC4):
    x = X()
    put_stateid(x, sid)
    x.u64(off).u32(stable).opaque(data)
    return Op(OP_WRITE, x.b, lambda r, st: (r.gu32(), r.gu32(), r.gfixed(8)) if st == OK else None)


def op_read(sid, off, count):
    x = X()
    put_stateid(x, sid)
    x.u64(off).u32(count)
    return Op(OP_READ, x.b, lambda r, st: (r.gu32(), r.gopaque()) if st == OK else None)


class Client:
    """An NFSv4.1 client: its own connection, client id and one session (slot 0)."""

    def __init__(self, host, port, owner):
        self.c = Conn(host, port)
        self.owner = owner.encode()
        self.clientid = None
        self.sessionid = None
        self.seqid = 0
        self.minor = 1

    def compound(self, ops, session=True):
        """Sends ops (after SEQUENCE when session); returns (status, [(status, value)])
        for the operations given, SEQUENCE's own result first when it failed."""
        allops = ([op_seq(self.sessionid, self.seqid + 1)] if session else []) + ops
        x = X().opaque(b"").u32(self.minor).u32(len(allops))
        for op in allops:
            x.u32(op.num).fixed(op.args)
        accept, r = self.c.call(NFS, 4, 1, bytes(x.b))
        check(accept == 0, "COMPOUND not accepted: %r" % (accept,))
        status = r.gu32()
        r.gopaque()
        res = []
        for op in allops[:r.gu32()]:
            num, st = r.gu32(), r.gu32()
            check(num == op.num or (num, st) == (OP_ILLEGAL, ILLEGAL),
                  "result for op %d where %d was sent" % (num, op.num))
            res.append((st, op.parse(r, st) if op.parse else None))
        if session:
            if res and res[0][0] == OK:
                self.seqid += 1
                return status, res[1:]
            return status, res[:1]
        return status, res

    def ok(self, ops, what):
        status, res = self.compound(ops)
        check(status == OK, "%s: status %d (%r)" % (what, status, [s for s, _ in res]))
        return [v for _, v in res]

    def exchange_id(self):
        verifier = os.urandom(8)
        x = X().fixed(verifier).opaque(self.owner).u32(0).u32(0).u32(0)
        status, res = self.compound([Op(OP_EXCHANGE_ID, x.b,
                                        lambda r, st: (r.gu64(), r.gu32(), r.gu32()))],
                                    session=False)
        check(status == OK, "EXCHANGE_ID: %d" % status)
        self.clientid, self.cs_seq, flags = res[0][1]
        return flags

    def create_session(self, clientid=None):
        chan = X().u32(0).u32(1 << 20).u32(1 << 20).u32(8192).u32(16).u32(1).u32(0)
        x = X().u64(self.clientid if clientid is None else clientid).u32(self.cs_seq).u32(0)
        x.fixed(bytes(chan.b)).fixed(bytes(chan.b)).u32(0x40000000).u32(1).u32(0)

        def parse(r, st):
            if st != OK:
                return None
            sid = r.gfixed(16)
            r.gu32(), r.gu32()
            skip_chan(r)
            skip_chan(r)
            return sid
        status, res = self.compound([Op(OP_CREATE_SESSION, x.b, parse)], session=False)
        if status == OK:
            self.sessionid = res[0][1]
            self.seqid = 0
        return status

    def connect(self):
        self.exchange_id()
        status = self.create_session()
        check(status == OK, "CREATE_SESSION: %d" % status)
        return self

    def reclaim_complete(self):
        status, _ = self.compound([Op(OP_RECLAIM_COMPLETE, X().u32(0).b)])
        return status

    def destroy_session(self):
        status, _ = self.compound([Op(OP_DESTROY_SESSION, X().fixed(self.sessionid).b)],
                                  session=False)
        return status

    def destroy_clientid(self, clientid=None):
        cid = self.clientid if clientid is None else clientid
        status, _ = self.compound([Op(OP_DESTROY_CLIENTID, X().u64(cid).b)], session=False)
        return status

    def goodbye(self):
        check(self.destroy_session() == OK, "DESTROY_SESSION")
        check(self.destroy_clientid() == OK, "DESTROY_CLIENTID")
        self.c.close()

    def open(self, path, name, create, access=3):
        """OPEN of path/name: (status, stateid, file handle)."""
        status, res = self.compound(op_lookup_path(path) +
                                    [op_open(self.clientid, self.owner, name, create, access),
                                     op_getfh()])
        if status != OK:
            return status, None, None
        return OK, res[-2][1], res[-1][1]


def ctx():
    a = sys.argv
    return a[1], int(a[2]), a[3], a[4]


def pattern(name, i):
    return random.Random("%s:%d" % (name, i)).randbytes(REC)


def mode_session():
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner)
    flags = cl.exchange_id()
    check(not flags & 0x80000000, "a new client's EXCHANGE_ID says CONFIRMED_R")
    check(cl.create_session() == OK, "CREATE_SESSION")
    cl.ok(op_lookup_path(exp), "SEQUENCE, PUTROOTFH, LOOKUP %s" % exp)
    check(cl.reclaim_complete() == OK, "RECLAIM_COMPLETE")
    st = cl.reclaim_complete()
    check(st == COMPLETE_ALREADY, "second RECLAIM_COMPLETE: %d, not COMPLETE_ALREADY" % st)
    st = cl.destroy_clientid()
    check(st == CLIENTID_BUSY, "DESTROY_CLIENTID with a live session: %d, not CLIENTID_BUSY" % st)
    cl.ok([Op(OP_PUTROOTFH)], "the session after a refused DESTROY_CLIENTID")
    check(cl.destroy_session() == OK, "DESTROY_SESSION")
    status, res = cl.compound([Op(OP_PUTROOTFH)])
    check(status == BADSESSION and res[0][0] == BADSESSION,
          "SEQUENCE on a destroyed session: %d, not BADSESSION" % status)
    check(cl.destroy_clientid() == OK, "DESTROY_CLIENTID")
    st = cl.create_session()
    check(st == STALE_CLIENTID, "CREATE_SESSION for a destroyed client: %d" % st)
    st = cl.destroy_clientid()
    check(st == STALE_CLIENTID, "DESTROY_CLIENTID twice: %d" % st)
    old = cl.clientid
    flags = cl.exchange_id()
    check(cl.clientid != old and not flags & 0x80000000,
          "the owner of a destroyed client is not a new client")
    cl.c.close()
    print("session ok")


def mode_lockt(name):
    host, port, exp, owner = ctx()
    a = Client(host, port, owner + "-a").connect()
    b = Client(host, port, owner + "-b").connect()
    st, sid, fh = a.open(exp, name, True)
    check(st == OK, "OPEN %s: %d" % (name, st))
    a_lo = b"lock-owner-a"
    lsid = a.ok([Op(OP_PUTFH, X().opaque(fh).b), op_lock(WRITE_LT, 0, 100, sid, a.clientid, a_lo)],
                "LOCK [0,100)")[-1]

    def lockt(cl, locktype, off, length, lo=b"lock-owner-b"):
        status, res = cl.compound([Op(OP_PUTFH, X().opaque(fh).b),
                                   op_lockt(locktype, off, length, cl.clientid, lo)])
        return status, res[-1][1]

    st, d = lockt(b, WRITE_LT, 50, 10)
    check(st == DENIED, "LOCKT of [50,60) under another client's lock: %d, not DENIED" % st)
    check(d == dict(offset=0, length=100, type=WRITE_LT, clientid=a.clientid, owner=a_lo),
          "LOCKT DENIED names %r, not the holder's [0,100) write lock" % d)
    st, d = lockt(b, READ_LT, 0, 1)
    check(st == DENIED, "LOCKT read of byte 0 under a write lock: %d, not DENIED" % st)
    st, _ = lockt(b, WRITE_LT, 100, 10)
    check(st == OK, "LOCKT of the free [100,110): %d" % st)
    st, _ = lockt(b, WRITE_LT, 100, (1 << 64) - 1)
    check(st == OK, "LOCKT from 100 to the end: %d" % st)
    st, _ = lockt(a, WRITE_LT, 50, 10, a_lo)
    check(st == OK, "LOCKT by the holder itself: %d" % st)
    st, _ = lockt(b, WRITE_LT, 50, 0)
    check(st == INVAL, "LOCKT of length 0: %d, not INVAL" % st)
    a.ok([Op(OP_PUTFH, X().opaque(fh).b), op_locku(WRITE_LT, lsid, 0, 100)], "LOCKU")
    st, _ = lockt(b, WRITE_LT, 0, 100)
    check(st == OK, "LOCKT after the holder's LOCKU: %d" % st)
    a.ok([Op(OP_PUTFH, X().opaque(fh).b), op_close(sid)], "CLOSE")
    a.goodbye()
    b.goodbye()
    print("lockt ok")


def mode_open(name, want):
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner).connect()
    st, sid, fh = cl.open(exp, name, True)
    check(st == want, "OPEN %s: %d, expected %d" % (name, st, want))
    if st == OK:
        cl.ok([Op(OP_PUTFH, X().opaque(fh).b), op_close(sid)], "CLOSE")
    check(cl.destroy_session() == OK, "DESTROY_SESSION")
    print("open ok")


def mode_reclaim_complete():
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner).connect()
    st = cl.reclaim_complete()
    check(st == OK, "RECLAIM_COMPLETE: %d" % st)
    check(cl.destroy_session() == OK, "DESTROY_SESSION")
    print("reclaim-complete ok")


def mode_syncwrite(name):
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner).connect()
    check(cl.reclaim_complete() == OK, "RECLAIM_COMPLETE")
    st, sid, fh = cl.open(exp, name, True, access=2)
    check(st == OK, "OPEN %s: %d" % (name, st))
    for i in range(1 << 30):
        count, committed, _ = cl.ok([Op(OP_PUTFH, X().opaque(fh).b),
                                     op_write(sid, i * REC, pattern(name, i))],
                                    "WRITE record %d" % i)[-1]
        check(count == REC and committed == FILE_SYNC4,
              "WRITE record %d: count %d, committed %d" % (i, count, committed))
        sys.stdout.write("%d\n" % i)
        sys.stdout.flush()


def mode_verify(name, n):
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner).connect()
    check(cl.reclaim_complete() == OK, "RECLAIM_COMPLETE")
    st, sid, fh = cl.open(exp, name, False, access=1)
    check(st == OK, "OPEN %s: %d" % (name, st))
    for i in range(n):
        _, data = cl.ok([Op(OP_PUTFH, X().opaque(fh).b), op_read(sid, i * REC, REC)],
                        "READ record %d" % i)[-1]
        check(data == pattern(name, i), "record %d of %s (acknowledged) differs" % (i, name))
    cl.ok([Op(OP_PUTFH, X().opaque(fh).b), op_close(sid)], "CLOSE")
    cl.goodbye()
    print("verify %d ok" % n)


def mode_reads(name, m):
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner).connect()
    check(cl.reclaim_complete() == OK, "RECLAIM_COMPLETE")
    st, sid, fh = cl.open(exp, name, False, access=1)
    check(st == OK, "OPEN %s: %d" % (name, st))
    for i in range(m):
        cl.ok([Op(OP_PUTFH, X().opaque(fh).b), op_read(sid, 0, 4096)], "READ %d" % i)
    cl.ok([Op(OP_PUTFH, X().opaque(fh).b), op_close(sid)], "CLOSE")
    cl.goodbye()
    print("reads %d ok" % m)


def putfh(fh):
    return Op(OP_PUTFH, X().opaque(fh).b)


def read_all(cl, fh, sid):
    return cl.ok([putfh(fh), op_read(sid, 0, 4096)], "READ")[-1][1]


def mode_removed_open(name):
    host, port, exp, owner = ctx()
    a = Client(host, port, owner + "-a").connect()
    b = Client(host, port, owner + "-b").connect()
    st, sid, fh = a.open(exp, name, True)
    check(st == OK, "OPEN %s: %d" % (name, st))
    a.ok([putfh(fh), op_write(sid, 0, b"old data")], "WRITE")
    a.ok([putfh(fh), op_lock(WRITE_LT, 0, 100, sid, a.clientid, b"lo-a")], "LOCK")
    b.ok(op_lookup_path(exp) + [Op(OP_REMOVE, X().opaque(name.encode()).b)], "REMOVE")
    check(read_all(a, fh, sid) == b"old data", "the removed file's data, read by its opener")
    a.ok([putfh(fh), op_write(sid, 0, b"OLD")], "WRITE to the removed file")
    check(read_all(a, fh, sid) == b"OLD data", "the removed file after a write")
    st, bsid, bfh = b.open(exp, name, True)
    check(st == OK, "OPEN (create) %s after its removal: %d" % (name, st))
    check(bfh != fh, "the new file has the removed one's handle")
    b.ok([putfh(bfh), op_lock(WRITE_LT, 0, 100, bsid, b.clientid, b"lo-b")],
         "LOCK of the new file (the removed one's lock is not its)")
    # RNM21: the file b renames over is open by a.
    st, tsid, tfh = a.open(exp, name + ".t", True)
    check(st == OK, "OPEN %s.t: %d" % (name, st))
    a.ok([putfh(tfh), op_write(tsid, 0, b"target")], "WRITE target")
    st, ssid, sfh = b.open(exp, name + ".s", True)
    check(st == OK, "OPEN %s.s: %d" % (name, st))
    b.ok([putfh(sfh), op_close(ssid)], "CLOSE source")
    b.ok(op_lookup_path(exp) + [Op(OP_SAVEFH)] +
         [Op(OP_RENAME, X().opaque((name + ".s").encode()).opaque((name + ".t").encode()).b)],
         "RENAME over an open file")
    check(read_all(a, tfh, tsid) == b"target", "the renamed-over file, read by its opener")
    a.ok([putfh(tfh), op_close(tsid)], "CLOSE the renamed-over file")
    a.ok([putfh(fh), op_close(sid)], "CLOSE the removed file")
    b.ok([putfh(bfh), op_close(bsid)], "CLOSE")
    a.goodbye()
    b.goodbye()
    print("removed-open ok")


def mode_courtesy(name, lease):
    import time
    host, port, exp, owner = ctx()
    a = Client(host, port, owner + "-a").connect()
    b = Client(host, port, owner + "-b").connect()
    got = a.ok(op_lookup_path(exp) + [Op(OP_GETATTR, X().u32(1).u32(1 << 10).b,
                                         lambda r, st: ([r.gu32() for _ in range(r.gu32())],
                                                        r.gopaque()))], "GETATTR lease_time")[-1]
    check(got[1] == X().u32(lease).b, "lease_time %r, not %d" % (got[1], lease))
    st, sid, fh = a.open(exp, name, True)
    check(st == OK, "OPEN %s: %d" % (name, st))
    a.ok([putfh(fh), op_lock(WRITE_LT, 0, 100, sid, a.clientid, b"lo-a")], "LOCK")
    st, bsid, _ = b.open(exp, name, False)
    check(st == OK, "b's OPEN %s: %d" % (name, st))

    def b_lock():
        status, res = b.compound([putfh(fh), op_lock(WRITE_LT, 0, 100, bsid, b.clientid,
                                                     b"lo-b")])
        return status
    check(b_lock() == DENIED, "b's LOCK while a's lease runs is not DENIED")
    for _ in range(lease * 10):   # a stays silent; b renews by asking
        time.sleep(0.5)
        st = b_lock()
        if st == OK:
            break
        check(st == DENIED, "b's LOCK: %d" % st)
    check(st == OK, "b's LOCK was never granted after a's lease ran out")
    status, _ = a.compound([Op(OP_PUTROOTFH)])
    check(status == BADSESSION, "a's SEQUENCE after its state was revoked: %d" % status)
    b.goodbye()
    print("courtesy ok")


def mode_hold(name):
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner).connect()
    check(cl.reclaim_complete() == OK, "RECLAIM_COMPLETE")
    st, sid, fh = cl.open(exp, name, True)
    check(st == OK, "OPEN %s: %d" % (name, st))
    cl.ok([Op(OP_PUTFH, X().opaque(fh).b), op_write(sid, 0, b"held")], "WRITE")
    print(fh.hex())


def mode_reclaim(hexfh):
    host, port, exp, owner = ctx()
    fh = bytes.fromhex(hexfh)
    other = Client(host, port, owner + "-new").connect()
    st, _, _ = other.open(exp, "during-grace", True)
    check(st == GRACE, "a new client's OPEN in the grace period: %d, not GRACE" % st)
    cl = Client(host, port, owner).connect()
    status, res = cl.compound([Op(OP_PUTFH, X().opaque(fh).b),
                               op_open_previous(cl.clientid, cl.owner)])
    check(status == OK, "OPEN CLAIM_PREVIOUS: %d (%r)" % (status, [s for s, _ in res]))
    sid = res[-1][1]
    data = cl.ok([Op(OP_PUTFH, X().opaque(fh).b), op_read(sid, 0, 4)], "READ")[-1][1]
    check(data == b"held", "READ with the reclaimed stateid: %r" % (data,))
    check(cl.reclaim_complete() == OK, "RECLAIM_COMPLETE")
    cl.ok([Op(OP_PUTFH, X().opaque(fh).b), op_close(sid)], "CLOSE")
    cl.goodbye()
    other.c.close()
    print("reclaim ok")


def main():
    mode = sys.argv[5]
    if mode == "removed-open":
        mode_removed_open(sys.argv[6])
        return
    if mode == "courtesy":
        mode_courtesy(sys.argv[6], int(sys.argv[7]))
        return
    if mode == "session":
        mode_session()
    elif mode == "lockt":
        mode_lockt(sys.argv[6])
    elif mode == "open":
        mode_open(sys.argv[6], int(sys.argv[7]))
    elif mode == "reclaim-complete":
        mode_reclaim_complete()
    elif mode == "syncwrite":
        mode_syncwrite(sys.argv[6])
    elif mode == "hold":
        mode_hold(sys.argv[6])
    elif mode == "reclaim":
        mode_reclaim(sys.argv[6])
    elif mode == "verify":
        mode_verify(sys.argv[6], int(sys.argv[7]))
    elif mode == "reads":
        mode_reads(sys.argv[6], int(sys.argv[7]))
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
