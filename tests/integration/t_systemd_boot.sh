#!/bin/bash
# The Debian package under a real, booted systemd: a Debian container made by
# debootstrap and booted with systemd-nspawn (its own network namespace, so
# port 7471 is its own), in which
#  (1) the package built by "cpack -G DEB" installs with apt;
#  (2) "systemctl enable --now rdmacpd.socket" listens, and a copy from this
#      machine's client into the container starts rdmacpd (socket activation);
#  (3) MemoryMax= and TasksMax= of the shipped unit are in force (systemctl
#      show, and the service's cgroup files);
#  (4) "systemctl reload" with a good config applies it (a new module), with a
#      bad one logs "FILE:LINE: problem" and keeps the daemon running, same
#      process, with the old config;
#  (5) the watchdog: with WatchdogSec=3s the daemon lives on (it pings); made
#      to hang (RDMACPD_TEST_HANG_ON_HUP, a hook for tests alone) it is
#      killed and restarted by systemd;
#  (6) the hardening holds: a module outside ReadWritePaths= cannot be
#      written ("Read-only file system"), and "systemd-analyze security
#      rdmacpd" rates the running service at most the score rdmacpd(8) gives;
#  (7) "systemctl stop" with a copy running drains it and the client exits 22
#      (the daemon is shutting down; rerun with --partial resumes);
#  (8) journalctl -u rdmacpd has the session lines at info and errors at err.
#
# Needs root, debootstrap, systemd-nspawn (systemd-container), nsenter, cpack
# and the Debian mirror of /etc/apt/sources.list*; skips where it cannot boot.
# The debootstrapped root is kept under RDMACP_BOOT_CACHE (default
# /var/cache/rdmacp-tests): a first run makes it (a few minutes), later runs
# boot a copy-on-write overlay of it in seconds. Nothing is installed on this
# machine itself.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "not root: booting a container needs root"
for c in debootstrap systemd-nspawn nsenter cpack dpkg-deb flock mount; do
	command -v "$c" >/dev/null || skip "$c not installed (apt-get install debootstrap systemd-container)"
done
# A sanitizer build's package needs the sanitizer runtimes in the container
# (and a second root); the normal build's package is the one shipped.
grep -Eq '^ENABLE_(ASAN|UBSAN):BOOL=ON' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null &&
	skip "sanitizer build: the booted test runs on the normal build's package"
. /etc/os-release
[ "${ID:-}" = debian ] && [ -n "${VERSION_CODENAME:-}" ] ||
	skip "not Debian: the package is built for this machine's Debian release"
SUITE=$VERSION_CODENAME

# The mirror apt uses here (one-line or deb822 sources).
MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
	awk '$1 == "deb" && $3 == "'"$SUITE"'" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }')
if [ -z "$MIRROR" ]; then
	MIRROR=$(awk '/^URIs:/ { u = $2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "'"$SUITE"'") { print u; exit } }' \
		/etc/apt/sources.list.d/*.sources 2>/dev/null)
fi
[ -n "$MIRROR" ] || skip "no Debian mirror for $SUITE in /etc/apt/sources.list*"

NSPID=
LEADER=
ROOT=$T/root
OVERLAY=0
boot_cleanup() {
	if [ -n "$NSPID" ] && kill -0 "$NSPID" 2>/dev/null; then
		kill -TERM "$NSPID" 2>/dev/null # nspawn powers the container off
		for _ in $(seq 1 100); do
			kill -0 "$NSPID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$NSPID" 2>/dev/null
		wait "$NSPID" 2>/dev/null
	fi
	[ "$OVERLAY" -eq 1 ] && umount "$ROOT" 2>/dev/null
	cleanup
}
trap boot_cleanup EXIT
trap 'exit 1' INT TERM HUP

# ---- the package, as t_package builds it ----
[ -f "$BUILD_DIR/CPackConfig.cmake" ] || die "no CPackConfig.cmake in $BUILD_DIR: no packaging"
mkdir -p "$T/cpack"
(cd "$T/cpack" && cpack -G DEB --config "$BUILD_DIR/CPackConfig.cmake" -B "$T/cpack") \
	>"$T/cpack.log" 2>&1 || { tail -30 "$T/cpack.log"; die "cpack -G DEB failed"; }
DEB=$(ls "$T"/cpack/rdmacp_*.deb 2>/dev/null | head -1)
[ -n "$DEB" ] || die "cpack made no rdmacp_*.deb"

# ---- the root: debootstrapped once with the package's dependencies ----
# The first alternative of each dependency, without versions.
DEPS=$(dpkg-deb -f "$DEB" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g' | grep -v '^$' |
	sort -u | tr '\n' ',' | sed 's/,$//')
INCLUDE="systemd,systemd-sysv,dbus,$DEPS"
KEY=$(printf '%s %s %s' "$SUITE" "$MIRROR" "$INCLUDE" | sha256sum | cut -c1-16)
CACHE=${RDMACP_BOOT_CACHE:-/var/cache/rdmacp-tests}
mkdir -p "$CACHE" || skip "cannot create $CACHE"
BASE=$CACHE/$SUITE-$KEY
exec 8>"$CACHE/.lock"
flock -w 600 8 || skip "another run held $CACHE/.lock for 600 s"
if [ ! -d "$BASE" ]; then
	echo "debootstrap $SUITE from $MIRROR into $BASE (once; include: $INCLUDE)"
	rm -rf "$BASE.tmp"
	start=$SECONDS
	if ! debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$BASE.tmp" "$MIRROR" \
		>"$T/debootstrap.log" 2>&1; then
		tail -5 "$T/debootstrap.log"
		rm -rf "$BASE.tmp"
		skip "debootstrap $SUITE from $MIRROR failed (no mirror?)"
	fi
	mv "$BASE.tmp" "$BASE"
	echo "debootstrap took $((SECONDS - start)) s"
fi
flock -u 8

# This run's root: a copy-on-write overlay of the cached one (a copy where
# overlayfs is missing), thrown away at the end.
mkdir -p "$ROOT" "$T/upper" "$T/work"
if mount -t overlay overlay -o "lowerdir=$BASE,upperdir=$T/upper,workdir=$T/work" "$ROOT" 2>/dev/null; then
	OVERLAY=1
else
	cp -a "$BASE/." "$ROOT/" || die "copy of $BASE failed"
fi

# ---- boot ----
# Locked memory: a machine's systemd gives the unit LimitMEMLOCK=infinity,
# but the container's can't go above its own hard limit: nspawn raises it
# where it may (CAP_SYS_RESOURCE here); elsewhere rdmacpd's fallback, sessions
# keeping CAP_IPC_LOCK, needs that capability, which nspawn drops by default.
systemd-nspawn --register=no --keep-unit --private-network -M rdmacp-test -D "$ROOT" \
	--rlimit=RLIMIT_MEMLOCK=infinity --capability=CAP_IPC_LOCK --boot \
	</dev/null >"$T/console.log" 2>&1 &
NSPID=$!
for _ in $(seq 1 100); do
	LEADER=$(pgrep -P "$NSPID" -x systemd | head -1)
	[ -n "$LEADER" ] && break
	kill -0 "$NSPID" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$LEADER" ]; then
	tail -10 "$T/console.log"
	skip "systemd-nspawn --boot did not start systemd in the container"
fi
# in_ct CMD...: CMD inside the container (all its namespaces, its root).
in_ct() { nsenter -t "$LEADER" -a "$@"; }
# on_lo CMD...: CMD from this machine, in the container's network namespace.
on_lo() { nsenter -t "$LEADER" -n "$@"; }
# Until the container's systemd answers on its bus and has booted.
for _ in $(seq 1 450); do
	state=$(in_ct systemctl is-system-running 2>&1)
	case $state in
	running | degraded | maintenance | stopping | offline) break ;;
	esac
	kill -0 "$NSPID" 2>/dev/null || break
	sleep 0.2
done
case $state in
running | degraded) pass "container booted: systemd is $state" ;;
*)
	tail -10 "$T/console.log"
	skip "the container did not finish booting: '$state'"
	;;
esac

# ---- (1) install the package with apt ----
cp "$DEB" "$ROOT/root/rdmacp.deb"
if in_ct env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	-o Acquire::Retries=0 /root/rdmacp.deb >"$T/apt.log" 2>&1; then
	pass "apt-get install rdmacp.deb in the container"
else
	tail -20 "$T/apt.log" | sed 's/^/    /'
	die "apt-get install of the package failed in the container"
fi
in_ct getent passwd rdmacp >/dev/null && pass "system user rdmacp made" || fail "no user rdmacp"

# ---- configuration, certificates, modules ----
make_certs "$T/certs"
install -m 0644 "$T/certs/ca.crt" "$T/certs/server.crt" "$ROOT/etc/rdmacp/"
install -m 0600 "$T/certs/server.key" "$ROOT/etc/rdmacp/"
in_ct install -d -o rdmacp -g rdmacp /srv/rdmacp/data /srv/rdmacp/data2
in_ct install -d /var/lib/rdmacp-outside
# good_conf [MODULE...]: the config with these extra modules (all in /srv/rdmacp).
good_conf() {
	local m
	{
		echo "[global]"
		echo "cert = /etc/rdmacp/server.crt"
		echo "key = /etc/rdmacp/server.key"
		echo "ca = /etc/rdmacp/ca.crt"
		echo "drain timeout = 1s"
		echo "log level = info"
		echo
		echo "[data]"
		echo "path = /srv/rdmacp/data"
		echo "read only = no"
		echo "allow = client"
		echo
		echo "[outside]"
		echo "path = /var/lib/rdmacp-outside"
		echo "read only = no"
		echo "allow = client"
		echo "uid = root"
		echo "gid = root"
		for m in "$@"; do
			printf '\n[%s]\npath = /srv/rdmacp/%s\nread only = no\nallow = client\n' "$m" "$m"
		done
	} >"$ROOT/etc/rdmacp/rdmacpd.conf"
}
good_conf
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" --transport tcp)
main_pid() { in_ct systemctl show -p MainPID --value rdmacpd.service; }
# journal_has PATTERN [journalctl args]: the service's journal has a line matching PATTERN.
journal_has() {
	local pat=$1
	shift
	in_ct journalctl -u rdmacpd --no-pager -o cat "$@" 2>/dev/null | grep -q -- "$pat"
}
# wait_journal SECONDS PATTERN: until the journal has PATTERN.
wait_journal() {
	for _ in $(seq 1 $(($1 * 5))); do
		journal_has "$2" && return 0
		sleep 0.2
	done
	return 1
}

# ---- (2) the socket, and a copy that activates the service ----
if in_ct systemctl enable --now rdmacpd.socket >"$T/enable.log" 2>&1; then
	pass "systemctl enable --now rdmacpd.socket"
else
	fail "systemctl enable --now rdmacpd.socket:"
	sed 's/^/    /' "$T/enable.log"
fi
[ "$(in_ct systemctl is-active rdmacpd.service)" = inactive ] &&
	pass "rdmacpd.service not started before the first connection" ||
	fail "rdmacpd.service is $(in_ct systemctl is-active rdmacpd.service) before any connection"
head -c 3000000 /dev/urandom >"$T/src.bin"
expect_rc 0 "copy into the container through the socket" on_lo "${CLIENT[@]}" -q "$T/src.bin" 127.0.0.1:data/
cmp -s "$T/src.bin" "$ROOT/srv/rdmacp/data/src.bin" && pass "copied file is identical" ||
	fail "copied file differs or is missing"
[ "$(in_ct stat -c %U "/srv/rdmacp/data/src.bin" 2>/dev/null)" = rdmacp ] &&
	pass "the copy belongs to the module's user rdmacp" || fail "the copy is not rdmacp's"
[ "$(in_ct systemctl is-active rdmacpd.service)" = active ] &&
	pass "rdmacpd.service started by the socket" || fail "rdmacpd.service not active after a copy"
journal_has "using 1 socket from systemd" && pass "rdmacpd serves the socket systemd passed" ||
	fail "no 'using 1 socket from systemd' in the journal"

# ---- (3) MemoryMax= and TasksMax= ----
limits=$(in_ct systemctl show -p MemoryMax -p TasksMax rdmacpd.service | sort | tr '\n' ' ')
[ "$limits" = "MemoryMax=8589934592 TasksMax=8192 " ] && pass "systemctl show: $limits" ||
	fail "systemctl show -p MemoryMax,TasksMax: $limits"
CG=$(in_ct systemctl show -p ControlGroup --value rdmacpd.service)
# The cgroup files: unified (v2), else the legacy controllers (v1).
cg_value() { # FILE_V2 CONTROLLER FILE_V1
	in_ct cat "/sys/fs/cgroup$CG/$1" 2>/dev/null || in_ct cat "/sys/fs/cgroup/$2$CG/$3" 2>/dev/null
}
# A container on a legacy (v1) cgroup host gets its controllers read-only,
# and on a unified (v2) host the memory and pids controllers reach it only
# when the host delegates them: without them its systemd makes no memory or
# pids cgroup for a service, so there is no file to look at (said, not
# failed). Where either file is there, both must say the unit's limits.
mem=$(cg_value memory.max memory memory.limit_in_bytes)
pids=$(cg_value pids.max pids pids.max)
if [ -z "$mem" ] && [ -z "$pids" ]; then
	echo "SKIP (part): the container has no memory or pids controller for $CG (legacy hierarchy, or not delegated): MemoryMax=/TasksMax= are not applied there"
else
	[ "$mem" = 8589934592 ] && pass "cgroup $CG: memory limit $mem" ||
		fail "cgroup $CG: memory limit '$mem', not 8589934592"
	[ "$pids" = 8192 ] && pass "cgroup $CG: pids limit $pids" ||
		fail "cgroup $CG: pids limit '$pids', not 8192"
fi

# ---- (4) reload: a good config applies, a bad one keeps the old ----
PID1=$(main_pid)
good_conf data2
in_ct systemctl reload rdmacpd >"$T/reload.log" 2>&1 || fail "systemctl reload: $(cat "$T/reload.log")"
wait_journal 10 "reloaded /etc/rdmacp/rdmacpd.conf" && pass "reload logged" || fail "no 'reloaded' in the journal"
expect_rc 0 "copy into the module the reload added" on_lo "${CLIENT[@]}" -q "$T/src.bin" 127.0.0.1:data2/
cp "$ROOT/etc/rdmacp/rdmacpd.conf" "$T/good.conf"
echo "no such key = 1" >>"$ROOT/etc/rdmacp/rdmacpd.conf"
BADLINE=$(wc -l <"$ROOT/etc/rdmacp/rdmacpd.conf")
in_ct systemctl reload rdmacpd >"$T/reload.log" 2>&1 || fail "systemctl reload (bad): $(cat "$T/reload.log")"
wait_journal 10 "reload failed, keeping the old configuration" &&
	pass "bad config: 'reload failed, keeping the old configuration'" || fail "bad config: no 'reload failed'"
journal_has "rdmacpd.conf:$BADLINE:" && pass "bad config: the journal names rdmacpd.conf:$BADLINE" ||
	fail "bad config: no rdmacpd.conf:$BADLINE: in the journal"
[ "$(in_ct systemctl is-active rdmacpd.service)" = active ] && [ "$(main_pid)" = "$PID1" ] &&
	pass "bad config: the same daemon keeps running" || fail "bad config: daemon not the same or not active"
expect_rc 0 "bad config: the old one still serves data2" on_lo "${CLIENT[@]}" -q "$T/src.bin" 127.0.0.1:data2/again.bin
cp "$T/good.conf" "$ROOT/etc/rdmacp/rdmacpd.conf"

# ---- (5) the watchdog ----
mkdir -p "$ROOT/etc/systemd/system/rdmacpd.service.d"
cat >"$ROOT/etc/systemd/system/rdmacpd.service.d/50-test-watchdog.conf" <<'EOF'
[Service]
WatchdogSec=3s
Environment=RDMACPD_TEST_HANG_ON_HUP=1
LimitCORE=0
EOF
in_ct systemctl daemon-reload
in_ct systemctl restart rdmacpd.service
PIDW=$(main_pid)
sleep 5
[ "$(main_pid)" = "$PIDW" ] && [ "$(in_ct systemctl is-active rdmacpd.service)" = active ] &&
	pass "watchdog: the daemon pings (alive 5 s at WatchdogSec=3s)" ||
	fail "watchdog: the daemon was restarted without hanging"
in_ct systemctl reload rdmacpd # the hook: hang
restarted=0
for _ in $(seq 1 60); do
	p=$(main_pid)
	if [ "$p" != 0 ] && [ "$p" != "$PIDW" ] && [ "$(in_ct systemctl is-active rdmacpd.service)" = active ]; then
		restarted=1
		break
	fi
	sleep 0.25
done
journal_has "hanging on purpose" || fail "watchdog: the test hook did not hang the daemon"
if [ "$restarted" -eq 1 ] && journal_has "Watchdog timeout"; then
	pass "watchdog: the hung daemon was killed and restarted ($PIDW -> $(main_pid))"
else
	fail "watchdog: no restart of the hung daemon (MainPID $(main_pid))"
	in_ct systemctl status --no-pager rdmacpd.service 2>&1 | tail -8 | sed 's/^/    /'
fi
rm "$ROOT/etc/systemd/system/rdmacpd.service.d/50-test-watchdog.conf"
in_ct systemctl daemon-reload
in_ct systemctl restart rdmacpd.service

# ---- (6) hardening ----
on_lo "${CLIENT[@]}" -q "$T/src.bin" 127.0.0.1:outside/ >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -ne 0 ] && pass "a push into a module outside ReadWritePaths= fails (exit $rc)" ||
	fail "a push into a module outside ReadWritePaths= succeeded"
grep -q "Read-only file system" "$T/err" && pass "outside ReadWritePaths=: Read-only file system" ||
	{ fail "outside ReadWritePaths=: no 'Read-only file system'"; sed 's/^/    /' "$T/err" | head -5; }
[ -z "$(ls -A "$ROOT/var/lib/rdmacp-outside")" ] && pass "nothing written outside ReadWritePaths=" ||
	fail "written outside ReadWritePaths=: $(ls -A "$ROOT/var/lib/rdmacp-outside")"
# The score rdmacpd(8) gives: "rates it N.N".
DOC_SCORE=$(grep -o 'rates it [0-9.]*' "$SRC_DIR/man/rdmacpd.8" | head -1 | awk '{print $3}')
score=$(in_ct systemd-analyze security --no-pager rdmacpd.service 2>&1 |
	grep -o 'exposure level for rdmacpd.service: [0-9.]*' | awk '{print $NF}')
if [ -z "$DOC_SCORE" ] || [ -z "$score" ]; then
	fail "systemd-analyze security: score '$score', documented '$DOC_SCORE'"
elif awk -v s="$score" -v d="$DOC_SCORE" 'BEGIN { exit !(s <= d) }'; then
	pass "systemd-analyze security rdmacpd: $score (rdmacpd(8): $DOC_SCORE)"
else
	fail "systemd-analyze security rdmacpd: $score, above the documented $DOC_SCORE"
fi

# ---- (7) stop with a copy running: drained, the client told (exit 22) ----
head -c 40000000 /dev/urandom >"$T/big.bin"
on_lo "${CLIENT[@]}" -q --partial --bwlimit 2048 "$T/big.bin" 127.0.0.1:data/ >"$T/big.out" 2>"$T/big.err" &
CPID=$!
running=0
for _ in $(seq 1 50); do
	in_ct systemctl show -p StatusText --value rdmacpd.service | grep -q '^1 active session' &&
		{ running=1; break; }
	sleep 0.2
done
[ "$running" -eq 1 ] || fail "the slow copy did not start (status: $(in_ct systemctl show -p StatusText --value rdmacpd.service))"
sleep 1
in_ct systemctl stop rdmacpd.service >"$T/stop.log" 2>&1 || fail "systemctl stop: $(cat "$T/stop.log")"
wait "$CPID"
rc=$?
[ "$rc" -eq 22 ] && pass "systemctl stop during a copy: the client exits 22" ||
	{ fail "systemctl stop during a copy: client exit $rc, wanted 22"; sed 's/^/    /' "$T/big.err" | head -5; }
grep -q "shutting down" "$T/big.err" && pass "the client says the daemon is shutting down" ||
	fail "client stderr lacks 'shutting down'"
journal_has "stopping, 1 active session" && pass "journal: stopping, 1 active session (drain)" ||
	fail "journal lacks 'stopping, 1 active session'"
# The supervisor could signal the session (CAP_KILL in the unit): it ended at
# once, not when its copy was done.
journal_has "still running after the drain, ending them" && pass "journal: the session was ended after the drain" ||
	fail "journal lacks 'still running after the drain, ending them'"
journal_has "still running, killing them" && fail "journal: the session had to be killed (not signalled in time)"

# ---- (8) the journal: levels and session lines ----
journal_has "session [0-9]* from .*127\.0\.0\.1.* ended:" -p info..info &&
	pass "journal: session lines at info" || fail "journal: no 'session N from ... ended:' at info"
journal_has "reload failed" -p err..err && pass "journal: the failed reload at err" ||
	fail "journal: 'reload failed' not at err"
journal_has "session [0-9]* from .* ended:" -p err && fail "journal: session end lines logged as errors"

in_ct systemctl stop rdmacpd.socket
if [ "$FAILS" -ne 0 ]; then
	echo "    journal of rdmacpd (last 30 lines):"
	in_ct journalctl -u rdmacpd --no-pager -n 30 2>&1 | sed 's/^/    /'
fi
finish
