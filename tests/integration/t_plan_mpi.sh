#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A sharded migration launched by MPI: a plan of 4 shards over two daemons
# (127.0.0.1 and 127.0.0.2, one storage behind both, as data movers in
# front of a parallel file system), `mpirun -np 4 rdmacp run PLAN --shard
# auto` (each rank takes its shard from OMPI_COMM_WORLD_RANK/SIZE), then
# finalize: every rank exits 0, both daemons served shards, the trees are
# identical; `report --json` says complete.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed: Open MPI's mpirun absent).
. "$(dirname "$0")/lib.sh"

command -v mpirun >/dev/null || skip "mpirun (openmpi-bin) not installed"
command -v jq >/dev/null || skip "jq not installed"
mpirun --version 2>/dev/null | grep -qi "open mpi" || skip "mpirun is not Open MPI's"
ip -4 addr show lo 2>/dev/null | grep -q "127.0.0.1/8" || skip "no 127.0.0.0/8 on lo"

"$RDMACP" certs init "$T/certs" --host 127.0.0.2 >/dev/null || die "certs init"
mkdir -p "$T/mod"
PORT=$(free_port)
for n in 1 2; do
	write_conf "$T/d$n.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
	sed -i "s/^listen = .*/listen = 127.0.0.$n:$PORT/" "$T/d$n.conf"
	printf '\n[data]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/mod" >>"$T/d$n.conf"
	"$RDMACPD" --config "$T/d$n.conf" -v >"$T/d$n.log" 2>&1 &
	DAEMON_PIDS+=($!)
done
for n in 1 2; do
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.$n/$PORT") 2>/dev/null && break
		sleep 0.05
	done
done
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")

S=$T/src/tree
mkdir -p "$S/x/y" "$S/z"
for i in $(seq 1 30); do head -c $((i * 3001)) /dev/urandom >"$S/x/f$i"; done
for i in $(seq 1 10); do echo "$i" >"$S/x/y/g$i"; done
head -c 1500000 /dev/urandom >"$S/z/big"
P=$T/tree.plan
expect_rc 0 "plan -a --shards 4 to two daemons" \
	"${CLIENT[@]}" plan -a --shards 4 "$S" "127.0.0.1,127.0.0.2:data/dst" -o "$P"
[ "$(head -1 "$P" | jq -r .hosts)" = "127.0.0.1,127.0.0.2" ] && pass "the plan names both hosts" ||
	fail "hosts: $(head -1 "$P" | jq -r .hosts)"

timeout 120 mpirun --allow-run-as-root --oversubscribe -np 4 \
	"${CLIENT[@]}" -q run "$P" --shard auto >"$T/mpi.out" 2>"$T/mpi.err"
rc=$?
[ "$rc" -eq 0 ] && pass "mpirun -np 4 rdmacp run --shard auto: exit 0" ||
	fail "mpirun: exit $rc: $(tail -5 "$T/mpi.err" | tr '\n' '|')"
for i in 0 1 2 3; do
	[ "$(head -1 "$P.journal.$i" 2>/dev/null | jq -r .shard)" = "$i" ] || fail "no journal of shard $i"
done
n1=$(grep -c "push to data done" "$T/d1.log")
n2=$(grep -c "push to data done" "$T/d2.log")
[ "$n1" -ge 1 ] && [ "$n2" -ge 1 ] && pass "both daemons served shards ($n1 and $n2 pushes)" ||
	fail "pushes per daemon: $n1 and $n2"
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P"
diff -r "$S" "$T/mod/dst/tree" >/dev/null && pass "trees identical" || fail "trees differ"
"${CLIENT[@]}" report --json "$P" >"$T/rep.json"
[ "$(jq -r 'select(.event == "report") | .complete' "$T/rep.json")" = true ] && pass "report: complete" ||
	fail "report: $(head -1 "$T/rep.json")"
finish
