#!/usr/bin/env bash
# Bad input to the CLI: every case exits non-zero with exactly one "cairn: " line
# on stderr, and no device file changes (checksums before and after).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

D="$T/dev"
sparse_files "$D" 128M a b c d e
sparse_files "$D" 16M small
ln -s "$D/a" "$D/a-link"
before=$(checksums "$D"/a "$D"/b "$D"/c "$D"/d "$D"/e "$D"/small)

# --- no daemon needed: the CLI refuses before connecting ---
export CAIRN_SOCKET="$T/nobody-here.sock"
run_fail "$CAIRN";                                   expect_stderr 'missing command'
run_fail "$CAIRN" frobnicate;                        expect_stderr "unknown command 'frobnicate'"
run_fail "$CAIRN" --bogus pool list;                 expect_stderr "unknown option '--bogus'"
run_fail "$CAIRN" pool;                              expect_stderr 'missing subcommand'
run_fail "$CAIRN" pool frob;                         expect_stderr "unknown subcommand 'frob'"
run_fail "$CAIRN" pool list -Z;                      expect_stderr "unknown option '-Z'"
run_fail "$CAIRN" pool create;                       expect_stderr 'missing pool name'
run_fail "$CAIRN" pool create tank;                  expect_stderr 'missing vdevs'
run_fail "$CAIRN" pool create -x tank "$D/a";        expect_stderr "unknown option '-x'"
run_fail "$CAIRN" pool create 1tank "$D/a";          expect_stderr 'invalid pool name'
run_fail "$CAIRN" pool create mirror "$D/a" "$D/b";  expect_stderr 'reserved'
run_fail "$CAIRN" pool create tank raidz4 "$D/a" "$D/b" "$D/c"; expect_stderr "unknown vdev type.*raidz4"
run_fail "$CAIRN" pool create tank stripe "$D/a" "$D/b";        expect_stderr "unknown vdev type.*stripe"
run_fail "$CAIRN" pool create tank mirror "$D/a";               expect_stderr 'mirror needs at least 2'
run_fail "$CAIRN" pool create tank mirror "$D/a" "$D/b" mirror "$D/c"; expect_stderr 'mirror needs at least 2'
run_fail "$CAIRN" pool create tank raidz1 "$D/a" "$D/b";        expect_stderr 'raidz1 needs at least 3'
run_fail "$CAIRN" pool create tank raidz2 "$D/a" "$D/b" "$D/c"; expect_stderr 'raidz2 needs at least 4'
run_fail "$CAIRN" pool create tank raidz3 "$D/a" "$D/b" "$D/c" "$D/d"; expect_stderr 'raidz3 needs at least 5'
run_fail "$CAIRN" pool create tank "$D/a" log raidz1 "$D/b" "$D/c" "$D/d"; expect_stderr "a log vdev is a device or a mirror"
run_fail "$CAIRN" pool create tank "$D/a" log;                  expect_stderr "'log' must be followed"
run_fail "$CAIRN" pool create tank "$D/a" cache;                  expect_stderr "'cache' needs at least one device"
run_fail "$CAIRN" pool create tank mirror "$D/a" "$D/b" spare;   expect_stderr "'spare' needs at least one device"
run_fail "$CAIRN" pool create tank mirror "$D/a" "$D/a";        expect_stderr 'more than once'
run_fail "$CAIRN" pool create tank mirror "$D/a" "$D/a-link";   expect_stderr 'more than once'
(cd "$D" && run_fail "$CAIRN" pool create tank mirror a "$D/a"); expect_stderr 'more than once'
run_fail "$CAIRN" pool create tank mirror "$D/a" "$D/missing";  expect_stderr "cannot open '$D/missing'"
run_fail "$CAIRN" pool create tank "$D";                        expect_stderr 'not a file or block device'
run_fail "$CAIRN" pool create -o comment tank "$D/a";           expect_stderr 'bad property'
run_fail "$CAIRN" pool import tank;                             expect_stderr 'give -d'
run_fail "$CAIRN" pool import -d "$T/nodir" tank;               expect_stderr 'cannot open search directory'
run_fail "$CAIRN" pool export;                                  expect_stderr 'missing pool name'
run_fail "$CAIRN" pool export a b;                              expect_stderr "unexpected argument 'b'"
run_fail "$CAIRN" pool set comment tank;                        expect_stderr 'want PROP=VALUE'
run_fail "$CAIRN" pool get;                                     expect_stderr 'missing property'
run_fail "$CAIRN" check tank;                                   expect_stderr 'give -d'

# --- daemon not running ---
run_fail "$CAIRN" pool list;            expect_stderr "cannot connect to cairnd at $CAIRN_SOCKET"
run_fail "$CAIRN" pool create tank mirror "$D/a" "$D/b"; expect_stderr 'cannot connect to cairnd'
run_fail "$CAIRN" --socket "$T/other.sock" pool status; expect_stderr "cannot connect to cairnd at $T/other.sock"

# --- the daemon refuses what needs the devices or the pool table ---
daemon_start d1
run_fail "$CAIRN" pool status nosuch;   expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool list nosuch;     expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool export nosuch;   expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool destroy nosuch;  expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool scrub nosuch;    expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool clear nosuch;    expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool get all nosuch;  expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool set comment=x nosuch; expect_stderr "no such pool 'nosuch'"
run_fail "$CAIRN" pool create -o nosuchprop=1 tank "$D/a";   expect_stderr "unknown pool property 'nosuchprop'"
run_fail "$CAIRN" pool create -o size=1 tank "$D/a";         expect_stderr "read-only"
run_fail "$CAIRN" pool create tank mirror "$D/a" "$D/small"; expect_stderr 'tank'
[ "$(checksums "$D"/a "$D"/b "$D"/c "$D"/d "$D"/e "$D"/small)" = "$before" ] ||
    fail "a refused command changed a device file"
pass "refusals before any pool exists leave the devices untouched"

# A device in another pool is refused without -f, and changes nothing.
sparse_files "$D" 128M in1 in2
run_ok "$CAIRN" pool create other mirror "$D/in1" "$D/in2"
run_ok "$CAIRN" pool export other
used=$(checksums "$D"/in1 "$D"/in2 "$D"/a)
run_fail "$CAIRN" pool create tank mirror "$D/in1" "$D/a";   expect_stderr 'tank'
[ "$(checksums "$D"/in1 "$D"/in2 "$D"/a)" = "$used" ] ||
    fail "refused create over another pool's device changed a file"
run_fail "$CAIRN" pool get nosuchprop;  expect_stderr "unknown pool property"
run_ok "$CAIRN" pool import -d "$D" other
run_fail "$CAIRN" pool import -d "$D" other; expect_stderr 'already imported'
run_fail "$CAIRN" pool set size=5 other;     expect_stderr 'read-only'
run_fail "$CAIRN" check -d "$D" other;       expect_stderr 'imported by cairnd'
pass "refusals with a pool present"

# A garbage client does not disturb the daemon or other clients.
python3 - "$CAIRN_SOCKET" <<'PY'
import socket, struct, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX); s.connect(path)
s.sendall(struct.pack('<I', 5) + b'\xff\xff\xff\xff\xff')     # not a Request
hdr = s.recv(4); n = struct.unpack('<I', hdr)[0]; body = b''
while len(body) < n: body += s.recv(n - len(body))
assert n > 0, "expected an error response"
s.sendall(struct.pack('<I', 0x7fffffff))                       # oversized
hdr = s.recv(4); assert len(hdr) == 4, "expected an error response to the oversized frame"
s.close()
t = socket.socket(socket.AF_UNIX); t.connect(path)
t.sendall(struct.pack('<I', 100) + b'abc'); t.close()          # dies mid-frame
PY
run_ok "$CAIRN" pool list other
kill -0 "$DAEMON_PID" || fail "daemon died after garbage clients"
pass "garbage clients are contained"
daemon_stop
