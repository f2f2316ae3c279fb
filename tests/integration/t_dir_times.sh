#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Directory times and modes are kept for every directory (issue 10,
# metadata fidelity), push and pull, with -r -p:
#   - a flat tree of 5,000 directories, each with its own mtime and one of
#     three modes (the receiver used to keep the times of the first 4,096
#     only: 905 came out with the time of the copy);
#   - a nested tree (directories 0700, 0750, 0555 with contents, files,
#     symlinks), where every directory's and symlink's mtime is the source's;
#   - -a is -r -p: the same result;
#   - a directory whose time the daemon can't set at the end of a push (an
#     existing one it doesn't own, in a module of the default user): the
#     client hears of it from the daemon's END count, exits 9, and its
#     summary counts the failure;
#   - a re-run of an unchanged tree (-a --skip quick, push and pull) writes nothing: no
#     ctime at the destination moves; with one file changed, only it and its directory;
#   - while a push still runs (a slow file in another directory), a directory it wrote a
#     file into, and one it made a subdirectory in, have the source's mode and time:
#     another session looking at them then (a shard of the same migration) finds nothing
#     to bring in line.
# Compared as "path type mode mtime" lines (find -printf), both sides.
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip "python3 not installed"
HOST=127.0.0.1
mkdir -p "$T/um/shared"
chown rdmacp: "$T/um"
chmod 0777 "$T/um/shared" # root's: the module's user may write in it, not set its time
chmod o+x "$T"
setup_standard "[users]" "path = $T/um" "allow = client" "uid = rdmacp" "gid = rdmacp"

# The trees, made in one process: each entry gets its own mtime (with
# nanoseconds), directories last, deepest first.
mkdir -p "$T/src"
python3 - "$T/src" <<'EOF' || die "could not make the source trees"
import os, sys
root = sys.argv[1]
base = 1_500_000_000
flat = os.path.join(root, "flat")
os.mkdir(flat)
modes = (0o755, 0o750, 0o700)
for i in range(5000):
    d = os.path.join(flat, "d%04d" % i)
    os.mkdir(d)
    os.chmod(d, modes[i % 3])
    os.utime(d, ns=((base + i * 7) * 10**9 + i * 1000 + 1,) * 2)
os.utime(flat, ns=(base * 10**9 + 5,) * 2)

nest = os.path.join(root, "nest")
t = [base + 100000]
def stamp(p, follow=True):
    t[0] += 13
    os.utime(p, ns=(t[0] * 10**9 + 123456789,) * 2, follow_symlinks=follow)
dirs = []
for a in range(6):
    for b in range(5):
        for c in range(3):
            d = os.path.join(nest, "a%d" % a, "b%d" % b, "c%d" % c)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "f"), "wb") as f:
                f.write(os.urandom(100 + a * b * c))
            stamp(os.path.join(d, "f"))
            os.symlink("f", os.path.join(d, "lnk"))
            stamp(os.path.join(d, "lnk"), False)
        os.symlink("../b0", os.path.join(nest, "a%d" % a, "b%d" % b, "up"))
        stamp(os.path.join(nest, "a%d" % a, "b%d" % b, "up"), False)
os.symlink("/nonexistent/target", os.path.join(nest, "dangling"))
stamp(os.path.join(nest, "dangling"), False)
for dp, dn, fn in sorted(os.walk(nest), key=lambda w: -w[0].count("/")):
    name = os.path.basename(dp)
    if name == "a1":
        os.chmod(dp, 0o700)
    elif name == "b2":
        os.chmod(dp, 0o555)
    elif name == "c1":
        os.chmod(dp, 0o750)
    stamp(dp)
EOF
# A 0555 directory may not be written into after its mode is set: copy it for
# the pull side as root does.
cp -a "$T/src/flat" "$T/src/nest" "$T/mod/"

# listing DIR: "path type mode mtime" for every entry, sorted.
listing() { (cd "$1" && find . -printf '%P %y %m %T@\n' | LC_ALL=C sort); }

# same DESC GOT WANT-DIR: the trees' listings agree, and file contents.
same() {
	local desc=$1 got=$2 want=$3
	listing "$want" >"$T/l.want"
	if ! listing "$got" >"$T/l.got" 2>/dev/null; then
		fail "$desc: cannot list $got"
		return
	fi
	if diff "$T/l.want" "$T/l.got" >"$T/l.diff"; then
		pass "$desc: $(wc -l <"$T/l.want") entries with the source's modes and times"
	else
		fail "$desc: $(grep -c '^>' "$T/l.diff") of $(wc -l <"$T/l.want") entries differ: $(grep '^[<>]' "$T/l.diff" | head -6 | tr '\n' '|')"
	fi
	diff -r --no-dereference "$want" "$got" >/dev/null 2>&1 && pass "$desc: contents equal" ||
		fail "$desc: contents differ"
}

# The source was made as intended (and cp -a kept it): else the test tests nothing.
n=$(find "$T/src/flat" -mindepth 1 -type d | wc -l)
[ "$n" -eq 5000 ] || die "flat source has $n directories"
[ "$(find "$T/src/flat" -mindepth 1 -printf '%T@\n' | sort -u | wc -l)" -eq 5000 ] ||
	die "flat source: the directories' mtimes are not distinct"
n=$(find "$T/src/nest" -type l | wc -l)
[ "$n" -eq 121 ] && [ "$(find "$T/src/nest" -type l -printf '%T@\n' | sort -u | wc -l)" -eq "$n" ] ||
	die "nested source: the symlinks' mtimes are not distinct"
same "cp -a of the sources (the pull side)" "$T/mod/flat" "$T/src/flat"
same "cp -a of the sources (the pull side)" "$T/mod/nest" "$T/src/nest"

for tree in flat nest; do
	expect_rc 0 "push -r -p $tree" "${CLIENT[@]}" -r -p "$T/src/$tree" "$HOST:data/push/"
	same "push -r -p $tree" "$T/mod/push/$tree" "$T/src/$tree"
	mkdir -p "$T/pull"
	expect_rc 0 "pull -r -p $tree" "${CLIENT[@]}" -r -p "$HOST:data/$tree" "$T/pull/"
	same "pull -r -p $tree" "$T/pull/$tree" "$T/src/$tree"
done

# -a is -r -p, both ways.
expect_rc 0 "push -a nest" "${CLIENT[@]}" -a "$T/src/nest" "$HOST:data/pusha/"
same "push -a nest" "$T/mod/pusha/nest" "$T/src/nest"
mkdir -p "$T/pulla"
expect_rc 0 "pull -a nest" "${CLIENT[@]}" --archive "$HOST:data/nest" "$T/pulla/"
same "pull -a nest" "$T/pulla/nest" "$T/src/nest"

# A re-run of an unchanged tree writes nothing: no entry's ctime moves (a directory's time
# that is its own already is not set again). Then one file changed: its directory's time
# is set back, and of the other directories none is touched.
ctimes() { (cd "$1" && find . -printf '%p %C@\n' | sort); }
sleep 0.05 # past the clock tick of the copies above: a write now gives a ctime of its own
for side in push pull; do
	if [ $side = push ]; then
		dst=$T/mod/pusha/nest run=("${CLIENT[@]}" -a --skip quick "$T/src/nest" "$HOST:data/pusha/")
	else
		dst=$T/pulla/nest run=("${CLIENT[@]}" -a --skip quick "$HOST:data/nest" "$T/pulla/")
	fi
	ctimes "$dst" >"$T/c.before"
	expect_rc 0 "$side -a --skip quick nest again, unchanged" "${run[@]}"
	ctimes "$dst" >"$T/c.after"
	cmp -s "$T/c.before" "$T/c.after" &&
		pass "$side: nothing written: $(wc -l <"$T/c.after") entries' ctimes as they were" ||
		fail "$side: ctimes moved: $(diff "$T/c.before" "$T/c.after" | grep -c '^>')"
done
f=$(cd "$T/src/nest" && find . -type f | sort | head -1)
d=$(dirname "$f")
t=$(stat -c %y "$T/src/nest/$d")
echo changed >>"$T/src/nest/$f"
touch -d "$t" "$T/src/nest/$d"
ctimes "$T/mod/pusha/nest" >"$T/c.before"
expect_rc 0 "push -a --skip quick nest, one file changed" \
	"${CLIENT[@]}" -a --skip quick "$T/src/nest" "$HOST:data/pusha/"
same "push -a --skip quick, one file changed" "$T/mod/pusha/nest" "$T/src/nest"
ctimes "$T/mod/pusha/nest" >"$T/c.after"
moved=$(diff "$T/c.before" "$T/c.after" | sed -n 's/^> \(.*\) [0-9.]*$/\1/p' | sort | tr '\n' ' ')
[ "$moved" = "$(printf '%s\n' "$d" "$f" | sort | tr '\n' ' ')" ] &&
	pass "only the changed file and its directory were written ($moved)" ||
	fail "written: $moved (want $d and $f)"

# While a push runs, a directory it has written a file into has the source's mode and
# time: set when the directory is looked at, the time set back after the write at once,
# not only at the end; so has one it only made a new subdirectory in (b/). The operands go
# in order: a/ (its file changed) and b/ first, then z/ (a new 6 MiB file at 1 MiB/s, which
# keeps the session open).
mkdir -p "$T/src/live/a" "$T/src/live/b" "$T/src/live/z" "$T/mod/live"
echo small >"$T/src/live/a/small"
touch -d @1500000100 "$T/src/live/a/small" "$T/src/live/a" "$T/src/live/b" "$T/src/live/z"
expect_rc 0 "push -a live" "${CLIENT[@]}" -a "$T/src/live/a" "$T/src/live/b" "$T/src/live/z" \
	"$HOST:data/live/"
echo changed >>"$T/src/live/a/small"
touch -d @1500000200 "$T/src/live/a/small"
chmod 0750 "$T/src/live/a" # a mode and a time of its own, changed: set at once, kept
touch -d @1500000150 "$T/src/live/a"
mkdir "$T/src/live/b/sub"
touch -d @1500000100 "$T/src/live/b" # b/: unchanged but for the new subdirectory
head -c $((6 << 20)) /dev/urandom >"$T/src/live/z/big"
want=$(stat -c '%a %y' "$T/src/live/a")
want_b=$(stat -c '%a %y' "$T/src/live/b")
"${CLIENT[@]}" -a --skip quick --bwlimit 1024 "$T/src/live/a" "$T/src/live/b" "$T/src/live/z" \
	"$HOST:data/live/" >"$T/live.out" 2>"$T/live.err" &
pid=$!
got= state="the changed file and the new subdirectory never arrived"
for _ in $(seq 100); do
	if [ "$(stat -c %s "$T/mod/live/a/small" 2>/dev/null)" = 14 ] && [ -d "$T/mod/live/b/sub" ]; then
		got=$(stat -c '%a %y' "$T/mod/live/a")
		got_b=$(stat -c '%a %y' "$T/mod/live/b")
		[ "$got" = "$want" ] && [ "$got_b" = "$want_b" ] && state=kept && break
		state="a/ has $got (source: $want), b/ has $got_b (source: $want_b)"
	fi
	kill -0 $pid 2>/dev/null || break
	sleep 0.05
done
if [ "$state" = kept ] && kill -0 $pid 2>/dev/null; then
	pass "while the push still ran, a/ (a file written) and b/ (a subdirectory made) had the source's mode and time"
else
	fail "while the push ran: $state$(kill -0 $pid 2>/dev/null || echo '; the push had ended')"
fi
wait $pid
rc=$?
[ $rc = 0 ] && pass "the slow push exits 0" || fail "the slow push: exit $rc: $(cat "$T/live.err")"
same "the slow push: a/" "$T/mod/live/a" "$T/src/live/a"
same "the slow push: b/" "$T/mod/live/b" "$T/src/live/b"
same "the slow push: z/" "$T/mod/live/z" "$T/src/live/z"

# A directory mode or time the daemon fails to set at its end: the client is told.
mkdir -p "$T/src/shared"
echo x >"$T/src/shared/f"
touch -d @1500000000 "$T/src/shared"
expect_rc 9 "push -r -p into a directory the module's user doesn't own" \
	"${CLIENT[@]}" --json -r -p "$T/src/shared" "$HOST:users/"
grep -q "1 failed at the receiver after the transfer" "$T/err" &&
	pass "the client says one entry failed at the receiver" || fail "stderr: $(cat "$T/err")"
[ "$(jq -r 'select(.event == "summary") | .failed' "$T/out")" = 1 ] &&
	pass "the summary counts it" || fail "summary: $(grep summary "$T/out")"
[ "$(cat "$T/um/shared/f" 2>/dev/null)" = x ] && pass "the file in it arrived" ||
	fail "shared/f missing"
grep -q 'shared.*\(chmod\|set mtime\)' "$T/d.log" && pass "the daemon's log names it" ||
	fail "daemon log: $(grep -i shared "$T/d.log" | tail -3)"

finish
