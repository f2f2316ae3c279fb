#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A migration keeps everything, every pass (issue 32), with rsync -aHAX
# --numeric-ids as root as the reference. A tree with every entry type and
# attribute (tests/tools/fidelity.py: owners of files, directories and
# symlinks, modes with 0700/0555 directories and set-id files, nanosecond
# times on every entry, hard links, xattrs, ACLs, a sparse file) is copied by
# rsync and by rdmacp -a -H -X -A --owner: a push, a pull, and after
# changes (chmod, chown, touch, content, file -> directory, symlink
# retargeted, hard link broken, xattr and ACL changed with content,
# deletions) a re-run of each with --skip quick --delete. After every pass
# the destinations compare equal, attribute by attribute. The re-run after
# metadata-only changes (modes, owners, times, xattrs and ACLs added, changed
# and removed on kept files and directories) sends no data but a touched
# file's, counts them "updated" and itemizes them (-v, --json) as rsync -i
# does (a kept file's and directory's xattrs and ACLs too); an unchanged re-run lists
# nothing. Last, the cut-over as one push with the plan's options over the plan's copy.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (owners)"
command -v rsync >/dev/null || skip "rsync not installed"
command -v python3 >/dev/null || skip "python3 not installed"
command -v jq >/dev/null || skip "jq not installed"
FID="$SRC_DIR/tests/tools/fidelity.py"
HOST=127.0.0.1

touch "$T/probe"
python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.p", b"1")' "$T/probe" 2>/dev/null ||
	skip "the file system of $T does not keep user attributes"

mkdir -p "$T/src"
python3 "$FID" make "$T/src/tree" || die "make the tree"
setup_standard "preserve owner = yes" "keep setid = yes" \
	"[src]" "path = $T/src" "allow = client" "read only = yes" "preserve owner = yes"
A=(-a -H -X -A --owner)

# same DESC DIR: DIR equals rsync's copy, attribute by attribute.
same() {
	if python3 "$FID" compare "$T/rs" "$2" >"$T/cmp" 2>&1; then
		pass "$1: equal to rsync's, attribute by attribute"
	else
		fail "$1: $(wc -l <"$T/cmp") differences: $(head -8 "$T/cmp" | tr '\n' '|')"
	fi
}

# summary KEY: a field of the --json summary in $T/out.
summary() { jq -r "select(.event == \"summary\") | .$1" "$T/out"; }

# migrate DESC [FINALIZE-ARGS]: plan -a -H -X -A --owner --skip quick in 2 shards (the 4 MiB sparse file
# split in 1 MiB ranges), run both, finalize, into data/mig/ (a trailing slash: the
# assembler opens the directory it names); then equal to rsync's.
migrate() {
	local i
	rm -f "$T/plan" "$T/plan".journal.*
	expect_rc 0 "$1: plan" "${CLIENT[@]}" plan "${A[@]}" --skip quick --shards 2 --split-size 1M \
		"$T/src/tree" "$HOST:data/mig/" -o "$T/plan"
	for i in 0 1; do
		expect_rc 0 "$1: run shard $i" "${CLIENT[@]}" -q run --json "$T/plan" --shard "$i/2"
		cp "$T/out" "$T/mig.$i.json"
	done
	expect_rc 0 "$1: finalize ${2:-}" "${CLIENT[@]}" finalize --json ${2:-} "$T/plan"
	same "$1 (plan, run, finalize)" "$T/mod/mig/tree"
	# What the runs and finalize brought in line without data, all told.
	MIG_UPDATED=$(cat "$T/mig.0.json" "$T/mig.1.json" "$T/out" |
		jq -s '[.[] | select(.event == "summary") | .updated] | add')
	MIG_UPDATED_NAMES=$(cat "$T/mig.0.json" "$T/mig.1.json" "$T/out" |
		jq -r 'select(.action == "updated") | .name' | sort | tr '\n' ' ')
}

# ---- first copies -----------------------------------------------------------
rsync -aHAX --numeric-ids "$T/src/tree/" "$T/rs/" || die "rsync"
mkdir -p "$T/pull"
expect_rc 0 "push -a -H -X -A --owner" "${CLIENT[@]}" "${A[@]}" "$T/src/tree" "$HOST:data/"
same "push" "$T/mod/tree"
expect_rc 0 "pull -a -H -X -A --owner" "${CLIENT[@]}" "${A[@]}" "$HOST:src/tree" "$T/pull/"
same "pull" "$T/pull/tree"
migrate "first migration"

# ---- an unchanged re-run: nothing sent, nothing listed -----------------------
expect_rc 0 "unchanged re-run, -v" "${CLIENT[@]}" "${A[@]}" -v --skip quick \
	"$T/src/tree" "$HOST:data/"
listed=$(grep -cE '^[<>ch.][fdL][.+a-z]{9} ' "$T/err")
[ "$listed" = 0 ] && pass "unchanged: -v lists nothing" ||
	fail "unchanged: -v lists $listed: $(grep -E '^[<>ch.][fdL]' "$T/err" | head -5 | tr '\n' '|')"
expect_rc 0 "unchanged re-run, --json" "${CLIENT[@]}" "${A[@]}" --json --skip quick \
	"$T/src/tree" "$HOST:data/"
[ "$(summary files)/$(summary updated)/$(summary bytes)" = 0/0/0 ] &&
	pass "unchanged: 0 copied, 0 updated, 0 bytes ($(summary skipped) unchanged)" ||
	fail "unchanged: copied $(summary files), updated $(summary updated), $(summary bytes) bytes"

# ---- metadata alone: updated, no data ---------------------------------------
python3 "$FID" meta "$T/src/tree" || die "meta changes"
rsync -aHAX --numeric-ids "$T/src/tree/" "$T/rs/" || die "rsync"
expect_rc 0 "metadata-only re-run, push" "${CLIENT[@]}" "${A[@]}" --json --skip quick \
	"$T/src/tree" "$HOST:data/"
same "push after chmod, chown, touch" "$T/mod/tree"
# A file touched (its mtime) is data to compare, as rsync's quick check takes it: copied.
[ "$(summary files)/$(summary bytes)" = 1/70000 ] &&
	pass "metadata only: only the touched file's data sent" ||
	fail "metadata only: copied $(summary files), $(summary bytes) bytes"
# Files whose attributes alone changed (hl2 by its link hl1, ro/file, sparse) are itemized too.
[ "$(summary updated)" = 8 ] && pass "metadata only: 8 updated" ||
	fail "metadata only: $(summary updated) updated, wanted 8"
changes=$(jq -r 'select(.action == "updated" or .action == "copied") |
	"\(.name) \(.changes | join(","))"' "$T/out" | sort | tr '\n' '|')
want="tree/hl2 xattrs|tree/link-a times,owner,group|tree/open perms|tree/open/a perms,xattrs|"
want+="tree/open/b owner,group|tree/open/deep/c content,times|tree/private owner,group,xattrs|"
want+="tree/ro/file xattrs|tree/sparse acls|"
[ "$changes" = "$want" ] && pass "--json says what changed: $changes" ||
	fail "--json changes: $changes, wanted $want"
expect_rc 0 "metadata-only re-run, pull -v" "${CLIENT[@]}" "${A[@]}" -v --skip quick \
	"$HOST:src/tree" "$T/pull/"
same "pull after chmod, chown, touch" "$T/pull/tree"
grep -qx '\.d\.\.\.p\.\.\.\.\. tree/open/' "$T/err" &&
	grep -qx '\.L\.\.t\.og\.\.\. tree/link-a' "$T/err" &&
	grep -q '^>f\.\.t\.\.\.\.\.\. tree/open/deep/c  70000 bytes' "$T/err" &&
	pass "-v itemizes as rsync -i: $(grep -E '^\.[dL]' "$T/err" | head -2 | tr '\n' '|')" ||
	fail "-v itemized lines: $(grep -E '^[.<>c]' "$T/err" | head -8 | tr '\n' '|')"

migrate "migration after chmod, chown, touch"
# Each entry changed counted once, as the push counted them: none again in finalize or the
# other shard, none that a shard's own writes touched.
[ "$MIG_UPDATED" = 8 ] && pass "migration after chmod, chown, touch: 8 updated" ||
	fail "migration after chmod, chown, touch: $MIG_UPDATED updated, wanted 8: $MIG_UPDATED_NAMES"

# ---- every kind of change, with --delete ------------------------------------
python3 "$FID" change "$T/src/tree" || die "changes"
rsync -aHAX --numeric-ids --delete "$T/src/tree/" "$T/rs/" || die "rsync"
# A dry run first: a file that became a directory would be replaced, as the run does.
expect_rc 0 "dry run of the changes" "${CLIENT[@]}" "${A[@]}" -n --skip quick --delete \
	"$T/src/tree" "$HOST:data/"
grep -q "^would copy tree/becomesdir/inside " "$T/out" && grep -q "^would delete tree/gone" "$T/out" &&
	pass "-n: the file that became a directory, and the deletion" ||
	fail "-n lists: $(head -8 "$T/out" | tr '\n' '|')"
expect_rc 0 "re-run after changes, push" "${CLIENT[@]}" "${A[@]}" --skip quick --delete \
	"$T/src/tree" "$HOST:data/"
same "push after changes" "$T/mod/tree"
expect_rc 0 "re-run after changes, pull" "${CLIENT[@]}" "${A[@]}" --skip quick --delete \
	"$HOST:src/tree" "$T/pull/"
same "pull after changes" "$T/pull/tree"
migrate "migration after changes" --delete

# ---- a dry run lists what would change only ---------------------------------
python3 -c 'import os,sys; os.chmod(sys.argv[1], 0o750)' "$T/src/tree/ro" || die "chmod"
expect_rc 0 "dry run after one chmod" "${CLIENT[@]}" "${A[@]}" -n --skip quick \
	"$T/src/tree" "$HOST:data/"
[ "$(cat "$T/out")" = "would update tree/ro (.d...p.....)" ] && pass "-n: only the change" ||
	fail "-n lists: $(head -5 "$T/out" | tr '\n' '|')"

# ---- the cut-over in one push, over the plan's copy (docs/MIGRATION.md) -------
# The plan's options as a push to the plan's destination: its names land where the
# plan's do, and only the change is made.
rsync -aHAX --numeric-ids --delete "$T/src/tree/" "$T/rs/" || die "rsync"
expect_rc 0 "one-push cut-over over the plan's copy" "${CLIENT[@]}" "${A[@]}" --json \
	--skip quick --delete "$T/src/tree" "$HOST:data/mig/"
same "the plan's copy after a one-push cut-over" "$T/mod/mig/tree"
[ "$(summary files)/$(summary updated)/$(summary bytes)/$(summary deleted)" = 0/1/0/0 ] &&
	pass "one-push cut-over: only the chmod, updated" ||
	fail "one-push cut-over: copied $(summary files), updated $(summary updated), \
$(summary bytes) bytes, deleted $(summary deleted)"
finish
