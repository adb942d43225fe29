#!/usr/bin/env python3
"""Medians of tools/bench/nfs-throughput.sh's results.tsv as markdown tables:
throughput (MiB/s and server CPU-seconds per GiB) and metadata rates (ops/s),
Cairn next to ganesha with the ratio Cairn / ganesha."""
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)  # (server, proto, phase) -> [(rate, cpu)]
loads = []
with open(sys.argv[1]) as f:
    next(f)
    for line in f:
        server, proto, phase, _rep, rate, cpu, load = line.rstrip("\n").split("\t")
        if not rate:
            continue
        rows[(server, proto, phase)].append((float(rate), float(cpu) if cpu else None))
        loads.append(float(load))


def med(server, proto, phase, i):
    vals = [r[i] for r in rows.get((server, proto, phase), []) if r[i] is not None]
    return (statistics.median(vals), len(vals)) if vals else (None, 0)


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


# The transport floor (a server sending from memory, nothing else) for a read
# phase: four replies in flight for read-cold-4, one for the others.
def floor_of(phase):
    if not phase.startswith("read"):
        return None
    f, _ = med("floor", "tcp", "depth-4" if phase == "read-cold-4" else "depth-1", 0)
    return f


print("| proto | phase | Cairn MiB/s | ganesha MiB/s | Cairn / ganesha | Cairn CPU-s/GiB | ganesha CPU-s/GiB | floor MiB/s | floor / ganesha | runs |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for proto in ("v3", "v4"):
    for phase in ("write", "read-warm", "read-cold", "read-cold-4"):
        c, n = med("cairn", proto, phase, 0)
        if n == 0:
            continue
        g, _ = med("ganesha", proto, phase, 0)
        cc, _ = med("cairn", proto, phase, 1)
        gc, _ = med("ganesha", proto, phase, 1)
        fl = floor_of(phase)
        print(f"| {proto} | {phase} | {fmt(c)} | {fmt(g)} | {ratio(c, g)} | {fmt(cc, 2)} | {fmt(gc, 2)} "
              f"| {fmt(fl)} | {ratio(fl, g)} | {n} |")
print()
print("| proto | file bytes | op | Cairn ops/s | ganesha ops/s | Cairn / ganesha | runs |")
print("|---|---:|---|---:|---:|---:|---:|")
for proto, size in (("v3", "0"), ("v3", "4096"), ("v4", "0")):
    for op in ("create", "stat", "unlink"):
        ph = f"meta-{op}-{size}"
        c, n = med("cairn", proto, ph, 0)
        g, _ = med("ganesha", proto, ph, 0)
        print(f"| {proto} | {size} | {op} | {fmt(c)} | {fmt(g)} | {ratio(c, g)} | {n} |")
if loads:
    print()
    print(f"load average (1 min) during the phases: min {min(loads):.1f}, "
          f"median {statistics.median(loads):.1f}, max {max(loads):.1f}")
