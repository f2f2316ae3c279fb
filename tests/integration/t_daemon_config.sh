#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rdmacpd as a process: config errors (exit 2, one "FILE:LINE:" line),
# files that are not configs (devices, FIFOs, too big: refused at once, at
# start and on SIGHUP), --check and its warnings about module paths, SIGTERM
# shutdown (with copies running: drained, or past 'drain timeout' ended with
# the client told, exit 22, and resumed by a --partial re-run), the
# connection caps and the handshake deadline.
# Real certificates (made here with openssl), real sockets on 127.0.0.1.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${RDMACP_BUILD_DIR:-$HERE/../../build}
RDMACPD=$BUILD/rdmacpd
RDMACP=$BUILD/rdmacp

skip() { echo "SKIP: $*"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

[ -x "$RDMACPD" ] || skip "no rdmacpd binary at $RDMACPD (set RDMACP_BUILD_DIR)"
command -v openssl >/dev/null || skip "openssl command not found"
[ -r /proc/net/tcp ] || skip "/proc/net/tcp not readable"

T=$(mktemp -d "${TMPDIR:-/tmp}/t_daemon_config.XXXXXX")
DAEMON_PIDS=()
cleanup() {
	for p in "${DAEMON_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# ---- certificates: a CA and a server certificate it signed ----
make_certs() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$T/ca.key" -out "$T/ca.pem" -subj "/CN=rdmacp test CA" -days 2 \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" || return 1
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$T/server.key" -out "$T/server.csr" -subj "/CN=localhost" || return 1
	cat >"$T/server.ext" <<-EOF
		basicConstraints=critical,CA:FALSE
		keyUsage=critical,digitalSignature
		extendedKeyUsage=serverAuth
		subjectAltName=DNS:localhost,IP:127.0.0.1
	EOF
	openssl x509 -req -in "$T/server.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" \
		-CAcreateserial -out "$T/server.pem" -days 2 -extfile "$T/server.ext" || return 1
	# A client, for the copies that section 3a stops the daemon under.
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$T/client.key" -out "$T/client.csr" -subj "/CN=client" || return 1
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' \
		>"$T/client.ext"
	openssl x509 -req -in "$T/client.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" \
		-CAcreateserial -out "$T/client.pem" -days 2 -extfile "$T/client.ext" || return 1
}
make_certs >"$T/openssl.log" 2>&1 || { cat "$T/openssl.log"; skip "openssl could not make certificates"; }
mkdir -p "$T/data"

# write_conf FILE [extra [global] lines...]
write_conf() {
	local f=$1
	shift
	{
		echo "[global]"
		echo "cert = $T/server.pem"
		echo "key = $T/server.key"
		echo "ca = $T/ca.pem"
		for line in "$@"; do
			echo "$line"
		done
		echo "[data]"
		echo "path = $T/data"
		echo "allow = *"
		echo "uid = root"
		echo "gid = root"
	} >"$f"
}

# ---- 1. a bad config: exit 2 and one line naming FILE:LINE ----
write_conf "$T/bad.conf" "max connections = 4" "lisen = 127.0.0.1"
"$RDMACPD" --config "$T/bad.conf" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -ne 2 ]; then
	fail "bad config: exit $rc, expected 2"
elif [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -qF "$T/bad.conf:6: unknown key 'lisen'" "$T/err"; then
	fail "bad config: expected one line with '$T/bad.conf:6:', got: $(cat "$T/err")"
else
	pass "bad config -> exit 2: $(cat "$T/err")"
fi

# The same through --check, and an error in a module section.
printf '[global]\ncert = %s\nkey = %s\nca = %s\n[data]\npath = relative\n' \
	"$T/server.pem" "$T/server.key" "$T/ca.pem" >"$T/bad2.conf"
"$RDMACPD" --check --config "$T/bad2.conf" 2>"$T/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -qF "$T/bad2.conf:6:" "$T/err"; then
	fail "--check bad module path: exit $rc, stderr: $(cat "$T/err")"
else
	pass "--check bad module path -> exit 2"
fi

"$RDMACPD" --config "$T/no-such.conf" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && pass "missing config file -> exit 2" || fail "missing config file: exit $rc"

"$RDMACPD" --bogus-option >/dev/null 2>&1
rc=$?
[ $rc -eq 1 ] && pass "bad option -> exit 1" || fail "bad option: exit $rc, expected 1"

# ---- 2. --check of a good config ----
write_conf "$T/good.conf" "listen = 127.0.0.1:7471" "max connections = 4"
"$RDMACPD" --check --config "$T/good.conf" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 0 ] && pass "--check good config -> 0" ||
	fail "--check good config: exit $rc: $(cat "$T/err")"

# A key where the certificate should be: readable, so the parser accepts it, but
# the TLS context must not load.
write_conf "$T/badtls.conf"
sed -i "s|^cert = .*|cert = $T/server.key|" "$T/badtls.conf"
"$RDMACPD" --check --config "$T/badtls.conf" 2>"$T/err"
rc=$?
if [ $rc -eq 2 ] && grep -qF "$T/badtls.conf" "$T/err"; then
	pass "unloadable certificate -> exit 2: $(cat "$T/err")"
else
	fail "unloadable certificate: exit $rc, stderr: $(cat "$T/err")"
fi

# ---- 2b. files that are not configs: refused at once (timeout: a hang is a failure) ----
# expect_refused DESC FILE TEXT: --check exits 2 within 10 s with one line naming FILE and TEXT.
expect_refused() {
	local desc=$1 file=$2 text=$3 rc
	timeout 10 "$RDMACPD" --check --config "$file" >"$T/out" 2>"$T/err"
	rc=$?
	if [ $rc -eq 124 ]; then
		fail "$desc: --check still running after 10 s"
	elif [ $rc -ne 2 ] || [ "$(wc -l <"$T/err")" -ne 1 ] ||
		! grep -qF "$file" "$T/err" || ! grep -qF "$text" "$T/err"; then
		fail "$desc: exit $rc, expected 2 and one line with '$text': $(cat "$T/err")"
	else
		pass "$desc -> exit 2: $(cat "$T/err")"
	fi
}
if [ -c /dev/urandom ]; then
	expect_refused "/dev/urandom as config" /dev/urandom "not a regular file (it is a character device)"
fi
mkfifo "$T/fifo.conf"
expect_refused "a FIFO nobody writes to" "$T/fifo.conf" "not a regular file (it is a FIFO)"
expect_refused "a directory" "$T/data" "not a regular file (it is a directory)"
# A valid config padded with comments to 2 MiB: refused for its size alone.
write_conf "$T/big.conf"
head -c $((2 << 20)) /dev/zero | tr '\0' '#' | fold -w 100 >>"$T/big.conf"
expect_refused "a 2 MiB config" "$T/big.conf" "file too big"
# A 100 KiB line: an error naming its line, not a truncated value.
write_conf "$T/longline.conf"
{ printf 'comment = '; head -c $((100 << 10)) /dev/zero | tr '\0' x; echo; } >>"$T/longline.conf"
expect_refused "a 100 KiB line" "$T/longline.conf" "$T/longline.conf:10: line too long"

# ---- 2c. --check warns about modules that export the kernel or the whole host ----
# check_conf NAME MODULE-LINES...: a config of [global] and these lines, then --check.
check_conf() {
	local name=$1
	shift
	{
		echo "[global]"
		echo "cert = $T/server.pem"
		echo "key = $T/server.key"
		echo "ca = $T/ca.pem"
		printf '%s\n' "$@"
	} >"$T/$name.conf"
	timeout 10 "$RDMACPD" --check --config "$T/$name.conf" >"$T/out" 2>"$T/err"
}
# expect_warning DESC TEXT: the last check_conf printed a line with TEXT.
expect_warning() {
	if grep -qF -- "$2" "$T/err"; then
		pass "$1: $(grep -F -- "$2" "$T/err")"
	else
		fail "$1: no warning with '$2': $(cat "$T/err")"
	fi
}
check_conf root "[root]" "path = /" "uid = root"
rc=$?
[ $rc -eq 0 ] || fail "--check path = /: exit $rc, expected 0 (a warning, not an error): $(cat "$T/err")"
expect_warning "--check path = /" "module [root]: path / exports the whole host"

check_conf kernel "[proc]" "path = /proc/" "uid = root" "[sys]" "path = /./sys" "uid = root" \
	"[dev]" "path = /dev" "uid = root"
rc=$?
[ $rc -eq 0 ] || fail "--check /proc, /sys, /dev: exit $rc, expected 0: $(cat "$T/err")"
expect_warning "--check path = /proc/" "module [proc]: path /proc/ is under /proc"
expect_warning "--check path = /./sys" "module [sys]: path /./sys is under /sys"
expect_warning "--check path = /dev" "module [dev]: path /dev is under /dev without 'devices = yes'"

# ".." is resolved (a module path has no symlinks); 'devices = yes' is what /dev is for.
check_conf dotdot "[p]" "path = $T/../../proc" "uid = root" "[d]" "path = /dev" "devices = yes" \
	"uid = root"
rc=$?
[ $rc -eq 0 ] || fail "--check $T/../../proc: exit $rc, expected 0: $(cat "$T/err")"
expect_warning "--check path = $T/../../proc" "module [p]: path $T/../../proc is under /proc"
if grep -qF "module [d]: path /dev" "$T/err"; then
	fail "--check /dev with devices = yes: warned: $(cat "$T/err")"
fi
check_conf plain "[data]" "path = $T/data" "uid = root" "gid = root"
if grep -qE "exports the whole host|is under /(proc|sys|dev)" "$T/err"; then
	fail "--check $T/data: a system-path warning: $(cat "$T/err")"
fi

# ---- helpers for a running daemon ----
port_listening() {
	local hex
	hex=$(printf ':%04X' "$1")
	awk -v p="$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
		END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# start_daemon NAME [extra [global] lines...]: sets PORT, PID, LOG.
start_daemon() {
	local name=$1
	shift
	local try
	for try in 1 2 3 4 5 6 7 8; do
		PORT=$((20000 + RANDOM % 40000))
		port_listening "$PORT" && continue
		write_conf "$T/$name.conf" "listen = 127.0.0.1:$PORT" "$@"
		LOG=$T/$name.log
		"$RDMACPD" --config "$T/$name.conf" 2>"$LOG" &
		PID=$!
		DAEMON_PIDS+=("$PID")
		local i
		for i in $(seq 100); do
			port_listening "$PORT" && return 0
			kill -0 "$PID" 2>/dev/null || break
			sleep 0.05
		done
		wait "$PID" 2>/dev/null
		grep -q "cannot listen" "$LOG" && continue # port taken meanwhile: another one
		echo "daemon did not start: $(cat "$LOG")"
		return 1
	done
	echo "no free port found"
	return 1
}

stop_daemon() {
	kill -TERM "$PID" 2>/dev/null
	wait "$PID"
}

# read_eof FD SECONDS: 0 if the peer closed (EOF or reset) within SECONDS.
read_eof() {
	local line
	read -r -t "$2" -u "$1" line 2>/dev/null
	local rc=$?
	[ $rc -gt 128 ] && return 1 # timeout: still open
	[ $rc -eq 0 ] && return 2   # the daemon sent a line: not expected from a silent TLS server
	return 0
}

# ---- 3. SIGTERM: exit 0, port closed ----
if start_daemon sigterm; then
	# stderr is a file, not the journal: timestamped lines (t_log_time.sh has both cases).
	if ! grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+[+-][0-9]{2}:[0-9]{2} rdmacpd\[[0-9]+\] ' "$LOG"; then
		fail "daemon log lines lack the timestamp prefix: $(cat "$LOG")"
	fi
	stop_daemon
	rc=$?
	if [ $rc -ne 0 ]; then
		fail "SIGTERM: exit $rc, expected 0; log: $(cat "$LOG")"
	elif port_listening "$PORT"; then
		fail "SIGTERM: port $PORT still listening"
	else
		pass "SIGTERM -> exit 0, port closed"
	fi
else
	fail "SIGTERM: could not start the daemon"
fi

# ---- 3a. SIGTERM with copies running: the drain, its 'drain timeout', the client told ----
# client ARGS...: rdmacp with the test's client certificate, to the daemon on $PORT.
client() {
	"$RDMACP" --config /dev/null --cert "$T/client.pem" --key "$T/client.key" --ca "$T/ca.pem" \
		-P "$PORT" --transport tcp "$@"
}
# stop_timed: SIGTERM the daemon, wait for it; its exit status in DRC, how long it took in MS.
stop_timed() {
	local t0
	t0=$(now_ms)
	kill -TERM "$PID" 2>/dev/null
	wait "$PID"
	DRC=$?
	MS=$(($(now_ms) - t0))
}
if [ ! -x "$RDMACP" ]; then
	fail "no rdmacp binary at $RDMACP: the copies under SIGTERM were not tried"
else
	head -c $((2 << 20)) /dev/urandom >"$T/small"
	head -c $((24 << 20)) /dev/urandom >"$T/big"

	# A copy that ends within the drain ends well (exit 0), and the daemon stops after it.
	if start_daemon drain "drain timeout = 30s"; then
		client -q --bwlimit 2M "$T/small" 127.0.0.1:data/drained/ >"$T/c.out" 2>"$T/c.err" &
		cpid=$!
		sleep 0.4
		stop_timed
		wait "$cpid"
		rc=$?
		if [ "$rc" -ne 0 ] || ! cmp -s "$T/small" "$T/data/drained/small"; then
			fail "SIGTERM, a copy that ends within the drain: exit $rc: $(cat "$T/c.err")"
		elif [ $DRC -ne 0 ] || [ $MS -gt 10000 ]; then
			fail "SIGTERM, drained: daemon exit $DRC after $MS ms: $(cat "$LOG")"
		else
			pass "SIGTERM with a copy running: the copy finished (exit 0), the daemon stopped after $MS ms"
		fi
		grep -q "letting them finish for up to 30 s" "$LOG" ||
			fail "SIGTERM, drained: the log does not give the drain timeout: $(cat "$LOG")"
	else
		fail "drain: could not start the daemon"
	fi

	# 'drain timeout = 1': a long copy is ended a second after SIGTERM, and its client
	# says that the daemon is going away (exit 22, not 10: that is a local Ctrl-C).
	if start_daemon cut "drain timeout = 1"; then
		client --partial --bwlimit 4M "$T/big" 127.0.0.1:data/cut/ >"$T/c.out" 2>"$T/c.err" &
		cpid=$!
		sleep 1.5
		stop_timed
		wait "$cpid"
		rc=$?
		[ "$rc" -eq 22 ] && pass "SIGTERM past the drain timeout: the client exits 22" ||
			fail "SIGTERM past the drain timeout: client exit $rc, wanted 22: $(cat "$T/c.err")"
		if grep -q "the daemon on 127.0.0.1 is shutting down (stopped or restarting)" "$T/c.err" &&
			grep -q -- "--partial resumes" "$T/c.err"; then
			pass "the client says the daemon is shutting down and that --partial resumes"
		else
			fail "the client's message: $(cat "$T/c.err")"
		fi
		grep -q "interrupted" "$T/c.err" &&
			fail "the client calls it an interruption: $(cat "$T/c.err")"
		if [ $DRC -ne 0 ] || [ $MS -lt 800 ] || [ $MS -gt 8000 ]; then
			fail "drain timeout = 1: daemon exit $DRC after $MS ms (about 1 s wanted): $(cat "$LOG")"
		else
			pass "drain timeout = 1: the daemon ended the session and exited 0 after $MS ms"
		fi
		grep -q "still running after the drain, ending them" "$LOG" ||
			fail "drain timeout = 1: no 'ending them' in the log: $(cat "$LOG")"
		[ -e "$T/data/cut/big" ] && fail "drain timeout = 1: a file under the final name"
		# The daemon back: the same command resumes.
		if start_daemon resume; then
			client --partial -v "$T/big" 127.0.0.1:data/cut/ >"$T/c.out" 2>"$T/c.err"
			rc=$?
			if [ $rc -ne 0 ] || ! cmp -s "$T/big" "$T/data/cut/big"; then
				fail "the re-run after the stop: exit $rc: $(cat "$T/c.err")"
			elif ! grep -qi "resumed" "$T/c.out" "$T/c.err"; then
				fail "the re-run after the stop: not resumed: $(cat "$T/c.out" "$T/c.err")"
			else
				pass "the --partial re-run resumed the cut copy"
			fi
			stop_daemon || fail "resume: daemon exit $?: $(cat "$LOG")"
		else
			fail "resume: could not start the daemon"
		fi
	else
		fail "drain timeout = 1: could not start the daemon"
	fi
fi

# 'drain timeout' values: a duration, 0 to 1h.
for v in 0 1500ms 45 2m 1h; do
	write_conf "$T/drain.conf" "drain timeout = $v"
	"$RDMACPD" --check --config "$T/drain.conf" >"$T/out" 2>"$T/err" ||
		fail "drain timeout = $v refused: $(cat "$T/err")"
done
for v in 5x -1 61m ""; do
	write_conf "$T/drain.conf" "drain timeout = $v"
	"$RDMACPD" --check --config "$T/drain.conf" >"$T/out" 2>"$T/err"
	rc=$?
	if [ $rc -ne 2 ] || ! grep -qF "$T/drain.conf:5: bad 'drain timeout' value" "$T/err"; then
		fail "drain timeout = '$v': exit $rc, wanted 2 and the line named: $(cat "$T/err")"
	fi
done
pass "drain timeout: 0 to 1h taken, other values refused with the line named"

# ---- 3b. SIGHUP with the config replaced by a FIFO, then a 2 MiB file: the old one stays ----
if start_daemon reload; then
	cp "$T/reload.conf" "$T/reload.good"
	stuck=0
	for bad in fifo big; do
		rm -f "$T/reload.conf"
		if [ $bad = fifo ]; then
			mkfifo "$T/reload.conf"
		else
			cp "$T/big.conf" "$T/reload.conf"
		fi
		before=$(grep -c "reload failed" "$LOG")
		kill -HUP "$PID"
		for i in $(seq 100); do
			[ "$(grep -c "reload failed" "$LOG")" -gt "$before" ] && break
			sleep 0.05
		done
		if [ "$(grep -c "reload failed" "$LOG")" -le "$before" ]; then
			# Blocked in the open of a FIFO, it would not see SIGTERM either.
			fail "reload with a $bad config: no 'reload failed' after 5 s: $(cat "$LOG")"
			stuck=1
			break
		elif ! kill -0 "$PID" 2>/dev/null || ! port_listening "$PORT"; then
			fail "reload with a $bad config: the daemon stopped listening: $(cat "$LOG")"
		else
			pass "reload with a $bad config: refused, old configuration kept"
		fi
	done
	if [ $stuck -eq 1 ]; then
		kill -KILL "$PID" 2>/dev/null
		wait "$PID" 2>/dev/null
	else
		# Back to a good file: the daemon reloads it, so the bad ones left nothing behind.
		# Its new module exports /proc: a reload runs no --check, so it warns itself.
		rm -f "$T/reload.conf"
		cp "$T/reload.good" "$T/reload.conf"
		printf '[proc]\npath = /proc\nuid = root\n' >>"$T/reload.conf"
		kill -HUP "$PID"
		for i in $(seq 100); do
			grep -q "reloaded $T/reload.conf" "$LOG" && break
			sleep 0.05
		done
		if ! grep -q "reloaded $T/reload.conf" "$LOG"; then
			fail "reload of the good config after the bad ones: not reloaded: $(cat "$LOG")"
		elif ! grep -q "warning: module \[proc\]: path /proc is under /proc" "$LOG"; then
			fail "reload with a /proc module: no warning logged: $(cat "$LOG")"
		else
			pass "reload with a /proc module: reloaded, warning logged"
		fi
		stop_daemon || fail "reload: daemon exit $?: $(cat "$LOG")"
	fi
else
	fail "reload: could not start the daemon"
fi

# ---- 4. max connections = 1: a second connection is closed at once ----
if start_daemon maxconn "max connections = 1" "handshake timeout = 30"; then
	exec 3<>"/dev/tcp/127.0.0.1/$PORT"
	# The first is held in the TLS handshake (it sends nothing).
	if read_eof 3 1; then
		fail "max connections: the first connection was closed too; serve_connection still the placeholder?"
	else
		t0=$(now_ms)
		exec 4<>"/dev/tcp/127.0.0.1/$PORT"
		if read_eof 4 3; then
			pass "max connections: second connection closed after $(($(now_ms) - t0)) ms"
		else
			fail "max connections: second connection still open after 3 s"
		fi
		exec 4<&-
		grep -q "refusing connection from 127.0.0.1:.*max connections" "$LOG" ||
			fail "max connections: no notice logged: $(cat "$LOG")"
	fi
	exec 3<&-
	stop_daemon || fail "max connections: daemon exit $?: $(cat "$LOG")"
else
	fail "max connections: could not start the daemon"
fi

# ---- 5. max connections per host = 1 ----
if start_daemon perhost "max connections = 8" "max connections per host = 1" "handshake timeout = 30"; then
	exec 3<>"/dev/tcp/127.0.0.1/$PORT"
	if read_eof 3 1; then
		fail "per host: the first connection was closed too; serve_connection still the placeholder?"
	else
		exec 4<>"/dev/tcp/127.0.0.1/$PORT"
		if read_eof 4 3; then
			pass "max connections per host: second connection closed"
		else
			fail "max connections per host: second connection still open after 3 s"
		fi
		exec 4<&-
		grep -q "per host" "$LOG" || fail "per host: no notice logged: $(cat "$LOG")"
	fi
	exec 3<&-
	stop_daemon || fail "per host: daemon exit $?: $(cat "$LOG")"
else
	fail "per host: could not start the daemon"
fi

# ---- 6. handshake timeout = 1: a silent connection is dropped in ~1 s ----
if start_daemon handshake "handshake timeout = 1"; then
	t0=$(now_ms)
	exec 3<>"/dev/tcp/127.0.0.1/$PORT"
	if read_eof 3 5; then
		elapsed=$(($(now_ms) - t0))
		if [ $elapsed -lt 500 ]; then
			fail "handshake deadline: closed after $elapsed ms, before the deadline (serve_connection still the placeholder?)"
		elif [ $elapsed -gt 3500 ]; then
			fail "handshake deadline: closed only after $elapsed ms"
		else
			pass "handshake deadline: silent connection closed after $elapsed ms"
		fi
	else
		fail "handshake deadline: silent connection still open after 5 s"
	fi
	exec 3<&-
	stop_daemon || fail "handshake: daemon exit $?: $(cat "$LOG")"
else
	fail "handshake: could not start the daemon"
fi

if [ $failures -gt 0 ]; then
	echo "$failures failure(s)"
	exit 1
fi
echo "all passed"
exit 0
