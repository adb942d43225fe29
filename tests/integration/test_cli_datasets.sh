#!/usr/bin/env bash
# Datasets through the CLI (zfs grammar): a hierarchy, properties with inheritance and
# their SOURCE, user properties, list in every shape, the pool's compressratio after
# real writes, snapshots (-r), rollback, clone, rename, destroy -r, volumes; then
# everything survives a clean restart, kill -9 and an export/import.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/nfs_lib.sh"

sparse_files "$T/dev" 4G a
daemon_start d1
run_ok "$CAIRN" pool create tank "$T/dev/a"

# ---- the pool's root filesystem comes with the pool ----
run_ok "$CAIRN" list
expect_stdout '^NAME +USED +AVAIL +REFER +MOUNTPOINT$'
expect_stdout '^tank +[0-9.]+[KMG]? +[0-9.]+[KMG] +[0-9.]+[KMG]? +/tank$'
expect_prop type tank filesystem
pass "root filesystem"

# ---- a hierarchy ----
run_ok "$CAIRN" create tank/a
run_ok "$CAIRN" create tank/a/b
run_ok "$CAIRN" create -p tank/x/y/z
run_ok "$CAIRN" create -o compression=gzip-3 -o recordsize=16K -o com.example:tag=hello tank/c
[ "$(ds_names tank)" = "$(printf 'tank\ntank/a\ntank/a/b\ntank/c\ntank/x\ntank/x/y\ntank/x/y/z')" ] ||
    fail "hierarchy: $(ds_names tank)"
expect_prop compression tank/c gzip-3 local
expect_prop recordsize tank/c 16384 local
expect_prop com.example:tag tank/c hello local
expect_prop mountpoint tank/a/b /tank/a/b
pass "create, create -p, create -o"

# ---- properties: local, inherited, default ----
expect_prop recordsize tank/a 131072 default
run_ok "$CAIRN" set compression=lz4 tank/a
expect_prop compression tank/a lz4 local
expect_prop compression tank/a/b lz4 "inherited from tank/a"
run_ok "$CAIRN" set recordsize=64K tank/a
expect_prop recordsize tank/a/b 65536 "inherited from tank/a"
run_ok "$CAIRN" set compression=off tank/a/b
expect_prop compression tank/a/b off local
run_ok "$CAIRN" inherit compression tank/a/b
expect_prop compression tank/a/b lz4 "inherited from tank/a"
run_ok "$CAIRN" set compression=zle tank
expect_prop compression tank/x/y/z zle "inherited from tank"
run_ok "$CAIRN" inherit compression tank/a
expect_prop compression tank/a/b zle "inherited from tank"
run_ok "$CAIRN" inherit compression tank
[ "$(ds_source compression tank/a/b)" = default ] || fail "compression not default after inherit"
# sizes and "none"
run_ok "$CAIRN" set quota=1G tank/a
expect_prop quota tank/a 1073741824 local
run_ok "$CAIRN" get -H -o value quota tank/a
expect_stdout '^1(\.00)?G$'
run_ok "$CAIRN" set quota=none tank/a
expect_prop quota tank/a 0
run_ok "$CAIRN" get -H -o value quota tank/a
expect_stdout '^none$'
run_ok "$CAIRN" set reservation=10M tank/x
expect_prop reservation tank/x 10485760 local
for kv in atime=off sync=always logbias=throughput primarycache=metadata secondarycache=none \
          readonly=on copies=2 checksum=sha256 sharenfs=on refquota=512M; do
    run_ok "$CAIRN" set "$kv" tank/x/y
    expect_prop "${kv%%=*}" tank/x/y "$(
        case $kv in refquota=*) echo 536870912 ;; *) echo "${kv#*=}" ;; esac)" local
done
expect_prop readonly tank/x/y/z on "inherited from tank/x/y"
pass "set, inherit, SOURCE column"

# ---- user properties ----
run_ok "$CAIRN" set com.example:owner=alice tank/a
expect_prop com.example:owner tank/a/b alice "inherited from tank/a"
run_ok "$CAIRN" set com.example:owner=bob tank/a/b
expect_prop com.example:owner tank/a/b bob local
run_ok "$CAIRN" get -H com.example:unset tank/a
[ "$(cat "$LAST_STDOUT")" = "$(printf 'tank/a\tcom.example:unset\t-\t-')" ] ||
    fail "unset user property: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" inherit com.example:owner tank/a/b
expect_prop com.example:owner tank/a/b alice "inherited from tank/a"
pass "user properties"

# ---- get shapes ----
run_ok "$CAIRN" get all tank/a
expect_stdout '^NAME +PROPERTY +VALUE +SOURCE$'
for p in type used available referenced compressratio recordsize compression quota \
         mountpoint com.example:owner; do
    expect_stdout "^tank/a +$p +"
done
expect_stdout '^tank/a +compressratio +[0-9]+\.[0-9]{2}x +-$'
run_ok "$CAIRN" get -H -p -o name,value used,compression tank/a tank/c
[ "$(wc -l <"$LAST_STDOUT")" -eq 4 ] || fail "get 2 props x 2 datasets: $(cat "$LAST_STDOUT")"
awk -F'\t' 'NF != 2 { exit 1 } NR == 1 && ($1 != "tank/a" || $2 !~ /^[0-9]+$/) { exit 1 }
            NR == 4 && ($1 != "tank/c" || $2 != "gzip-3") { exit 1 }' "$LAST_STDOUT" ||
    fail "get -H -p -o name,value: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" get -r -H -o name compression tank/a
[ "$(cat "$LAST_STDOUT")" = "$(printf 'tank/a\ntank/a/b')" ] || fail "get -r: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" get --json recordsize,compression tank/a/b
python3 - "$LAST_STDOUT" <<'PY' || fail "get --json: $(cat "$LAST_STDOUT")"
import json, sys
d = json.load(open(sys.argv[1]))["properties"]
by = {p["property"]: p for p in d}
assert by["recordsize"]["value"] == 65536 and by["recordsize"]["source"] == "inherited from tank/a", by
assert isinstance(by["compression"]["value"], str) and by["compression"]["source"] == "default", by
assert all(p["name"] == "tank/a/b" for p in d), d
PY
created=$(ds_get creation tank/a)
now=$(date +%s)
[ "$created" -le "$now" ] && [ "$created" -gt $((now - 3600)) ] || fail "creation -p is $created (now $now)"
run_ok "$CAIRN" get -H -o value creation tank/a
expect_stdout '^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]{2} [0-9]{2}:[0-9]{2} [0-9]{4}$'
pass "get -r, -H, -p, -o, --json, all"

# ---- list shapes ----
run_ok "$CAIRN" list tank/a
[ "$(wc -l <"$LAST_STDOUT")" -eq 2 ] || fail "list tank/a (no -r) is one row: $(cat "$LAST_STDOUT")"
expect_stdout '^tank/a +.* /tank/a$'
run_ok "$CAIRN" list -H -p -o name,used,avail,refer,ratio,type,com.example:owner -r tank/a
awk -F'\t' 'NF != 7 || $2 !~ /^[0-9]+$/ || $3 !~ /^[0-9]+$/ || $4 !~ /^[0-9]+$/ ||
            $5 !~ /^[0-9]+\.[0-9]+x?$/ || $6 != "filesystem" || $7 != "alice" { exit 1 }' \
    "$LAST_STDOUT" || fail "list -H -p -o: $(cat "$LAST_STDOUT")"
[ "$(cut -f1 "$LAST_STDOUT")" = "$(printf 'tank/a\ntank/a/b')" ] || fail "list -r order"
run_ok "$CAIRN" list -o name,avail,refer,ratio,compress tank/c
expect_stdout '^NAME +AVAIL +REFER +RATIO +COMPRESS$'
expect_stdout '^tank/c .*gzip-3$'
run_ok "$CAIRN" list --json -r tank/x
python3 - "$LAST_STDOUT" <<'PY' || fail "list --json: $(cat "$LAST_STDOUT")"
import json, sys
d = json.load(open(sys.argv[1]))["datasets"]
assert [r["name"] for r in d] == ["tank/x", "tank/x/y", "tank/x/y/z"], d
for r in d:
    assert isinstance(r["used"], int) and isinstance(r["available"], int), r
    assert isinstance(r["referenced"], int) and r["mountpoint"] == "/" + r["name"], r
PY
run_ok "$CAIRN" list -H -t filesystem -o name
grep -q '^tank/a/b$' "$LAST_STDOUT" || fail "list without a name lists every pool's datasets"
pass "list -r -H -p -o --json -t"

# ---- snapshots, rollback, clone ----
run_ok "$CAIRN" snapshot -r tank/a@s1
[ "$(ds_names -t snapshot tank/a | sort)" = "$(printf 'tank/a/b@s1\ntank/a@s1' | sort)" ] ||
    fail "snapshot -r: $(ds_names -t snapshot tank/a)"
run_ok "$CAIRN" list -H -o name,type -t snapshot tank/a
[ "$(cat "$LAST_STDOUT")" = "$(printf 'tank/a@s1\tsnapshot')" ] ||
    fail "list -t snapshot FS shows FS's snapshots: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" list -H -o name -r tank/a
grep -q '@' "$LAST_STDOUT" && fail "snapshots listed without -t snapshot"
run_ok "$CAIRN" snapshot tank/a@s2
run_ok "$CAIRN" snapshot tank/a@s3
run_fail "$CAIRN" rollback tank/a@s1
expect_stderr 'tank/a@s1'
[ "$(ds_names -t snapshot tank/a | grep -c '^tank/a@')" -eq 3 ] || fail "refused rollback destroyed snapshots"
run_ok "$CAIRN" rollback tank/a@s3
run_ok "$CAIRN" rollback -r tank/a@s1
[ "$(ds_names -t snapshot tank/a | grep '^tank/a@')" = "tank/a@s1" ] ||
    fail "rollback -r kept newer snapshots: $(ds_names -t snapshot tank/a)"
expect_prop type tank/a@s1 snapshot
run_ok "$CAIRN" clone -o compression=gzip tank/a@s1 tank/c/clone1
expect_prop type tank/c/clone1 filesystem
expect_prop compression tank/c/clone1 gzip local
expect_prop com.example:tag tank/c/clone1 hello "inherited from tank/c"
expect_prop origin tank/c/clone1 tank/a@s1
run_fail "$CAIRN" destroy tank/a@s1         # the clone's origin
expect_stderr "tank/a@s1"
pass "snapshot -r, rollback (-r), clone"

# ---- rename, destroy ----
run_ok "$CAIRN" rename tank/x tank/x2
[ "$(ds_names tank/x2)" = "$(printf 'tank/x2\ntank/x2/y\ntank/x2/y/z')" ] || fail "rename: $(ds_names tank/x2)"
expect_prop mountpoint tank/x2/y/z /tank/x2/y/z
expect_prop readonly tank/x2/y/z on "inherited from tank/x2/y"
run_fail "$CAIRN" list tank/x
run_ok "$CAIRN" rename tank/a/b tank/c/b
expect_prop com.example:owner tank/c/b - -
run_fail "$CAIRN" destroy tank/x2
expect_stderr 'tank/x2'
run_ok "$CAIRN" destroy -r tank/x2
run_fail "$CAIRN" list tank/x2
ds_names tank | grep -q '^tank/x2' && fail "destroy -r left descendants"
run_ok "$CAIRN" destroy tank/c/b@s1
run_ok "$CAIRN" destroy tank/c/b
pass "rename (children follow), destroy, destroy -r"

# ---- volumes ----
run_ok "$CAIRN" create -V 1G -s tank/vol1
run_ok "$CAIRN" create -V 1G tank/vol2
run_ok "$CAIRN" create -V 64M -b 16K tank/vol3
expect_prop type tank/vol1 volume
expect_prop volsize tank/vol1 1073741824
expect_prop volblocksize tank/vol1 8192
expect_prop volblocksize tank/vol3 16384
expect_prop refreservation tank/vol1 0
run_ok "$CAIRN" get -H -o value refreservation tank/vol1
expect_stdout '^none$'
rr=$(ds_get refreservation tank/vol2)
[ "$rr" -ge 1073741824 ] && [ "$rr" -le $((1073741824 + 64 * 1048576)) ] ||
    fail "refreservation of a 1G thick volume is $rr"
used=$(ds_get used tank/vol2)
[ "$used" -ge 1073741824 ] || fail "a thick volume's refreservation counts as used ($used)"
[ "$(ds_get used tank/vol1)" -lt 16777216 ] || fail "a sparse volume uses space it never wrote"
run_ok "$CAIRN" list -H -p -o name,type,volsize -t volume
[ "$(cat "$LAST_STDOUT")" = "$(printf 'tank/vol1\tvolume\t1073741824\ntank/vol2\tvolume\t1073741824\ntank/vol3\tvolume\t67108864')" ] ||
    fail "list -t volume: $(cat "$LAST_STDOUT")"
run_ok "$CAIRN" list -H -o name,mountpoint tank/vol1
[ "$(cat "$LAST_STDOUT")" = "$(printf 'tank/vol1\t-')" ] || fail "a volume has no mountpoint"
pass "volumes: -V, -s, -b, refreservation"

# ---- pool list shows the pool's compressratio: the root dataset's, over the whole tree;
# refcompressratio that of one dataset's referenced data ----
run_ok "$CAIRN" create -o sharenfs=no_root_squash -o compression=gzip tank/text
expect_share /tank/text
nfs_ports d1
yes 'the same words, again and again' | head -c 8M >"$T/text" || true
run_ok nfs-cp "$T/text" "$(nfs_url /tank/text/words)"
run_ok "$CAIRN" snapshot tank/text@counted   # a task: its txg holds the writes before it
run_ok "$CAIRN" get -H -o value compressratio tank
ratio=$(cat "$LAST_STDOUT")
run_ok "$CAIRN" pool list tank
expect_stdout '^NAME +SIZE +ALLOC +FREE +CAP +RATIO +HEALTH +EXPANDSZ$'
run_ok "$CAIRN" pool list -H tank
[ "$(cut -f6 "$LAST_STDOUT")" = "$ratio" ] || fail "pool list RATIO $(cut -f6 "$LAST_STDOUT"), root compressratio $ratio"
[ "${ratio%%.*}" -ge 3 ] || fail "8 MiB of repeated words under gzip give a pool ratio of only $ratio"
# refcompressratio (the REFRATIO column): of what tank/text's root references
run_ok "$CAIRN" list -o name,refratio tank/text
expect_stdout '^NAME +REFRATIO$'
run_ok "$CAIRN" list -H -o refratio tank/text
refratio=$(cat "$LAST_STDOUT")
[[ "$refratio" =~ ^[0-9]+\.[0-9]{2}x$ ]] || fail "refcompressratio of tank/text: $refratio"
[ "${refratio%%.*}" -ge 3 ] || fail "8 MiB of repeated words under gzip: refcompressratio $refratio"
run_fail "$CAIRN" set refcompressratio=2.00x tank/text
run_ok "$CAIRN" destroy -r tank/text
pass "pool list RATIO, refcompressratio"

# ---- persistence: clean restart, kill -9, export/import ----
before=$(ds_state)
echo "$before" | grep -q '^tank/c/clone1	filesystem	gzip	' || fail "state: $before"
daemon_stop
daemon_start d1
[ "$(ds_state)" = "$before" ] || fail "datasets changed across restart: $(diff <(echo "$before") <(ds_state))"
expect_prop com.example:owner tank/a alice local
run_ok "$CAIRN" set com.example:after=crash tank/a
run_ok "$CAIRN" snapshot tank/c@late
before=$(ds_state)
daemon_kill9
daemon_start d1
[ "$(ds_state)" = "$before" ] || fail "datasets changed across kill -9: $(diff <(echo "$before") <(ds_state))"
expect_prop com.example:after tank/a crash local
expect_prop type tank/c@late snapshot
run_ok "$CAIRN" pool export tank
run_ok "$CAIRN" list -H -o name
grep -q '^tank' "$LAST_STDOUT" && fail "datasets listed after export"
run_ok "$CAIRN" pool import -d "$T/dev" tank
[ "$(ds_state)" = "$before" ] || fail "datasets changed across export/import"
pass "persistence across restart, kill -9, export/import"

run_ok "$CAIRN" pool export tank
daemon_stop
check_clean tank "$T/dev"
pass "cairn check is clean after the dataset work"
