#!/usr/bin/env bash
# Refused dataset commands: each exits non-zero with exactly one "cairn: " line that
# names what is wrong, and changes nothing (the full listing is the same before and
# after every refusal).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# --- no daemon needed: the CLI refuses the words themselves ---
export CAIRN_SOCKET="$T/nobody-here.sock"
run_fail "$CAIRN" create;                          expect_stderr 'create: missing dataset name'
run_fail "$CAIRN" create "tank/bad name";          expect_stderr "invalid dataset name 'tank/bad name': character ' '"
run_fail "$CAIRN" create tank//a;                  expect_stderr "invalid dataset name 'tank//a': empty component"
run_fail "$CAIRN" create 1tank/a;                  expect_stderr 'must begin with a letter'
run_fail "$CAIRN" create tank/a@s;                 expect_stderr "'tank/a@s' is a snapshot"
run_fail "$CAIRN" create -s tank/fs;               expect_stderr '-s is only for volumes'
run_fail "$CAIRN" create -b 8K tank/fs;            expect_stderr '-b is only for volumes'
run_fail "$CAIRN" create -V 1x tank/v;             expect_stderr "bad volume size '1x'"
run_fail "$CAIRN" create -V 0 tank/v;              expect_stderr 'greater than zero'
run_fail "$CAIRN" create -V 99999999E tank/v;      expect_stderr 'too large'
run_fail "$CAIRN" create -V;                       expect_stderr "option '-V' needs an argument"
run_fail "$CAIRN" create -o compression tank/a;    expect_stderr "bad property 'compression'"
run_fail "$CAIRN" create -o compression=lz4 -o compress=gzip tank/a; expect_stderr 'more than once'
run_fail "$CAIRN" create -q tank/a;                expect_stderr "unknown option '-q'"
run_fail "$CAIRN" create tank/a tank/b;            expect_stderr "unexpected argument 'tank/b'"
run_fail "$CAIRN" destroy;                         expect_stderr 'missing dataset or snapshot name'
run_fail "$CAIRN" snapshot tank/a;                 expect_stderr "'tank/a' is not a snapshot name"
run_fail "$CAIRN" snapshot tank/a@;                expect_stderr 'empty snapshot name'
run_fail "$CAIRN" rollback tank/a;                 expect_stderr 'not a snapshot name'
run_fail "$CAIRN" clone tank/a tank/b;             expect_stderr "'tank/a' is not a snapshot name"
run_fail "$CAIRN" clone tank/a@s tank/b@s;         expect_stderr "'tank/b@s' is a snapshot"
run_fail "$CAIRN" rename tank/a;                   expect_stderr 'missing old and new names'
run_fail "$CAIRN" rename tank/a@s tank/b;          expect_stderr 'not a snapshot name'
run_fail "$CAIRN" set compression tank/a;          expect_stderr 'want PROP=VALUE'
run_fail "$CAIRN" set compression=lz4;             expect_stderr 'missing PROP=VALUE and dataset name'
run_fail "$CAIRN" set -f compression=lz4 tank/a;   expect_stderr '-f applies to volsize only'
run_fail "$CAIRN" inherit compression=lz4 tank/a;  expect_stderr 'property name only'
run_fail "$CAIRN" get compression;                 expect_stderr 'missing dataset name'
run_fail "$CAIRN" get;                             expect_stderr 'missing property name'
run_fail "$CAIRN" get -o name,bogus all tank;      expect_stderr "invalid field 'bogus'"
run_fail "$CAIRN" list -t bogus;                   expect_stderr "invalid type 'bogus'"
run_fail "$CAIRN" list -o name,,used;              expect_stderr 'empty column name'
run_fail "$CAIRN" list tank/a tank/b;              expect_stderr "unexpected argument 'tank/b'"
run_fail "$CAIRN" list;                            expect_stderr 'cannot connect to cairnd'
pass "the CLI refuses bad words before connecting"

# --- the daemon refuses what needs the pool ---
sparse_files "$T/dev" 1G a
daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"
run_ok "$CAIRN" create -p tank/a/b
run_ok "$CAIRN" create tank/c
run_ok "$CAIRN" set com.example:k=v tank/a
run_ok "$CAIRN" snapshot tank/a@s1
run_ok "$CAIRN" clone tank/a@s1 tank/cl
run_ok "$CAIRN" create -V 64M -s tank/vol

state=$(ds_state)
[ "$(echo "$state" | wc -l)" -eq 7 ] || fail "setup: $state"
unchanged() { [ "$(ds_state)" = "$state" ] || fail "a refused command changed datasets: $(diff <(echo "$state") <(ds_state))"; }
refuse() { run_fail "$CAIRN" "$@"; unchanged; }

refuse create tank/nope/child;              expect_stderr "cannot create 'tank/nope/child'.*(parent|tank/nope)"
refuse create tank/a;                       expect_stderr "cannot create 'tank/a'.*exists"
refuse create tank;                         expect_stderr "cannot create 'tank'"
refuse create nopool/a;                     expect_stderr "no such pool 'nopool'"
refuse create -o nosuchprop=1 tank/e;       expect_stderr "nosuchprop"
refuse create -o compression=bogus tank/e;  expect_stderr "compression"
refuse create -o recordsize=3K tank/e;      expect_stderr "recordsize"
refuse create -o recordsize=4M tank/e;      expect_stderr "recordsize"
refuse create -o used=5 tank/e;             expect_stderr "used"
refuse create -V 64M -b 3K tank/v2;         expect_stderr "cannot create 'tank/v2'"
refuse create -V 100K tank/v2;              expect_stderr "cannot create 'tank/v2'"   # not a multiple of 8K
refuse create -p -o compression=bogus tank/p/q; expect_stderr "compression"
refuse set compression=bogus tank/a;        expect_stderr "cannot set property for 'tank/a'.*compression"
refuse set nosuchprop=1 tank/a;             expect_stderr "nosuchprop"
refuse set used=1 tank/a;                   expect_stderr "used"
refuse set quota=abc tank/a;                expect_stderr "quota"
refuse set copies=4 tank/a;                 expect_stderr "copies"
refuse set atime=maybe tank/a;              expect_stderr "atime"
refuse set compression=lz4 tank/nope;       expect_stderr "tank/nope"
refuse set volsize=1G tank/a;               expect_stderr "volsize"
refuse set volsize=32M tank/vol;            expect_stderr "^cairn: cannot set property for 'tank/vol': shrinking a volume destroys the data beyond its new end; use 'cairn set -f volsize=32M tank/vol'$"
refuse set -f volsize=32M tank/a;           expect_stderr "volsize"
refuse set -f volsize=100K tank/vol;        expect_stderr "multiple of volblocksize"
refuse set compression=lz4 tank/a@s1;       expect_stderr "tank/a@s1"
refuse inherit used tank/a;                 expect_stderr "used"
refuse inherit compression tank/nope;       expect_stderr "tank/nope"
refuse inherit nosuchprop tank/a;           expect_stderr "nosuchprop"
refuse snapshot tank/nope@s;                expect_stderr "cannot create snapshot 'tank/nope@s'"
refuse snapshot tank/a@s1;                  expect_stderr "cannot create snapshot 'tank/a@s1'.*exists"
refuse snapshot nopool/a@s;                 expect_stderr "no such pool 'nopool'"
refuse destroy tank/a;                      expect_stderr "cannot destroy 'tank/a'"
refuse destroy tank/nope;                   expect_stderr "cannot destroy 'tank/nope'"
refuse destroy tank/a@nope;                 expect_stderr "cannot destroy 'tank/a@nope'"
refuse destroy tank/a@s1;                   expect_stderr "cannot destroy 'tank/a@s1'"    # origin of tank/cl
refuse destroy tank;                        expect_stderr "root dataset"
refuse destroy -r tank;                     expect_stderr "root dataset"
refuse rollback tank/a@nope;                expect_stderr "tank/a@nope"
refuse clone tank/a@nope tank/cl2;          expect_stderr "tank/a@nope"
refuse clone tank/a@s1 tank/c;              expect_stderr "cannot create 'tank/c'.*exists"
refuse clone tank/a@s1 tank/nope/cl;        expect_stderr "tank/nope"
refuse clone tank/a@s1 other/cl;            expect_stderr "same pool"
refuse rename tank/a tank/nope/a;           expect_stderr "tank/nope"
refuse rename tank/a tank/c;                expect_stderr "exists"
refuse rename tank/a tank/a/b/a;            expect_stderr "cannot rename 'tank/a'"
refuse rename tank/a other/a;               expect_stderr "between pools"
refuse rename tank tank2;                   expect_stderr "root dataset"
refuse rename tank/a@s1 tank/c@s1;          expect_stderr "keeps its dataset"
refuse get nosuchprop tank/a;               expect_stderr "unknown property: nosuchprop"
refuse get compression tank/nope;           expect_stderr "cannot open 'tank/nope'"
refuse get compression tank/a tank/nope;    expect_stderr "cannot open 'tank/nope'"
refuse list tank/nope;                      expect_stderr "cannot open 'tank/nope'"
refuse list nopool;                         expect_stderr "no such pool 'nopool'"
refuse list -o name,bogus;                  expect_stderr "unknown property: bogus"
pass "refusals name the problem and change nothing"

# dedup is a ZFS property the engine does not implement: refused, never stored.
refuse set dedup=on tank/a;                 expect_stderr "dedup.*not implemented"
refuse create -o dedup=on tank/e;           expect_stderr "dedup.*not implemented"
pass "unimplemented properties are refused"

# A forced shrink is the one way down; growing needs no force.
run_ok "$CAIRN" set -f volsize=32M tank/vol
expect_prop volsize tank/vol 33554432 local
run_ok "$CAIRN" set volsize=48M tank/vol
expect_prop volsize tank/vol 50331648 local
pass "volsize shrinks only with -f"

# A volume behind a LUN is not rolled back under its initiators: the refusal names the LUN.
TGT=iqn.2026-11.org.cairn.test:rollback
run_ok "$CAIRN" snapshot tank/vol@before
run_ok "$CAIRN" iscsi target create "$TGT"
run_ok "$CAIRN" iscsi lun add "$TGT" tank/vol
run_fail "$CAIRN" rollback tank/vol@before
expect_stderr "cannot roll back 'tank/vol': volume 'tank/vol' is LUN 0 of iSCSI target $TGT \(remove the LUN first\)"
run_ok "$CAIRN" iscsi lun remove "$TGT" 0
run_ok "$CAIRN" iscsi target destroy "$TGT"
run_ok "$CAIRN" rollback tank/vol@before
run_ok "$CAIRN" destroy tank/vol@before
pass "rollback of a LUN's volume names the LUN"

# Destroying with children needs -r; a busy origin needs its clone gone first.
run_ok "$CAIRN" destroy tank/cl
run_ok "$CAIRN" destroy -r tank/a
[ "$(ds_names tank)" = "$(printf 'tank\ntank/c\ntank/vol')" ] || fail "destroy -r: $(ds_names tank)"
pass "destroy -r after the refusals"

# A pool with datasets exports and imports whole; nothing is left busy.
run_ok "$CAIRN" pool export tank
run_fail "$CAIRN" get all tank/c;           expect_stderr "no such pool 'tank'"
run_ok "$CAIRN" pool import -d "$T/dev" tank
expect_prop type tank/vol volume
run_ok "$CAIRN" pool destroy tank
run_fail "$CAIRN" list tank;                expect_stderr "no such pool 'tank'"
daemon_stop
pass "export, import and destroy a pool with datasets"
