#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rdmacp doctor on this host: human output and exit 0 (a host without an RDMA
# device is a warning: "no RDMA devices", tcp still works); --json is one
# object that jq parses, with devices == [] (when the host has none) and
# io_uring ok; with RLIMIT_MEMLOCK at 64 KiB and CAP_IPC_LOCK dropped it names
# the memlock problem with its fix and exits 6. The run with real devices
# (rxe0/rxe1 ACTIVE, RoCE v2 GIDs) is in t_verbs_vm.sh (tests/rxe-vm/e2e.sh).
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed (apt-get install jq)"

# ---- 1. human output ----------------------------------------------------------
expect_rc 0 "doctor" "$RDMACP" --config /dev/null doctor
cp "$T/out" "$T/human"
has_devices=0
if grep -q "^RDMA devices: none" "$T/human"; then
	if grep -q "no RDMA devices (" "$T/human" && grep -q "fix: load the driver" "$T/human"; then
		pass "doctor: says \"no RDMA devices\" with the reason and the fix"
	else
		fail "doctor: no-device warning or its fix missing: $(head -3 "$T/human")"
	fi
	grep -q "ready: tcp (verbs unavailable)" "$T/human" &&
		pass "doctor: ready for tcp, verbs unavailable" ||
		fail "doctor: no 'ready: tcp (verbs unavailable)' line"
else
	has_devices=1
	echo "note: this host has RDMA devices; the no-device checks do not apply"
fi
for w in "memlock:" "io_uring:" "huge pages:"; do
	grep -q "^$w" "$T/human" && pass "doctor: reports $w" || fail "doctor: no '$w' line"
done

# ---- 2. --json (both spellings: after the subcommand, and as a global option) -----
for form in "doctor --json" "--json doctor"; do
	# shellcheck disable=SC2086
	"$RDMACP" --config /dev/null $form >"$T/json" 2>"$T/err"
	rc=$?
	[ "$rc" -eq 0 ] && pass "rdmacp $form: exit 0" || fail "rdmacp $form: exit $rc"
	if ! jq -e . "$T/json" >/dev/null 2>&1; then
		fail "rdmacp $form: not JSON: $(head -c 200 "$T/json")"
		continue
	fi
	[ "$(wc -l <"$T/json")" -eq 1 ] && pass "rdmacp $form: one JSON object" ||
		fail "rdmacp $form: more than one line"
	jq -e '.io_uring.ok == true and .memlock.ok == true and .ok == true and
	       (.problems | type == "array") and (.hugepages | has("total", "free", "size_kb", "thp"))' \
		"$T/json" >/dev/null && pass "rdmacp $form: io_uring ok, memlock ok, fields present" ||
		fail "rdmacp $form: $(jq -c '{io_uring, memlock, ok}' "$T/json")"
	if [ "$has_devices" -eq 0 ]; then
		jq -e '.devices == [] and .verbs.available == false and
		       any(.problems[]; .severity == "warning" and (.what | startswith("no RDMA devices")) and
			   (.fix | length > 0))' "$T/json" >/dev/null &&
			pass "rdmacp $form: devices == [], verbs unavailable as a warning with a fix" ||
			fail "rdmacp $form: devices/warning wrong: $(jq -c '{devices, verbs, problems}' "$T/json")"
	fi
done
expect_rc 1 "doctor with a stray argument is a usage error" "$RDMACP" --config /dev/null doctor bogus

# Verbs pins the pool once for io_uring and once per device: two rails need 3/2 of one.
one=$("$RDMACP" --config /dev/null doctor --json 2>/dev/null | jq -r .memlock.need)
two=$("$RDMACP" --config /dev/null --devices dev0,dev1 doctor --json 2>/dev/null | jq -r .memlock.need)
[ -n "$one" ] && [ "$one" -gt 0 ] && [ $((two * 2)) -eq $((one * 3)) ] &&
	pass "memlock need: one device $one, two devices $two (the pool x2, x3)" ||
	fail "memlock need: one device $one, two devices $two"


# ---- 3. memlock too small, no CAP_IPC_LOCK -> the problem, its fix, exit 6 ---------
if ! command -v capsh >/dev/null; then
	echo "SKIP (part): capsh not installed (apt-get install libcap2-bin): memlock check not run"
elif ! capsh --drop=cap_ipc_lock -- -c 'ulimit -l 64' 2>/dev/null; then
	echo "SKIP (part): cannot drop CAP_IPC_LOCK or lower RLIMIT_MEMLOCK here: memlock check not run"
else
	capsh --drop=cap_ipc_lock -- -c "ulimit -l 64 && exec '$RDMACP' --config /dev/null doctor" \
		>"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" -eq 6 ] && pass "memlock 64 KiB without CAP_IPC_LOCK: exit 6" ||
		fail "memlock 64 KiB without CAP_IPC_LOCK: exit $rc, wanted 6"
	if grep -q "^ERROR: pool needs .* RLIMIT_MEMLOCK is 64 KiB, and no CAP_IPC_LOCK" "$T/out" &&
		grep -q "fix: raise RLIMIT_MEMLOCK with 'ulimit -l unlimited'" "$T/out"; then
		pass "memlock problem reported with its fix"
	else
		fail "memlock problem or fix missing:"
		sed 's/^/    /' "$T/out"
	fi
	grep -q "^NOT ready" "$T/out" && pass "doctor says NOT ready" || fail "no NOT ready line"
	capsh --drop=cap_ipc_lock -- -c "ulimit -l 64 && exec '$RDMACP' --config /dev/null doctor --json" \
		>"$T/json" 2>"$T/err"
	jq -e '.memlock.ok == false and .memlock.cap_ipc_lock == false and .memlock.limit == 65536 and
	       .ok == false and any(.problems[]; .severity == "error" and
		   (.what | test("RLIMIT_MEMLOCK")) and (.fix | test("ulimit -l unlimited")))' \
		"$T/json" >/dev/null && pass "memlock problem in --json" ||
		fail "memlock problem not in --json: $(jq -c '{memlock, problems}' "$T/json" 2>&1)"
	# The verdict matches what a transfer meets: the same limits make a real push fail.
	setup_standard
	head -c 100000 /dev/urandom >"$T/f"
	capsh --drop=cap_ipc_lock -- -c "ulimit -l 64 && exec $(printf '%q ' "${CLIENT[@]}") -q \
		--transport tcp '$T/f' 127.0.0.1:data/" >"$T/out" 2>"$T/err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		pass "a real push under the same limits fails too (exit $rc: $(head -1 "$T/err"))"
	else
		fail "a real push under memlock 64 KiB without CAP_IPC_LOCK succeeded: doctor is too strict"
	fi
fi

finish
