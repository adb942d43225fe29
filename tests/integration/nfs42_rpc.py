#!/usr/bin/env python3
"""NFSv4.2 operations (RFC 7862) through a raw client (nfs4_rpc.Client speaking
minor version 2): SEEK, ALLOCATE, DEALLOCATE, READ_PLUS and COPY.

  nfs42_rpc.py HOST NFSPORT EXPORT OWNER ops
      a file with data in records 0 and 8 (record = 128 KiB) and a hole between:
      SEEK finds each, the hole at the end of file (sr_eof), NXIO at the end,
      UNION_NOTSUPP for an unknown content type; READ_PLUS sends data and hole
      segments with the right bytes; ALLOCATE extends the size (and is NOSPC
      for more than the pool holds, changing nothing); DEALLOCATE turns a record
      into a hole (SEEK, READ see it), zeroes part of one, ignores what lies
      past the end of file and keeps the size; COPY (count 0: to the end) makes a
      byte-identical copy with the holes kept, copies a range, and refuses
      overlapping ranges of one file, ranges past the source's end (INVAL), a
      directory (WRONG_TYPE), a missing saved handle (NOFILEHANDLE), another
      server as the source (NOTSUPP), with the order of those errors; one COPY
      moves at most 64 MiB (a short count the client asks again after). Errors: bad
      stateid, a read-only open's stateid (OPENMODE), directories (ISDIR),
      length 0 (INVAL), past the largest offset (FBIG), no handle.
      OFFLOAD_STATUS: NOTSUPP. CLONE (whole file, a range, within one file, its
      alignment rules: INVAL, the order of its errors), clone_blksize = the record size, and a COPY with
      unaligned ends (head and tail copied, the middle cloned). In minor versions 0 and 1 SEEK and GETXATTR are
      OP_ILLEGAL and the 4.2 attributes are not supported, in 4.2 they are.
      Extended attributes (RFC 8276) on a file and a directory: SETXATTR's
      CREATE/REPLACE/EITHER rules (EXIST, NOXATTR), values with any bytes up to
      8 KiB (XATTR2BIG beyond), bad names (INVAL, NAMETOOLONG), LISTXATTRS
      whole and in pieces by cookie (TOOSMALL when no name fits), REMOVEXATTR,
      ACCESS granting XAREAD/XAWRITE/XALIST.
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER mkfile NAME
      creates NAME with one record of data and the extended attribute k = v.
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER rofs NAME
      EXPORT is read-only: ALLOCATE, DEALLOCATE, COPY into NAME, SETXATTR and
      REMOVEXATTR are ROFS; SEEK, READ_PLUS and GETXATTR work.
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER fill NAME MIB
      writes MIB MiB of random bytes to NAME (FILE_SYNC).
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER clonefile|copyfile SRC DST
      CLONE (count 0), or COPY until done, all of SRC into a new file DST; the
      size and the bytes (by digest) must match.
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER samefile A B
      A and B have the same size and bytes.
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER remove NAME...
      REMOVEs the files.
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER punch NAME MIB
      DEALLOCATEs all of NAME: it reads as zeros, keeps its size, SEEK finds no
      data, and its space_used falls below one record (polled: the space is
      given back when the txg syncs).
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER punch-crash NAME
      sets an extended attribute, writes records 0..3 (FILE_SYNC), DEALLOCATEs
      records 1-2 and ALLOCATEs up to 6 records, then prints "punched" and waits
      to be killed with the daemon.
  nfs42_rpc.py HOST NFSPORT EXPORT OWNER punch-verify NAME
      after the daemon's kill -9 and restart (same OWNER): records 0 and 3 hold
      their bytes, 1-2 read as zeros and are a hole, the size is 6 records, the
      extended attribute is there.

Exit 0 when every check holds; "FAIL: ..." and exit 1 otherwise.
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs_rpc import X, check, fail  # noqa: E402
from nfs4_rpc import (OK, INVAL, ILLEGAL, Client, Op, op_close, op_read,  # noqa: E402
                      op_write, put_stateid, putfh, op_lookup_path, OP_GETATTR,
                      OP_PUTROOTFH, OP_SAVEFH, OP_REMOVE)

OP_ALLOCATE, OP_COPY, OP_DEALLOCATE, OP_OFFLOAD_STATUS = 59, 60, 62, 67
OP_READ_PLUS, OP_SEEK, OP_CLONE = 68, 69, 71
NXIO, ISDIR, FBIG, NOSPC, ROFS = 6, 21, 27, 28, 30
NOTSUPP, NOFILEHANDLE, BAD_STATEID, OPENMODE = 10004, 10020, 10025, 10038
WRONG_TYPE, UNION_NOTSUPP = 10083, 10090
NL4_NAME = 1
DATA, HOLE = 0, 1
RS = 128 * 1024
ANON = (0, bytes(12))
FATTR4_SIZE, FATTR4_SPACE_USED = 4, 45
FATTR4_SPACE_FREED, FATTR4_CHANGE_ATTR_TYPE, FATTR4_XATTR_SUPPORT = 78, 79, 82
FATTR4_CLONE_BLKSIZE = 77
BADXDR = 10036
OP_GETXATTR, OP_SETXATTR, OP_LISTXATTRS, OP_REMOVEXATTR, OP_ACCESS = 72, 73, 74, 75, 3
EXIST, NAMETOOLONG, TOOSMALL, NOXATTR, XATTR2BIG = 17, 63, 10005, 10095, 10096
SX_EITHER, SX_CREATE, SX_REPLACE = 0, 1, 2


def rnd(seed, n=RS):
    return random.Random(seed).randbytes(n)


# ---------------------------------------------------------------- operations

def op_seek(sid, off, what):
    x = X()
    put_stateid(x, sid)
    x.u64(off).u32(what)
    return Op(OP_SEEK, x.b, lambda r, st: (bool(r.gu32()), r.gu64()) if st == OK else None)


def op_fallocate(num, sid, off, length):
    x = X()
    put_stateid(x, sid)
    x.u64(off).u64(length)
    return Op(num, x.b)


def op_read_plus(sid, off, count):
    x = X()
    put_stateid(x, sid)
    x.u64(off).u32(count)

    def parse(r, st):
        if st != OK:
            return None
        eof = bool(r.gu32())
        segs = []
        for _ in range(r.gu32()):
            kind = r.gu32()
            if kind == DATA:
                segs.append(("data", r.gu64(), r.gopaque()))
            elif kind == HOLE:
                segs.append(("hole", r.gu64(), r.gu64()))
            else:
                fail("READ_PLUS: segment of type %d" % kind)
        return eof, segs
    return Op(OP_READ_PLUS, x.b, parse)


def op_copy(src_sid, dst_sid, soff, doff, count, source_servers=()):
    """COPY; source_servers: host names for ca_source_server<> (an inter-server copy)."""
    x = X()
    put_stateid(x, src_sid)
    put_stateid(x, dst_sid)
    x.u64(soff).u64(doff).u64(count).u32(0).u32(1).u32(len(source_servers))
    for name in source_servers:
        x.u32(NL4_NAME).opaque(name)

    def parse(r, st):
        if st != OK:
            return None
        check(r.gu32() == 0, "COPY answered with a callback id: not synchronous")
        count, committed, _ = r.gu64(), r.gu32(), r.gfixed(8)
        consecutive, synchronous = r.gu32(), r.gu32()
        check(synchronous == 1, "COPY says it was not synchronous")
        return count, committed
    return Op(OP_COPY, x.b, parse)


def op_getattr(*bits):
    words = [0, 0, 0]
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    x = X().u32(3).u32(words[0]).u32(words[1]).u32(words[2])
    return Op(OP_GETATTR, x.b,
              lambda r, st: ([r.gu32() for _ in range(r.gu32())], X(r.gopaque()))
              if st == OK else None)


def supported_attrs(cl):
    words, vals = cl.ok([Op(OP_PUTROOTFH), op_getattr(0)], "GETATTR supported_attrs")[-1]
    sup = [vals.gu32() for _ in range(vals.gu32())]
    return {w * 32 + b for w, v in enumerate(sup) for b in range(32) if v >> b & 1}


def u64_attr(cl, fh, bit):
    words, vals = cl.ok([putfh(fh), op_getattr(bit)], "GETATTR %d" % bit)[-1]
    return vals.gu64()


def status_of(cl, ops):
    status, res = cl.compound(ops)
    return status


def expect(cl, ops, want, what):
    st = status_of(cl, ops)
    check(st == want, "%s: status %d, not %d" % (what, st, want))


def op_getxattr(name):
    return Op(OP_GETXATTR, X().opaque(name).b, lambda r, st: r.gopaque() if st == OK else None)


def op_setxattr(how, name, value):
    return Op(OP_SETXATTR, X().u32(how).opaque(name).opaque(value).b,
              lambda r, st: (r.gu32(), r.gu64(), r.gu64()) if st == OK else None)


def op_removexattr(name):
    return Op(OP_REMOVEXATTR, X().opaque(name).b,
              lambda r, st: (r.gu32(), r.gu64(), r.gu64()) if st == OK else None)


def op_listxattrs(cookie, maxcount):
    def parse(r, st):
        if st != OK:
            return None
        cookie = r.gu64()
        names = [r.gopaque() for _ in range(r.gu32())]
        return cookie, names, bool(r.gu32())
    return Op(OP_LISTXATTRS, X().u64(cookie).u32(maxcount).b, parse)


# ---------------------------------------------------------------- helpers

def ctx():
    a = sys.argv
    return a[1], int(a[2]), a[3], a[4]


def connect(owner, minor=2):
    host, port, _, _ = ctx()
    cl = Client(host, port, owner)
    cl.minor = minor
    cl.connect()
    return cl


def open_file(cl, exp, name, create=True, access=3):
    st, sid, fh = cl.open(exp, name, create, access)
    check(st == OK, "OPEN %s: %d" % (name, st))
    return sid, fh


def seek(cl, fh, sid, off, what):
    return cl.ok([putfh(fh), op_seek(sid, off, what)], "SEEK %d from %d" % (what, off))[-1]


def read(cl, fh, sid, off, count):
    out = b""
    while count:
        eof, data = cl.ok([putfh(fh), op_read(sid, off, min(count, 1 << 20))], "READ")[-1]
        out += data
        off += len(data)
        count -= len(data)
        if eof or not data:
            break
    return out


def write(cl, fh, sid, off, data):
    for i in range(0, len(data), 1 << 20):
        cl.ok([putfh(fh), op_write(sid, off + i, data[i:i + (1 << 20)])], "WRITE")


def fallocate(cl, fh, sid, num, off, length):
    return status_of(cl, [putfh(fh), op_fallocate(num, sid, off, length)])


def lookup_fh(cl, path):
    from nfs4_rpc import op_getfh
    return cl.ok(op_lookup_path(path) + [op_getfh()], "LOOKUP %s" % path)[-1]


def unknown(sid):
    """A stateid of this server's boot that it never handed out."""
    return (1, sid[1][:8] + b"\xff\xff\xff\xf0")


def poll(cond, what, tries=240):
    """Waits (bounded) for a condition that becomes true when a txg syncs."""
    for _ in range(tries):
        if cond():
            return
        time.sleep(0.5)
    fail(what)


# ---------------------------------------------------------------- modes

def check_seek(cl, fh, sid):
    check(seek(cl, fh, sid, 0, DATA) == (False, 0), "SEEK_DATA 0")
    check(seek(cl, fh, sid, 0, HOLE) == (False, RS), "SEEK_HOLE 0: the end of record 0")
    check(seek(cl, fh, sid, RS + 7, DATA) == (False, 8 * RS), "SEEK_DATA inside the hole")
    check(seek(cl, fh, sid, 8 * RS + 5, DATA) == (False, 8 * RS + 5), "SEEK_DATA inside data")
    check(seek(cl, fh, sid, 8 * RS, HOLE) == (True, 9 * RS),
          "SEEK_HOLE in the last record: the end of file, with sr_eof")
    expect(cl, [putfh(fh), op_seek(sid, 9 * RS, DATA)], NXIO, "SEEK_DATA at the end of file")
    expect(cl, [putfh(fh), op_seek(sid, 1 << 40, HOLE)], NXIO, "SEEK_HOLE past the end")
    expect(cl, [putfh(fh), op_seek(sid, 0, 7)], UNION_NOTSUPP, "SEEK of content type 7")


def check_read_plus(cl, fh, sid, a, b):
    eof, segs = cl.ok([putfh(fh), op_read_plus(sid, 0, 9 * RS)], "READ_PLUS 0")[-1]
    check(not eof, "READ_PLUS of the first 1 MiB says eof")
    check(segs == [("data", 0, a), ("hole", RS, 7 * RS)],
          "READ_PLUS 0: %r" % [(s[0], s[1], len(s[2]) if s[0] == "data" else s[2]) for s in segs])
    eof, segs = cl.ok([putfh(fh), op_read_plus(sid, 7 * RS, 2 * RS)], "READ_PLUS 7")[-1]
    check(eof and segs == [("hole", 7 * RS, RS), ("data", 8 * RS, b)],
          "READ_PLUS of the last two records: eof %r, %r" % (eof, [s[:2] for s in segs]))
    eof, segs = cl.ok([putfh(fh), op_read_plus(sid, 9 * RS, 10)], "READ_PLUS at EOF")[-1]
    check(eof and segs == [], "READ_PLUS at the end of file: eof %r, %r" % (eof, segs))


def check_allocate(cl, fh, sid):
    check(fallocate(cl, fh, sid, OP_ALLOCATE, 9 * RS, RS) == OK, "ALLOCATE past the end")
    check(u64_attr(cl, fh, FATTR4_SIZE) == 10 * RS, "ALLOCATE did not extend the size")
    check(seek(cl, fh, sid, 9 * RS, DATA) == (True, 10 * RS),
          "SEEK_DATA in the allocated tail: no data, sr_eof")
    check(fallocate(cl, fh, sid, OP_ALLOCATE, 0, RS) == OK, "ALLOCATE inside the file")
    st = fallocate(cl, fh, sid, OP_ALLOCATE, 0, 1 << 50)
    check(st == NOSPC, "ALLOCATE of 1 PiB: %d, not NOSPC" % st)
    check(u64_attr(cl, fh, FATTR4_SIZE) == 10 * RS, "a refused ALLOCATE changed the size")
    check(fallocate(cl, fh, sid, OP_ALLOCATE, 0, 0) == INVAL, "ALLOCATE of length 0")
    check(fallocate(cl, fh, sid, OP_ALLOCATE, 1 << 63, 1) == FBIG, "ALLOCATE past 2^63")
    check(fallocate(cl, fh, ANON, OP_ALLOCATE, 0, 1) == OK, "ALLOCATE, anonymous stateid")
    check(fallocate(cl, fh, (0xffffffff, b"\xff" * 12), OP_ALLOCATE, 0, 1) == OK,
          "ALLOCATE, all-ones stateid (taken as the anonymous one, as Linux nfsd does)")


def check_deallocate(cl, fh, sid, b):
    check(fallocate(cl, fh, sid, OP_DEALLOCATE, 0, RS) == OK, "DEALLOCATE record 0")
    check(seek(cl, fh, sid, 0, DATA) == (False, 8 * RS), "SEEK_DATA after punching record 0")
    check(read(cl, fh, sid, 0, RS) == bytes(RS), "record 0 after the punch")
    check(fallocate(cl, fh, sid, OP_DEALLOCATE, 8 * RS + 100, 50) == OK, "DEALLOCATE 50 bytes")
    want = b[:100] + bytes(50) + b[150:]
    check(read(cl, fh, sid, 8 * RS, RS) == want, "record 8 after punching 50 bytes in it")
    check(fallocate(cl, fh, sid, OP_DEALLOCATE, 20 * RS, RS) == OK, "DEALLOCATE past the end")
    check(fallocate(cl, fh, sid, OP_DEALLOCATE, 9 * RS, 1 << 40) == OK, "DEALLOCATE to far away")
    check(u64_attr(cl, fh, FATTR4_SIZE) == 10 * RS, "DEALLOCATE changed the size")
    return want


def check_errors(cl, exp, fh, sid):
    bad = unknown(sid)
    expect(cl, [putfh(fh), op_seek(bad, 0, DATA)], BAD_STATEID, "SEEK, unknown stateid")
    expect(cl, [putfh(fh), op_fallocate(OP_DEALLOCATE, bad, 0, 1)], BAD_STATEID,
           "DEALLOCATE, unknown stateid")
    expect(cl, [putfh(fh), op_read_plus(bad, 0, 1)], BAD_STATEID, "READ_PLUS, unknown stateid")
    rsid, rfh = open_file(cl, exp, "readonly", True, access=1)
    expect(cl, [putfh(rfh), op_fallocate(OP_DEALLOCATE, rsid, 0, 1)], OPENMODE,
           "DEALLOCATE through a read-only open")
    expect(cl, [putfh(rfh), op_fallocate(OP_ALLOCATE, rsid, 0, 1)], OPENMODE,
           "ALLOCATE through a read-only open")
    cl.ok([putfh(rfh), op_close(rsid)], "CLOSE readonly")
    dfh = lookup_fh(cl, exp)
    for op in (op_seek(ANON, 0, DATA), op_fallocate(OP_ALLOCATE, ANON, 0, 1),
               op_fallocate(OP_DEALLOCATE, ANON, 0, 1), op_read_plus(ANON, 0, 1)):
        expect(cl, [putfh(dfh), op], ISDIR, "operation %d on a directory" % op.num)
    expect(cl, [op_seek(ANON, 0, DATA)], NOFILEHANDLE, "SEEK without a file handle")
    return dfh


def check_copy(cl, exp, fh, sid, dfh, size):
    dsid, dst = open_file(cl, exp, "copy")
    res = cl.ok([putfh(fh), Op(OP_SAVEFH), putfh(dst), op_copy(sid, dsid, 0, 0, 0)],
                "COPY to the end")[-1]
    check(res == (size, 2), "COPY count 0: %r, not (%d, FILE_SYNC4)" % (res, size))
    check(read(cl, dst, dsid, 0, size) == read(cl, fh, sid, 0, size), "the copy's bytes")
    check(seek(cl, dst, dsid, 0, DATA) == (False, 8 * RS), "the copy keeps the source's holes")
    res = cl.ok([putfh(fh), Op(OP_SAVEFH), putfh(dst), op_copy(sid, dsid, 8 * RS, RS, 100)],
                "COPY 100 bytes")[-1]
    check(res[0] == 100, "COPY of 100 bytes copied %d" % res[0])
    check(read(cl, dst, dsid, RS, 100) == read(cl, fh, sid, 8 * RS, 100), "COPY of a range")
    for soff, count, what in ((size + 1, 1, "from past the end"), (size - 10, 11, "past the end")):
        expect(cl, [putfh(fh), Op(OP_SAVEFH), putfh(dst), op_copy(sid, dsid, soff, 0, count)],
               INVAL, "COPY " + what)
    expect(cl, [putfh(fh), Op(OP_SAVEFH), op_copy(sid, sid, 0, RS // 2, RS)], INVAL,
           "COPY of overlapping ranges of one file")
    expect(cl, [putfh(dfh), Op(OP_SAVEFH), putfh(dst), op_copy(ANON, dsid, 0, 0, 1)],
           WRONG_TYPE, "COPY from a directory")
    expect(cl, [putfh(dst), op_copy(ANON, dsid, 0, 0, 1)], NOFILEHANDLE, "COPY without SAVEFH")
    expect(cl, [putfh(fh), Op(OP_SAVEFH), putfh(dst), op_copy(sid, unknown(sid), 0, 0, 1)],
           BAD_STATEID, "COPY, unknown destination stateid")
    # Which error wins when several apply (the server checks in this order).
    other = [b"elsewhere.example"]
    expect(cl, [putfh(fh), Op(OP_SAVEFH), putfh(dst), op_copy(sid, dsid, 0, 0, 1, other)],
           NOTSUPP, "COPY from another server")
    expect(cl, [putfh(dst), Op(OP_COPY, X().b)], BADXDR,
           "COPY without arguments or SAVEFH: BADXDR before NOFILEHANDLE")
    expect(cl, [putfh(dst), op_copy(ANON, dsid, 0, 0, 1, other)], NOFILEHANDLE,
           "COPY from another server without SAVEFH: NOFILEHANDLE before NOTSUPP")
    expect(cl, [putfh(dfh), Op(OP_SAVEFH), putfh(dst), op_copy(ANON, unknown(sid), 0, 0, 1, other)],
           NOTSUPP, "COPY from another server's directory: NOTSUPP before WRONG_TYPE")
    expect(cl, [putfh(dfh), Op(OP_SAVEFH), putfh(dst), op_copy(ANON, unknown(sid), 0, 0, 1)],
           WRONG_TYPE, "COPY from a directory, unknown destination stateid: the source first")
    expect(cl, [putfh(fh), Op(OP_SAVEFH), putfh(dst), op_copy(sid, unknown(sid), size + 1, 0, 1)],
           BAD_STATEID, "COPY past the source's end, unknown stateid: the stateid first")
    cl.ok([putfh(dst), op_close(dsid)], "CLOSE copy")
    # One COPY moves at most 64 MiB (a sparse 100 MiB source: cheap to copy).
    hsid, hfh = open_file(cl, exp, "sparse100")
    check(fallocate(cl, hfh, hsid, OP_ALLOCATE, 0, 100 << 20) == OK, "ALLOCATE 100 MiB")
    csid, cfh = open_file(cl, exp, "copy100")
    res = cl.ok([putfh(hfh), Op(OP_SAVEFH), putfh(cfh), op_copy(hsid, csid, 0, 0, 0)],
                "COPY of 100 MiB")[-1]
    check(res[0] == 64 << 20, "COPY of 100 MiB copied %d bytes, not 64 MiB" % res[0])
    check(u64_attr(cl, cfh, FATTR4_SIZE) == 64 << 20, "the 64 MiB copy's size")
    check(seek(cl, cfh, csid, 0, DATA)[0], "the copy of a hole has data")
    cl.ok([putfh(hfh), op_close(hsid)], "CLOSE sparse100")
    cl.ok([putfh(cfh), op_close(csid)], "CLOSE copy100")


def op_clone(src_sid, dst_sid, soff, doff, count):
    x = X()
    put_stateid(x, src_sid)
    put_stateid(x, dst_sid)
    x.u64(soff).u64(doff).u64(count)
    return Op(OP_CLONE, x.b)


def clone(cl, sfh, ssid, dfh, dsid, soff, doff, count):
    st, _ = cl.compound([putfh(sfh), Op(OP_SAVEFH), putfh(dfh),
                         op_clone(ssid, dsid, soff, doff, count)])
    return st


def check_clone(cl, exp):
    """CLONE (RFC 7862 15.13) and a COPY whose middle is cloned: the bytes, the
    size, clone_blksize, and the alignment rules."""
    sid, fh = open_file(cl, exp, "csrc")
    src = rnd("clone-src", 8 * RS + 1000)
    write(cl, fh, sid, 0, src)
    words, vals = cl.ok([putfh(fh), op_getattr(FATTR4_CLONE_BLKSIZE)], "clone_blksize")[-1]
    check(vals.gu32() == RS, "clone_blksize is not the record size")
    check(FATTR4_CLONE_BLKSIZE in supported_attrs(cl), "clone_blksize not supported")
    dsid, dfh = open_file(cl, exp, "cdst")
    check(clone(cl, fh, sid, dfh, dsid, 0, 0, 0) == OK, "CLONE count 0")
    check(u64_attr(cl, dfh, FATTR4_SIZE) == len(src), "the clone's size")
    check(read(cl, dfh, dsid, 0, len(src)) == src, "the clone's bytes")
    check(clone(cl, fh, sid, dfh, dsid, 2 * RS, 9 * RS, 2 * RS) == OK, "CLONE of a range")
    check(read(cl, dfh, dsid, 9 * RS, 2 * RS) == src[2 * RS:4 * RS], "the cloned range")
    check(u64_attr(cl, dfh, FATTR4_SIZE) == 11 * RS, "CLONE past the end grows the file")
    for soff, doff, count, what in ((100, 0, RS, "source offset"), (0, RS // 2, RS, "destination offset"),
                                    (0, 0, RS + 1, "count"), (0, 0, 9 * RS, "range past the end")):
        check(clone(cl, fh, sid, dfh, dsid, soff, doff, count) == INVAL,
              "CLONE with an unaligned %s is not INVAL" % what)
    check(clone(cl, fh, sid, fh, sid, 0, 4 * RS, RS) == OK, "CLONE within one file")
    check(read(cl, fh, sid, 4 * RS, RS) == src[:RS], "CLONE within one file: the bytes")
    src = src[:4 * RS] + src[:RS] + src[5 * RS:]
    check(clone(cl, fh, sid, fh, sid, 0, RS // 2, RS) == INVAL, "CLONE of overlapping ranges")
    expect(cl, [putfh(fh), Op(OP_SAVEFH), putfh(dfh), op_clone(sid, unknown(sid), 0, 0, RS)],
           BAD_STATEID, "CLONE, unknown destination stateid")
    expect(cl, [putfh(dfh), op_clone(sid, dsid, 0, 0, RS)], NOFILEHANDLE, "CLONE without SAVEFH")
    expect(cl, [putfh(fh), Op(OP_CLONE, X().b)], BADXDR, "CLONE without arguments")
    # Which error wins when several apply (the server checks in this order).
    expect(cl, [putfh(dfh), op_clone(sid, unknown(sid), 0, 0, RS)], NOFILEHANDLE,
           "CLONE without SAVEFH, unknown stateid: NOFILEHANDLE first")
    root = lookup_fh(cl, exp)
    expect(cl, [putfh(root), Op(OP_SAVEFH), putfh(dfh), op_clone(ANON, unknown(sid), 0, 0, RS)],
           WRONG_TYPE, "CLONE from a directory, unknown destination stateid: the source first")
    expect(cl, [putfh(fh), Op(OP_SAVEFH), putfh(dfh), op_clone(sid, unknown(sid), 100, 0, RS)],
           BAD_STATEID, "CLONE unaligned, unknown stateid: the stateid before alignment")
    # COPY: head and tail copied, the records in between cloned.
    res = cl.ok([putfh(fh), Op(OP_SAVEFH), putfh(dfh), op_copy(sid, dsid, RS - 10, RS - 10, 5 * RS)],
                "COPY, unaligned ends")[-1]
    check(res == (5 * RS, 2), "COPY, unaligned ends: %r" % (res,))
    check(read(cl, dfh, dsid, RS - 10, 5 * RS) == src[RS - 10:6 * RS - 10], "COPY's bytes")
    cl.ok([putfh(fh), op_close(sid)], "CLOSE csrc")
    cl.ok([putfh(dfh), op_close(dsid)], "CLOSE cdst")


def check_minor_versions(cl, fh):
    expect(cl, [Op(OP_OFFLOAD_STATUS, X().u32(0).fixed(bytes(12)).b)], NOTSUPP, "OFFLOAD_STATUS")
    check({FATTR4_SPACE_FREED, FATTR4_CHANGE_ATTR_TYPE} <= supported_attrs(cl),
          "4.2 does not list space_freed and change_attr_type")
    words, vals = cl.ok([putfh(fh), op_getattr(FATTR4_CHANGE_ATTR_TYPE, FATTR4_XATTR_SUPPORT)],
                        "change_attr_type, xattr_support")[-1]
    check(vals.gu32() == 0, "change_attr_type is not MONOTONIC_INCR")
    check(vals.gu32() == 1, "xattr_support is not TRUE")
    c1 = connect(ctx()[3] + "-v41", minor=1)
    expect(c1, [putfh(fh), op_seek(ANON, 0, DATA)], ILLEGAL, "SEEK in minor version 1")
    expect(c1, [putfh(fh), op_getxattr(b"a")], ILLEGAL, "GETXATTR in minor version 1")
    check(not {FATTR4_SPACE_FREED, FATTR4_CHANGE_ATTR_TYPE} & supported_attrs(c1),
          "4.1 lists the 4.2 attributes")
    c1.goodbye()
    c0 = Client(ctx()[0], ctx()[1], "v40")
    c0.minor = 0
    status, res = c0.compound([Op(OP_PUTROOTFH), op_seek(ANON, 0, DATA)], session=False)
    check(status == ILLEGAL, "SEEK in minor version 0: %d" % status)


def check_xattrs(cl, exp, fh):
    expect(cl, [putfh(fh), op_getxattr(b"a")], NOXATTR, "GETXATTR of a missing name")
    cinfo = cl.ok([putfh(fh), op_setxattr(SX_CREATE, b"a", b"one")], "SETXATTR CREATE a")[-1]
    check(cinfo[2] > cinfo[1], "SETXATTR's change_info did not move: %r" % (cinfo,))
    expect(cl, [putfh(fh), op_setxattr(SX_CREATE, b"a", b"x")], EXIST, "SETXATTR CREATE existing")
    expect(cl, [putfh(fh), op_setxattr(SX_REPLACE, b"b", b"x")], NOXATTR,
           "SETXATTR REPLACE missing")
    cl.ok([putfh(fh), op_setxattr(SX_EITHER, b"b", b"\0two\xff")], "SETXATTR EITHER b")
    cl.ok([putfh(fh), op_setxattr(SX_REPLACE, b"a", b"uno")], "SETXATTR REPLACE a")
    check(cl.ok([putfh(fh), op_getxattr(b"a")], "GETXATTR a")[-1] == b"uno", "the value of a")
    check(cl.ok([putfh(fh), op_getxattr(b"b")], "GETXATTR b")[-1] == b"\0two\xff", "value of b")
    cookie, names, eof = cl.ok([putfh(fh), op_listxattrs(0, 4096)], "LISTXATTRS")[-1]
    check(eof and sorted(names) == [b"a", b"b"], "LISTXATTRS: %r eof %r" % (names, eof))
    cookie, first, eof = cl.ok([putfh(fh), op_listxattrs(0, 16 + 8)], "LISTXATTRS small")[-1]
    check(len(first) == 1 and not eof, "LISTXATTRS with room for one: %r eof %r" % (first, eof))
    cookie, rest, eof = cl.ok([putfh(fh), op_listxattrs(cookie, 16 + 8)], "LISTXATTRS on")[-1]
    check(eof and sorted(first + rest) == [b"a", b"b"], "LISTXATTRS resumed: %r" % (rest,))
    expect(cl, [putfh(fh), op_listxattrs(0, 10)], TOOSMALL, "LISTXATTRS of 10 bytes")
    expect(cl, [putfh(fh), op_setxattr(SX_EITHER, b"big", bytes(8193))], XATTR2BIG,
           "SETXATTR of 8193 bytes")
    cl.ok([putfh(fh), op_setxattr(SX_EITHER, b"max", bytes(8192))], "SETXATTR of 8192 bytes")
    expect(cl, [putfh(fh), op_setxattr(SX_EITHER, b"", b"x")], INVAL, "SETXATTR of no name")
    expect(cl, [putfh(fh), op_setxattr(SX_EITHER, b"n" * 256, b"x")], NAMETOOLONG,
           "SETXATTR of a 256-byte name")
    expect(cl, [putfh(fh), op_setxattr(7, b"a", b"x")], INVAL, "SETXATTR option 7")
    cl.ok([putfh(fh), op_removexattr(b"a")], "REMOVEXATTR a")
    expect(cl, [putfh(fh), op_removexattr(b"a")], NOXATTR, "REMOVEXATTR of a missing name")
    expect(cl, [putfh(fh), op_getxattr(b"a")], NOXATTR, "GETXATTR of a removed name")
    dfh = lookup_fh(cl, exp)
    cl.ok([putfh(dfh), op_setxattr(SX_EITHER, b"d", b"dir")], "SETXATTR on a directory")
    check(cl.ok([putfh(dfh), op_getxattr(b"d")], "GETXATTR dir")[-1] == b"dir", "dir's xattr")
    access = cl.ok([putfh(fh), Op(OP_ACCESS, X().u32(0x1c0).b,
                                  lambda r, st: (r.gu32(), r.gu32()))], "ACCESS xattr bits")[-1]
    check(access == (0x1c0, 0x1c0), "ACCESS XAREAD|XAWRITE|XALIST: %r" % (access,))
    expect(cl, [op_getxattr(b"a")], NOFILEHANDLE, "GETXATTR without a file handle")


def mode_ops():
    _, _, exp, owner = ctx()
    cl = connect(owner)
    sid, fh = open_file(cl, exp, "sparse")
    a, b = rnd("a"), rnd("b")
    write(cl, fh, sid, 0, a)
    write(cl, fh, sid, 8 * RS, b)
    check_seek(cl, fh, sid)
    check_read_plus(cl, fh, sid, a, b)
    check_allocate(cl, fh, sid)
    check_deallocate(cl, fh, sid, b)
    dfh = check_errors(cl, exp, fh, sid)
    check_copy(cl, exp, fh, sid, dfh, 10 * RS)
    check_minor_versions(cl, fh)
    check_clone(cl, exp)
    check_xattrs(cl, exp, fh)
    cl.ok([putfh(fh), op_close(sid)], "CLOSE")
    cl.goodbye()
    print("ops ok")


def mode_mkfile(name):
    _, _, exp, owner = ctx()
    cl = connect(owner)
    sid, fh = open_file(cl, exp, name)
    write(cl, fh, sid, 0, rnd(name))
    cl.ok([putfh(fh), op_setxattr(SX_EITHER, b"k", b"v")], "SETXATTR")
    cl.ok([putfh(fh), op_close(sid)], "CLOSE")
    cl.goodbye()
    print("mkfile ok")


def mode_rofs(name):
    _, _, exp, owner = ctx()
    cl = connect(owner)
    fh = lookup_fh(cl, exp + "/" + name)
    for op in (op_fallocate(OP_ALLOCATE, ANON, 0, 1), op_fallocate(OP_DEALLOCATE, ANON, 0, 1)):
        expect(cl, [putfh(fh), op], ROFS, "operation %d on a read-only export" % op.num)
    expect(cl, [putfh(fh), Op(OP_SAVEFH), op_copy(ANON, ANON, 0, RS, 1)], ROFS,
           "COPY into a read-only export")
    expect(cl, [putfh(fh), op_setxattr(SX_EITHER, b"k", b"w")], ROFS, "SETXATTR read-only")
    expect(cl, [putfh(fh), op_removexattr(b"k")], ROFS, "REMOVEXATTR on a read-only export")
    check(cl.ok([putfh(fh), op_getxattr(b"k")], "GETXATTR ro")[-1] == b"v", "xattr read-only")
    check(seek(cl, fh, ANON, 0, HOLE) == (True, RS), "SEEK on a read-only export")
    eof, segs = cl.ok([putfh(fh), op_read_plus(ANON, 0, RS)], "READ_PLUS read-only")[-1]
    check(eof and segs == [("data", 0, rnd(name))], "READ_PLUS on a read-only export")
    cl.goodbye()
    print("rofs ok")


def mode_fill(name, mib):
    _, _, exp, owner = ctx()
    cl = connect(owner)
    sid, fh = open_file(cl, exp, name)
    write(cl, fh, sid, 0, os.urandom(mib << 20))
    cl.ok([putfh(fh), op_close(sid)], "CLOSE")
    cl.goodbye()
    print("fill ok")


def mode_punch(name, mib):
    _, _, exp, owner = ctx()
    cl = connect(owner)
    sid, fh = open_file(cl, exp, name, create=False)
    poll(lambda: u64_attr(cl, fh, FATTR4_SPACE_USED) >= mib << 20,
         "space_used never reached the %d MiB written" % mib)
    check(fallocate(cl, fh, sid, OP_DEALLOCATE, 0, mib << 20) == OK, "DEALLOCATE all")
    check(u64_attr(cl, fh, FATTR4_SIZE) == mib << 20, "DEALLOCATE changed the size")
    check(read(cl, fh, sid, 0, mib << 20) == bytes(mib << 20), "the punched file's bytes")
    check(seek(cl, fh, sid, 0, DATA)[0], "SEEK_DATA found data in a punched file")
    poll(lambda: u64_attr(cl, fh, FATTR4_SPACE_USED) < RS,
         "space_used never fell after DEALLOCATE")
    cl.ok([putfh(fh), op_close(sid)], "CLOSE")
    cl.goodbye()
    print("punch ok")


def mode_clonefile(op, src, dst):
    """CLONE (op "clone") or COPY (op "copy") of all of src to a new file dst;
    the bytes compared by digest, 1 MiB at a time."""
    import hashlib
    _, _, exp, owner = ctx()
    cl = connect(owner)
    ssid, sfh = open_file(cl, exp, src, create=False, access=1)
    dsid, dfh = open_file(cl, exp, dst)
    size = u64_attr(cl, sfh, FATTR4_SIZE)
    if op == "clone":
        check(clone(cl, sfh, ssid, dfh, dsid, 0, 0, 0) == OK, "CLONE of " + src)
    else:
        done = 0
        while done < size:
            n, _ = cl.ok([putfh(sfh), Op(OP_SAVEFH), putfh(dfh),
                          op_copy(ssid, dsid, done, done, size - done)], "COPY")[-1]
            check(n > 0, "COPY made no progress")
            done += n
    check(u64_attr(cl, dfh, FATTR4_SIZE) == size, "the %s's size" % op)
    for off in range(0, size, 8 << 20):
        n = min(8 << 20, size - off)
        a = hashlib.sha256(read(cl, sfh, ssid, off, n)).digest()
        b = hashlib.sha256(read(cl, dfh, dsid, off, n)).digest()
        check(a == b, "the %s's bytes at %d" % (op, off))
    cl.ok([putfh(sfh), op_close(ssid)], "CLOSE")
    cl.ok([putfh(dfh), op_close(dsid)], "CLOSE")
    cl.goodbye()
    print(op + " ok")


def mode_samefile(a, b):
    import hashlib
    _, _, exp, owner = ctx()
    cl = connect(owner)
    asid, afh = open_file(cl, exp, a, create=False, access=1)
    bsid, bfh = open_file(cl, exp, b, create=False, access=1)
    size = u64_attr(cl, afh, FATTR4_SIZE)
    check(u64_attr(cl, bfh, FATTR4_SIZE) == size, "%s and %s differ in size" % (a, b))
    for off in range(0, size, 8 << 20):
        n = min(8 << 20, size - off)
        check(hashlib.sha256(read(cl, afh, asid, off, n)).digest() ==
              hashlib.sha256(read(cl, bfh, bsid, off, n)).digest(), "%s and %s differ at %d" % (a, b, off))
    cl.ok([putfh(afh), op_close(asid)], "CLOSE")
    cl.ok([putfh(bfh), op_close(bsid)], "CLOSE")
    cl.goodbye()
    print("samefile ok")


def mode_remove(*names):
    _, _, exp, owner = ctx()
    cl = connect(owner)
    for name in names:
        cl.ok(op_lookup_path(exp) + [Op(OP_REMOVE, X().opaque(name.encode()).b)], "REMOVE " + name)
    cl.goodbye()
    print("remove ok")


def mode_punch_crash(name):
    _, _, exp, owner = ctx()
    cl = connect(owner)
    sid, fh = open_file(cl, exp, name)
    # A SETXATTR waits for its txg; the writes and the punch follow it, and the
    # punch waits for its own txg; the ALLOCATE is durable when it returns.
    cl.ok([putfh(fh), op_setxattr(SX_EITHER, b"kept", b"after the crash")], "SETXATTR")
    for i in range(4):
        write(cl, fh, sid, i * RS, rnd("%s:%d" % (name, i)))
    check(fallocate(cl, fh, sid, OP_DEALLOCATE, RS, 2 * RS) == OK, "DEALLOCATE records 1-2")
    check(fallocate(cl, fh, sid, OP_ALLOCATE, 0, 6 * RS) == OK, "ALLOCATE to 6 records")
    print("punched")
    sys.stdout.flush()
    time.sleep(600)


def mode_punch_verify(name):
    _, _, exp, owner = ctx()
    cl = connect(owner)
    sid, fh = open_file(cl, exp, name, create=False, access=1)
    check(u64_attr(cl, fh, FATTR4_SIZE) == 6 * RS, "the ALLOCATEd size did not survive")
    for i in range(4):
        want = bytes(RS) if i in (1, 2) else rnd("%s:%d" % (name, i))
        check(read(cl, fh, sid, i * RS, RS) == want, "record %d after the crash" % i)
    check(seek(cl, fh, sid, RS, DATA) == (False, 3 * RS), "the punched hole after the crash")
    check(cl.ok([putfh(fh), op_getxattr(b"kept")], "GETXATTR")[-1] == b"after the crash",
          "the extended attribute set before the crash")
    cl.ok([putfh(fh), op_close(sid)], "CLOSE")
    cl.goodbye()
    print("punch-verify ok")


def main():
    mode, args = sys.argv[5], sys.argv[6:]
    modes = {"ops": mode_ops, "mkfile": mode_mkfile, "rofs": mode_rofs,
             "punch-crash": mode_punch_crash, "punch-verify": mode_punch_verify}
    if mode in ("clonefile", "copyfile"):
        mode_clonefile(mode[:-4], args[0], args[1])
    elif mode == "samefile":
        mode_samefile(args[0], args[1])
    elif mode == "remove":
        mode_remove(*args)
    elif mode in ("fill", "punch"):
        (mode_fill if mode == "fill" else mode_punch)(args[0], int(args[1]))
    elif mode in modes:
        modes[mode](*args)
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
