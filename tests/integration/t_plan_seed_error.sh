#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The client's side of an ASSEMBLE SEED that the daemon answers with an
# error (issue 32; the daemon's side is t_plan_split.sh's section 7). The
# module's sessions run as nobody, and the destination's old copy of a
# split file is root's, mode 0600: the daemon knows SEED, and answers ERROR
# (it can't read the old copy). A split file (3 ranges over 2 shards)
# migrated, then changed in 2 blocks and planned again with --delta:
#   1. each shard's run exits 0 and warns exactly once that the old copies
#      of the file's ranges were not made, naming the host, the file and
#      the daemon's reason (Permission denied);
#   2. the ranges go whole: the runs' bytes add up to the file's size;
#   3. finalize assembles the file, byte-exact, and no staging directory is
#      left.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root: the module's sessions switch to the user nobody"
getent passwd nobody >/dev/null || skip "no user nobody"
command -v jq >/dev/null || skip "jq not installed"
HOST=127.0.0.1
MIB=$((1 << 20))
SIZE=$((24 * MIB))

PORT=$(free_port)
make_certs "$T/certs"
# The sessions run as nobody: it must reach the module directory.
chmod 0755 "$T"
M=$T/seedless
mkdir -p "$M" "$T/plans" "$T/src/split"
chown nobody "$M"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
printf '\n[seedless]\npath = %s\nallow = client\nuid = nobody\n' "$M" >>"$T/d.conf"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")

SP=$T/src/split
SD=$M/dst/split
head -c $SIZE /dev/urandom >"$SP/huge" || die "random"
echo x >"$SP/small"

# split_runs NAME [OPTIONS]: a plan of the split tree (8 MiB ranges, 2 shards), both run, finalized.
split_runs() {
	local p=$T/plans/$1 i
	shift
	expect_rc 0 "plan $(basename "$p")" "${CLIENT[@]}" plan -r --split-size 8M --shards 2 "$@" \
		"$SP" "$HOST:seedless/dst" -o "$p"
	for i in 0 1; do
		expect_rc 0 "$(basename "$p") shard $i" "${CLIENT[@]}" --json run "$p" --shard "$i/2"
		cp "$T/out" "$p.out$i"
		cp "$T/err" "$p.err$i"
	done
	expect_rc 0 "$(basename "$p") finalize" "${CLIENT[@]}" finalize "$p"
}

split_runs s1
cmp -s "$SP/huge" "$SD/huge" && pass "first migration: identical" || fail "first migration: differs"

# The old copy: there, but not for the module's user to read.
chown root:root "$SD/huge"
chmod 0600 "$SD/huge"
for m in 2 12; do
	dd if=/dev/urandom of="$SP/huge" bs=4096 count=1 seek=$((m * 256 + 3)) conv=notrunc \
		status=none || die "dd"
done
split_runs s2 --delta

# ---- 1. one warning per shard, with the daemon's reason ----
for i in 0 1; do
	n=$(grep -c "old copies of .*huge's ranges not made (--delta sends them whole)" \
		"$T/plans/s2.err$i")
	[ "$n" = 1 ] && pass "shard $i: warned once that the old copies were not made" ||
		fail "shard $i: $n warnings: $(cat "$T/plans/s2.err$i")"
	grep "ranges not made" "$T/plans/s2.err$i" | grep -q "^.*$HOST.*Permission denied" &&
		pass "shard $i: the warning names the host and the daemon's reason" ||
		fail "shard $i: $(cat "$T/plans/s2.err$i")"
	! grep -q "can't make old copies" "$T/plans/s2.err$i" &&
		pass "shard $i: not taken for a daemon without SEED" ||
		fail "shard $i: $(cat "$T/plans/s2.err$i")"
done
grep -q "old copies of the parts of .*Permission denied" "$T/d.log" &&
	pass "daemon: refused the SEED (its log says why)" || fail "daemon log: $(grep -i seed "$T/d.log")"

# ---- 2. the ranges sent whole ----
sent=$(cat "$T"/plans/s2.out* | jq -s '[.[] | select(.event == "summary") | .bytes] | add')
[ "$sent" = "$SIZE" ] && pass "the file's ranges sent whole ($sent bytes)" ||
	fail "the runs sent $sent bytes, not $SIZE"

# ---- 3. finalize ----
cmp -s "$SP/huge" "$SD/huge" && pass "identical after finalize" || fail "differs after finalize"
! ls -d "$SD"/.rdmacp-split.* "$M"/dst/.rdmacp-split.* >/dev/null 2>&1 &&
	pass "no staging directory left" ||
	fail "staging left: $(ls -d "$SD"/.rdmacp-split.* "$M"/dst/.rdmacp-split.* 2>&1)"
finish
