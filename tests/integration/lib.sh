# Shared helpers for integration tests (sourced, not run).
# Each test: real rdmacpd and rdmacp processes on loopback, real certificates,
# a private temp dir, everything cleaned up on exit. Exit 0 pass, 1 fail,
# 77 skip (with the reason printed).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=${RDMACP_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd

T=$(mktemp -d "${TMPDIR:-/tmp}/rdmacp-it.XXXXXX")
DAEMON_PIDS=()
FAILS=0

# Loop devices a test attached (loop_attach): cleanup detaches them.
LOOPS=()
cleanup() {
	local p
	for p in "${DAEMON_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${DAEMON_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	for p in "${LOOPS[@]}"; do
		losetup -d "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }
die() { echo "FAIL: $*"; exit 1; }

[ -x "$RDMACP" ] && [ -x "$RDMACPD" ] || die "binaries not built in $BUILD_DIR"

# loop_attach FILE: a loop device over FILE (cleanup detaches it); its path in LOOP.
# A machine that cannot attach one skips the test, saying why.
loop_attach() {
	LOOP=$(losetup -f --show "$1" 2>"$T/losetup.err") ||
		skip "losetup: $(cat "$T/losetup.err")"
	LOOPS+=("$LOOP")
}

# block_node PATH DEV: a block device node at PATH for DEV's major:minor.
block_node() {
	local mm
	mm=$(stat -c '%t %T' "$2") || die "stat $2"
	set -- "$1" $mm
	mknod "$1" b $((16#$2)) $((16#$3)) || skip "mknod not possible here"
}

# A free TCP port on 127.0.0.1 (bind-and-release; good enough for tests).
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}

# make_certs DIR: CA, server (localhost/127.0.0.1/::1), client "client".
make_certs() {
	"$RDMACP" certs init "$1" >/dev/null || die "certs init $1"
}

# write_conf FILE PORT CERTDIR [extra global lines...]; modules appended by caller.
write_conf() {
	local file=$1 port=$2 certs=$3
	shift 3
	{
		echo "[global]"
		echo "listen = 127.0.0.1:$port"
		echo "cert = $certs/server.crt"
		echo "key = $certs/server.key"
		echo "ca = $certs/ca.crt"
		local l
		for l in "$@"; do echo "$l"; done
	} >"$file"
}

# start_daemon CONF LOG PORT: start in the background, wait until it listens.
start_daemon() {
	local conf=$1 log=$2 port=$3 i
	"$RDMACPD" --config "$conf" -v >"$log" 2>&1 &
	DAEMON_PID=$!
	DAEMON_PIDS+=("$DAEMON_PID")
	for i in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$log"; die "daemon exited"; }
		sleep 0.05
	done
	cat "$log"
	die "daemon did not listen on $port"
}

# daemon_cipher_title LOG: the AEAD of a daemon's sealed tcp lanes as its logs name it
# ("AES-256-GCM"), from its start line (pinned by "cipher" or measured: auto);
# daemon_cipher LOG: the same as --json names it ("aes-256-gcm").
daemon_cipher_title() { sed -n 's/.*sealed tcp lanes: \([A-Za-z0-9-]*\).*/\1/p' "$1" | head -1; }
daemon_cipher() { daemon_cipher_title "$1" | tr 'A-Z' 'a-z'; }

# daemon_settled LOG: wait (up to 10 s) until every session the daemon logging to LOG
# started has ended. A session logs its "done:" line as it winds down, which can be after
# its client has exited: read that line after this. 0, or 1 if one still runs.
daemon_settled() {
	local i
	for i in $(seq 1 200); do
		[ "$(grep -c ': session [0-9]* from .* started$' "$1")" -le \
			"$(grep -c ': session [0-9]* from .* ended: ' "$1")" ] && return 0
		sleep 0.05
	done
	return 1
}

stop_daemon() {
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# Module sections written by the tests run as root: "uid = root" (and "gid =
# root" when it sets no gid either) after each section header whose section
# sets no uid. Sessions
# of a module without 'uid' run as the unprivileged user rdmacp, which can't
# enter the tests' private (0700, root-owned) temp dirs; t_privs.sh tests
# that default, the other tests test what they are about.
as_root_modules() {
	awk '
		function flush() { if (hdr != "") { print hdr; if (!u) print "uid = root";
			if (!u && !g) print "gid = root"; for (i = 1; i <= n; i++) print body[i] } }
		/^\[/ { flush(); hdr = $0; n = 0; u = g = 0; next }
		hdr == "" { print; next }
		{ body[++n] = $0 }
		/^[ \t]*uid[ \t]*=/ { u = 1 }
		/^[ \t]*gid[ \t]*=/ { g = 1 }
		END { flush() }'
}

# Standard setup: certs in $T/certs, module "data" at $T/mod allowing "client",
# daemon on $PORT. Extra module sections may be passed as lines; every module
# runs as root unless its lines say otherwise (as_root_modules).
setup_standard() {
	PORT=$(free_port)
	make_certs "$T/certs"
	mkdir -p "$T/mod"
	write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
	{
		echo
		echo "[data]"
		echo "path = $T/mod"
		echo "allow = client"
		local l
		for l in "$@"; do echo "$l"; done
	} | as_root_modules >>"$T/d.conf"
	start_daemon "$T/d.conf" "$T/d.log" "$PORT"
	CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
		--ca "$T/certs/ca.crt" -P "$PORT")
}

# start_rawserver ARGS...: a scripted daemon (rawserver.py: --mode, --caps, ...) with the
# test's certificates (RS_CERT: which server certificate, default "server"), output in
# $T/rs.out, its port in $T/rs.port; RS_PID is its pid. Gives up after 5 s.
start_rawserver() {
	rm -f "$T/rs.port"
	python3 "$HERE/rawserver.py" --cert "$T/certs/${RS_CERT:-server}.crt" \
		--key "$T/certs/${RS_CERT:-server}.key" --ca "$T/certs/ca.crt" \
		--port-file "$T/rs.port" --timeout 10 "$@" >"$T/rs.out" 2>&1 &
	RS_PID=$!
	for _ in $(seq 1 100); do
		[ -s "$T/rs.port" ] && return 0
		sleep 0.05
	done
	die "rawserver did not start: $(cat "$T/rs.out")"
}

# old_daemon_refuses CAPS FEATURE DESC ARGS...: rdmacp with ARGS (options and operands)
# against a daemon from before FEATURE (rawserver.py announcing only CAPS) exits 12,
# says the daemon is too old for FEATURE, and never sends OPEN.
old_daemon_refuses() {
	local caps=$1 feature=$2 desc=$3
	shift 3
	start_rawserver --mode error-open --caps "$caps"
	expect_rc 12 "$desc" "$RDMACP" --config /dev/null --cert "$T/certs/client.crt" \
		--key "$T/certs/client.key" --ca "$T/certs/ca.crt" -P "$(cat "$T/rs.port")" \
		--transport tcp "$@"
	kill "$RS_PID" 2>/dev/null
	wait "$RS_PID" 2>/dev/null
	grep -q "too old for $feature" "$T/err" && pass "$desc: says the daemon is too old" ||
		fail "$desc: message: $(cat "$T/err")"
	grep -q "OPEN" "$T/rs.out" && fail "$desc: OPEN was sent to the old daemon" ||
		pass "$desc: no OPEN sent"
}

# expect_same_tree DESC A B: the same names, types and bytes (diff -r, links not followed).
expect_same_tree() {
	if diff -r --no-dereference "$2" "$3" >"$T/diff" 2>&1; then
		pass "$1: identical"
	else
		fail "$1: trees differ: $(head -5 "$T/diff" | tr '\n' ' ')"
	fi
}

# expect_rc WANT DESC CMD...: run, compare the exit status.
expect_rc() {
	local want=$1 desc=$2 rc
	shift 2
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	if [ "$rc" -eq "$want" ]; then
		pass "$desc (exit $rc)"
	else
		fail "$desc: exit $rc, wanted $want"
		sed 's/^/    /' "$T/err" | head -20
	fi
}

# The hostile client (tests/tools/rawpeer.c; rawpeer --help).
RAWPEER_BIN=${RAWPEER_BIN:-$BUILD_DIR/tests/rawpeer}

# rawpeer_for PORT [SECS]: RAWPEER=(...), rawpeer with the client certificate of
# make_certs "$T/certs", for a daemon on PORT, each wait at most SECS (default 10).
rawpeer_for() {
	[ -x "$RAWPEER_BIN" ] || die "rawpeer not built in $BUILD_DIR/tests"
	RAWPEER=("$RAWPEER_BIN" -P "$1" --cert "$T/certs/client.crt" --key "$T/certs/client.key"
		--ca "$T/certs/ca.crt" --timeout "${2:-10}")
}

# rawpeer_rc WANT DESC STEP...: run rawpeer (what it printed in $T/rp.out and
# $T/rp.err), compare its exit status.
rawpeer_rc() {
	local want=$1 desc=$2 rc
	shift 2
	timeout 120 "${RAWPEER[@]}" "$@" >"$T/rp.out" 2>"$T/rp.err"
	rc=$?
	if [ "$rc" -eq "$want" ]; then
		pass "$desc (rawpeer exit $rc)"
	else
		fail "$desc: rawpeer exit $rc, wanted $want"
		sed 's/^/    /' "$T/rp.out" "$T/rp.err" | tail -30
	fi
}

# ---- ASSEMBLE by hand (rdmacp finalize's request, hostile) ----
# asm_hex PATH NAME STAGING SIZE COUNT PART...: an ASSEMBLE payload in hex, parts
# NAME:OFFSET:LEN[:FILE] (the digest: XXH3-128 of FILE, via xxhsum; else zeros),
# COUNT as written (it may lie). ASM_MODE (octal, 0644), ASM_FLAGS, ASM_UID, ASM_GID: the
# request's mode, flags (PROTO_ASM_*), owner.
asm_hex() {
	python3 - "$@" <<'PY'
import os, struct, subprocess, sys
path, name, staging, size, count = sys.argv[1:6]
env = os.environ.get
def s16(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b
out = struct.pack(">I", int(env("ASM_FLAGS", "0"), 0)) + s16(path) + s16(name) + s16(staging)
out += struct.pack(">IqIIIQH", int(env("ASM_MODE", "0644"), 8), 1700000000, 0,
                   int(env("ASM_UID", "0")), int(env("ASM_GID", "0")), int(size), int(count))
digests = {}
for spec in sys.argv[6:]:
    f = spec.split(":")
    digest = bytes(16)
    if len(f) > 3:
        if f[3] not in digests:
            h = subprocess.run(["xxhsum", "-H2", f[3]], capture_output=True, text=True).stdout.split()[0]
            digests[f[3]] = bytes.fromhex(h[-32:])
        digest = digests[f[3]]
    out += s16(f[0]) + struct.pack(">QQ", int(f[1]), int(f[2])) + digest
print(out.hex())
PY
}
# asm WANT CAPS ARGS...: one ASSEMBLE by hand (rawclient.py), its answer against WANT
# (error:CODE or frame:ASSEMBLED); what it printed in $T/rc.out. ASM_PRE: more
# rawclient steps before it (e.g. another ASSEMBLE frame and --recv ASSEMBLED).
asm() {
	local want=$1 caps=$2
	shift 2
	python3 "$HERE/rawclient.py" --port "$PORT" --cert "$T/certs/client.crt" --key "$T/certs/client.key" \
		--ca "$T/certs/ca.crt" --server-name localhost --caps "$caps" --hello \
		${ASM_PRE:-} --frame "type=29,payload=$(asm_hex "$@")" --expect "$want" >"$T/rc.out" 2>&1
}

finish() {
	if [ "$FAILS" -ne 0 ]; then
		echo "$FAILS check(s) failed; daemon log:"
		[ -f "$T/d.log" ] && sed 's/^/    /' "$T/d.log" | tail -40
		exit 1
	fi
	exit 0
}
