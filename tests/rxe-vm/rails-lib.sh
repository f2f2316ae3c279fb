# SPDX-License-Identifier: MIT
#
# Sourced by rails.sh and rails2.sh (inside the Soft-RoCE VM): the log, the
# checks' verdicts, veth0 brought back with its policy route, and a daemon on
# SERVER (default 10.0.0.2) with a module "data" in a temp dir.
#
# Before sourcing: NAME (the log's prefix), B and OUT (the script's
# arguments), PORT. Gives RDMACP, RDMACPD, SERVER, W, FAILS, DPID and
# rails_daemon.

RDMACP=$B/rdmacp
RDMACPD=$B/rdmacpd
SERVER=${SERVER:-10.0.0.2}
W=$(mktemp -d "/tmp/rdmacp-$NAME.XXXXXX")
FAILS=0
DPID=

mkdir -p "$OUT"
say() { echo "$NAME: $*"; echo "$NAME: $*" >>"$OUT/$NAME.log"; }
pass() { say "ok: $*"; }
# With the daemon's last lines on lanes, transport and failures: CI shows FAIL lines only.
fail() {
	local ctx=
	[ -f "$W/d.log" ] && ctx=$(grep -aiE 'lane|transport|fail|error' "$W/d.log" | tail -3 |
		cut -c1-300 | tr '\n' '|')
	say "FAIL: $*${ctx:+ [daemon: $ctx]}"
	FAILS=$((FAILS + 1))
}
# Taking veth0 down deletes the route through it in table 100: put it back too.
veth0_up() {
	ip link set veth0 up
	ip route replace 10.0.0.2/32 dev veth0 src 10.0.0.1 table 100
}
cleanup() {
	[ -n "$DPID" ] && kill -TERM "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	[ -f "$W/d.log" ] && cp "$W/d.log" "$OUT/${NAME}_daemon.log"
	veth0_up 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

# rails_daemon VERBOSITY [GLOBAL-LINE...]: certificates, the config and the daemon, up.
rails_daemon() {
	local v=$1 l
	shift
	"$RDMACP" certs init "$W/certs" --host "$SERVER" >/dev/null 2>&1 ||
		{ fail "certs init"; exit 1; }
	mkdir -p "$W/mod"
	{
		printf '[global]\nlisten = %s:%s\n' "$SERVER" "$PORT"
		printf 'cert = %s\nkey = %s\nca = %s\n' "$W/certs/server.crt" \
			"$W/certs/server.key" "$W/certs/ca.crt"
		printf 'handshake timeout = 10\nidle timeout = 60\nlanes from other addresses = yes\n'
		for l in "$@"; do echo "$l"; done
		printf '\n[data]\npath = %s\nallow = client\nuid = %s\ngid = %s\n' "$W/mod" \
			"$(id -u)" "$(id -g)"
	} >"$W/d.conf"
	"$RDMACPD" --config "$W/d.conf" "$v" >"$W/d.log" 2>&1 &
	DPID=$!
	for _ in $(seq 1 100); do
		(exec 4<>"/dev/tcp/$SERVER/$PORT") 2>/dev/null && break
		sleep 0.1
	done
}

# flowing NAME: until the push's temp file under the module holds 1 MiB (data flows on
# both lanes: the session, its lanes and the first chunks are past), at most 60 s. On a
# loaded machine the emulated VM takes seconds for a TLS handshake: a fixed sleep could
# take the link down before the lanes exist.
flowing() {
	for _ in $(seq 1 600); do
		[ -n "$(find "$W/mod" -maxdepth 1 -name ".$1.*" -size +1024k 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	say "$1: no data flowing after 60 s"
}
