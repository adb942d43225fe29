#!/usr/bin/env python3
"""NFSv4 delegations over the wire, with raw clients that run a callback service:
4.1 clients whose session carries a back channel on their own connection, and a
4.0 client listening on a callback address of its own.

  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER recall NAME
      client a opens NAME for read and gets a read delegation; client b's OPEN for
      write is DELAY; a receives CB_SEQUENCE + CB_RECALL of that delegation on its
      back channel and answers; b is still held off until a's DELEGRETURN, then its
      OPEN succeeds; the returned delegation's stateid is no longer good.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER write NAME
      a creates NAME and gets a write delegation, writes through its stateid; b's OPEN
      for read is DELAY and recalls it; a opens under the delegation
      (CLAIM_DELEG_CUR_FH) as a client flushing its cached opens does, returns it,
      and b's OPEN then succeeds and reads a's data.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER revoke NAME LEASE
      a gets a read delegation and ignores the recall (keeping its lease alive); b's
      OPEN for write is DELAY until (polling, bounded) a's delegation is revoked, a
      lease after the recall; a's SEQUENCE then flags RECALLABLE_STATE_REVOKED, its
      READ with the delegation's stateid is DELEG_REVOKED, and FREE_STATEID clears it.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER rebind NAME
      a holds a read delegation and leaves the CB_RECALL b's OPEN causes unanswered:
      the server gives up on its back channel (SEQUENCE flags CB_PATH_DOWN_SESSION);
      a binds its connection again (BIND_CONN_TO_SESSION) and gets the recall again,
      answers it and returns the delegation; b's OPEN then succeeds.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER v3 NAME
      a holds a read delegation; an NFSv3 WRITE to the file is JUKEBOX and recalls it;
      after a's DELEGRETURN the v3 WRITE succeeds.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER nlm NAME
      a holds a read delegation; an NLM exclusive LOCK (NFSv3 locking) is
      DENIED_GRACE_PERIOD and recalls it; after a's DELEGRETURN the LOCK is granted.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER v40 NAME
      a 4.0 client gives SETCLIENTID a callback address it listens on; the server
      probes it with CB_NULL, the client's OPEN for read gets a read delegation, a 4.1
      client's OPEN for write is DELAY and the 4.0 client receives CB_RECALL on a
      connection the server makes; DELEGRETURN lets the other OPEN through.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER cbgetattr NAME
      a holds a write delegation and has written through it; b's GETATTR of change
      and size waits while the server asks a (CB_SEQUENCE + CB_GETATTR on its back
      channel) and answers with a's size and a change attribute past the file's (a
      third client's GETATTR meanwhile is DELAY: one request waits for the holder); the
      same answer again gives the same change, a new one a greater change; b's VERIFY
      and NVERIFY of change and size ask a the same way and compare with a's values
      (VERIFY of the file's own is NOT_SAME); after a's DELEGRETURN b sees the file's
      own attributes with no callback.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER cbgetattrexpired NAME LEASE
      a holds a write delegation, writes through it and then falls silent; once its
      lease ran out, b's GETATTR is answered at once with the file's own attributes
      (no CB_GETATTR to a: its state yields), and b can then open the file for write.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER cbgetattr40 NAME
      the same CB_GETATTR to a 4.0 holder of a write delegation, on a connection the
      server makes to its callback address.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER deleghold NAME
      a opens NAME-r for read and NAME-w for write and holds a read and a write
      delegation; prints both file handles (hex) and leaves without a word.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER delegreclaim HEXR HEXW NAME
      after a restart: a new client's OPEN is GRACE; a (same owner) reclaims its opens
      with CLAIM_PREVIOUS naming the delegation type it held and gets both delegations
      back (recall not set: its back channel is up); CLAIM_DELEGATE_PREV and
      CLAIM_DELEG_PREV_FH are NOTSUPP; after a's RECLAIM_COMPLETE the new client's
      conflicting OPENs are DELAY and recall the reclaimed delegations (CB_RECALL of
      their stateids), and succeed once a returns them.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER deleghold40 NAME
      a 4.0 client with a callback address holds a read delegation on NAME; prints
      the file handle (hex) and leaves without a word.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER delegreclaim40 HEXFH NAME
      after a restart the 4.0 client (same name) answers the CB_NULL probe and
      reclaims its open with CLAIM_PREVIOUS naming a read delegation, which it gets
      back. If the server had the probe's answer by then (recall not set), another
      client's OPEN for write after grace is DELAY and recalls it (CB_RECALL to the
      callback address); if not (recall set), the client returns it at once, as it is
      told to. Either way the other client's OPEN then succeeds.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER none NAME
      (daemon with nfs_delegations = 0) a client with a back channel gets none.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER hostwrite NAME DATA
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER hostread NAME DATA
      another client (the host, beside a kernel client holding a delegation): OPEN
      NAME for write (read), retrying while DELAY (bounded), then WRITE DATA at 0
      (READ, which must start with DATA); prints how many DELAYs it saw.
  nfs4_deleg_rpc.py HOST NFSPORT EXPORT OWNER hostgetattr NAME SIZE
      the host's GETATTR of NAME's size (retrying while DELAY, bounded) must be SIZE;
      prints how many DELAYs it saw (none when a write delegation's holder answered
      CB_GETATTR).

Exit 0 when every check holds; "FAIL: ..." and exit 1 otherwise.
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs_rpc import NFS, X, Conn, auth_sys, check, fail  # noqa: E402
from nfs4_rpc import (GRACE, OK, Client, Op, bitmap, chan_attrs, fattr,  # noqa: E402
                      op_close, op_getfh, op_lookup_path, op_read, op_write, put_stateid,
                      putfh, stateid)

OP_OPEN, OP_DELEGRETURN, OP_FREE_STATEID, OP_CREATE_SESSION = 18, 8, 45, 43
OP_SETCLIENTID, OP_SETCLIENTID_CONFIRM, OP_OPEN_CONFIRM, OP_RENEW = 35, 36, 20, 30
OP_CB_GETATTR, OP_CB_RECALL, OP_CB_SEQUENCE = 3, 4, 11
OP_GETATTR, OP_LOOKUP, FATTR4_CHANGE, FATTR4_SIZE = 9, 15, 3, 4
OP_NVERIFY, OP_VERIFY, SAME, NOT_SAME = 17, 37, 10009, 10027
DELAY, BAD_STATEID, DELEG_REVOKED, JUKEBOX = 10008, 10025, 10087, 10008
OPEN_DELEGATE_NONE, OPEN_DELEGATE_READ, OPEN_DELEGATE_WRITE = 0, 1, 2
SEQ4_STATUS_RECALLABLE_STATE_REVOKED, SEQ4_STATUS_CB_PATH_DOWN_SESSION = 0x40, 0x200
OP_BIND_CONN_TO_SESSION, CDFC4_BACK_OR_BOTH, CDFS4_BOTH = 41, 7, 3
CB_PROG = 0x40000000
CLAIM_NULL, CLAIM_PREVIOUS, CLAIM_DELEGATE_PREV, CLAIM_DELEG_CUR_FH = 0, 1, 3, 5
CLAIM_DELEG_PREV_FH, NOTSUPP, CB_PATH_DOWN = 6, 10004, 10048


class CbConn(Conn):
    """A connection that also carries callbacks: calls from the server that
    arrive while we wait for a reply are kept for wait_callback."""

    def __init__(self, host, port):
        super().__init__(host, port)
        self.callbacks = []

    def call_raw(self, prog, vers, proc, args=b"", flavor=1, cred=None, rpcvers=2):
        self.xid += 1
        cred = auth_sys() if cred is None else cred
        x = X().u32(self.xid).u32(0).u32(rpcvers).u32(prog).u32(vers).u32(proc)
        x.u32(flavor).opaque(cred).u32(0).opaque(b"")
        self.send_record(bytes(x.b) + args)
        while True:
            rec = self.recv_record()
            r = X(rec)
            xid, mtype = r.gu32(), r.gu32()
            if mtype == 0:
                self.callbacks.append(rec)
                continue
            check(xid == self.xid, "reply xid")
            return r

    def wait_callback(self, timeout=15):
        if self.callbacks:
            return self.callbacks.pop(0)
        self.s.settimeout(timeout)
        try:
            rec = self.recv_record()
        except socket.timeout:
            fail("no callback came within %d s" % timeout)
        finally:
            self.s.settimeout(20)
        check(X(rec[4:8]).gu32() == 0, "a reply where a callback was expected")
        return rec


def parse_cb_call(rec):
    """A CB_COMPOUND call: (xid, prog, proc, minor, ident, [(op, args)])."""
    r = X(rec)
    xid = r.gu32()
    r.gu32(), r.gu32()
    prog, _vers, proc = r.gu32(), r.gu32(), r.gu32()
    r.gu32(), r.gopaque(), r.gu32(), r.gopaque()     # credential, verifier
    if proc == 0:
        return xid, prog, proc, None, None, []
    r.gopaque()                                       # tag
    minor, ident = r.gu32(), r.gu32()
    ops = []
    for _ in range(r.gu32()):
        op = r.gu32()
        if op == OP_CB_SEQUENCE:
            sess, seq, slot, high, _cache = r.gfixed(16), r.gu32(), r.gu32(), r.gu32(), r.gu32()
            check(r.gu32() == 0, "CB_SEQUENCE with referring calls")
            ops.append((op, dict(session=sess, seq=seq, slot=slot, high=high)))
        elif op == OP_CB_RECALL:
            ops.append((op, dict(sid=stateid(r), truncate=r.gu32(), fh=r.gopaque())))
        elif op == OP_CB_GETATTR:
            fh = r.gopaque()
            ops.append((op, dict(fh=fh, mask=[r.gu32() for _ in range(r.gu32())])))
        else:
            fail("unexpected callback operation %d" % op)
    return xid, prog, proc, minor, ident, ops


def cb_reply(xid, ops=None):
    """The reply to a callback: CB_NULL's when ops is None, else CB_COMPOUND's
    with every operation OK (CB_GETATTR's attributes: its args' "attrs", a fattr4)."""
    x = X().u32(xid).u32(1).u32(0).u32(0).opaque(b"").u32(0)
    if ops is None:
        return bytes(x.b)
    x.u32(OK).opaque(b"").u32(len(ops))
    for op, a in ops:
        x.u32(op).u32(OK)
        if op == OP_CB_SEQUENCE:
            x.fixed(a["session"]).u32(a["seq"]).u32(a["slot"]).u32(a["high"]).u32(a["high"])
        elif op == OP_CB_GETATTR:
            x.fixed(a["attrs"])
    return bytes(x.b)


def parse_open(r, st):
    """OPEN4resok: the open stateid, rflags and the delegation (type, stateid)."""
    if st != OK:
        return None
    sid = stateid(r)
    r.gu32(), r.gu64(), r.gu64()
    rflags = r.gu32()
    for _ in range(r.gu32()):
        r.gu32()
    dtype = r.gu32()
    dsid = None
    if dtype in (OPEN_DELEGATE_READ, OPEN_DELEGATE_WRITE):
        dsid = stateid(r)
        recall = r.gu32()
        if dtype == OPEN_DELEGATE_WRITE:
            check(r.gu32() == 1, "write delegation space limit is not by size")
            r.gu64()
        r.gu32(), r.gu32(), r.gu32(), r.gopaque()     # nfsace4
    elif dtype == 3:
        r.gu32()
    return dict(sid=sid, rflags=rflags, dtype=dtype, dsid=dsid,
                recall=recall if dsid else None)


def op_open_d(clientid, owner, name, create=False, access=1, seqid=0, claim=CLAIM_NULL,
              dsid=None, prev_deleg=OPEN_DELEGATE_NONE):
    x = X().u32(seqid).u32(access).u32(0).u64(clientid).opaque(owner)
    if create:
        x.u32(1).u32(0).u32(0).opaque(b"")
    else:
        x.u32(0)
    x.u32(claim)
    if claim in (CLAIM_NULL, CLAIM_DELEGATE_PREV):
        x.opaque(name.encode())
    elif claim == CLAIM_DELEG_CUR_FH:
        put_stateid(x, dsid)
    elif claim == CLAIM_PREVIOUS:
        x.u32(prev_deleg)
    return Op(OP_OPEN, x.b, parse_open)


def op_delegreturn(sid):
    x = X()
    put_stateid(x, sid)
    return Op(OP_DELEGRETURN, x.b)


class CbClient(Client):
    """A 4.1 client whose session's back channel is its own connection."""

    def __init__(self, host, port, owner, back=True):
        super().__init__(host, port, owner)
        self.c = CbConn(host, port)
        self.back = back
        self.flags = 0

    def create_session(self, clientid=None):
        chan = chan_attrs()
        x = X().u64(self.clientid).u32(self.cs_seq).u32(2 if self.back else 0)
        x.fixed(chan).fixed(chan).u32(CB_PROG)
        x.u32(1).u32(1).fixed(auth_sys(0, 0, b"cbclient"))   # callbacks: AUTH_SYS

        def parse(r, st):
            if st != OK:
                return None
            sid = r.gfixed(16)
            r.gu32()
            flags = r.gu32()
            return sid, flags
        status, res = self.compound([Op(OP_CREATE_SESSION, x.b, parse)], session=False)
        if status == OK:
            self.sessionid, flags = res[0][1]
            check(bool(flags & 2) == self.back,
                  "CREATE_SESSION back channel flag %#x (asked %s)" % (flags, self.back))
            self.seqid = 0
        return status

    def seq_flags(self):
        """A SEQUENCE alone: its sr_status_flags."""
        args = X().fixed(self.sessionid).u32(self.seqid + 1).u32(0).u32(0).u32(0)

        def parse(r, st):
            if st != OK:
                return None
            r.gfixed(16)
            for _ in range(4):
                r.gu32()
            return r.gu32()
        status, res = self.compound([Op(53, args.b, parse)], session=False)
        check(status == OK, "SEQUENCE: %d" % status)
        self.seqid += 1
        return res[0][1]

    def open(self, path, name, create=False, access=1):
        status, res = self.compound(op_lookup_path(path) +
                                    [op_open_d(self.clientid, self.owner, name, create, access),
                                     op_getfh()])
        if status != OK:
            return status, None, None
        return OK, res[-2][1], res[-1][1]

    def answer_recall(self, dsid, fh):
        """Waits for CB_RECALL of dsid on the back channel and answers it."""
        xid, prog, proc, minor, _ident, ops = parse_cb_call(self.c.wait_callback())
        check(prog == CB_PROG and proc == 1, "callback program %#x procedure %d" % (prog, proc))
        check(minor == 1, "CB_COMPOUND minor version %d" % minor)
        check([op for op, _ in ops] == [OP_CB_SEQUENCE, OP_CB_RECALL],
              "callback operations %r, not CB_SEQUENCE, CB_RECALL" % [op for op, _ in ops])
        check(ops[0][1]["session"] == self.sessionid, "CB_SEQUENCE names another session")
        rec = ops[1][1]
        check(rec["sid"][1] == dsid[1], "CB_RECALL of another stateid")
        check(rec["fh"] == fh, "CB_RECALL of another file handle")
        self.c.send_record(cb_reply(xid, ops))
        return ops[0][1]["seq"]


def op_getattr_cs():
    """GETATTR of change and size: (change, size)."""
    def parse(r, st):
        if st != OK:
            return None
        mask = [r.gu32() for _ in range(r.gu32())]
        check(mask and mask[0] == (1 << FATTR4_CHANGE | 1 << FATTR4_SIZE),
              "GETATTR answered attributes %r" % mask)
        v = X(r.gopaque())
        return v.gu64(), v.gu64()
    return Op(OP_GETATTR, bitmap(FATTR4_CHANGE, FATTR4_SIZE), parse)


def cs_attrs(change, size):
    return fattr({FATTR4_CHANGE: bytes(X().u64(change).b), FATTR4_SIZE: bytes(X().u64(size).b)})


class Background:
    """A call run in a thread (it waits for a callback this thread answers)."""

    def __init__(self, fn):
        self.result, self.error = None, None
        self.t = threading.Thread(target=self.run, args=(fn,))
        self.t.start()

    def run(self, fn):
        try:
            self.result = fn()
        except BaseException as e:   # noqa: B036 - fail() exits; report it to the caller
            self.error = e

    def join(self):
        self.t.join(30)
        check(not self.t.is_alive(), "the call never returned")
        if self.error:
            raise self.error
        return self.result


def check_cb_getattr(ops, fh):
    got = [op for op, _ in ops]
    check(got[-1] == OP_CB_GETATTR, "callback operations %r, not ending in CB_GETATTR" % got)
    args = ops[-1][1]
    check(args["fh"] == fh, "CB_GETATTR of another file handle")
    check(args["mask"] and args["mask"][0] & (1 << FATTR4_CHANGE | 1 << FATTR4_SIZE) ==
          (1 << FATTR4_CHANGE | 1 << FATTR4_SIZE), "CB_GETATTR asks %r" % args["mask"])


def ctx():
    a = sys.argv
    return a[1], int(a[2]), a[3], a[4]


def make_file(cl, exp, name, data):
    st, o, fh = cl.open(exp, name, True, access=3)
    check(st == OK, "OPEN (create) %s: %d" % (name, st))
    cl.ok([putfh(fh), op_write(o["sid"], 0, data)], "WRITE")
    cl.ok([putfh(fh), op_close(o["sid"])], "CLOSE")
    return fh


def read_delegation(a, exp, name):
    st, o, fh = a.open(exp, name, access=1)
    check(st == OK, "a's OPEN for read: %d" % st)
    check(o["dtype"] == OPEN_DELEGATE_READ,
          "a's OPEN for read got delegation type %d, not a read delegation" % o["dtype"])
    return o, fh


def mode_recall(name):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    make_file(b, exp, name, b"first")
    o, fh = read_delegation(a, exp, name)
    st, bo, _ = b.open(exp, name, access=3)
    check(st == DELAY, "b's OPEN for write under a's read delegation: %d, not DELAY" % st)
    a.answer_recall(o["dsid"], fh)
    st, bo, _ = b.open(exp, name, access=3)
    check(st == DELAY, "b's OPEN before a returned its delegation: %d, not DELAY" % st)
    a.ok([putfh(fh), op_delegreturn(o["dsid"])], "DELEGRETURN")
    st, bo, _ = b.open(exp, name, access=3)
    check(st == OK, "b's OPEN for write after the DELEGRETURN: %d" % st)
    check(bo["dtype"] == OPEN_DELEGATE_NONE, "b (no back channel) got a delegation")
    status, res = a.compound([putfh(fh), op_read(o["dsid"], 0, 10)])
    check(res[-1][0] == BAD_STATEID, "READ with a returned delegation: %d" % res[-1][0])
    b.ok([putfh(fh), op_write(bo["sid"], 0, b"second")], "b's WRITE")
    a.ok([putfh(fh), op_close(o["sid"])], "a's CLOSE")
    b.ok([putfh(fh), op_close(bo["sid"])], "b's CLOSE")
    a.goodbye()
    b.goodbye()
    print("recall ok")


def mode_write(name):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    st, o, fh = a.open(exp, name, True, access=3)
    check(st == OK, "a's OPEN (create) for write: %d" % st)
    check(o["dtype"] == OPEN_DELEGATE_WRITE,
          "a's OPEN of a file nobody else has open got delegation %d, not write" % o["dtype"])
    a.ok([putfh(fh), op_write(o["dsid"], 0, b"cached by a")], "WRITE with the delegation")
    st, _, _ = b.open(exp, name, access=1)
    check(st == DELAY, "b's OPEN for read under a's write delegation: %d, not DELAY" % st)
    a.answer_recall(o["dsid"], fh)
    res = a.ok([putfh(fh), op_open_d(a.clientid, b"second-owner", "", access=3,
                                     claim=CLAIM_DELEG_CUR_FH, dsid=o["dsid"])],
               "OPEN CLAIM_DELEG_CUR_FH")
    cur = res[-1]
    check(cur["dtype"] == OPEN_DELEGATE_NONE, "CLAIM_DELEG_CUR_FH granted a new delegation")
    a.ok([putfh(fh), op_delegreturn(o["dsid"])], "DELEGRETURN")
    st, bo, _ = b.open(exp, name, access=1)
    check(st == OK, "b's OPEN for read after the return: %d" % st)
    data = b.ok([putfh(fh), op_read(bo["sid"], 0, 100)], "b's READ")[-1][1]
    check(data == b"cached by a", "b reads %r" % data)
    for cl, sid in ((a, o["sid"]), (a, cur["sid"]), (b, bo["sid"])):
        cl.ok([putfh(fh), op_close(sid)], "CLOSE")
    a.goodbye()
    b.goodbye()
    print("write ok")


def getattr_via_holder(b, fh, answer):
    """b's GETATTR of change and size while answer(ops, xid) replies to the
    holder's CB_GETATTR: b's (change, size)."""
    call = Background(lambda: b.ok([putfh(fh), op_getattr_cs()], "b's GETATTR")[-1])
    answer()
    return call.join()


def verify_via_holder(b, fh, negate, change, size, answer):
    """b's VERIFY (NVERIFY if negate) of change and size while answer() replies
    to the holder's CB_GETATTR: its status."""
    op = Op(OP_NVERIFY if negate else OP_VERIFY, cs_attrs(change, size))
    call = Background(lambda: b.compound([putfh(fh), op])[0])
    answer()
    return call.join()


def mode_cbgetattr(name):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    st, o, fh = a.open(exp, name, True, access=3)
    check(st == OK and o["dtype"] == OPEN_DELEGATE_WRITE,
          "a's OPEN (create) for write: %d, delegation %d" % (st, o and o["dtype"]))
    a.ok([putfh(fh), op_write(o["dsid"], 0, b"cached by a")], "WRITE with the delegation")
    change0, size0 = a.ok([putfh(fh), op_getattr_cs()], "a's own GETATTR")[-1]
    check(size0 == 11 and not a.c.callbacks, "a's own GETATTR: size %d, %d callbacks" %
          (size0, len(a.c.callbacks)))

    c = CbClient(host, port, owner + "-c", back=False).connect()

    def answer(change, size, meanwhile=None):
        def run():
            xid, prog, proc, minor, _i, ops = parse_cb_call(a.c.wait_callback())
            if meanwhile:
                meanwhile()
            check(proc == 1 and minor == 1, "callback procedure %d minor %d" % (proc, minor))
            check([op for op, _ in ops] == [OP_CB_SEQUENCE, OP_CB_GETATTR],
                  "callback operations %r" % [op for op, _ in ops])
            check_cb_getattr(ops, fh)
            ops[1][1]["attrs"] = cs_attrs(change, size)
            a.c.send_record(cb_reply(xid, ops))
        return run
    change1, size1 = getattr_via_holder(b, fh, answer(change0, size0))
    check((change1, size1) == (change0, size0),
          "b sees %r though a reports the file unchanged %r" % ((change1, size1), (change0, size0)))
    def third_client_waits():
        st, _ = c.compound([putfh(fh), op_getattr_cs()])
        check(st == DELAY, "c's GETATTR while a is asked for b's: %d, not DELAY" % st)
    change2, size2 = getattr_via_holder(b, fh, answer(change0 + 7, 4096, third_client_waits))
    check(size2 == 4096 and change2 > change0,
          "b sees change %d size %d after a reported a change in its cache" % (change2, size2))
    change3, _ = getattr_via_holder(b, fh, answer(change0 + 7, 4096))
    check(change3 == change2, "the same report moved the change attribute %d -> %d" %
          (change2, change3))
    change4, _ = getattr_via_holder(b, fh, answer(change0 + 8, 8192))
    check(change4 > change3, "a new report left the change attribute at %d" % change4)
    # VERIFY and NVERIFY compare with the holder's values, as GETATTR answers them.
    st = verify_via_holder(b, fh, False, change4, 8192, answer(change0 + 8, 8192))
    check(st == OK, "b's VERIFY of the holder's change and size: %d, not OK" % st)
    st = verify_via_holder(b, fh, False, change0, 11, answer(change0 + 8, 8192))
    check(st == NOT_SAME, "b's VERIFY of the file's own change and size: %d, not NOT_SAME" % st)
    st = verify_via_holder(b, fh, True, change4, 8192, answer(change0 + 8, 8192))
    check(st == SAME, "b's NVERIFY of the holder's change and size: %d, not SAME" % st)
    st = verify_via_holder(b, fh, True, change4, 8192, answer(change0 + 9, 12288))
    check(st == OK, "b's NVERIFY after the holder wrote again: %d, not OK" % st)
    a.ok([putfh(fh), op_delegreturn(o["dsid"])], "DELEGRETURN")
    change5, size5 = b.ok([putfh(fh), op_getattr_cs()], "b's GETATTR after the return")[-1]
    check(size5 == 11 and not a.c.callbacks, "after DELEGRETURN: size %d, %d callbacks" %
          (size5, len(a.c.callbacks)))
    a.ok([putfh(fh), op_close(o["sid"])], "CLOSE")
    a.goodbye()
    b.goodbye()
    c.goodbye()
    print("cbgetattr ok")


def mode_cbgetattr_expired(name, lease):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    st, o, fh = a.open(exp, name, True, access=3)
    check(st == OK and o["dtype"] == OPEN_DELEGATE_WRITE,
          "a's OPEN (create) for write: %d, delegation %d" % (st, o and o["dtype"]))
    a.ok([putfh(fh), op_write(o["dsid"], 0, b"written by a")], "WRITE with the delegation")
    time.sleep(lease + 2)        # a falls silent past its lease
    _change, size = b.ok([putfh(fh), op_getattr_cs()], "b's GETATTR after a's lease ran out")[-1]
    check(size == 12, "b's GETATTR: size %d, not the file's 12" % size)
    a.c.s.settimeout(1)
    try:
        rec = a.c.recv_record()
        fail("a, whose lease ran out, was called back: %r" % rec[:64])
    except socket.timeout:
        pass
    st, bo, _ = b.open(exp, name, access=3)
    check(st == OK, "b's OPEN for write after a's state yielded: %d" % st)
    b.ok([putfh(fh), op_close(bo["sid"])], "b's CLOSE")
    b.goodbye()
    print("cbgetattrexpired ok")


def mode_revoke(name, lease):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    make_file(b, exp, name, b"data")
    o, fh = read_delegation(a, exp, name)
    check(a.seq_flags() & SEQ4_STATUS_RECALLABLE_STATE_REVOKED == 0, "flags before revocation")
    st = DELAY
    for _ in range(lease * 8):
        st, bo, _ = b.open(exp, name, access=3)
        if st != DELAY:
            break
        a.seq_flags()              # a renews its lease but never returns the delegation
        time.sleep(0.5)
    check(st == OK, "b's OPEN for write never got past a's unreturned delegation: %d" % st)
    check(a.c.callbacks, "a never got a CB_RECALL")
    flags = a.seq_flags()
    check(flags & SEQ4_STATUS_RECALLABLE_STATE_REVOKED,
          "a's SEQUENCE flags %#x lack RECALLABLE_STATE_REVOKED" % flags)
    status, res = a.compound([putfh(fh), op_read(o["dsid"], 0, 10)])
    check(res[-1][0] == DELEG_REVOKED, "READ with a revoked delegation: %d" % res[-1][0])
    x = X()
    put_stateid(x, o["dsid"])
    a.ok([Op(OP_FREE_STATEID, x.b)], "FREE_STATEID of the revoked delegation")
    flags = a.seq_flags()
    check(not flags & SEQ4_STATUS_RECALLABLE_STATE_REVOKED,
          "flags %#x still say revoked after FREE_STATEID" % flags)
    data = a.ok([putfh(fh), op_read(o["sid"], 0, 10)], "a's READ with its open")[-1][1]
    check(data == b"data", "a's READ: %r" % data)
    a.ok([putfh(fh), op_close(o["sid"])], "a's CLOSE")
    b.ok([putfh(fh), op_close(bo["sid"])], "b's CLOSE")
    a.goodbye()
    b.goodbye()
    print("revoke ok")


def mode_rebind(name):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    make_file(b, exp, name, b"data")
    o, fh = read_delegation(a, exp, name)
    st, _, _ = b.open(exp, name, access=3)
    check(st == DELAY, "b's OPEN for write under a's read delegation: %d, not DELAY" % st)
    a.c.wait_callback()                   # and never answered
    flags = 0
    for _ in range(60):                   # the server waits a while for the answer
        flags = a.seq_flags()
        if flags & SEQ4_STATUS_CB_PATH_DOWN_SESSION:
            break
        time.sleep(0.5)
    check(flags & SEQ4_STATUS_CB_PATH_DOWN_SESSION,
          "a's SEQUENCE flags %#x never said its back channel is down" % flags)
    res = a.ok([Op(OP_BIND_CONN_TO_SESSION, X().fixed(a.sessionid).u32(CDFC4_BACK_OR_BOTH)
                   .u32(0).b, lambda r, st: (r.gfixed(16), r.gu32()) if st == OK else None)],
               "BIND_CONN_TO_SESSION")
    check(res[-1][1] == CDFS4_BOTH, "BIND_CONN_TO_SESSION gave direction %d" % res[-1][1])
    check(not a.seq_flags() & SEQ4_STATUS_CB_PATH_DOWN_SESSION, "flags after binding")
    a.answer_recall(o["dsid"], fh)
    a.ok([putfh(fh), op_delegreturn(o["dsid"])], "DELEGRETURN")
    st, bo, _ = b.open(exp, name, access=3)
    check(st == OK, "b's OPEN after the return: %d" % st)
    b.ok([putfh(fh), op_close(bo["sid"])], "b's CLOSE")
    a.ok([putfh(fh), op_close(o["sid"])], "a's CLOSE")
    a.goodbye()
    b.goodbye()
    print("rebind ok")


def v3_write(host, port, fh, data):
    c = Conn(host, port)
    args = X().opaque(fh).u64(0).u32(len(data)).u32(2).opaque(data)
    accept, r = c.call(NFS, 3, 7, bytes(args.b))
    check(accept == 0, "v3 WRITE not accepted")
    st = r.gu32()
    c.close()
    return st


def mode_v3(name):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    make_file(b, exp, name, b"v4 data")
    b.goodbye()
    o, fh = read_delegation(a, exp, name)
    st = v3_write(host, port, fh, b"v3")
    check(st == JUKEBOX, "v3 WRITE under a read delegation: %d, not JUKEBOX" % st)
    a.answer_recall(o["dsid"], fh)
    a.ok([putfh(fh), op_delegreturn(o["dsid"])], "DELEGRETURN")
    st = v3_write(host, port, fh, b"v3")
    check(st == 0, "v3 WRITE after the return: %d" % st)
    data = a.ok([putfh(fh), op_read(o["sid"], 0, 100)], "READ")[-1][1]
    check(data == b"v3 data", "a reads %r after the v3 write" % data)
    a.ok([putfh(fh), op_close(o["sid"])], "CLOSE")
    a.goodbye()
    print("v3 ok")


def mode_nlm(name):
    from nlm_rpc import GRACE as NLM_GRACE, GRANTED, Owner
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    make_file(b, exp, name, b"locked data")
    b.goodbye()
    o, fh = read_delegation(a, exp, name)
    nlm = Owner(Conn(host, port), "nlmhost", 4242)
    st = nlm.lock(fh, True, 0, 100)
    check(st == NLM_GRACE, "NLM LOCK under a read delegation: %d, not DENIED_GRACE_PERIOD" % st)
    a.answer_recall(o["dsid"], fh)
    a.ok([putfh(fh), op_delegreturn(o["dsid"])], "DELEGRETURN")
    st = nlm.lock(fh, True, 0, 100)
    check(st == GRANTED, "NLM LOCK after the return: %d" % st)
    check(nlm.unlock(fh, 0, 100) == GRANTED, "NLM UNLOCK")
    a.ok([putfh(fh), op_close(o["sid"])], "CLOSE")
    a.goodbye()
    print("nlm ok")


def compound40(conn, ops):
    x = X().opaque(b"").u32(0).u32(len(ops))
    for op in ops:
        x.u32(op.num).fixed(op.args)
    accept, r = conn.call(NFS, 4, 1, bytes(x.b))
    check(accept == 0, "COMPOUND not accepted")
    status = r.gu32()
    r.gopaque()
    res = []
    for op in ops[:r.gu32()]:
        num, st = r.gu32(), r.gu32()
        check(num == op.num, "4.0 result for op %d where %d was sent" % (num, op.num))
        res.append((st, op.parse(r, st) if op.parse else None))
    return status, res


def accept_callback(lsock):
    """Accepts the server's callback connection; its first call record."""
    lsock.settimeout(15)
    try:
        s, _ = lsock.accept()
    except socket.timeout:
        fail("the server never connected to the 4.0 callback address")
    cb = Conn.__new__(Conn)
    cb.s = s
    s.settimeout(15)
    return cb, cb.recv_record()


def client40_with_callback(host, port, owner):
    """A 4.0 client whose callback address we listen on, confirmed and probed:
    (connection, clientid, listening socket)."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    lport = lsock.getsockname()[1]
    uaddr = "127.0.0.1.%d.%d" % (lport >> 8, lport & 255)
    a = Conn(host, port)
    sc = X().fixed(os.urandom(8)).opaque((owner + "-40").encode()).u32(CB_PROG)
    sc.opaque(b"tcp").opaque(uaddr.encode()).u32(77)
    st, res = compound40(a, [Op(OP_SETCLIENTID, sc.b,
                                lambda r, s: (r.gu64(), r.gfixed(8)) if s == OK else None)])
    check(st == OK, "SETCLIENTID: %d" % st)
    clientid, verf = res[0][1]
    st, _ = compound40(a, [Op(OP_SETCLIENTID_CONFIRM, X().u64(clientid).fixed(verf).b)])
    check(st == OK, "SETCLIENTID_CONFIRM: %d" % st)
    cb, rec = accept_callback(lsock)
    xid, prog, proc, _, _, _ = parse_cb_call(rec)
    check(prog == CB_PROG and proc == 0, "first callback is %#x/%d, not CB_NULL" % (prog, proc))
    cb.send_record(cb_reply(xid))
    cb.s.close()
    return a, clientid, lsock


def open40_delegation(a, clientid, exp, name, access, dtype):
    """4.0 OPENs (confirmed) until one gets delegation dtype: (open, fh)."""
    seqid = 0
    for _ in range(20):   # the probe's answer is taken in asynchronously: open again
        st, res = compound40(a, op_lookup_path(exp) +
                             [op_open_d(clientid, b"owner40", name, access=access, seqid=seqid),
                              op_getfh()])
        check(st == OK, "4.0 OPEN: %d" % st)
        seqid += 1
        o, fh = res[-2][1], res[-1][1]
        if o["rflags"] & 2:
            x = X()
            put_stateid(x, o["sid"])
            x.u32(seqid)
            st, _ = compound40(a, [putfh(fh), Op(OP_OPEN_CONFIRM, x.b)])
            check(st == OK, "OPEN_CONFIRM: %d" % st)
            seqid += 1
        if o["dtype"] == dtype:
            break
        time.sleep(0.2)
    check(o["dtype"] == dtype,
          "the 4.0 client with a working callback got delegation %d" % o["dtype"])
    return o, fh


def mode_v40(name):
    host, port, exp, owner = ctx()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    make_file(b, exp, name, b"data")
    a, clientid, lsock = client40_with_callback(host, port, owner)
    o, fh = open40_delegation(a, clientid, exp, name, 1, OPEN_DELEGATE_READ)
    st, _, _ = b.open(exp, name, access=3)
    check(st == DELAY, "4.1 OPEN for write under a 4.0 read delegation: %d, not DELAY" % st)
    cb, rec = accept_callback(lsock)
    xid, prog, proc, minor, ident, ops = parse_cb_call(rec)
    check(proc == 1 and minor == 0 and ident == 77,
          "4.0 callback: procedure %d minor %d ident %d" % (proc, minor, ident))
    check([op for op, _ in ops] == [OP_CB_RECALL], "4.0 callback operations %r" % ops)
    check(ops[0][1]["sid"][1] == o["dsid"][1] and ops[0][1]["fh"] == fh,
          "CB_RECALL names another delegation or file")
    cb.send_record(cb_reply(xid, ops))
    cb.s.close()
    st, _ = compound40(a, [putfh(fh), op_delegreturn(o["dsid"])])
    check(st == OK, "4.0 DELEGRETURN: %d" % st)
    st, bo, _ = b.open(exp, name, access=3)
    check(st == OK, "4.1 OPEN for write after the 4.0 DELEGRETURN: %d" % st)
    b.ok([putfh(fh), op_close(bo["sid"])], "CLOSE")
    b.goodbye()
    a.close()
    print("v40 ok")


def mode_cbgetattr40(name):
    host, port, exp, owner = ctx()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    fh = make_file(b, exp, name, b"data")
    change0, size0 = b.ok([putfh(fh), op_getattr_cs()], "b's GETATTR")[-1]
    a, clientid, lsock = client40_with_callback(host, port, owner)
    o, fh = open40_delegation(a, clientid, exp, name, 3, OPEN_DELEGATE_WRITE)

    def answer():
        cb, rec = accept_callback(lsock)
        xid, _prog, proc, minor, ident, ops = parse_cb_call(rec)
        check(proc == 1 and minor == 0 and ident == 77,
              "4.0 callback: procedure %d minor %d ident %d" % (proc, minor, ident))
        check([op for op, _ in ops] == [OP_CB_GETATTR], "4.0 callback operations %r" % ops)
        check_cb_getattr(ops, fh)
        ops[0][1]["attrs"] = cs_attrs(change0 + 1, 100000)
        cb.send_record(cb_reply(xid, ops))
        cb.s.close()
    change1, size1 = getattr_via_holder(b, fh, answer)
    check(size1 == 100000 and change1 > change0,
          "b sees change %d size %d after the 4.0 holder reported a change" % (change1, size1))
    st, _ = compound40(a, [putfh(fh), op_delegreturn(o["dsid"])])
    check(st == OK, "4.0 DELEGRETURN: %d" % st)
    _, size2 = b.ok([putfh(fh), op_getattr_cs()], "b's GETATTR after the return")[-1]
    check(size2 == size0, "after the 4.0 DELEGRETURN b sees size %d, not %d" % (size2, size0))
    b.goodbye()
    a.close()
    print("cbgetattr40 ok")


def mode_deleghold(name):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    make_file(b, exp, name + "-r", b"before the restart")
    b.goodbye()
    fhs = []
    for suffix, access, dtype in (("-r", 1, OPEN_DELEGATE_READ), ("-w", 3, OPEN_DELEGATE_WRITE)):
        st, o, fh = a.open(exp, name + suffix, create=suffix == "-w", access=access)
        check(st == OK and o["dtype"] == dtype,
              "a's OPEN of %s: %d, delegation %d" % (name + suffix, st, o and o["dtype"]))
        fhs.append(fh.hex())
    print(" ".join(fhs))


def open_retry_grace(b, exp, name, access, renew):
    """b's OPEN, again while the server is in grace (bounded): (status, open).
    renew() keeps the holder's lease alive meanwhile (an expired holder would
    just lose its delegation to the OPEN)."""
    for _ in range(160):
        st, o, _ = b.open(exp, name, access=access)
        if st != GRACE:
            return st, o
        renew()
        time.sleep(0.25)
    fail("the grace period never ended")


def mode_delegreclaim(hexr, hexw, name):
    host, port, exp, owner = ctx()
    fhr, fhw = bytes.fromhex(hexr), bytes.fromhex(hexw)
    b = CbClient(host, port, owner + "-b", back=False).connect()
    st, _, _ = b.open(exp, name + "-r", access=2)
    check(st == GRACE, "a new client's OPEN in grace: %d, not GRACE" % st)
    a = CbClient(host, port, owner + "-a").connect(reclaim_complete=False)
    held = {}
    for fh, access, dtype in ((fhr, 1, OPEN_DELEGATE_READ), (fhw, 3, OPEN_DELEGATE_WRITE)):
        o = a.ok([putfh(fh), op_open_d(a.clientid, a.owner, "", access=access,
                                       claim=CLAIM_PREVIOUS, prev_deleg=dtype)],
                 "OPEN CLAIM_PREVIOUS with delegation type %d" % dtype)[-1]
        check(o["dtype"] == dtype and o["recall"] == 0,
              "reclaim of delegation type %d got %d (recall %r)" % (dtype, o["dtype"], o["recall"]))
        held[fh] = o
    # Delegations do not outlive a client's restart here: nothing to reclaim that way.
    for claim, fh_ops in ((CLAIM_DELEGATE_PREV, op_lookup_path(exp)),
                          (CLAIM_DELEG_PREV_FH, [putfh(fhr)])):
        st, res = a.compound(fh_ops + [op_open_d(a.clientid, a.owner, name + "-r", claim=claim)])
        check(res[-1][0] == NOTSUPP, "OPEN claim %d: %d, not NOTSUPP" % (claim, res[-1][0]))
    check(a.reclaim_complete() == OK, "RECLAIM_COMPLETE")
    for fh, access in ((fhr, 2), (fhw, 1)):
        suffix = "-r" if fh == fhr else "-w"
        st, _ = open_retry_grace(b, exp, name + suffix, access, a.seq_flags)
        check(st == DELAY, "b's conflicting OPEN of %s: %d, not DELAY" % (name + suffix, st))
        a.answer_recall(held[fh]["dsid"], fh)
        a.ok([putfh(fh), op_delegreturn(held[fh]["dsid"])], "DELEGRETURN")
        st, bo, _ = b.open(exp, name + suffix, access=access)
        check(st == OK, "b's OPEN of %s after the return: %d" % (name + suffix, st))
        b.ok([putfh(fh), op_close(bo["sid"])], "b's CLOSE")
        a.ok([putfh(fh), op_close(held[fh]["sid"])], "a's CLOSE")
    a.goodbye()
    b.goodbye()
    print("delegreclaim ok")


def mode_deleghold40(name):
    host, port, exp, owner = ctx()
    b = CbClient(host, port, owner + "-b", back=False).connect()
    make_file(b, exp, name, b"before the restart")
    b.goodbye()
    a, clientid, _lsock = client40_with_callback(host, port, owner)
    _o, fh = open40_delegation(a, clientid, exp, name, 1, OPEN_DELEGATE_READ)
    print(fh.hex())


def mode_delegreclaim40(hexfh, name):
    host, port, exp, owner = ctx()
    fh = bytes.fromhex(hexfh)
    a, clientid, lsock = client40_with_callback(host, port, owner)
    st, res = compound40(a, [putfh(fh), op_open_d(clientid, b"owner40", "", access=1,
                                                  claim=CLAIM_PREVIOUS,
                                                  prev_deleg=OPEN_DELEGATE_READ)])
    check(st == OK, "4.0 OPEN CLAIM_PREVIOUS with a read delegation: %d" % st)
    o = res[-1][1]
    check(o["dtype"] == OPEN_DELEGATE_READ, "4.0 reclaim got delegation %d" % o["dtype"])
    if o["rflags"] & 2:
        x = X()
        put_stateid(x, o["sid"])
        x.u32(1)
        st, _ = compound40(a, [putfh(fh), Op(OP_OPEN_CONFIRM, x.b)])
        check(st == OK, "OPEN_CONFIRM: %d" % st)

    def renew():
        st, _ = compound40(a, [Op(OP_RENEW, X().u64(clientid).b)])
        check(st in (OK, CB_PATH_DOWN), "RENEW: %d" % st)

    def delegreturn():
        st, _ = compound40(a, [putfh(fh), op_delegreturn(o["dsid"])])
        check(st == OK, "4.0 DELEGRETURN: %d" % st)
    b = CbClient(host, port, owner + "-b", back=False).connect()
    if o["recall"]:
        delegreturn()
    st, bo = open_retry_grace(b, exp, name, 2, renew)
    if not o["recall"]:
        check(st == DELAY, "b's OPEN for write under the reclaimed delegation: %d, not DELAY" % st)
        cb, rec = accept_callback(lsock)
        xid, _prog, _proc, _minor, _ident, ops = parse_cb_call(rec)
        check([op for op, _ in ops] == [OP_CB_RECALL] and ops[0][1]["sid"][1] == o["dsid"][1],
              "4.0 callback %r is not CB_RECALL of the reclaimed delegation" % ops)
        cb.send_record(cb_reply(xid, ops))
        cb.s.close()
        delegreturn()
        st, bo, _ = b.open(exp, name, access=2)
    check(st == OK, "b's OPEN for write after the return: %d" % st)
    b.ok([putfh(fh), op_close(bo["sid"])], "CLOSE")
    b.goodbye()
    a.close()
    print("delegreclaim40 ok (recall %d)" % o["recall"])


def mode_none(name):
    host, port, exp, owner = ctx()
    a = CbClient(host, port, owner + "-a").connect()
    for _ in range(80):   # a restarted server is in grace for a moment
        st, o, fh = a.open(exp, name, True, access=3)
        if st != GRACE:
            break
        time.sleep(0.25)
    check(st == OK, "OPEN: %d" % st)
    check(o["dtype"] == OPEN_DELEGATE_NONE, "a delegation with nfs_delegations = 0")
    a.ok([putfh(fh), op_close(o["sid"])], "CLOSE")
    a.goodbye()
    print("none ok")


def host_open(b, exp, name, access):
    delays = 0
    for _ in range(240):
        st, o, fh = b.open(exp, name, access=access)
        if st != DELAY:
            break
        delays += 1
        time.sleep(0.5)
    check(st == OK, "the host's OPEN of %s: %d" % (name, st))
    return o, fh, delays


def mode_host_io(name, data, write):
    host, port, exp, owner = ctx()
    b = CbClient(host, port, owner, back=False).connect()
    o, fh, delays = host_open(b, exp, name, 2 if write else 1)
    if write:
        b.ok([putfh(fh), op_write(o["sid"], 0, data.encode())], "the host's WRITE")
    else:
        got = b.ok([putfh(fh), op_read(o["sid"], 0, 4096)], "the host's READ")[-1][1]
        # The holder may write more once its delegation is back: what it wrote
        # under the delegation must be there, first.
        check(got.startswith(data.encode()), "the host reads %r, not %r first" % (got, data))
    b.ok([putfh(fh), op_close(o["sid"])], "CLOSE")
    b.goodbye()
    print("delays %d" % delays)


def mode_host_getattr(name, size):
    host, port, exp, owner = ctx()
    b = CbClient(host, port, owner, back=False).connect()
    status, res = b.compound(op_lookup_path(exp) + [Op(OP_LOOKUP, X().opaque(name.encode()).b),
                                                    op_getfh()])
    check(status == OK, "LOOKUP %s: %d" % (name, status))
    fh = res[-1][1]
    delays = 0
    for _ in range(240):
        status, res = b.compound([putfh(fh), op_getattr_cs()])
        if status != DELAY:
            break
        delays += 1
        time.sleep(0.5)
    check(status == OK, "the host's GETATTR: %d" % status)
    check(res[-1][1][1] == size, "the host's GETATTR: size %d, not %d" % (res[-1][1][1], size))
    b.goodbye()
    print("delays %d" % delays)


def main():
    mode = sys.argv[5]
    if mode in ("hostwrite", "hostread"):
        mode_host_io(sys.argv[6], sys.argv[7], mode == "hostwrite")
        return
    if mode == "hostgetattr":
        mode_host_getattr(sys.argv[6], int(sys.argv[7]))
        return
    if mode == "recall":
        mode_recall(sys.argv[6])
    elif mode == "write":
        mode_write(sys.argv[6])
    elif mode == "revoke":
        mode_revoke(sys.argv[6], int(sys.argv[7]))
    elif mode == "v3":
        mode_v3(sys.argv[6])
    elif mode == "rebind":
        mode_rebind(sys.argv[6])
    elif mode == "nlm":
        mode_nlm(sys.argv[6])
    elif mode == "v40":
        mode_v40(sys.argv[6])
    elif mode == "cbgetattr":
        mode_cbgetattr(sys.argv[6])
    elif mode == "cbgetattrexpired":
        mode_cbgetattr_expired(sys.argv[6], int(sys.argv[7]))
    elif mode == "cbgetattr40":
        mode_cbgetattr40(sys.argv[6])
    elif mode == "deleghold":
        mode_deleghold(sys.argv[6])
    elif mode == "delegreclaim":
        mode_delegreclaim(sys.argv[6], sys.argv[7], sys.argv[8])
    elif mode == "deleghold40":
        mode_deleghold40(sys.argv[6])
    elif mode == "delegreclaim40":
        mode_delegreclaim40(sys.argv[6], sys.argv[7])
    elif mode == "none":
        mode_none(sys.argv[6])
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
