#!/usr/bin/env python3
"""NFSv3 namespace operations across a SIGKILL of the server (test_crash_zil_ns.sh).

  nfs_ns_crash.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT ops DIR
      makes DIR under the export, then CREATEs (GUARDED and EXCLUSIVE), RENAMEs,
      SETATTRs (mode), LINKs and REMOVEs in it until the server goes away. Before each
      call it prints an intent line "I names...", after each successful reply an ack
      line with the names and handles it learned (flushed: the lines survive the kill).
  nfs_ns_crash.py HOST NFSPORT MOUNTPORT PMAPPORT EXPORT check ACKFILE...
      after the restart: every acknowledged name resolves to the handle it had (the
      handles from before the crash stay valid), with the mode last set; removed names
      are gone and the handles of removed files are stale. Names of the one operation in
      flight at the kill are not judged.
Exit 0 when every check holds; "FAIL: ..." and exit 1 otherwise.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nfs_rpc import NFS, X, Conn, check, ctx, fail, lookup, getattr_status, fattr, mount  # noqa: E402


def sattr_mode(mode=None):
    x = X()
    if mode is None:
        x.u32(0)
    else:
        x.u32(1).u32(mode)
    return bytes(x.u32(0).u32(0).u32(0).u32(0).u32(0).b)


def post_fh(r):
    return r.gopaque() if r.gu32() else None


def nfs_call(c, proc, args):
    st, r = c.call(NFS, 3, proc, args)
    check(st == 0, "proc %d: accept %r" % (proc, st))
    return r.gu32(), r


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def mode_ops(dirname):
    host, nport, mport, pport, exp = ctx()
    try:
        root = mount(host, mport, exp)
        c = Conn(host, nport)
        out("I P %s" % dirname)
        status, r = nfs_call(c, 9, bytes(X().opaque(root).opaque(dirname.encode()).b) + sattr_mode(0o755))
        check(status == 0, "MKDIR %s: %d" % (dirname, status))
        dfh = post_fh(r)
        check(dfh is not None, "MKDIR returned no handle")
        out("P %s %s" % (dirname, dfh.hex()))
        names = {}  # i -> current name of file i
        for i in range(1000000):
            name = "f%d" % i
            out("I C %s" % name)
            if i % 2:
                how = X().u32(2).fixed(b"%08d" % (i % 100000000))
            else:
                how = X().u32(1).fixed(sattr_mode(0o640))
            status, r = nfs_call(c, 8, bytes(X().opaque(dfh).opaque(name.encode()).b) + bytes(how.b))
            check(status == 0, "CREATE %s: %d" % (name, status))
            fh = post_fh(r)
            check(fh is not None, "CREATE returned no handle")
            out("C %s %s" % (name, fh.hex()))
            names[i] = (name, fh)
            if i % 3 == 0:
                new = "g%d" % i
                out("I R %s %s" % (name, new))
                status, _ = nfs_call(c, 14, bytes(X().opaque(dfh).opaque(name.encode()).opaque(dfh).opaque(new.encode()).b))
                check(status == 0, "RENAME %s: %d" % (name, status))
                out("R %s %s" % (name, new))
                names[i] = (new, fh)
            if i % 4 == 1:
                mode = 0o600 | (i % 64)
                out("I M %s" % names[i][0])
                status, _ = nfs_call(c, 2, bytes(X().opaque(fh).b) + sattr_mode(mode) + bytes(X().u32(0).b))
                check(status == 0, "SETATTR %s: %d" % (names[i][0], status))
                out("M %s %o" % (names[i][0], mode))
            if i % 5 == 2:
                link = "h%d" % i
                out("I L %s" % link)
                status, _ = nfs_call(c, 15, bytes(X().opaque(fh).opaque(dfh).opaque(link.encode()).b))
                check(status == 0, "LINK %s: %d" % (link, status))
                out("L %s %s" % (link, names[i][0]))
            if i >= 6 and i % 2 == 0:
                victim = names[i - 6][0]
                out("I D %s" % victim)
                status, _ = nfs_call(c, 12, bytes(X().opaque(dfh).opaque(victim.encode()).b))
                check(status == 0, "REMOVE %s: %d" % (victim, status))
                out("D %s" % victim)
    except (EOFError, ConnectionError, OSError):
        return  # the server was killed: that is the point


def mode_check(ackfiles):
    host, nport, mport, pport, exp = ctx()
    root = mount(host, mport, exp)
    c = Conn(host, nport)
    judged = 0
    for ackfile in ackfiles:
        lines = open(ackfile).read().split("\n")
        if lines and lines[-1] != "":
            lines = lines[:-1]  # a torn last line
        names = {}     # name -> handle hex
        modes = {}     # handle hex -> mode set last
        gone = set()   # names removed
        doubt = set()
        dirname = dfh = None
        intent = None
        for ln in lines:
            w = ln.split()
            if not w:
                continue
            if w[0] == "I":
                intent = w[2:]
                continue
            intent = None
            if w[0] == "P":
                dirname, dfh = w[1], w[2]
            elif w[0] == "C":
                names[w[1]] = w[2]
                gone.discard(w[1])
            elif w[0] == "R":
                names[w[2]] = names.pop(w[1])
                gone.add(w[1])
            elif w[0] == "M":
                modes[names[w[1]]] = int(w[2], 8)
            elif w[0] == "L":
                names[w[1]] = names[w[2]]
            elif w[0] == "D":
                names.pop(w[1])
                gone.add(w[1])
        if intent:
            doubt.update(intent)
        if dfh is None:
            continue
        status, got = lookup(c, root, dirname)
        check(status == 0 and got.hex() == dfh, "%s: directory %s: status %d, handle changed" % (ackfile, dirname, status))
        dbytes = bytes.fromhex(dfh)
        live = set(names.values())
        doubt_fhs = {names[n] for n in doubt if n in names}
        for name, fh in names.items():
            if name in doubt:
                continue
            status, got = lookup(c, dbytes, name)
            check(status == 0, "%s: acknowledged %s is missing after the crash (status %d)" % (ackfile, name, status))
            check(got.hex() == fh, "%s: %s has another handle after the crash" % (ackfile, name))
            status, r = getattr_status(c, got)
            check(status == 0, "%s: GETATTR of %s's handle from before the crash: %d" % (ackfile, name, status))
            a = fattr(r)
            if fh in modes and fh not in doubt_fhs:
                check(a["mode"] & 0o7777 == modes[fh], "%s: %s mode %o, acknowledged %o" % (ackfile, name, a["mode"] & 0o7777, modes[fh]))
            judged += 1
        for name in gone - set(names) - doubt:
            status, _ = lookup(c, dbytes, name)
            check(status == 2, "%s: removed %s is back (status %d)" % (ackfile, name, status))
            judged += 1
        # Handles of files whose every name was removed (and acknowledged) are stale.
        created = {}
        for ln in lines:
            w = ln.split()
            if w and w[0] == "C":
                created[w[1]] = w[2]
        for name, fh in created.items():
            if fh in live or fh in doubt_fhs or name in doubt:
                continue
            status, _ = getattr_status(c, bytes.fromhex(fh))
            check(status == 70, "%s: handle of removed %s: status %d, expected STALE" % (ackfile, name, status))
            judged += 1
    c.close()
    print("checked %d acknowledged names and handles" % judged)


def main():
    mode = sys.argv[6]
    if mode == "ops":
        mode_ops(sys.argv[7])
    elif mode == "check":
        mode_check(sys.argv[7:])
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
