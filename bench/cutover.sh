#!/usr/bin/env bash
# Cut-over after a migration (issue 32), in one run, on one machine over loopback (see
# docs/PERFORMANCE.md): a realistic tree on a fresh ext4 (loop device, as bench/freshfs.sh)
# is migrated four ways; then, in each of a few cycles, 0.1 % of its files change in
# content and 0.1 % in metadata only, and each way runs again (the cut-over), timed:
#   rdmacp  plan -a -H --owner --skip quick --shards N --split-size 32M, the N shards'
#           `run` at once, `finalize`, to an rdmacpd module (tcp, lanes sealed: its default)
#   push    one rdmacp -aH --owner --skip quick -r to the same daemon (the rsync user's
#           way, and a cut-over's in one walk: see docs/MIGRATION.md)
#   rsync   rsync -aH --numeric-ids to an rsync daemon (one process)
#   fpsync  fpsync -n N -o '-lptgoDH --numeric-ids' to the same rsync daemon
# Recorded, per cycle: rdmacp's bytes sent in the cut-over (the `bytes` of every --json
# summary of its runs and finalize, and of the push) against the changed bytes (the sizes
# of the files changed in content), and the cut-over's wall time of each (sync -f of the
# file system counted); for the push and rsync also the CPU time of both ends (the client's
# and its daemon's session), steadier than wall times on two shared CPUs.
# Afterwards every destination is compared with the source (XXH128 of every file; path,
# mode, owner, size, mtime, type, link target and link count of every name): a mismatch
# is printed and counted, not hidden: the diff is left in BENCH_DIR/cutover.TOOL.diff
# and the script exits 2.
#
# usage: bench/cutover.sh [--quick] [--jobs N] [--finalize-jobs N] [--cycles N]
#   --quick   about 5,000 names and two 40 MiB split files (smoke run)
#   (default) 86,000 files (0-128 KiB), 8,000 symlinks, 4,000 hard links, about 2,040
#             directories, 10 set-id files, 6 files of 64-128 MiB split at 32M: 100,047
#             names, about 1.2 GB
#   --jobs N  shards, and concurrent runs, of rdmacp and fpsync (default 4)
#   --finalize-jobs N  rdmacp finalize's probe sessions (default: finalize's own, the
#             shards up to the CPUs online; 1: one session)
#   --cycles N  change-and-cut-over cycles (default 3; 1 with --quick): each changes
#             other files, then runs the four ways again; every cycle's times are
#             printed, and the ratios of their medians (one run's time varies by
#             +-15 % on a small VM)
#
# Needs root (loop device, mount, owners). Environment: BENCH_DIR (where the file
# system image goes, default /var/tmp/rdmacp-bench), RDMACP_BUILD_DIR (default
# <repo>/build).
set -u
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR=$(cd "$HERE/.." && pwd)
BUILD_DIR=${RDMACP_BUILD_DIR:-$SRC_DIR/build}
RDMACP=$BUILD_DIR/rdmacp
RDMACPD=$BUILD_DIR/rdmacpd
BENCH_DIR=${BENCH_DIR:-/var/tmp/rdmacp-bench}

QUICK=0 JOBS=4 FIN_JOBS=() CYCLES=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--jobs) JOBS=$2; shift ;;
	--finalize-jobs) FIN_JOBS=(--jobs "$2"); shift ;;
	--cycles) CYCLES=$2; shift ;;
	-h | --help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 1 ;;
	esac
	shift
done
[ -n "$CYCLES" ] || CYCLES=$((QUICK ? 1 : 3))
case $CYCLES in '' | *[!0-9]* | 0) echo "--cycles: a number of at least 1" >&2; exit 1 ;; esac
if [ "$QUICK" = 1 ]; then
	NFILES=4300 NSYM=400 NHARD=200 NTOP=8 NSUB=12 BIG="40 40" IMG_SIZE=3G
else
	NFILES=86000 NSYM=8000 NHARD=4000 NTOP=40 NSUB=50 BIG="64 80 96 112 120 128" IMG_SIZE=10G
fi
SPLIT=32M

# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

{ [ -x "$RDMACP" ] && [ -x "$RDMACPD" ]; } || die "binaries not built in $BUILD_DIR"
need rsync fpsync jq python3 bc xxhsum losetup mkfs.ext4 mount umount pgrep
[ -x /usr/bin/time ] || die "needs /usr/bin/time (package time)"
[ "$(id -u)" -eq 0 ] || die "needs root (loop device, mount, owners)"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
bench_workdir cut
rm -f "$BENCH_DIR"/cutover.*.diff "$BENCH_DIR/cutover.updated"
FS=$R/fs
cut_cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	PIDS=()
	if mountpoint -q "$FS" 2>/dev/null; then
		umount "$FS" || umount -l "$FS"
	fi
	bench_cleanup
}
trap cut_cleanup EXIT

# ---------------------------------------------------------------- file system
truncate -s "$IMG_SIZE" "$R/fs.img" || die "truncate"
LOOP=$(losetup --direct-io=on -f --show "$R/fs.img") || die "losetup"
LOOPS+=("$LOOP")
mkfs.ext4 -q -F "$LOOP" || die "mkfs.ext4"
{ mkdir -p "$FS" && mount "$LOOP" "$FS"; } || die "mount $LOOP"
log "ext4 (journal) on $LOOP, direct I/O, $IMG_SIZE, at $FS"
SRC=$FS/src
mkdir -p "$FS/rd/push" "$FS/dst/rs" "$FS/dst/fp" "$R/fptmp" || die "mkdir"

# ---------------------------------------------------------------- the tree
# From a fixed seed: NTOP x NSUB leaf directories (some 0700/0750, some owned by others),
# files of 0-4 KiB (75 %), 4-32 KiB (22 %), 32-128 KiB (3 %) cut from a random pool,
# modes 0644/0600/0640/0755, one in five owned by 1000:1000, one in twenty by 1001:100;
# set-id files; symlinks (relative, one in ten dangling, some lchown'd); hard links
# (other names of files, in other directories); the big files at the top; random
# nanosecond mtimes on everything, directories last.
log "generating the tree"
python3 - "$SRC" "$NFILES" "$NSYM" "$NHARD" "$NTOP" "$NSUB" "$BIG" <<'EOF' || die "cannot generate the tree"
import os, random, sys
root = sys.argv[1]
nfiles, nsym, nhard, ntop, nsub = map(int, sys.argv[2:7])
big = [int(x) for x in sys.argv[7].split()]
rng = random.Random(32)
pool = os.urandom(16 << 20)
def when():
    return rng.randrange(1500000000, 1780000000) * 10**9 + rng.randrange(10**9)
dirs = []
for a in range(ntop):
    for b in range(nsub):
        d = os.path.join(root, "d%02d" % a, "s%02d" % b)
        os.makedirs(d)
        dirs.append(d)
files = []
for i in range(nfiles):
    r = rng.random()
    size = rng.randint(0, 4096) if r < 0.75 else rng.randint(4096, 32768) if r < 0.97 else rng.randint(32768, 131072)
    p = os.path.join(rng.choice(dirs), "f%05d" % i)
    off = rng.randrange(0, len(pool) - size)
    with open(p, "wb") as f:
        f.write(pool[off:off + size])
    os.chmod(p, rng.choice([0o644, 0o644, 0o644, 0o600, 0o640, 0o755]))
    o = rng.random()
    if o < 0.2:
        os.chown(p, 1000, 1000)
    elif o < 0.25:
        os.chown(p, 1001, 100)
    files.append(p)
for i, mode in enumerate([0o4755, 0o2755, 0o6755, 0o4711, 0o2750] * 2):
    os.chown(files[i], 0 if i % 2 else 1000, 0 if i % 3 else 50)
    os.chmod(files[i], mode)
for i, mib in enumerate(big):
    p = os.path.join(root, "big%d.img" % i)
    with open(p, "wb") as f:
        for _ in range(mib):
            off = rng.randrange(0, len(pool) - (1 << 20))
            f.write(pool[off:off + (1 << 20)])
    files.append(p)
names = []
for i in range(nhard):
    t = rng.choice(files[:nfiles])
    p = os.path.join(rng.choice(dirs), "h%05d" % i)
    os.link(t, p)
for i in range(nsym):
    d = rng.choice(dirs)
    t = os.path.relpath(rng.choice(files[:nfiles]), d) if i % 10 else "missing-%d" % i
    p = os.path.join(d, "l%05d" % i)
    os.symlink(t, p)
    if i % 7 == 0:
        os.lchown(p, 1000, 1000)
    names.append(p)
for p in files + names:
    t = when()
    os.utime(p, ns=(t, t), follow_symlinks=False)
alld = dirs + sorted({os.path.dirname(d) for d in dirs}) + [root]
for j, d in enumerate(alld):
    if j % 50 == 1:
        os.chmod(d, 0o700)
    elif j % 50 == 2:
        os.chmod(d, 0o750)
    if j % 40 == 3:
        os.chown(d, 1000, 1000)
    t = when()
    os.utime(d, ns=(t, t))
EOF
NAMES=$(find "$SRC" | wc -l)
BYTES=$(find "$SRC" -type f -links 1 -printf '%s\n' | awk '{ s += $1 } END { printf "%d", s }')
BYTES=$((BYTES + $(find "$SRC" -type f -links +1 -printf '%i %s\n' | sort -u | awk '{ s += $2 } END { printf "%d", s }')))
log "tree: $NAMES names, $BYTES bytes"

# ---------------------------------------------------------------- daemons
bench_rdmacpd "$FS/rd" 300 "preserve owner = yes
keep setid = yes"
RD_PID=${PIDS[${#PIDS[@]} - 1]}
# Symlinks as they are (rsyncd munges them without a chroot: the targets would differ).
bench_rsyncd "$FS/dst" "munge symlinks = no"
RS_PID=${PIDS[${#PIDS[@]} - 1]}
RS_URL=rsync://127.0.0.1:$RS_PORT/bench

# Every name's path, mode, owner, size (not a directory's: the file system's business),
# mtime, type, link target and link count, then the XXH128 of every file.
listing() { # DIR
	(cd "$1" && find . -printf '%P %m %U:%G %s %T@ %y %l %n\n' |
		awk '$7 == "d" { $4 = "-" } 1' | sort &&
		find . -type f -print0 | sort -z | xargs -0 -r xxhsum -H128 -q)
}
# Warm the page cache the same way before every timed run: the source's and the
# destination's inodes and the source's data, then sync.
warm() { # DST
	find "$SRC" "$1" -printf '' && find "$SRC" -type f -print0 | xargs -0 cat >/dev/null
	sync -f "$FS"
}
rd_shards() { # PLAN TAG: every shard's run at once
	local s pids=() rc=0
	for s in $(seq 0 $((JOBS - 1))); do
		"${RD[@]}" run "$1" --shard "$s/$JOBS" --json >"$R/$2.run.$s.json" 2>"$R/$2.run.$s.err" &
		pids+=($!)
	done
	for s in "${pids[@]}"; do wait "$s" || rc=1; done
	return $rc
}
rd_migrate() { # TAG: plan, runs, finalize; T_PLAN T_RUN T_FIN T_ALL
	local t0 t1 t2 t3
	t0=$(now)
	"${RD[@]}" -q plan -a -H --owner --skip quick --shards "$JOBS" --split-size "$SPLIT" \
		"$SRC" 127.0.0.1:bench/ -o "$R/$1.plan" || die "$1: rdmacp plan failed"
	t1=$(now)
	rd_shards "$R/$1.plan" "$1" || die "$1: rdmacp run failed: $(cat "$R/$1".run.*.err | head -5)"
	t2=$(now)
	"${RD[@]}" finalize "$R/$1.plan" ${FIN_JOBS[@]+"${FIN_JOBS[@]}"} --json >"$R/$1.fin.json" 2>"$R/$1.fin.err" ||
		die "$1: rdmacp finalize failed: $(head -5 "$R/$1.fin.err")"
	sync -f "$FS"
	t3=$(now)
	T_PLAN=$(echo "$t1 - $t0" | bc -l) T_RUN=$(echo "$t2 - $t1" | bc -l)
	T_FIN=$(echo "$t3 - $t2" | bc -l) T_ALL=$(echo "$t3 - $t0" | bc -l)
}
# CPU seconds of DAEMON_PID's sessions that ended (it reaps them: their processes', their
# children's and their threads' time).
child_cpu() { # DAEMON_PID
	awk -v hz="$(getconf CLK_TCK)" '{ print ($16 + $17) / hz }' "/proc/$1/stat"
}
# A run's CPU seconds on both ends: the client's (TIMEFILE, /usr/bin/time's "%U %S") and its
# daemon's session (once reaped), on a VM whose two CPUs make wall times noisy.
cpu_total() { # TIMEFILE DAEMON_PID DAEMON_CPU_BEFORE
	for _ in $(seq 100); do
		pgrep -P "$2" >/dev/null || break
		sleep 0.02
	done
	echo "$(tail -1 "$1" | awk '{ print $1 + $2 }') + $(child_cpu "$2") - $3" | bc -l
}
rp_migrate() { # TAG: one push, the same command both times; T_ALL, CPU_ALL
	local t0 c0
	c0=$(child_cpu "$RD_PID")
	t0=$(now)
	/usr/bin/time -f '%U %S' -o "$R/$1.push.cpu" \
		"${RD[@]}" -aH --owner --skip quick -r --json "$SRC" 127.0.0.1:bench/push/ \
		>"$R/$1.push.json" 2>"$R/$1.push.err" || die "$1: rdmacp push failed: $(head -5 "$R/$1.push.err")"
	sync -f "$FS"
	T_ALL=$(echo "$(now) - $t0" | bc -l)
	CPU_ALL=$(cpu_total "$R/$1.push.cpu" "$RD_PID" "$c0")
}
rs_migrate() { # TAG; T_ALL, CPU_ALL
	local t0 c0
	c0=$(child_cpu "$RS_PID")
	t0=$(now)
	/usr/bin/time -f '%U %S' -o "$R/$1.rs.cpu" \
		rsync -aH --numeric-ids --stats "$SRC" "$RS_URL/rs/" >"$R/$1.rs.stats" 2>"$R/$1.rs.err" ||
		die "$1: rsync failed: $(head -5 "$R/$1.rs.err")"
	sync -f "$FS"
	T_ALL=$(echo "$(now) - $t0" | bc -l)
	CPU_ALL=$(cpu_total "$R/$1.rs.cpu" "$RS_PID" "$c0")
}
fp_migrate() { # TAG
	local t0
	t0=$(now)
	fpsync -n "$JOBS" -t "$R/fptmp" -o "-lptgoDH --numeric-ids" "$SRC/" "$RS_URL/fp/src/" \
		>"$R/$1.fp.out" 2>&1 || die "$1: fpsync failed: $(tail -5 "$R/$1.fp.out")"
	sync -f "$FS"
	T_ALL=$(echo "$(now) - $t0" | bc -l)
}

# ---------------------------------------------------------------- first migration
log "first migration: rdmacp"
warm "$FS/rd"
rd_migrate first
F_RD=$T_ALL
log "first migration: rdmacp push"
warm "$FS/rd/push"
rp_migrate first
F_RP=$T_ALL
log "first migration: rsync"
warm "$FS/dst/rs"
rs_migrate first
F_RS=$T_ALL
log "first migration: fpsync"
mkdir -p "$FS/dst/fp/src"
warm "$FS/dst/fp"
fp_migrate first
F_FP=$T_ALL

# ---------------------------------------------------------------- the cut-overs
# Each cycle: 0.1 % of the regular files (not the big ones) change in content: half
# appended to (1-4 KiB), half rewritten at the same size; each given a new mtime. Another
# 0.1 % in metadata only: half chmod, half chown; size and mtime kept. Then each way runs
# again (the cut-over), timed.
change() { # CYCLE: prints "files changed, their bytes"
	python3 - "$SRC" "$1" <<'EOF'
import os, random, sys
root, cycle = sys.argv[1], int(sys.argv[2])
rng = random.Random(3232 + cycle - 1)
files, seen = [], set()
for d, _, names in sorted(os.walk(root)):
    for n in sorted(names):
        p = os.path.join(d, n)
        st = os.lstat(p)
        if os.path.islink(p) or st.st_ino in seen or n.startswith("big"):
            continue
        seen.add(st.st_ino)
        files.append(p)
k = max(2, round(len(files) / 1000))
pick = rng.sample(files, 2 * k)
changed = 0
for i, p in enumerate(pick[:k]):
    if i % 2:
        with open(p, "ab") as f:
            f.write(os.urandom(rng.randint(1024, 4096)))
    else:
        size = os.path.getsize(p)
        with open(p, "r+b") as f:
            f.write(os.urandom(size))
    t = (1790000000 + cycle) * 10**9 + rng.randrange(10**9)
    os.utime(p, ns=(t, t))
    changed += os.path.getsize(p)
for i, p in enumerate(pick[k:]):
    st = os.stat(p)
    if i % 2:
        os.chmod(p, (st.st_mode & 0o7777) ^ 0o044)
    else:
        os.chown(p, 1002 + cycle, 1002 + cycle)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
print(k, changed)
EOF
}
# What rdmacp sent and did in cycle C's cut-over, from its --json summaries.
cut_counts() { # C
	local c=$1
	cat "$R"/cut"$c".run.*.json "$R/cut$c.fin.json" | jq -s '[.[] | select(.event == "summary")] |
		{bytes: (map(.bytes) | add), files: (map(.files) | add), updated: (map(.updated) | add)}' \
		>"$R/cut$c.sum" || die "cannot read rdmacp's --json"
	RD_BYTES[c]=$(jq .bytes "$R/cut$c.sum")
	RD_FILES[c]=$(jq .files "$R/cut$c.sum")
	RD_UPD[c]=$(jq .updated "$R/cut$c.sum")
	# The names rdmacp brought in line without data, for a look against what changed.
	cat "$R"/cut"$c".run.*.json "$R/cut$c.fin.json" | jq -r 'select(.event == "file" and .action == "updated")
		| "\(.type) \(.name) \(.changes // [] | join(","))"' | sort | sed "s/^/$c /" >>"$BENCH_DIR/cutover.updated"
	RD_KEPT[c]=$(cat "$R"/cut"$c".run.*.json | jq -s '[.[] | select(.event == "run") | .ranges_kept] | add')
	read -r "RP_BYTES[c]" "RP_UPD[c]" "RP_FILES[c]" < <(jq -r 'select(.event == "summary") |
		"\(.bytes) \(.updated) \(.files)"' "$R/cut$c.push.json") || die "cannot read the push's --json"
	RS_SENT[c]=$(awk -F': ' '/^Total bytes sent/ { gsub(",", "", $2); print $2 }' "$R/cut$c.rs.stats")
	RS_LIT[c]=$(awk -F': ' '/^Literal data/ { gsub(/[, a-z]/, "", $2); print $2 }' "$R/cut$c.rs.stats")
}
declare -a NCHANGED CHANGED_BYTES C_RD C_PLAN C_RUN C_FIN RD_SESSIONS C_RP C_RS C_FP U_RP U_RS
declare -a RD_BYTES RD_FILES RD_UPD RD_KEPT RP_BYTES RP_UPD RP_FILES RS_SENT RS_LIT
for c in $(seq "$CYCLES"); do
	log "cycle $c: changing the tree"
	read -r "NCHANGED[c]" "CHANGED_BYTES[c]" < <(change "$c")
	[ -n "${CHANGED_BYTES[c]}" ] || die "cannot change the tree"
	log "cycle $c: changed ${NCHANGED[c]} files in content (${CHANGED_BYTES[c]} bytes), ${NCHANGED[c]} in metadata only"
	log "cycle $c: cut-over: rdmacp"
	warm "$FS/rd"
	n0=$(grep -c ': connected (' "$R/d.log")
	rd_migrate "cut$c"
	RD_SESSIONS[c]=$(($(grep -c ': connected (' "$R/d.log") - n0))
	C_RD[c]=$T_ALL C_PLAN[c]=$T_PLAN C_RUN[c]=$T_RUN C_FIN[c]=$T_FIN
	log "cycle $c: cut-over: rdmacp push"
	warm "$FS/rd/push"
	rp_migrate "cut$c"
	C_RP[c]=$T_ALL U_RP[c]=$CPU_ALL
	log "cycle $c: cut-over: rsync"
	warm "$FS/dst/rs"
	rs_migrate "cut$c"
	C_RS[c]=$T_ALL U_RS[c]=$CPU_ALL
	log "cycle $c: cut-over: fpsync"
	warm "$FS/dst/fp"
	fp_migrate "cut$c"
	C_FP[c]=$T_ALL
	cut_counts "$c"
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- verify
log "comparing the destinations with the source"
listing "$SRC" >"$R/src.list"
MISMATCH=0
verify() { # NAME DIR
	listing "$2" >"$R/$1.list" 2>&1
	if cmp -s "$R/src.list" "$R/$1.list"; then
		V[$1]=equal
	else
		diff "$R/src.list" "$R/$1.list" >"$BENCH_DIR/cutover.$1.diff"
		V[$1]="DIFFERS: $(grep -c '^<' "$BENCH_DIR/cutover.$1.diff") lines of the source's listing not matched (diff: $BENCH_DIR/cutover.$1.diff)"
		echo "# $1: first differences (< source, > destination):" >&2
		head -8 "$BENCH_DIR/cutover.$1.diff" >&2
		MISMATCH=1
	fi
}
declare -A V
verify rdmacp "$FS/rd/src"
verify push "$FS/rd/push/src"
verify rsync "$FS/dst/rs/src"
verify fpsync "$FS/dst/fp/src"

# ---------------------------------------------------------------- report
r2() { echo "$1 / $2" | bc -l; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
row() { printf '%-40s %9.2fs %9.2fs %9.2fs %9.2fs\n' "$@"; }
ratios() { printf '%-40s %10s %10s %9.2fx %9.2fx\n' "$1" "" "" "$(r2 "$3" "$2")" "$(r2 "$4" "$2")"; }
echo "rdmacp $("$RDMACP" --version 2>&1 | head -1); $(rsync --version | head -1); $(fpsync -h 2>&1 | head -1)"
echo "$(nproc) CPUs, $(uname -r); tcp over loopback (NOT RDMA); ext4 on a loop device; load $LOAD_START at the start, $LOAD_END after the cut-overs"
echo "tree: $NAMES names, $BYTES bytes; $JOBS shards / jobs; each of $CYCLES cycles changes ${NCHANGED[1]} files in content, as many in metadata only"
printf '%-40s %10s %10s %10s %10s\n' "" rdmacp push rsync fpsync
row "first migration" "$F_RD" "$F_RP" "$F_RS" "$F_FP"
for c in $(seq "$CYCLES"); do
	row "cut-over $c" "${C_RD[c]}" "${C_RP[c]}" "${C_RS[c]}" "${C_FP[c]}"
done
M_RD=$(median "${C_RD[@]}") M_RP=$(median "${C_RP[@]}") M_RS=$(median "${C_RS[@]}") M_FP=$(median "${C_FP[@]}")
row "cut-over, median of $CYCLES" "$M_RD" "$M_RP" "$M_RS" "$M_FP"
ratios "medians / rdmacp's (goal >= 2x)" "$M_RD" "$M_RS" "$M_FP"
ratios "medians / push's (goal >= 2x)" "$M_RP" "$M_RS" "$M_FP"
for c in $(seq "$CYCLES"); do
	ratios "cycle $c / push's" "${C_RP[c]}" "${C_RS[c]}" "${C_FP[c]}"
done
M_URP=$(median "${U_RP[@]}") M_URS=$(median "${U_RS[@]}")
printf '%-40s %10s %9.2fs %9.2fs %10s\n' "CPU of both ends, median of $CYCLES" "" "$M_URP" "$M_URS" ""
printf '%-40s %10s %10s %9.2fx %10s\n' "CPU medians / push's" "" "" "$(r2 "$M_URS" "$M_URP")" ""
printf '%-40s %10s %10s %10s %10s\n' "destination = source at the end" "${V[rdmacp]%%:*}" "${V[push]%%:*}" "${V[rsync]%%:*}" "${V[fpsync]%%:*}"
for c in $(seq "$CYCLES"); do
	echo "cycle $c: changed ${NCHANGED[c]} in content (${CHANGED_BYTES[c]} bytes), ${NCHANGED[c]} in metadata only"
	echo "  rdmacp: plan $(printf %.2f "${C_PLAN[c]}") s, $JOBS runs $(printf %.2f "${C_RUN[c]}") s, finalize $(printf %.2f "${C_FIN[c]}") s (${FIN_JOBS[*]:-default jobs}); ${RD_SESSIONS[c]} daemon sessions; ${RD_FILES[c]} files sent, ${RD_UPD[c]} updated, ${RD_KEPT[c]} split ranges kept"
	echo "  push: ${RP_FILES[c]} files sent, ${RP_UPD[c]} updated; CPU of both ends: push $(printf %.2f "${U_RP[c]}") s, rsync $(printf %.2f "${U_RS[c]}") s"
	echo "  bytes sent / changed bytes (goal <= 1.05): rdmacp $(printf %.3f "$(r2 "${RD_BYTES[c]}" "${CHANGED_BYTES[c]}")"), push $(printf %.3f "$(r2 "${RP_BYTES[c]}" "${CHANGED_BYTES[c]}")"); rsync: literal data ${RS_LIT[c]}, total sent ${RS_SENT[c]}"
done
for t in rdmacp push rsync fpsync; do
	[ "${V[$t]}" = equal ] || echo "$t: ${V[$t]}"
done
[ "$MISMATCH" = 0 ] || exit 2
