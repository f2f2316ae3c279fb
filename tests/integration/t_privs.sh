#!/bin/bash
# Privileges on a shared host (issue 8 items 1 and 2; SECURITY.md G39-G41),
# each attack against a real rdmacpd running as root:
#  - a client's set-id bits: never created unless the module says
#    'keep setid = yes'; -p leaves an existing directory's mode alone;
#  - a client's owners: --owner refused unless 'preserve owner = yes' under
#    'uid = root';
#  - sessions run as the module's user with no capability (/proc/PID/status
#    while a transfer runs), as the user rdmacp by default, so files belong to
#    it and a pull can't read what it can't; one identity per connection;
#  - before its first OPEN a session holds only the capabilities it will need;
#  - a daemon that is not root runs sessions as itself, refuses other users;
#  - a pull as root strips set-id bits unless --owner;
#  - a module root swapped (for a symlink, for another directory, a parent for
#    a symlink) after the daemon loaded its config: refused, nothing written;
#  - rdmacpd --check warns about module parents that other users can write.
# Needs root and the system user rdmacp (scripts/deps.sh creates it).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root: rdmacpd's sessions switch users only when it is root"
getent passwd rdmacp >/dev/null ||
	skip "no system user 'rdmacp' (scripts/deps.sh creates it with systemd-sysusers or useradd)"
command -v python3 >/dev/null || skip "python3 not installed"
RD_UID=$(id -u rdmacp)
RD_GID=$(id -g rdmacp)

# The default module's user must reach $T/pub: $T is searchable, not listable.
chmod 0711 "$T"
PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod" "$T/pub" "$T/src" "$T/got" "$T/target" \
	"$T/swap1/m" "$T/swap2/m" "$T/swap3/p/m" "$T/decoy/p/m"
chown rdmacp:rdmacp "$T/pub"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 20"
# Only keys today's rdmacpd knows here: the attacks run against old code too.
cat >>"$T/d.conf" <<EOF

[data]
path = $T/mod
allow = client
uid = root
gid = root

[pub]
path = $T/pub
allow = client

[swap1]
path = $T/swap1/m
allow = client
uid = root
gid = root

[swap2]
path = $T/swap2/m
allow = client
uid = root
gid = root

[swap3]
path = $T/swap3/p/m
allow = client
uid = root
gid = root
EOF
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
D1=$DAEMON_PID
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT" -q)

# (before the swaps below make its modules unavailable)
"$RDMACPD" --check --config "$T/d.conf" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && ! grep -q "could replace" "$T/err"; then
	pass "--check: no warning for root-owned private parents"
else
	fail "--check on the test config: exit $rc: $(cat "$T/err")"
fi

mode_of() { stat -c %a "$1" 2>/dev/null || echo missing; }
owner_of() { stat -c %u:%g "$1" 2>/dev/null || echo missing; }

# ---- set-id bits from the client (G39) ----
printf '#!/bin/sh\necho hi\n' >"$T/src/suid"
cp "$T/src/suid" "$T/src/sgid"
chmod 4755 "$T/src/suid"
chmod 2755 "$T/src/sgid"
expect_rc 0 "push setuid and setgid files with -p" \
	"${CLIENT[@]}" -p "$T/src/suid" "$T/src/sgid" 127.0.0.1:data/
m=$(mode_of "$T/mod/suid")
[ "$m" = 755 ] && pass "setuid file arrives as 755" || fail "setuid file arrived as $m (want 755)"
m=$(mode_of "$T/mod/sgid")
[ "$m" = 755 ] && pass "setgid file arrives as 755" || fail "setgid file arrived as $m (want 755)"

# -r -p of a 07777 directory: an existing directory takes the sender's mode,
# as rsync -p gives it, and one the push creates too: without set-id and
# sticky bits either way (the module does not keep them).
mkdir -p "$T/mod/shared" "$T/src/shared" "$T/src/fresh"
chmod 0755 "$T/mod/shared"
echo x >"$T/src/shared/f"
echo y >"$T/src/fresh/f"
chmod 07777 "$T/src/shared" "$T/src/fresh"
expect_rc 0 "push -r -p of two 07777 directories" \
	"${CLIENT[@]}" -r -p "$T/src/shared" "$T/src/fresh" 127.0.0.1:data/
m=$(mode_of "$T/mod/shared")
[ "$m" = 777 ] && pass "existing directory takes 777, not 7777" ||
	fail "existing directory re-moded to $m by -r -p (want 777)"
m=$(mode_of "$T/mod/fresh")
[ "$m" = 777 ] && pass "created directory gets 777, no set-id or sticky bit" ||
	fail "created directory got $m (want 777)"
[ -f "$T/mod/shared/f" ] && [ -f "$T/mod/fresh/f" ] && pass "their files arrived" ||
	fail "files of the directories missing"

# ---- owners from the client (G40) ----
echo owned >"$T/src/owned"
chown 12345:12346 "$T/src/owned"
expect_rc 5 "--owner refused in a module without 'preserve owner'" \
	"${CLIENT[@]}" --owner -p "$T/src/owned" 127.0.0.1:data/
grep -q "does not keep owners" "$T/err" && pass "client says why: $(head -1 "$T/err")" ||
	fail "no clear message for the refused --owner: $(cat "$T/err")"
[ ! -e "$T/mod/owned" ] && pass "nothing stored for the refused --owner" ||
	fail "refused --owner push stored $(owner_of "$T/mod/owned")"

# ---- before any OPEN: root, but without most of root's capabilities ----
# CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID SETGID SETUID SETPCAP IPC_LOCK SYS_RESOURCE
PREAUTH=$((0x1f | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 14 | 1 << 24))
python3 "$HERE/rawclient.py" --port "$PORT" --ca "$T/certs/ca.crt" --cert "$T/certs/client.crt" \
	--key "$T/certs/client.key" --hello --sleep 3 --expect closed --timeout 1 >/dev/null 2>&1 &
RC_PID=$!
PRE=""
for _ in $(seq 1 50); do
	for p in $(pgrep -P "$D1"); do
		# Past the fork for sure: the client is in its 3 s sleep after HELLO.
		sleep 0.5
		grep -q "^Uid:[[:space:]]*0[[:space:]]" "/proc/$p/status" 2>/dev/null &&
			cp "/proc/$p/status" "$T/pre.status" 2>/dev/null && PRE=$T/pre.status
	done
	[ -n "$PRE" ] && break
	sleep 0.1
done
wait "$RC_PID"
if [ -z "$PRE" ]; then
	fail "no session process seen before OPEN"
else
	for cap in CapEff CapPrm CapBnd; do
		v=$((0x$(awk -v k="$cap:" '$1 == k {print $2}' "$PRE")))
		[ $((v & ~PREAUTH)) -eq 0 ] && pass "before OPEN: $cap $(printf %#x $v) within the set" ||
			fail "before OPEN: $cap $(printf %#x $v) has more than $(printf %#x $PREAUTH)"
	done
fi

# ---- the session's identity while a transfer runs (G40) ----
# A daemon of its own whose sessions' memlock need (memory budget + 4 MiB per
# connection) fits the usual 8 MiB hard limit: a session then gets
# RLIMIT_MEMLOCK and no capability at all, even where rdmacpd lacks
# CAP_SYS_RESOURCE (elsewhere it keeps CAP_IPC_LOCK alone, see rdmacpd(8)).
mkdir -p "$T/pub2"
chown rdmacp:rdmacp "$T/pub2"
P3=$(free_port)
write_conf "$T/d3.conf" "$P3" "$T/certs" "memory budget = 2M" "pool size = 1M" \
	"max connections = 1"
printf '\n[pub2]\npath = %s\nallow = client\n' "$T/pub2" >>"$T/d3.conf"
start_daemon "$T/d3.conf" "$T/d3.log" "$P3"
D3=$DAEMON_PID
echo hello >"$T/src/payload0"
head -c $((12 << 20)) /dev/urandom >"$T/src/big"
"${CLIENT[@]}" -P "$P3" --chunk-size 64K --bwlimit 2M "$T/src/big" 127.0.0.1:pub2/ \
	>"$T/bw.out" 2>&1 &
BW=$!
SESSION=""
STATUS=""
for _ in $(seq 1 100); do
	for p in $(pgrep -P "$D3"); do
		if grep -q "^Uid:[[:space:]]*$RD_UID[[:space:]]" "/proc/$p/status" 2>/dev/null; then
			SESSION=$p
			cp "/proc/$p/status" "$T/status" 2>/dev/null && STATUS=$T/status
		fi
	done
	[ -n "$STATUS" ] && break
	# Old code: the session stays root; keep what it shows for the report.
	for p in $(pgrep -P "$D3"); do cp "/proc/$p/status" "$T/status.any" 2>/dev/null; done
	sleep 0.1
done
if [ -z "$STATUS" ]; then
	fail "no session of the daemon ran as rdmacp ($RD_UID) during a push to the default module"
	[ -f "$T/status.any" ] && grep -E '^(Uid|Gid|Cap)' "$T/status.any" | sed 's/^/    /'
else
	pass "session $SESSION runs as uid $RD_UID during the push"
	f=$(awk '/^Uid:/ {print $2,$3,$4,$5}' "$STATUS")
	[ "$f" = "$RD_UID $RD_UID $RD_UID $RD_UID" ] && pass "real/effective/saved/fs uid $f" ||
		fail "uids $f"
	f=$(awk '/^Gid:/ {print $2,$3,$4,$5}' "$STATUS")
	[ "$f" = "$RD_GID $RD_GID $RD_GID $RD_GID" ] && pass "gids $f" || fail "gids $f"
	f=$(awk '/^Groups:/ {$1=""; print}' "$STATUS")
	echo " $f " | grep -q ' 0 ' && fail "still in group 0: $f" || pass "groups:$f"
	for cap in CapInh CapPrm CapEff CapBnd CapAmb; do
		v=$(awk -v k="$cap:" '$1 == k {print $2}' "$STATUS")
		[ "$v" = 0000000000000000 ] && pass "$cap empty" || fail "$cap = $v"
	done
	v=$(awk '$1 == "NoNewPrivs:" {print $2}' "$STATUS")
	[ "$v" = 1 ] && pass "NoNewPrivs 1" || fail "NoNewPrivs $v"
	v=$(awk '$1 == "Max" && $2 == "locked" {print $4, $5}' "/proc/$SESSION/limits")
	[ "$v" = "6291456 6291456" ] && pass "RLIMIT_MEMLOCK instead: $v" ||
		fail "RLIMIT_MEMLOCK $v (want 6 MiB soft and hard)"
fi
wait "$BW"
rc=$?
[ "$rc" -eq 0 ] && pass "the slow push finished" || { fail "slow push: exit $rc"; cat "$T/bw.out"; }
cmp -s "$T/src/big" "$T/pub2/big" && pass "pushed file is identical" || fail "pushed file differs"
o=$(owner_of "$T/pub2/big")
[ "$o" = "$RD_UID:$RD_GID" ] && pass "file in the default module owned by rdmacp ($o)" ||
	fail "file in the default module owned by $o (want rdmacp $RD_UID:$RD_GID)"

# The same through the main daemon (default budget: RLIMIT_MEMLOCK or CAP_IPC_LOCK).
expect_rc 0 "push to the default module" "${CLIENT[@]}" "$T/src/payload0" 127.0.0.1:pub/
o=$(owner_of "$T/pub/payload0")
[ "$o" = "$RD_UID:$RD_GID" ] && pass "owned by rdmacp there too" || fail "owned by $o there"

# ---- a pull reads as the module's user (G40) ----
echo s3cret >"$T/pub/secret"
chmod 0600 "$T/pub/secret"
echo public >"$T/pub/open"
chmod 0644 "$T/pub/open"
expect_rc 0 "pull a file rdmacp can read" "${CLIENT[@]}" 127.0.0.1:pub/open "$T/got/"
"${CLIENT[@]}" 127.0.0.1:pub/secret "$T/got/" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -ne 0 ] && [ ! -e "$T/got/secret" ]; then
	pass "pull of a root-only file refused (exit $rc: $(head -1 "$T/err"))"
else
	fail "pull of a 0600 root file: exit $rc, got: $(cat "$T/got/secret" 2>/dev/null)"
fi

# ---- a pull as root strips set-id bits unless --owner (G39) ----
cp "$T/src/suid" "$T/mod/tool"
chmod 4755 "$T/mod/tool"
expect_rc 0 "pull -p a setuid file as root" "${CLIENT[@]}" -p 127.0.0.1:data/tool "$T/got/"
m=$(mode_of "$T/got/tool")
[ "$m" = 755 ] && pass "pulled setuid file arrives as 755" || fail "pulled setuid file is $m (want 755)"
mkdir -p "$T/got2"
expect_rc 0 "pull -p --owner a setuid file as root" \
	"${CLIENT[@]}" -p --owner 127.0.0.1:data/tool "$T/got2/"
m=$(mode_of "$T/got2/tool")
[ "$m" = 4755 ] && pass "with --owner the setuid bit is kept" || fail "with --owner: $m (want 4755)"

# ---- module roots swapped after the config was loaded (G41): unavailable, exit 23 ----
echo bad >"$T/src/payload"
# (1) the module directory renamed away, a symlink to another directory in its place
mv "$T/swap1/m" "$T/swap1/m.away"
ln -s "$T/target" "$T/swap1/m"
expect_rc 23 "push into a module swapped for a symlink refused" \
	"${CLIENT[@]}" "$T/src/payload" 127.0.0.1:swap1/
[ -z "$(ls -A "$T/target")" ] && pass "nothing written through the symlink" ||
	fail "written through the symlink: $(ls -A "$T/target")"
# (2) the module directory replaced by another directory
mv "$T/swap2/m" "$T/swap2/m.away"
mkdir "$T/swap2/m"
expect_rc 23 "push into a module replaced by another directory refused" \
	"${CLIENT[@]}" "$T/src/payload" 127.0.0.1:swap2/
[ -z "$(ls -A "$T/swap2/m")" ] && pass "nothing written into the impostor" ||
	fail "written into the impostor: $(ls -A "$T/swap2/m")"
# (3) a parent of the module path swapped for a symlink to a look-alike tree
mv "$T/swap3/p" "$T/swap3/p.away"
ln -s "$T/decoy/p" "$T/swap3/p"
expect_rc 23 "push into a module whose parent became a symlink refused" \
	"${CLIENT[@]}" "$T/src/payload" 127.0.0.1:swap3/
[ -z "$(ls -A "$T/decoy/p/m")" ] && pass "nothing written into the look-alike" ||
	fail "written into the look-alike: $(ls -A "$T/decoy/p/m")"
echo "not for you" >"$T/target/t"
expect_rc 23 "pull through a module swapped for a symlink refused" \
	"${CLIENT[@]}" 127.0.0.1:swap1/t "$T/got/"
[ ! -e "$T/got/t" ] && pass "nothing read through the symlink" || fail "read through the symlink"
grep -q "swap1.*symlink" "$T/d.log" && pass "the daemon logs the refusal" ||
	fail "no log line for the swapped module"

# ---- one identity per connection ----
open_frame() { # DIRECTION FLAGS PATH: an OPEN frame spec for rawclient.py
	python3 -c 'import struct,sys; p=sys.argv[3].encode()
print("type=OPEN,payload=" + (struct.pack(">BBBBIIIH", int(sys.argv[1]), 1, 1, 0,
	int(sys.argv[2], 0), 1 << 20, 32, len(p)) + p).hex())' "$@"
}
RAW=(python3 "$HERE/rawclient.py" --port "$PORT" --ca "$T/certs/ca.crt"
	--cert "$T/certs/client.crt" --key "$T/certs/client.key" --hello)
DRY=0x18 # dry run, destination is a directory
expect_rc 0 "the same module twice on one connection" \
	"${RAW[@]}" --frame "$(open_frame 1 $DRY data/)" --recv END \
	--frame "$(open_frame 1 $DRY data/)" --expect frame:END
expect_rc 0 "a module of another user after a root one: refused on that connection" \
	"${RAW[@]}" --frame "$(open_frame 1 $DRY data/)" --recv END \
	--frame "$(open_frame 1 $DRY pub/)" --expect error:5
expect_rc 0 "and a root module after an rdmacp one: refused too" \
	"${RAW[@]}" --frame "$(open_frame 1 $DRY pub/)" --recv END \
	--frame "$(open_frame 1 $DRY data/)" --expect error:5
grep -q "runs as another user" "$T/d.log" && pass "the daemon says why" ||
	fail "no log line for the second identity"

# ---- rdmacpd --check: parents other users can write (G41) ----
mkdir -p "$T/ww/m" "$T/sticky/m"
chmod 0777 "$T/ww"
chmod 1777 "$T/sticky"
chown nobody "$T/sticky/m" 2>/dev/null || chown 65534 "$T/sticky/m"
write_conf "$T/ww.conf" "$(free_port)" "$T/certs"
printf '\n[ww]\npath = %s\nallow = client\nuid = root\ngid = root\n' "$T/ww/m" >>"$T/ww.conf"
"$RDMACPD" --check --config "$T/ww.conf" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q "module \[ww\]: $T/ww is writable by every user" "$T/err"; then
	pass "--check warns: $(head -1 "$T/err")"
else
	fail "--check on a module under a world-writable parent: exit $rc: $(cat "$T/err")"
fi
write_conf "$T/st.conf" "$(free_port)" "$T/certs"
printf '\n[st]\npath = %s/x\nallow = client\nuid = root\ngid = root\n' "$T/sticky/m" >>"$T/st.conf"
mkdir -p "$T/sticky/m/x"
"$RDMACPD" --check --config "$T/st.conf" >"$T/out" 2>"$T/err"
if grep -q "module \[st\]: $T/sticky is writable by others .*sticky.* owned by uid" "$T/err" &&
	grep -q "module \[st\]: $T/sticky/m is owned by uid" "$T/err"; then
	pass "--check warns about another user's entry in a sticky directory"
else
	fail "--check on a module under another user's dir in a sticky dir: $(cat "$T/err")"
fi

# ---- a daemon that is not root: sessions run as it, other users refused ----
if command -v setpriv >/dev/null; then
	mkdir -p "$T/nr/certs" "$T/nr/own" "$T/nr/root"
	cp "$T/certs/server.crt" "$T/certs/server.key" "$T/certs/ca.crt" "$T/nr/certs/"
	chown -R rdmacp:rdmacp "$T/nr"
	P4=$(free_port)
	write_conf "$T/nr/d.conf" "$P4" "$T/nr/certs" "pool size = 1M" "memory budget = 2M"
	printf '\n[own]\npath = %s\nallow = client\n\n[asroot]\npath = %s\nallow = client\nuid = root\n' \
		"$T/nr/own" "$T/nr/root" >>"$T/nr/d.conf"
	setpriv --reuid rdmacp --regid rdmacp --clear-groups "$RDMACPD" --check \
		--config "$T/nr/d.conf" >"$T/out" 2>"$T/err"
	grep -q "module \[asroot\]: wants uid 0 .* not root" "$T/err" &&
		pass "--check as rdmacp warns about the uid = root module" ||
		fail "--check as rdmacp: $(cat "$T/err")"
	DAEMON_RUN=(setpriv --reuid rdmacp --regid rdmacp --clear-groups "$RDMACPD")
	"${DAEMON_RUN[@]}" --config "$T/nr/d.conf" -v >"$T/nr.log" 2>&1 &
	DAEMON_PIDS+=($!)
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$P4") 2>/dev/null && break
		sleep 0.05
	done
	expect_rc 0 "a daemon running as rdmacp serves its own module" \
		"${CLIENT[@]}" -P "$P4" --chunk-size 64K "$T/src/payload0" 127.0.0.1:own/
	o=$(owner_of "$T/nr/own/payload0")
	[ "$o" = "$RD_UID:$RD_GID" ] && pass "stored as rdmacp" || fail "stored as $o"
	expect_rc 23 "and refuses a module that wants root" \
		"${CLIENT[@]}" -P "$P4" --chunk-size 64K "$T/src/payload0" 127.0.0.1:asroot/
	[ ! -e "$T/nr/root/payload0" ] && pass "nothing stored there" || fail "stored in asroot"
else
	echo "SKIP (non-root daemon only): setpriv not installed"
fi

# ---- what the new keys allow (controls; unknown keys to today's rdmacpd) ----
mkdir -p "$T/keep" "$T/plain"
P2=$(free_port)
write_conf "$T/d2.conf" "$P2" "$T/certs"
cat >>"$T/d2.conf" <<EOF

[keep]
path = $T/keep
allow = client
uid = root
keep setid = yes
preserve owner = yes
EOF
start_daemon "$T/d2.conf" "$T/d2.log" "$P2"
C2=("${CLIENT[@]}" -P "$P2")
expect_rc 0 "push -p into a 'keep setid' module" "${C2[@]}" -p "$T/src/suid" 127.0.0.1:keep/
m=$(mode_of "$T/keep/suid")
[ "$m" = 4755 ] && pass "'keep setid = yes' keeps the setuid bit" || fail "keep setid: $m"
expect_rc 0 "--owner into a 'preserve owner' module under uid = root" \
	"${C2[@]}" --owner "$T/src/owned" 127.0.0.1:keep/
o=$(owner_of "$T/keep/owned")
[ "$o" = 12345:12346 ] && pass "--owner honoured there ($o)" || fail "--owner there gave $o"

# 'preserve owner' where the session is not root: a config error, FILE:LINE.
write_conf "$T/bad.conf" "$(free_port)" "$T/certs"
printf '\n[plain]\npath = %s\nallow = client\npreserve owner = yes\n' "$T/plain" >>"$T/bad.conf"
"$RDMACPD" --check --config "$T/bad.conf" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "bad.conf:[0-9]*: 'preserve owner' in \[plain\] needs 'uid = root'" \
	"$T/err"; then
	pass "'preserve owner' without uid = root: $(cat "$T/err")"
else
	fail "'preserve owner' without uid = root: exit $rc: $(cat "$T/err")"
fi
# A module path with a symlink in it: refused at load.
ln -s "$T/plain" "$T/plainlink"
write_conf "$T/bad2.conf" "$(free_port)" "$T/certs"
printf '\n[l]\npath = %s\nallow = client\nuid = root\n' "$T/plainlink" >>"$T/bad2.conf"
"$RDMACPD" --check --config "$T/bad2.conf" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "bad2.conf:.*symlink" "$T/err" &&
	pass "module path with a symlink: $(cat "$T/err")" ||
	fail "module path with a symlink: exit $rc: $(cat "$T/err")"

finish
