#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A hostile local user races the --delete pass of a module that runs as
# root (SECURITY.md B14, G40): while the daemon walks the destination to
# remove what the source does not have, the user, who may write one
# directory of the tree, moves things under its feet:
#   - the whole extraneous tree it is emptying renamed out of the module
#     (into a sticky, world-writable directory beside the module root, on
#     the same file system, as /tmp would be) and back;
#   - a directory of it swapped for a symlink to a victim directory outside
#     the module (root's, not the user's to write) or to root's files in
#     the sticky directory, and back;
#   - the extraneous tree itself swapped for such a symlink, and back.
# Many rounds, each a real push (rdmacp -r --delete) against a real rdmacpd
# running as root with the module's 'uid = root'; after each, the victim
# directory and root's files in the sticky directory are exactly as they
# were, and what the source has is still at the destination. At least one
# round must have caught the walk mid-way (it removed some of the
# extraneous tree but not all of it), or the test proved nothing.
#
# Why it holds (src/engine_delete.c): the pass never resolves a path from
# the module root once it has started. It holds an open directory per level,
# each opened from the one above with O_NOFOLLOW|O_DIRECTORY and checked to
# be on the walk's own mount; every entry is looked at with
# AT_SYMLINK_NOFOLLOW and removed with unlinkat() on the directory fd that
# listed it. A symlink is removed itself, never followed, and an entry
# swapped between the look and the removal fails (rmdir of a symlink,
# unlink of a directory) instead of being followed. Renaming a directory
# out of the module moves the held fd with it: the pass may go on emptying
# that directory where it now is, but what it holds is what was in the
# module (or what the user, who can write there, put there: nothing the
# user could not have moved into the module in the first place). No
# directory outside the module that the user cannot write ever becomes a
# directory the pass holds. So this test is a regression test, not a fix.
#
# Needs root (the daemon's sessions run as root in the module) and the user
# 'nobody' for the attacker.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root: the attack is on a module that runs as root"
getent passwd nobody >/dev/null || skip "no user 'nobody' to attack as"
command -v setpriv >/dev/null || skip "setpriv not installed (util-linux)"
command -v python3 >/dev/null || skip "python3 not installed"
# The attacker's python: one 'nobody' may run (not a shim in root's home).
RACER_PY=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
setpriv --reuid nobody --regid "$(id -g nobody)" --clear-groups "$RACER_PY" -c '' 2>/dev/null ||
	RACER_PY=/usr/bin/python3
setpriv --reuid nobody --regid "$(id -g nobody)" --clear-groups "$RACER_PY" -c '' 2>/dev/null ||
	skip "no python3 that the user nobody may run"
command -v jq >/dev/null || skip "jq not installed"
# Rounds until this many seconds have gone (at least 6): a loaded machine runs fewer.
ROUNDS=${RDMACP_RACE_ROUNDS:-30}
BUDGET_S=${RDMACP_RACE_SECONDS:-90}
NDIRS=${RDMACP_RACE_DIRS:-600}
NOBODY_GID=$(id -g nobody)
HOST=127.0.0.1

# The attacker must reach into $T; the module root and its parents are root's, not writable.
chmod 0711 "$T"
PORT=$(free_port)
make_certs "$T/certs"
mkdir -p "$T/mod" "$T/victim/sub" "$T/outside/root-dir" "$T/src/tree/shared"
chmod 0755 "$T/mod"
write_conf "$T/d.conf" "$PORT" "$T/certs" "handshake timeout = 5" "idle timeout = 30"
cat >>"$T/d.conf" <<EOF

[race]
path = $T/mod
allow = client
uid = root
gid = root
EOF
start_daemon "$T/d.conf" "$T/d.log" "$PORT"
CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt" --key "$T/certs/client.key"
	--ca "$T/certs/ca.crt" -P "$PORT")

# What root owns outside the module: a victim directory, and files in a sticky /tmp-like one.
for f in passwd shadow group sub/hosts; do echo "victim $f" >"$T/victim/$f"; done
chmod 0755 "$T/victim" "$T/victim/sub"
chmod 1777 "$T/outside"
echo "root's file" >"$T/outside/root-file"
echo "root's other file" >"$T/outside/root-dir/kept"
snapshot() { # the names, types, sizes, modes, owners and bytes of what lies outside the module
	(cd "$T/victim" && find . -printf '%p %y %s %m %u\n' | sort && find . -type f -exec cat {} +)
	(cd "$T/outside" && find . -maxdepth 1 -name 'root-*' -printf '%p %y %s %m %u\n' | sort &&
		find root-dir -printf '%p %y %s %m %u\n' && cat root-file root-dir/kept)
}
before=$(snapshot)

# The source: a tree whose directory 'shared' the user may write at the destination.
echo "top" >"$T/src/tree/top"
echo "kept" >"$T/src/tree/shared/keep"
expect_rc 0 "the first push" "${CLIENT[@]}" -q -r "$T/src/tree" "$HOST:race/dst/"
D=$T/mod/dst/tree
chown nobody:"$NOBODY_GID" "$D/shared"
chmod 0755 "$T/mod/dst" "$D"

# The attacker: renames out and back, symlink swaps, until told to stop.
cat >"$T/racer.py" <<'EOF'
import os, random, sys, time
shared, outside, victim, stop, ndirs = sys.argv[1:6]
ndirs = int(ndirs)
junk = os.path.join(shared, "junk")
targets = [victim, os.path.join(outside, "root-dir")]
moves = 0
def pause():
    time.sleep(random.choice((0, 0, 0.0002, 0.001, 0.003)))
def swap(path, aside, target):
    # path out of the way (out of the module), a symlink in its place, then back
    global moves
    try:
        os.rename(path, aside)
    except OSError:
        return
    moves += 1
    try:
        os.symlink(target, path)
    except OSError:
        pass
    pause()
    try:
        os.unlink(path)
    except OSError:
        pass
    try:
        os.rename(aside, path)
    except OSError:
        pass
# A hard link to root's file, where the pass will remove it: refused by the kernel
# (fs.protected_hardlinks), and were it not, unlinking a name removes only that name.
try:
    os.link(os.path.join(victim, "passwd"), os.path.join(junk, "d0", "link"))
except OSError:
    pass
while not os.path.exists(stop):
    what = random.randrange(4)
    aside = os.path.join(outside, "aside.%d" % os.getpid())
    if what == 0:
        # the extraneous tree out of the module and back
        try:
            os.rename(junk, aside)
            moves += 1
            pause()
            os.rename(aside, junk)
        except OSError:
            pass
    elif what == 1:
        swap(junk, aside, random.choice(targets))
    else:
        swap(os.path.join(junk, "d%d" % random.randrange(ndirs)), aside, random.choice(targets))
print(moves)
EOF

make_junk() { # the extraneous tree, made by the user in the directory the user may write
	setpriv --reuid nobody --regid "$NOBODY_GID" --clear-groups --no-new-privs \
		"$RACER_PY" - "$D/shared/junk" "$NDIRS" <<'EOF'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
os.mkdir(top)
for i in range(n):
    d = os.path.join(top, "d%d" % i)
    os.mkdir(d)
    os.mkdir(os.path.join(d, "sub"))
    for name in ("a", "sub/b"):
        with open(os.path.join(d, name), "w") as f:
            f.write("junk\n")
EOF
}
JUNK_ENTRIES=$((NDIRS * 4 + 1))
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

overlapped=0
interfered=0
rounds=0
start=$SECONDS
for round in $(seq 1 "$ROUNDS"); do
	[ "$round" -gt 6 ] && [ $((SECONDS - start)) -ge "$BUDGET_S" ] && break
	rounds=$round
	# What an earlier round's attacker left lying about: gone (rm does not follow symlinks).
	rm -rf "$D/shared/junk" "$T/outside"/aside.* "$T/stop"
	t0=$(date +%s.%N)
	make_junk
	t1=$(date +%s.%N)
	setpriv --reuid nobody --regid "$NOBODY_GID" --clear-groups --no-new-privs \
		"$RACER_PY" "$T/racer.py" "$D/shared" "$T/outside" "$T/victim" "$T/stop" "$NDIRS" \
		>"$T/racer.out" 2>"$T/racer.err" &
	racer=$!
	"${CLIENT[@]}" --json -r --delete "$T/src/tree" "$HOST:race/dst/" >"$T/out" 2>"$T/err"
	rc=$?
	t2=$(date +%s.%N)
	touch "$T/stop"
	wait "$racer"
	moves=$(cat "$T/racer.out")
	deleted=$(jq -r 'select(.event == "summary") | .deleted' "$T/out" 2>/dev/null | tail -1)
	left=$(find "$D/shared/junk" "$T/outside"/aside.* 2>/dev/null | wc -l)
	echo "    round $round: exit $rc, $moves moves by the attacker, ${deleted:-?} deleted," \
		"$left junk entries left ($(secs "$t0" "$t1") s to make, $(secs "$t1" "$t2") s to push)"
	[ "$rc" -ne 0 ] && echo "      $(grep -m1 -v '^{' "$T/err")"
	[ -s "$T/racer.err" ] && fail "round $round: the attacker failed: $(head -3 "$T/racer.err")"
	case $rc in
	0 | 9) ;; # the attacker's moves may fail entries of the pass: said, not fatal
	*) fail "round $round: exit $rc: $(tail -3 "$T/err")" ;;
	esac
	[ "${deleted:-0}" -gt 0 ] && [ "$left" -gt 0 ] && overlapped=$((overlapped + 1))
	[ "$left" -gt 0 ] || [ "$rc" -ne 0 ] && interfered=$((interfered + 1))
	now=$(snapshot)
	if [ "$now" != "$before" ]; then
		fail "round $round: something outside the module changed"
		diff <(echo "$before") <(echo "$now") | head -10
		break
	fi
	if [ "$(cat "$D/top" 2>/dev/null)" != top ] || [ "$(cat "$D/shared/keep" 2>/dev/null)" != kept ]; then
		fail "round $round: what the source has is gone from the destination"
		break
	fi
done
pass "$rounds rounds of $JUNK_ENTRIES extraneous entries raced: the victim directory and root's files outside the module untouched"
[ -e "$T/victim/passwd" ] && [ -e "$T/outside/root-dir/kept" ] && pass "the victim's files are all there" ||
	fail "a victim file is gone"
if [ "$overlapped" -gt 0 ]; then
	pass "$overlapped of $rounds rounds caught the pass mid-walk ($interfered interfered at all)"
else
	fail "no round caught the pass mid-walk ($interfered interfered at all): the race proved nothing"
fi
finish
