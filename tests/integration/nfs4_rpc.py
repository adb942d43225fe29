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
      OPEN (create) NAME, then FILE_SYNC4 WRITEs of 64 KiB records
      until killed; prints each record's index once the reply says FILE_SYNC4.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER verify NAME N
      records 0..N-1 of NAME read back with their pattern.
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
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER idle
      EXCHANGE_ID, CREATE_SESSION and RECLAIM_COMPLETE, then exits without opening
      anything: a client with nothing to reclaim after its server is replaced.
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER no-reclaim HEXFH
      that client after its server was replaced, in the grace period: OPEN
      CLAIM_PREVIOUS of the handle is refused with NO_GRACE (it was not recorded).
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER session-rules NAME
      the rules a well-behaved client never meets: EXCHANGE_ID, CREATE_SESSION and
      DESTROY_CLIENTID not alone without SEQUENCE (NOT_ONLY_OP); CREATE_SESSION with
      unknown flags (INVAL), a too small back channel (TOOSMALL), by a principal
      other than the record's maker (CLID_INUSE); EXCHANGE_ID of another principal:
      an update is PERM, a collision with a record in use CLID_INUSE, with one
      without state a new client ID; requests and replies past the session's sizes
      (REQ_TOO_BIG, REP_TOO_BIG, REP_TOO_BIG_TO_CACHE); SECINFO_NO_NAME(PARENT) of
      the root (NOENT); RENAME from a file (NOTDIR); the current stateid cleared
      by PUTROOTFH, kept by SAVEFH/RESTOREFH; OPEN before RECLAIM_COMPLETE (GRACE).
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER v40-rules NAME
      NFSv4.0 (SETCLIENTID, seqids): OPEN create with a size, UNCHECKED4 over a file
      (size ignored), WRITE with the bypass stateid, of zero bytes (no change), by
      another user with the opener's stateid (ACCESS); CLOSE with the anonymous
      stateid (BAD_STATEID); LOCK naming an unknown client (STALE_CLIENTID);
      OPEN_DOWNGRADE to a mode never opened (INVAL); the owner's own deny; GETATTR
      and VERIFY of a write-only attribute (INVAL); ACCESS supported bits per type;
      READLINK of a directory (INVAL); OPEN of a FIFO (SYMLINK); SETCLIENTID of a
      name in use by another principal (CLID_INUSE); a CREATE retransmitted with
      its XID (the first answer, from the duplicate request cache); a restarted
      client's old stateid (EXPIRED).
  nfs4_rpc.py HOST NFSPORT EXPORT OWNER unconfirmed-expiry LEASE
      a client ID never confirmed is gone after a lease (STALE_CLIENTID).

OWNER is the client owner id: a client restarted with the same OWNER is the same
client to the server (a new verifier), which is how grace ends early.
Exit 0 when every check holds; "FAIL: ..." and exit 1 otherwise.
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs_rpc import NFS, X, Conn, auth_sys, check, fail  # noqa: E402

OP_CLOSE, OP_GETFH, OP_LOCK, OP_LOCKT, OP_LOCKU, OP_LOOKUP = 4, 10, 12, 13, 14, 15
OP_OPEN, OP_PUTFH, OP_PUTROOTFH, OP_READ, OP_WRITE = 18, 22, 24, 25, 38
OP_EXCHANGE_ID, OP_CREATE_SESSION, OP_DESTROY_SESSION = 42, 43, 44
OP_SEQUENCE, OP_DESTROY_CLIENTID, OP_RECLAIM_COMPLETE = 53, 57, 58
OP_GETATTR, OP_REMOVE, OP_RENAME, OP_SAVEFH = 9, 28, 29, 32
OK, DENIED, GRACE, STALE_CLIENTID, INVAL = 0, 10010, 10013, 10022, 22
NO_GRACE = 10033
UNCHECKED4 = 0
OP_ILLEGAL, ILLEGAL = 10044, 10044   # the operation number and status
BADSESSION, COMPLETE_ALREADY, CLIENTID_BUSY = 10052, 10054, 10074
PERM, NOENT, NOTDIR, TOOSMALL, CLID_INUSE, BAD_STATEID = 1, 2, 20, 10005, 10017, 10025
REQ_TOO_BIG, REP_TOO_BIG, REP_TOO_BIG_TO_CACHE, NOT_ONLY_OP = 10065, 10066, 10067, 10081
OP_RESTOREFH, OP_SECINFO_NO_NAME = 31, 52
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


def op_seq(sessionid, seqid, cachethis=False):
    def parse(r, st):
        if st == OK:
            r.gfixed(16)
            for _ in range(5):
                r.gu32()
    x = X().fixed(sessionid).u32(seqid).u32(0).u32(0).u32(int(cachethis))
    return Op(OP_SEQUENCE, x.b, parse)


# Room for a 1 MiB READ or WRITE with its COMPOUND around it, as a client must
# ask for one (the server holds it to the session's sizes, RFC 8881 18.46.3).
MAX_MSG = (1 << 20) + 4096


def chan_attrs(maxreq=MAX_MSG, maxresp=MAX_MSG, maxresp_cached=8192, maxops=16, maxreqs=1):
    """channel_attrs4 (no RDMA): headerpad 0 and the given sizes."""
    return bytes(X().u32(0).u32(maxreq).u32(maxresp).u32(maxresp_cached).u32(maxops)
                 .u32(maxreqs).u32(0).b)


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
        self.cred = None          # AUTH_SYS body of every call (None: uid 0)
        self.cachethis = False    # SEQUENCE's sa_cachethis

    def compound(self, ops, session=True):
        """Sends ops (after SEQUENCE when session); returns (status, [(status, value)])
        for the operations given, SEQUENCE's own result first when it failed."""
        allops = ([op_seq(self.sessionid, self.seqid + 1, self.cachethis)] if session
                  else []) + ops
        x = X().opaque(b"").u32(self.minor).u32(len(allops))
        for op in allops:
            x.u32(op.num).fixed(op.args)
        accept, r = self.c.call(NFS, 4, 1, bytes(x.b), cred=self.cred)
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

    def exchange_id(self, flags=0, verifier=None, want=OK):
        """EXCHANGE_ID (a fresh verifier unless given); its flags, or the status
        when it is not OK (which must be want)."""
        self.verifier = verifier or os.urandom(8)
        x = X().fixed(self.verifier).opaque(self.owner).u32(flags).u32(0).u32(0)
        status, res = self.compound([Op(OP_EXCHANGE_ID, x.b,
                                        lambda r, st: (r.gu64(), r.gu32(), r.gu32())
                                        if st == OK else None)],
                                    session=False)
        check(status == want, "EXCHANGE_ID: %d, expected %d" % (status, want))
        if status != OK:
            return status
        self.clientid, self.cs_seq, flags = res[0][1]
        return flags

    def create_session(self, clientid=None, fore=None, back=None, flags=0):
        x = X().u64(self.clientid if clientid is None else clientid).u32(self.cs_seq)
        x.u32(flags).fixed(fore or chan_attrs()).fixed(back or chan_attrs())
        x.u32(0x40000000).u32(1).u32(0)

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
            self.cs_seq += 1
        return status

    def connect(self, reclaim_complete=True):
        """EXCHANGE_ID and CREATE_SESSION, then (as a client must before its
        first new OPEN or LOCK, RFC 8881 18.51.3) RECLAIM_COMPLETE."""
        self.exchange_id()
        status = self.create_session()
        check(status == OK, "CREATE_SESSION: %d" % status)
        if reclaim_complete:
            check(self.reclaim_complete() == OK, "RECLAIM_COMPLETE")
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
    cl = Client(host, port, owner).connect(reclaim_complete=False)
    st = cl.reclaim_complete()
    check(st == OK, "RECLAIM_COMPLETE: %d" % st)
    check(cl.destroy_session() == OK, "DESTROY_SESSION")
    print("reclaim-complete ok")


def mode_syncwrite(name):
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner).connect()
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
    cl = Client(host, port, owner).connect(reclaim_complete=False)
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


def mode_idle():
    host, port, exp, owner = ctx()
    Client(host, port, owner).connect()
    print("idle ok")


def mode_no_reclaim(hexfh):
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner).connect(reclaim_complete=False)
    status, res = cl.compound([Op(OP_PUTFH, X().opaque(bytes.fromhex(hexfh)).b),
                               op_open_previous(cl.clientid, cl.owner)])
    check(status == NO_GRACE, "OPEN CLAIM_PREVIOUS of a client that never opened anything: "
          "%d, not NO_GRACE" % status)
    cl.goodbye()
    print("no-reclaim ok")


def status_of(cl, ops, session=True):
    return cl.compound(ops, session=session)[0]


def mode_session_rules(name):
    """The session and client-ID rules of RFC 8881 that a well-behaved client
    never meets (pynfs CSESS, EID, DESCID, SEQ, SECNN, RNM2r, CSID5)."""
    host, port, exp, owner = ctx()
    other = auth_sys(uid=1111, gid=37, machine=b"other")
    # NOT_ONLY_OP: without SEQUENCE, these must be alone in their COMPOUND.
    cl = Client(host, port, owner + "-solo")
    eid = X().fixed(os.urandom(8)).opaque(cl.owner).u32(0).u32(0).u32(0).b
    st = status_of(cl, [Op(OP_EXCHANGE_ID, eid), Op(OP_PUTROOTFH)], session=False)
    check(st == NOT_ONLY_OP, "EXCHANGE_ID + PUTROOTFH: %d, not NOT_ONLY_OP" % st)
    st = status_of(cl, [Op(OP_DESTROY_CLIENTID, X().u64(0).b),
                        Op(OP_RECLAIM_COMPLETE, X().u32(1).b)], session=False)
    check(st == NOT_ONLY_OP, "DESTROY_CLIENTID + RECLAIM_COMPLETE: %d, not NOT_ONLY_OP" % st)
    cl.exchange_id()
    cs = X().u64(cl.clientid).u32(cl.cs_seq).u32(0).fixed(chan_attrs()).fixed(chan_attrs())
    cs.u32(0x40000000).u32(1).u32(0)
    st = status_of(cl, [Op(OP_CREATE_SESSION, cs.b), Op(OP_PUTROOTFH)], session=False)
    check(st == NOT_ONLY_OP, "CREATE_SESSION + PUTROOTFH: %d, not NOT_ONLY_OP" % st)
    # CREATE_SESSION: unknown flags, a back channel too small; neither uses its seqid.
    st = cl.create_session(flags=0xf)
    check(st == INVAL, "CREATE_SESSION with flags 0xf: %d, not INVAL" % st)
    st = cl.create_session(back=chan_attrs(maxreq=10, maxreqs=1))
    check(st == TOOSMALL, "CREATE_SESSION with a 10-byte back channel: %d, not TOOSMALL" % st)
    # Only the principal that made an unconfirmed record may confirm it.
    cl.cred = other
    st = cl.create_session()
    check(st == CLID_INUSE, "CREATE_SESSION by another principal: %d, not CLID_INUSE" % st)
    cl.cred = None
    check(cl.create_session() == OK, "CREATE_SESSION with the refused ones' seqid")
    # An update of the confirmed record by another principal is PERM; a new
    # record of the owner by another principal replaces it only once it has
    # no state left (its session gone): a new client ID, the old one stale.
    cl.cred = other
    cl.exchange_id(flags=0x40000000, verifier=cl.verifier, want=PERM)
    cl.exchange_id(verifier=cl.verifier, want=CLID_INUSE)
    cl.cred = None
    check(cl.destroy_session() == OK, "DESTROY_SESSION")
    old = cl.clientid
    cl.cred = other
    cl.exchange_id()
    check(cl.clientid != old, "a colliding owner without state kept the old client ID")
    st = cl.create_session(clientid=old)
    check(st == STALE_CLIENTID, "CREATE_SESSION of the replaced client ID: %d" % st)
    check(cl.create_session() == OK, "CREATE_SESSION of the new client ID")
    cl.goodbye()
    # Sizes the session was made with: the request, the reply, the cached reply.
    cl = Client(host, port, owner + "-sizes")
    cl.exchange_id()
    st = cl.create_session(fore=chan_attrs(maxreq=512, maxresp=400, maxresp_cached=400))
    check(st == OK, "CREATE_SESSION of 512-byte requests, 400-byte replies: %d" % st)
    st = status_of(cl, [Op(OP_PUTROOTFH), Op(OP_LOOKUP, X().opaque(b"12345" * 100).b)])
    check(st == REQ_TOO_BIG, "a 600-byte request on a 512-byte session: %d" % st)
    readable = 0xffffffff & ~(1 << (48 - 32)) & ~(1 << (54 - 32))   # not the *_set ones
    getattr_all = Op(OP_GETATTR, X().u32(2).u32(0xffffffff).u32(readable).b)
    st = status_of(cl, [Op(OP_PUTROOTFH)] + [getattr_all] * 4)
    check(st == REP_TOO_BIG, "a reply past the session's 400 bytes: %d" % st)
    cl.ok([Op(OP_PUTROOTFH)], "a small COMPOUND after REP_TOO_BIG")
    check(cl.destroy_session() == OK, "DESTROY_SESSION")
    st = cl.create_session(fore=chan_attrs(maxresp_cached=10))
    check(st == OK, "CREATE_SESSION with a 10-byte reply cache: %d" % st)
    cl.cachethis = True
    st = status_of(cl, [])
    check(st == REP_TOO_BIG_TO_CACHE, "SEQUENCE cachethis on a 10-byte cache: %d" % st)
    cl.cachethis = False
    cl.ok([Op(OP_PUTROOTFH)], "the slot after REP_TOO_BIG_TO_CACHE")
    check(cl.reclaim_complete() == OK, "RECLAIM_COMPLETE")
    # SECINFO_NO_NAME of the root's parent; RENAME from a file.
    st = status_of(cl, [Op(OP_PUTROOTFH), Op(OP_SECINFO_NO_NAME, X().u32(1).b)])
    check(st == NOENT, "SECINFO_NO_NAME(PARENT) of the root: %d, not NOENT" % st)
    st, sid, fh = cl.open(exp, name, True)
    check(st == OK, "OPEN %s: %d" % (name, st))
    st = status_of(cl, [putfh(fh), Op(OP_SAVEFH)] + op_lookup_path(exp) +
                   [Op(OP_RENAME, X().opaque(b"x").opaque(b"y").b)])
    check(st == NOTDIR, "RENAME from a file: %d, not NOTDIR" % st)
    cl.ok([putfh(fh), op_close(sid)], "CLOSE")
    # The current stateid goes with the filehandle (RFC 8881 16.2.3.1.2): none
    # after PUTROOTFH; SAVEFH and RESTOREFH keep it with theirs.
    cur = (1, bytes(12))
    opened = op_lookup_path(exp) + [op_open(cl.clientid, cl.owner, name, False)]
    st, res = cl.compound(opened + [Op(OP_PUTROOTFH), op_close(cur)])
    check(st == BAD_STATEID, "CLOSE(current stateid) after PUTROOTFH: %d, not BAD_STATEID" % st)
    sid = res[len(opened) - 1][1]
    st = status_of(cl, [Op(OP_PUTROOTFH)] + op_lookup_path(exp)[1:] +
                   [Op(OP_LOOKUP, X().opaque(name.encode()).b), op_close(sid)])
    check(st == OK, "CLOSE of the open left by the refused CLOSE: %d" % st)
    st = status_of(cl, opened + [Op(OP_SAVEFH), Op(OP_PUTROOTFH), Op(OP_RESTOREFH),
                                 op_close(cur)])
    check(st == OK, "CLOSE(current stateid) after SAVEFH, PUTROOTFH, RESTOREFH: %d" % st)
    cl.goodbye()
    # A new client's OPEN before its RECLAIM_COMPLETE is GRACE.
    cl = Client(host, port, owner + "-early").connect(reclaim_complete=False)
    st, _, _ = cl.open(exp, name, False)
    check(st == GRACE, "OPEN before RECLAIM_COMPLETE: %d, not GRACE" % st)
    cl.goodbye()
    print("session-rules ok")


def mode_unconfirmed_expiry(lease):
    """An unconfirmed client ID lives one lease (RFC 8881 18.35.4)."""
    import time
    host, port, exp, owner = ctx()
    cl = Client(host, port, owner)
    cl.exchange_id()
    time.sleep(lease + 2)
    st = cl.create_session()
    check(st == STALE_CLIENTID, "CREATE_SESSION after a lease unconfirmed: %d" % st)
    print("unconfirmed-expiry ok")


# ---------------------------------------------------------------- NFSv4.0

OP_ACCESS, OP_CREATE, OP_OPEN_CONFIRM, OP_OPEN_DOWNGRADE, OP_READLINK = 3, 6, 20, 21, 27
OP_SETATTR, OP_SETCLIENTID, OP_SETCLIENTID_CONFIRM, OP_VERIFY = 34, 35, 36, 37
ACCESS, EXIST, EXPIRED, SHARE_DENIED, SYMLINK = 13, 17, 10011, 10015, 10029
ACCESS4_READ, ACCESS4_LOOKUP, ACCESS4_MODIFY, ACCESS4_EXTEND = 0x1, 0x2, 0x4, 0x8
ACCESS4_DELETE, ACCESS4_EXECUTE = 0x10, 0x20
FATTR4_CHANGE, FATTR4_SIZE, FATTR4_MODE, FATTR4_TIME_MODIFY_SET = 3, 4, 33, 54
ONES = (0xffffffff, b"\xff" * 12)
ZEROS = (0, bytes(12))


def fattr(attrs):
    """fattr4 of {attribute number: encoded value}, in attribute order."""
    words = [0, 0]
    vals = b""
    for num in sorted(attrs):
        words[num // 32] |= 1 << (num % 32)
        vals += attrs[num]
    return bytes(X().u32(2).u32(words[0]).u32(words[1]).opaque(vals).b)


def bitmap(*nums):
    words = [0, 0]
    for num in nums:
        words[num // 32] |= 1 << (num % 32)
    return bytes(X().u32(2).u32(words[0]).u32(words[1]).b)


class Client40(Client):
    """An NFSv4.0 client: SETCLIENTID, one open-owner with its seqid."""

    def __init__(self, host, port, owner):
        super().__init__(host, port, owner)
        self.minor = 0
        self.oseq = 0

    def compound(self, ops, session=False):
        return super().compound(ops, session=False)

    def setclientid(self, verifier=None, want=OK):
        self.verifier = verifier or os.urandom(8)
        x = X().fixed(self.verifier).opaque(self.owner).u32(0x40000000).opaque(b"tcp")
        x.opaque(b"127.0.0.1.0.0").u32(1)
        st, res = self.compound([Op(OP_SETCLIENTID, x.b, lambda r, s: (r.gu64(), r.gfixed(8))
                                    if s == OK else None)])
        check(st == want, "SETCLIENTID: %d, expected %d" % (st, want))
        if st != OK:
            return st
        self.clientid, confirm = res[0][1]
        st, _ = self.compound([Op(OP_SETCLIENTID_CONFIRM, X().u64(self.clientid).fixed(confirm).b)])
        check(st == OK, "SETCLIENTID_CONFIRM: %d" % st)
        self.oseq = 0
        return OK

    def open40(self, path, name, access=3, deny=0, create_attrs=None):
        """OPEN (with OPEN_CONFIRM when asked) of path/name: (status, stateid, fh)."""
        x = X().u32(self.oseq).u32(access).u32(deny).u64(self.clientid).opaque(self.owner)
        if create_attrs is not None:
            x.u32(1).u32(UNCHECKED4).fixed(fattr(create_attrs))
        else:
            x.u32(0)
        x.u32(0).opaque(name.encode())

        def parse(r, st):
            if st != OK:
                return None
            sid = stateid(r)
            r.gu32(), r.gu64(), r.gu64()
            rflags = r.gu32()
            for _ in range(r.gu32()):
                r.gu32()
            check(r.gu32() == 0, "OPEN granted a delegation")
            return sid, rflags
        st, res = self.compound(op_lookup_path(path) + [Op(OP_OPEN, x.b, parse), op_getfh()])
        if st in (OK, SHARE_DENIED, SYMLINK, ACCESS):   # seqid-consuming outcomes
            self.oseq += 1
        if st != OK:
            return st, None, None
        (sid, rflags), fh = res[-2][1], res[-1][1]
        if rflags & 2:   # OPEN4_RESULT_CONFIRM
            x = X()
            put_stateid(x, sid)
            x.u32(self.oseq)
            st, res = self.compound([putfh(fh), Op(OP_OPEN_CONFIRM, x.b, lambda r, s: stateid(r)
                                                   if s == OK else None)])
            check(st == OK, "OPEN_CONFIRM: %d" % st)
            self.oseq += 1
            sid = res[-1][1]
        return OK, sid, fh

    def close40(self, fh, sid):
        x = X().u32(self.oseq)
        put_stateid(x, sid)
        st, _ = self.compound([putfh(fh), Op(OP_CLOSE, x.b)])
        if st in (OK, BAD_STATEID):
            self.oseq += 1 if st == OK else 0
        return st

    def getattr_u64(self, fh, num):
        st, res = self.compound([putfh(fh), Op(OP_GETATTR, bitmap(num),
                                               lambda r, s: ([r.gu32() for _ in range(r.gu32())],
                                                             r.gopaque()) if s == OK else None)])
        check(st == OK, "GETATTR %d: %d" % (num, st))
        return X(res[-1][1][1]).gu64()


def mode_v40_rules(name):
    """NFSv4.0 state and attribute rules (pynfs OPEN2 OPEN7 OPEN21 OPDG2 WRT1 WRT2
    WRT4 WRT19 CLOSE4 LOCK10 CID1 CID2a GATT3 VF5 ACC2 RDLK2d)."""
    host, port, exp, owner = ctx()
    c = Client40(host, port, owner + "-40")
    c.setclientid()
    # OPEN create with a size makes a file of that size; UNCHECKED4 over it
    # ignores a size but zero, which truncates.
    size = lambda n: X().u64(n).b
    mode = X().u32(0o600).b
    st, sid, fh = c.open40(exp, name, create_attrs={FATTR4_SIZE: size(32), FATTR4_MODE: mode})
    check(st == OK, "OPEN create %s: %d" % (name, st))
    check(c.getattr_u64(fh, FATTR4_SIZE) == 32, "size after OPEN create with size 32")
    st, sid, _ = c.open40(exp, name, create_attrs={FATTR4_SIZE: size(16)})
    check(st == OK, "OPEN UNCHECKED4 of an existing file: %d" % st)
    check(c.getattr_u64(fh, FATTR4_SIZE) == 32, "an existing file took a create size of 16")
    # WRITE: the bypass stateid counts as the anonymous one; nothing written
    # changes nothing; another user's credential may not use the opener's stateid.
    st, res = c.compound([putfh(fh), op_write(ONES, 0, b"one", stable=1)])
    check(st == OK, "WRITE with the all-ones stateid: %d" % st)
    before = c.getattr_u64(fh, FATTR4_CHANGE)
    st, _ = c.compound([putfh(fh), op_write(sid, 5, b"")])
    check(st == OK and c.getattr_u64(fh, FATTR4_CHANGE) == before,
          "a zero-length WRITE: %d, or it changed the file" % st)
    c.cred = auth_sys(uid=3912, gid=2422, machine=b"whatever")
    st, _ = c.compound([putfh(fh), op_write(sid, 0, b"stolen")])
    c.cred = None
    check(st == ACCESS, "WRITE by another user with the opener's stateid: %d, not ACCESS" % st)
    # Special stateids name no state; LOCK's lock-owner is its open's client's.
    st = c.close40(fh, ZEROS)
    check(st == BAD_STATEID, "CLOSE with the anonymous stateid: %d, not BAD_STATEID" % st)
    lk = X().u32(WRITE_LT).u32(0).u64(0).u64(25).u32(1).u32(c.oseq)
    put_stateid(lk, sid)
    lk.u32(0).u64(c.clientid ^ 0x5a5a5a5a).opaque(b"lock-owner")
    st, _ = c.compound([putfh(fh), Op(OP_LOCK, lk.b)])
    check(st == STALE_CLIENTID, "LOCK with a lock-owner of an unknown client: %d" % st)
    # OPEN_DOWNGRADE only to what was opened; the owner's own deny applies to it.
    dg = X()
    put_stateid(dg, sid)
    dg.u32(c.oseq).u32(1).u32(0)
    st, _ = c.compound([putfh(fh), Op(OP_OPEN_DOWNGRADE, dg.b)])
    check(st == INVAL, "OPEN_DOWNGRADE to read, never opened alone: %d, not INVAL" % st)
    denied = name + ".deny"
    st, dsid, dfh = c.open40(exp, denied, access=3, deny=1, create_attrs={})
    check(st == OK, "OPEN create, deny read: %d" % st)
    st, _, _ = c.open40(exp, denied, access=1, deny=0)
    check(st == SHARE_DENIED, "the same owner's read OPEN of a read-denied file: %d" % st)
    check(c.close40(dfh, dsid) == OK, "CLOSE")
    # Write-only attributes cannot be read or compared.
    st, _ = c.compound([putfh(fh), Op(OP_GETATTR, bitmap(FATTR4_TIME_MODIFY_SET))])
    check(st == INVAL, "GETATTR of time_modify_set: %d, not INVAL" % st)
    st, _ = c.compound([putfh(fh), Op(OP_VERIFY, fattr({FATTR4_TIME_MODIFY_SET: X().u32(0).b}))])
    check(st == INVAL, "VERIFY of time_modify_set: %d, not INVAL" % st)
    # ACCESS supports only the bits meaningful for the type.
    every = ACCESS4_READ | ACCESS4_LOOKUP | ACCESS4_MODIFY | ACCESS4_EXTEND | ACCESS4_DELETE \
        | ACCESS4_EXECUTE
    acc = lambda r, s: (r.gu32(), r.gu32()) if s == OK else None
    st, res = c.compound([putfh(fh), Op(OP_ACCESS, X().u32(every).b, acc)])
    check(st == OK and not res[-1][1][0] & (ACCESS4_LOOKUP | ACCESS4_DELETE),
          "ACCESS of a file: %d, supported %r" % (st, res[-1][1]))
    st, res = c.compound(op_lookup_path(exp) + [Op(OP_ACCESS, X().u32(every).b, acc)])
    check(st == OK and not res[-1][1][0] & ACCESS4_EXECUTE,
          "ACCESS of a directory: %d, supported %r" % (st, res[-1][1]))
    # READLINK of a directory; OPEN of a FIFO.
    st, _ = c.compound(op_lookup_path(exp) + [Op(OP_READLINK)])
    check(st == INVAL, "READLINK of a directory: %d, not INVAL" % st)
    fifo = name + ".fifo"
    st, _ = c.compound(op_lookup_path(exp) + [Op(OP_CREATE, X().u32(7).opaque(fifo.encode())
                                                  .fixed(fattr({})).b)])
    check(st == OK, "CREATE fifo: %d" % st)
    st, _, _ = c.open40(exp, fifo)
    check(st == SYMLINK, "OPEN of a FIFO: %d, not SYMLINK" % st)
    # A retransmission (same XID, same arguments) gets the first answer from the
    # duplicate request cache; the same call as a new one (new XID) runs again.
    mkdir = op_lookup_path(exp) + [Op(OP_CREATE, X().u32(2).opaque((name + ".d").encode())
                                      .fixed(fattr({})).b)]
    st = status_of(c, mkdir)
    check(st == OK, "CREATE directory: %d" % st)
    c.c.xid -= 1
    st = status_of(c, mkdir)
    check(st == OK, "the CREATE retransmitted with its XID: %d, not the first answer" % st)
    st = status_of(c, mkdir)
    check(st == EXIST, "the CREATE sent again as a new call: %d, not EXIST" % st)
    # Another principal may not take a name whose client holds state; a
    # restarted client's old stateids have EXPIRED.
    other = Client40(host, port, owner + "-40")
    other.cred = auth_sys(uid=1111, gid=37, machine=b"other")
    other.setclientid(verifier=c.verifier, want=CLID_INUSE)
    c.setclientid()
    st = c.close40(fh, sid)
    check(st == EXPIRED, "CLOSE with the stateid of the client before its restart: %d" % st)
    print("v40-rules ok")


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
    elif mode == "session-rules":
        mode_session_rules(sys.argv[6])
    elif mode == "v40-rules":
        mode_v40_rules(sys.argv[6])
    elif mode == "unconfirmed-expiry":
        mode_unconfirmed_expiry(int(sys.argv[6]))
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
    elif mode == "idle":
        mode_idle()
    elif mode == "no-reclaim":
        mode_no_reclaim(sys.argv[6])
    elif mode == "verify":
        mode_verify(sys.argv[6], int(sys.argv[7]))
    elif mode == "reads":
        mode_reads(sys.argv[6], int(sys.argv[7]))
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
