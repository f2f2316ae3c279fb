#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Packed slots (capability 0x80000), real daemons, tcp lanes:
#   1. push of 10,000 files of 1..4096 bytes in one run (and a few empty):
#      byte-identical, every regular file travelled packed (--json
#      packed_files), in far fewer slots than files; pulled back by a client
#      that plays an older receiver (without the wider window 0x20000000, and
#      without the wide one 0x10000000 too)
#   2. a mixed tree: empty files, files at and around a pack's bounds (256 KiB),
#      one exactly a chunk, one spanning chunks, pushed and pulled with a
#      chunk of 1 MiB and of 64 KiB (which packs at most 16 KiB files):
#      identical trees, the daemon's log counting the packs
#   2b. the mixed tree pushed and pulled with its sources out of the page cache
#      (the sender's reads that wait for the disk), and pushed with every read on
#      an O_NONBLOCK fd answered -EAGAIN (a test hook)
#   3. an old daemon (no 0x80000 in HELLO): a push still arrives whole, one
#      chunk per file (packed_files 0); an old client pulling from ours the same
#   4. a packed run cut by killing the client: nothing under a final name that
#      is not whole and verified (every file at the destination equals its
#      source), no temp file left
#   5. packs made by hand (rawpeer) against the daemon: a good one commits both
#      files; one naming a file not in flight, and one whose table does not add
#      up, end the session with ERROR PROTOCOL and commit nothing; a packed slot
#      held beside the chunks of the file at table entry 0 is no duplicate of them
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

HOST=127.0.0.1
KIB=1024

command -v jq >/dev/null || skip "jq not installed"
setup_standard
mkdir -p "$T/src" "$T/pull"

json_sum() { jq -r "select(.event == \"summary\") | .$1" "$T/out"; }

# ---- 1. 10,000 small files in one run ------------------------------------------------
python3 - "$T/src/many" <<'EOF' || die "make many"
import os, sys, random
d = sys.argv[1]
os.makedirs(d)
r = random.Random(12)
for i in range(10000):
    n = 0 if i % 997 == 0 else r.randint(1, 4096)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(r.randbytes(n))
EOF
expect_rc 0 "10,000 files pushed" "${CLIENT[@]}" --transport tcp --json -r "$T/src/many" "$HOST:data/"
expect_same_tree "10,000 files" "$T/src/many" "$T/mod/many"
nonempty=$(find "$T/src/many" -type f -size +0 | wc -l)
pf=$(json_sum packed_files)
ps=$(json_sum packed_slots)
[ "$pf" = "$nonempty" ] && pass "10,000 files: all $pf non-empty files packed" ||
	fail "10,000 files: packed_files $pf, $nonempty non-empty files"
[ -n "$ps" ] && [ "$ps" -ge 1 ] && [ "$ps" -le $((nonempty / 100)) ] &&
	pass "10,000 files: in $ps slots" || fail "10,000 files: $ps slots"
[ "$(json_sum files)" = 10001 ] && [ "$(json_sum failed)" = 0 ] &&
	pass "10,000 files: summary counts them" ||
	fail "10,000 files: files $(json_sum files) failed $(json_sum failed)"
# Pulled by a client that plays an older receiver: without the wider window
# (0x20000000) the daemon offers it 1,536 files at a time, without the wide one
# too (0x10000000) 768, each within that receiver's span of ids.
for off in 0x20000000 0x30000000; do
	rm -rf "$T/pull/many"
	RDMACP_TEST_CAPS_OFF=$off expect_rc 0 "10,000 files pulled (caps off $off)" \
		"${CLIENT[@]}" --transport tcp -r "$HOST:data/many" "$T/pull/"
	expect_same_tree "10,000 files pulled (caps off $off)" "$T/src/many" "$T/pull/many"
done
rm -rf "$T/pull/many"

# ---- 2. a mixed tree, both ways, two chunk sizes ----------------------------------------
mkdir -p "$T/src/mixed/sub/deeper" "$T/src/mixed/emptydir"
mk() { head -c "$2" /dev/urandom >"$T/src/mixed/$1" || die "make $1"; }
: >"$T/src/mixed/empty1"
: >"$T/src/mixed/sub/empty2"
mk one 1
mk sub/small 5000
mk k16 $((16 * KIB))
mk k16plus $((16 * KIB + 1))
mk pmax $((256 * KIB))
mk pmaxplus $((256 * KIB + 1))
mk chunk $((1024 * KIB))
mk sub/span $((2 * 1024 * KIB + 7))
mk sub/deeper/tail 333
ln -s one "$T/src/mixed/link"
for cs in 1M 64K; do
	rm -rf "$T/mod/mixed"
	expect_rc 0 "mixed push, chunk $cs" "${CLIENT[@]}" --transport tcp --json --chunk-size "$cs" \
		-r "$T/src/mixed" "$HOST:data/"
	expect_same_tree "mixed push, chunk $cs" "$T/src/mixed" "$T/mod/mixed"
	pf=$(json_sum packed_files)
	# 1 MiB chunks pack files of up to 256 KiB: one, small, k16, k16plus, pmax, tail;
	# 64 KiB chunks up to 16 KiB: one, small, k16, tail.
	want=6
	[ "$cs" = 64K ] && want=4
	[ "$pf" = "$want" ] && pass "mixed push, chunk $cs: $pf files packed" ||
		fail "mixed push, chunk $cs: packed_files $pf, wanted $want"
	rm -rf "$T/pull/mixed"
	expect_rc 0 "mixed pull, chunk $cs" "${CLIENT[@]}" --transport tcp --json --chunk-size "$cs" \
		-r "$HOST:data/mixed" "$T/pull/"
	expect_same_tree "mixed pull, chunk $cs" "$T/src/mixed" "$T/pull/mixed"
	[ "$(json_sum packed_files)" = "$want" ] && pass "mixed pull, chunk $cs: packed" ||
		fail "mixed pull, chunk $cs: packed_files $(json_sum packed_files)"
done

# ---- 2b. sources not in the page cache ---------------------------------------------------
# The sender's fds stay O_NONBLOCK. Reads that wait for the disk, both ways: the
# sources evicted first (written back, then POSIX_FADV_DONTNEED). Then a file system
# that answers such a read -EAGAIN (the test hook makes every read on an O_NONBLOCK
# fd look so): the fd is made blocking and the read submitted again.
evict() {
	sync -f "$1"
	find "$1" -type f -print0 | python3 -c '
import os, sys
for p in sys.stdin.buffer.read().split(b"\0"):
    if p:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)'
	# Resident bytes of the files' pages, summed (fincore, util-linux).
	find "$1" -type f -size +0 -exec fincore --bytes --noheadings --raw -o RES {} + |
		awk '{ s += $1 } END { print s + 0 }'
}
cached=$(evict "$T/src/mixed")
if [ "$cached" = 0 ]; then
	rm -rf "$T/mod/mixed"
	expect_rc 0 "uncached push" "${CLIENT[@]}" --transport tcp --json -r "$T/src/mixed" "$HOST:data/"
	expect_same_tree "uncached push" "$T/src/mixed" "$T/mod/mixed"
	cached=$(evict "$T/mod/mixed")
	rm -rf "$T/pull/mixed"
	expect_rc 0 "uncached pull" "${CLIENT[@]}" --transport tcp --json -r "$HOST:data/mixed" "$T/pull/"
	expect_same_tree "uncached pull" "$T/src/mixed" "$T/pull/mixed"
	[ "$cached" = 0 ] || echo "note: the pull's source kept $cached bytes in the page cache"
else
	echo "not checked: $T's file system kept $cached bytes in the page cache after POSIX_FADV_DONTNEED"
fi
rm -rf "$T/mod/mixed"
expect_rc 0 "push, reads answered -EAGAIN" env RDMACP_TEST_READ_EAGAIN=1 timeout 120 "${CLIENT[@]}" \
	--transport tcp -r "$T/src/mixed" "$HOST:data/"
expect_same_tree "push, reads answered -EAGAIN" "$T/src/mixed" "$T/mod/mixed"

grep -q "files travelled packed in" "$T/d.log" && pass "daemon log counts the packs" ||
	fail "daemon log: no packed count"

# ---- 3. old peers ---------------------------------------------------------------------
OLD_PORT=$(free_port)
mkdir -p "$T/oldmod"
write_conf "$T/old.conf" "$OLD_PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
printf '\n[data]\npath = %s\nallow = client\n' "$T/oldmod" | as_root_modules >>"$T/old.conf"
RDMACP_TEST_CAPS_OFF=0x80000 start_daemon "$T/old.conf" "$T/old.log" "$OLD_PORT"
OLD=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$OLD_PORT" --transport tcp)
expect_rc 0 "old daemon push" "${OLD[@]}" --json -r "$T/src/mixed" "$HOST:data/"
expect_same_tree "old daemon push" "$T/src/mixed" "$T/oldmod/mixed"
[ "$(json_sum packed_files)" = 0 ] && pass "old daemon: nothing packed" ||
	fail "old daemon: packed_files $(json_sum packed_files)"
rm -rf "$T/pull/mixed"
RDMACP_TEST_CAPS_OFF=0x80000 expect_rc 0 "old client pull" "${CLIENT[@]}" --transport tcp --json \
	-r "$HOST:data/mixed" "$T/pull/"
expect_same_tree "old client pull" "$T/src/mixed" "$T/pull/mixed"
[ "$(json_sum packed_files)" = 0 ] && pass "old client: nothing packed" ||
	fail "old client: packed_files $(json_sum packed_files)"

# ---- 4. a packed run cut short ------------------------------------------------------------
rm -rf "$T/mod/many"
"${CLIENT[@]}" --transport tcp -q -r --bwlimit 4M "$T/src/many" "$HOST:data/" >/dev/null 2>&1 &
c=$!
for _ in $(seq 1 200); do
	[ "$(find "$T/mod/many" -type f 2>/dev/null | head -300 | wc -l)" -ge 300 ] && break
	sleep 0.05
done
kill -9 $c 2>/dev/null
wait $c 2>/dev/null
sleep 1
n=$(find "$T/mod/many" -type f | wc -l)
[ "$n" -gt 0 ] && [ "$n" -lt 10000 ] && pass "cut: $n files arrived before the cut" ||
	fail "cut: $n files arrived (the cut came too early or too late)"
# One digest pass over what arrived, checked against the source (not a cmp per file).
bad=$( (cd "$T/mod/many" && find . -type f -print0 | xargs -0 -r sha1sum) |
	(cd "$T/src/many" && sha1sum -c --quiet 2>/dev/null) | wc -l)
[ "$bad" = 0 ] && pass "cut: every file there is whole" || fail "cut: $bad files differ from their source"
tmp=$(find "$T/mod" -name '.*.rdmacp.*' | wc -l)
[ "$tmp" = 0 ] && pass "cut: no temp file left" || fail "cut: $tmp temp files left"

# ---- 5. packs made by hand ---------------------------------------------------------------
rawpeer_for "$PORT"
head -c 100 /dev/urandom >"$T/pa.bin"
head -c 200 /dev/urandom >"$T/pb.bin"
# mkpack OUT ID1:LEN1 ID2:LEN2 [EXTRA]: pa.bin then pb.bin, EXTRA junk bytes, the table.
mkpack() {
	python3 - "$@" "$T/pa.bin" "$T/pb.bin" <<'EOF2' || die "mkpack"
import struct, sys
out, p1, p2 = sys.argv[1], sys.argv[2], sys.argv[3]
extra = int(sys.argv[4]) if len(sys.argv) > 6 else 0
a, b = open(sys.argv[-2], "rb").read(), open(sys.argv[-1], "rb").read()
body = a + b + b"Z" * extra
for p in (p1, p2):
    i, n = p.split(":")
    body += struct.pack(">II", int(i), int(n))
open(out, "wb").write(body)
EOF2
	stat -c %s "$1"
}
n=$(mkpack "$T/good.pack" 1:100 2:200)
rawpeer_rc 0 "a pack by hand, committed" \
	hello caps=0x3fffff open push data/hand/ dir chunk=65536 lanes ring \
	files 1:pa.bin:100 2:pb.bin:200 ack expect "1=OK" \
	chunk 0 1 0 "$n" "$T/good.pack" did=0 dres=2 \
	"done" 1 100 "$T/pa.bin" "done" 2 200 "$T/pb.bin" \
	result expect "OK" result expect "OK" end wait END bye close
cmp -s "$T/pa.bin" "$T/mod/hand/pa.bin" && cmp -s "$T/pb.bin" "$T/mod/hand/pb.bin" &&
	pass "hand pack: both files committed, identical" || fail "hand pack: files differ or missing"
n=$(mkpack "$T/unknown.pack" 1:100 7:200)
rawpeer_rc 0 "a pack naming a file not in flight" \
	hello caps=0x3fffff open push data/bad1/ dir chunk=65536 lanes ring \
	files 1:pa.bin:100 2:pb.bin:200 ack \
	chunk 0 1 0 "$n" "$T/unknown.pack" did=0 dres=2 \
	wait closed expect-seen "ERROR PROTOCOL" expect closed
n=$(mkpack "$T/short.pack" 1:100 2:200 3)
rawpeer_rc 0 "a pack whose table does not add up" \
	hello caps=0x3fffff open push data/bad2/ dir chunk=65536 lanes ring \
	files 1:pa.bin:100 2:pb.bin:200 ack \
	chunk 0 1 0 "$n" "$T/short.pack" did=0 dres=2 \
	wait closed expect-seen "ERROR PROTOCOL" expect closed
# A file whose table entry is 0 (id 1024) gets its second chunk, a packed slot
# arrives, then its first chunk: a packed slot held at the same time (which names no
# file of its own) is no duplicate of that chunk.
head -c $((128 * KIB)) /dev/urandom >"$T/big.bin"
python3 - "$T/pa.bin" "$T/one.pack" <<'EOF2' || die "one.pack"
import struct, sys
a = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(a + struct.pack(">II", 1023, len(a)))
EOF2
n=$(stat -c %s "$T/one.pack")
rawpeer_rc 0 "a packed slot beside a chunk of the file at table entry 0" \
	hello caps=0x3fffff open push data/entry0/ dir chunk=65536 lanes ring \
	files 1023:pa.bin:100 1024:big.bin:131072 ack expect "1023=OK" \
	chunk 0 1024 65536 65536 "$T/big.bin" chunk 1 0 0 "$n" "$T/one.pack" did=0 dres=1 \
	chunk 2 1024 0 65536 "$T/big.bin" \
	"done" 1023 100 "$T/pa.bin" "done" 1024 131072 "$T/big.bin" \
	result expect "OK" result expect "OK" end wait END bye close
cmp -s "$T/pa.bin" "$T/mod/entry0/pa.bin" && cmp -s "$T/big.bin" "$T/mod/entry0/big.bin" &&
	pass "table entry 0: both files committed, identical" ||
	fail "table entry 0: $(grep -i 'duplicate\|chunk' "$T/d.log" | tail -1)"
for d in bad1 bad2; do
	[ -z "$(find "$T/mod/$d" -type f 2>/dev/null)" ] && pass "$d: nothing committed" ||
		fail "$d: $(find "$T/mod/$d" -type f)"
done
grep -q "packed slot: file id 7 (200 bytes) not one in flight" "$T/d.log" &&
	grep -q "packed slot: bad table of 2 files" "$T/d.log" &&
	pass "daemon log names both refusals" || fail "daemon log: $(grep -i 'packed slot' "$T/d.log")"

finish
