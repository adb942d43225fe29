#!/usr/bin/env python3
"""Turns pool-throughput.sh's results.tsv into markdown tables of medians.

  pool-throughput-report.py OUTDIR     (reads OUTDIR/results.tsv and OUTDIR/machine.txt)

"% of device" is Cairn's physical write rate (logical MB/s x bytes the leaves took per
logical byte, i.e. counting every mirror copy, parity column and metadata block) over
fio's aggregate O_DIRECT write rate on as many files as the layout has leaves.
"x zfs-fuse" compares logical MB/s with zfs-fuse on the same layout and compression
(zfs-fuse's records are 128K at most; both Cairn record sizes are compared with it).
"""
import statistics
import sys
from collections import defaultdict


def med(rows, key):
    vals = [float(r[key]) for r in rows if r[key] not in ("-", "")]
    return statistics.median(vals) if vals else None


def best(rows, key):
    vals = [float(r[key]) for r in rows if r[key] not in ("-", "")]
    return max(vals) if vals else None


def fmt(v, spec="%.0f"):
    return "-" if v is None else spec % v


def main():
    out = sys.argv[1]
    rows = []
    with open(out + "/results.tsv") as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            rows.append(dict(zip(head, line.rstrip("\n").split("\t"))))
    groups = defaultdict(list)
    for r in rows:
        groups[(r["kind"], r["layout"], r["record"], r["compress"])].append(r)
    try:
        print("```\n" + open(out + "/machine.txt").read().rstrip() + "\n```\n")
    except OSError:
        pass

    layouts = sorted({r["layout"] for r in rows}, key=lambda l: (l != "mirror", l))
    fio = {l: groups.get(("fio", l, "1m", "-"), []) for l in layouts}
    print("Device limit (fio, O_DIRECT, io_uring, 1 MiB, iodepth 8, one job per leaf file), "
          "medians:\n")
    print("| layout | files | write MB/s (all files) | read MB/s (all files) | best write / read | reps |")
    print("|---|---|---|---|---|---|")
    nfiles = {"mirror": 2, "raidz2": 6, "raidz1": 3, "single": 1}
    for l in layouts:
        print("| %s | %s | %s | %s | %s | %d |" % (
            l, nfiles.get(l, "?"), fmt(med(fio[l], "write_mbps")), fmt(med(fio[l], "read_mbps")),
            fmt(best(fio[l], "write_mbps")) + " / " + fmt(best(fio[l], "read_mbps")), len(fio[l])))
    print()

    print("Cairn (bench_dmu_pool), medians; MB/s are logical (user) bytes:\n")
    print("| layout | record | compress | write MB/s | read MB/s | write CPU-s/GiB | "
          "read CPU-s/GiB | cores busy (write) | leaf bytes / logical | % of device "
          "(every copy) | x zfs-fuse write | x zfs-fuse read | best write / read MB/s | reps |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted(k for k in groups if k[0] == "cairn")
    order = {"off": 0, "lz4": 1, "lzjb": 2}
    keys.sort(key=lambda k: (layouts.index(k[1]), int(k[2].rstrip("kmKM")) *
                             (1024 if k[2][-1] in "mM" else 1), order.get(k[3], 9), k[3]))
    for k in keys:
        g = groups[k]
        w, rd = med(g, "write_mbps"), med(g, "read_mbps")
        ratio = med(g, "phys_ratio")
        dev = med(fio[k[1]], "write_mbps") if fio.get(k[1]) else None
        pct = (w * ratio / dev * 100) if (w and ratio and dev) else None
        zf = groups.get(("zfsfuse", k[1], "128k", k[3]), [])
        zw, zr = med(zf, "write_mbps"), med(zf, "read_mbps")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |" % (
            k[1], k[2], k[3], fmt(w), fmt(rd), fmt(med(g, "write_cpu_per_gib"), "%.2f"),
            fmt(med(g, "read_cpu_per_gib"), "%.2f"), fmt(med(g, "write_cores"), "%.2f"),
            fmt(ratio, "%.3f"), fmt(pct, "%.0f%%"),
            fmt(w / zw if (w and zw) else None, "%.2f"),
            fmt(rd / zr if (rd and zr) else None, "%.2f"),
            fmt(best(g, "write_mbps")) + " / " + fmt(best(g, "read_mbps")), len(g)))
    print()

    zkeys = sorted((k for k in groups if k[0] == "zfsfuse"),
                   key=lambda k: (layouts.index(k[1]), order.get(k[3], 9)))
    if zkeys:
        print("zfs-fuse 0.7 (fio through FUSE, 1 MiB buffered I/O, recordsize 128K), medians; "
              "CPU is the zfs-fuse process only:\n")
        print("| layout | compress | write MB/s | read MB/s | write CPU-s/GiB | read CPU-s/GiB "
              "| cores busy (write) | best write / read MB/s | reps |")
        print("|---|---|---|---|---|---|---|---|---|")
        for k in zkeys:
            g = groups[k]
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %d |" % (
                k[1], k[3], fmt(med(g, "write_mbps")), fmt(med(g, "read_mbps")),
                fmt(med(g, "write_cpu_per_gib"), "%.2f"), fmt(med(g, "read_cpu_per_gib"), "%.2f"),
                fmt(med(g, "write_cores"), "%.2f"),
                fmt(best(g, "write_mbps")) + " / " + fmt(best(g, "read_mbps")), len(g)))
        print()
    else:
        print("zfs-fuse: no results (skipped or could not run; see the run's log).\n")


if __name__ == "__main__":
    main()
