#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Nested modules (issue 8 item 7, SECURITY.md G42). [pub] at mods/ and
# [alicemod] at mods/alice: before the fix the daemon started and served
# pub/alice/secret to a client that [alicemod] refuses, and pushed through
# pub/ro/ into a read-only module. Now overlapping module paths are a config
# error: FILE:LINE, exit 2, at startup, with --check and on SIGHUP (which
# keeps the old configuration). Paths are compared canonically (trailing
# slashes, "//", ".") and by their real paths (symlinks).
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
source "$(dirname "$0")/lib.sh"

PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mods/alice" "$T/mods/ro" "$T/other" "$T/pulled"
echo "alice's secret" >"$T/mods/alice/secret"
ln -s "$T/mods/alice" "$T/alice-link"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")

# nested_conf FILE OUTER_PATH INNER_PATH: [pub] allows "client"; [alicemod]
# allows only "alice", [ro] is read only.
nested_conf() {
	write_conf "$1" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
	cat >>"$1" <<-EOF

		[pub]
		path = $2
		allow = client
		uid = root
		gid = root

		[alicemod]
		path = $3
		allow = alice
		uid = root
		gid = root
	EOF
}

# ---- 1. the attack: the daemon must not start with nested modules ----
nested_conf "$T/nested.conf" "$T/mods" "$T/mods/alice"
# Line of [alicemod]'s path in the file: the error must name it.
inner_line=$(grep -n "^path = $T/mods/alice\$" "$T/nested.conf" | cut -d: -f1)
timeout 10 "$RDMACPD" --config "$T/nested.conf" >"$T/nested.log" 2>&1 &
dpid=$!
DAEMON_PIDS+=("$dpid")
started=0
for _ in $(seq 1 60); do
	kill -0 "$dpid" 2>/dev/null || break
	if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
		started=1
		break
	fi
	sleep 0.05
done
if [ "$started" -eq 1 ]; then
	# Old behaviour: it serves. Show what that means, then fail.
	"${CLIENT[@]}" -q 127.0.0.1:pub/alice/secret "$T/pulled/secret" >/dev/null 2>&1
	if cmp -s "$T/mods/alice/secret" "$T/pulled/secret"; then
		fail "daemon started with nested modules and served pub/alice/secret to a client [alicemod] refuses"
	else
		fail "daemon started with nested modules"
	fi
	kill -TERM "$dpid" 2>/dev/null
	wait "$dpid" 2>/dev/null
else
	wait "$dpid"
	rc=$?
	if [ "$rc" -eq 2 ] && grep -qF "$T/nested.conf:$inner_line: module [alicemod]" "$T/nested.log" &&
		grep -q "overlaps module \[pub\]" "$T/nested.log"; then
		pass "nested modules -> exit 2: $(head -1 "$T/nested.log")"
	else
		fail "nested modules: exit $rc, wanted 2 and '$T/nested.conf:$inner_line:'; log: $(cat "$T/nested.log")"
	fi
fi
[ -e "$T/pulled/secret" ] && fail "pub/alice/secret was served"

# ---- 2. --check, and spellings that hide the overlap ----
check_overlap() {
	local desc=$1 outer=$2 inner=$3
	local want=${4:-"module \[alicemod\] .* overlaps module \[pub\]"}
	nested_conf "$T/c.conf" "$outer" "$inner"
	"$RDMACPD" --check --config "$T/c.conf" >"$T/out" 2>"$T/err"
	local rc=$?
	if [ "$rc" -eq 2 ] && grep -q "^rdmacpd: $T/c.conf:[0-9]*: $want" "$T/err"; then
		pass "--check $desc -> exit 2"
	else
		fail "--check $desc: exit $rc, stderr: $(cat "$T/err")"
	fi
}
check_overlap "inner module below outer" "$T/mods" "$T/mods/alice"
check_overlap "outer module listed second" "$T/mods/alice" "$T/mods"
check_overlap "same directory twice" "$T/mods" "$T/mods/"
check_overlap "'//', '.' and trailing slashes" "$T//mods/./" "$T/mods//alice/."
# No module path may hold a symlink (G41), so this one is refused for that.
check_overlap "a symlink into the outer module" "$T/mods" "$T/alice-link" \
	"module path $T/alice-link has a symlink in it"
check_overlap "'..' into the outer module" "$T/mods" "$T/other/../mods/ro"
check_overlap "the root directory" "/" "$T/other"

# Siblings and a name that merely starts like the other's are fine.
nested_conf "$T/ok.conf" "$T/mods/alice" "$T/mods/ro"
expect_rc 0 "--check sibling modules" "$RDMACPD" --check --config "$T/ok.conf"
mkdir -p "$T/mods-more"
nested_conf "$T/ok2.conf" "$T/mods" "$T/mods-more"
expect_rc 0 "--check '$T/mods' next to '$T/mods-more'" "$RDMACPD" --check --config "$T/ok2.conf"

# ---- 3. SIGHUP with a nested config keeps the old one ----
nested_conf "$T/d.conf" "$T/mods/ro" "$T/mods/alice"
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
nested_conf "$T/d.conf" "$T/mods" "$T/mods/alice"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 50); do
	grep -q "keeping the old configuration" "$T/d.log" && break
	sleep 0.1
done
if grep -q "d.conf:[0-9]*: module \[alicemod\] .* overlaps" "$T/d.log" &&
	grep -q "keeping the old configuration" "$T/d.log"; then
	pass "SIGHUP with nested modules: error logged, old configuration kept"
else
	fail "SIGHUP with nested modules: log: $(cat "$T/d.log")"
fi
# The old config has no module at mods/, so pub/alice/secret does not exist.
expect_rc 5 "after the failed reload, pub/alice/secret is not served" \
	"${CLIENT[@]}" -q 127.0.0.1:pub/alice/secret "$T/pulled/secret2"
[ -e "$T/pulled/secret2" ] && fail "pub/alice/secret was served after SIGHUP"
kill -0 "$DAEMON_PID" 2>/dev/null && pass "daemon still running" || fail "daemon died on SIGHUP"

finish
