#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rdmacp run, finalize and report fed hand-edited plans and journals
# (SECURITY.md 49), against a real daemon. The editor here is hostile: it
# numbers the entries again and computes the plan's digest again
# (tests/tools/planforge.py), so the reader's checks of order, count and
# digest pass and only the checks of what the entries say are left.
#   1. names that leave the plan's source: "..", an absolute name, a name
#      beside the planned tree (in its base directory), a NUL escape, ".."
#      in hex, a hard link's target, entries pasted from another plan: run
#      and finalize exit 19 naming PLAN:LINE, nothing is sent, nothing
#      outside the source reaches the module; a name through a symlink in
#      the source (a whole file, and a split file's ranges): the entry
#      fails, nothing behind the symlink is read;
#   2. shard numbers: an entry in shard 7 of 2, a header of 0 or 70000
#      shards: 19; --shard 2/2: 1;
#   3. journals: a line naming no entry of the plan (another plan's), a
#      garbled line, a line with a NUL byte in it, a name with "..": run,
#      finalize and report exit 19 naming JOURNAL:LINE; a last line cut
#      short (a run killed while it wrote) or a tail of NUL bytes (a crash
#      before the data reached the disk): left out, the run goes on and cuts
#      them;
#   4. a journal that claims done what was never sent: the shard's run
#      leaves it out (the journal is its record), finalize checks the
#      destination: exit 15 naming the file, nothing changed, the file
#      marked failed in its shard's journal; the shard's next run sends it,
#      finalize exits 0, the trees are identical; the same for a file whose
#      copy at the destination has another size.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
command -v xxh128sum >/dev/null || skip "xxh128sum not installed (xxhash)"
command -v python3 >/dev/null || skip "python3 not installed"
FORGE=$SRC_DIR/tests/tools/planforge.py
setup_standard
HOST=127.0.0.1

S=$T/src/tree
mkdir -p "$S/a/b" "$S/c" "$T/outside" "$T/src/other" "$T/plans"
for i in $(seq 1 12); do echo "file $i" >"$S/a/f$i"; done
for i in $(seq 1 4); do head -c $((i * 3000)) /dev/urandom >"$S/a/b/g$i"; done
echo "in c" >"$S/c/x"
# What no plan of $S may read: beside the tree in its base, far away, behind a symlink.
echo "SECRET beside the tree" >"$T/src/secret"
echo "SECRET outside" >"$T/outside/secret"
echo "SECRET of another plan" >"$T/src/other/x"
ln -s "$T/outside" "$S/link"
P=$T/plans/p.plan
expect_rc 0 "plan -a --shards 2" "${CLIENT[@]}" plan -a --shards 2 "$S" "$HOST:data/dst" -o "$P"
expect_rc 0 "another plan" "${CLIENT[@]}" plan -a --shards 2 "$T/src/other" "$HOST:data/dst" \
	-o "$T/plans/other.plan"

no_secret() { # DESC: nothing from outside the planned tree reached the module
	if grep -rqs SECRET "$T/mod"; then
		fail "$1: read outside the source: $(grep -rls SECRET "$T/mod" | tr '\n' ' ')"
	else
		pass "$1: nothing outside the source read"
	fi
}
forge() { # OUT EDIT: the plan edited, numbered and digested again
	python3 "$FORGE" "$P" "$1" "$2" || die "planforge $2"
}
# The first regular file's entry, to clone.
F='f = [e for e in entries if e["type"] == "file"][0]
'

# The editor's tool is right: an unchanged plan forged again is a good plan.
forge "$T/plans/same.plan" 'pass'
expect_rc 0 "a plan forged again unchanged reads as good" "${CLIENT[@]}" report "$T/plans/same.plan"
rm -f "$T/plans/same.plan"*

# ---- 1. names that leave the source ------------------------------------------------------
hostile_plan() { # DESC WANT EDIT: run and finalize exit 19, naming the plan's line; nothing sent
	local desc=$1 want=$2 edit=$3
	rm -rf "$T/plans/bad.plan"* "$T/mod/dst"
	forge "$T/plans/bad.plan" "$edit"
	expect_rc 19 "$desc: run" "${CLIENT[@]}" run "$T/plans/bad.plan" --shard 0/2
	if grep -q "bad.plan:[0-9][0-9]*: .*$want" "$T/err"; then
		pass "$desc: '$(grep -m1 bad.plan "$T/err")'"
	else
		fail "$desc: message: $(head -3 "$T/err")"
	fi
	[ ! -e "$T/mod/dst" ] && pass "$desc: nothing sent" ||
		fail "$desc: sent: $(find "$T/mod/dst" | head -5 | tr '\n' ' ')"
	expect_rc 19 "$desc: finalize" "${CLIENT[@]}" finalize "$T/plans/bad.plan"
	no_secret "$desc"
}
hostile_plan "a name with .. out of the base" "not a name beneath" \
	"$F"'entries.append(dict(f, name="../outside/secret", shard=0))'
hostile_plan "a name with .. inside it" "not a name beneath" \
	"$F"'entries.append(dict(f, name="tree/a/../../secret", shard=0))'
hostile_plan "an absolute name" "not a name beneath" \
	"$F"'entries.append(dict(f, name="'"$T"'/outside/secret", shard=0))'
hostile_plan "a name beside the planned tree" "not beneath the plan's top entry" \
	"$F"'entries.append(dict(f, name="secret", shard=0))'
hostile_plan "an empty name" '"name" is' \
	"$F"'entries.append(dict(f, name="", shard=0))'
hostile_plan "a NUL escape in a name" "NUL" \
	"$F"'entries.append(dict(f, name="tree/a\u0000/../../secret", shard=0))'
hostile_plan "a name with .. in hex" "not a name beneath" \
	"$F"'e = dict(f, shard=0); del e["name"]; e["name_hex"] = b"tree/../secret".hex(); entries.append(e)'
hostile_plan "a hard link to a name beside the tree" "not beneath the plan's top entry" \
	"$F"'header["hardlinks"] = True
entries.append(dict(f, type="hardlink", name="tree/a/ln", link="secret", shard=0, size=0))'
hostile_plan "a hard link to an absolute name" "not a name beneath" \
	"$F"'header["hardlinks"] = True
entries.append(dict(f, type="hardlink", name="tree/a/ln", link="/etc/hostname", shard=0, size=0))'
hostile_plan "the entries of another plan pasted in" "not beneath the plan's top entry" \
	'entries.extend(dict(json.loads(l), shard=0) for l in open("'"$T"'/plans/other.plan").read().splitlines()[1:])'
hostile_plan "a plan whose first entry is not one name" "the first entry" \
	'entries[0]["name"] = "tree/a"'

# Beneath the tree by name, through a symlink in the source: the name is fine, the file is not read.
rm -rf "$T/plans/bad.plan"* "$T/mod/dst"
forge "$T/plans/bad.plan" "$F"'entries.append(dict(f, name="tree/link/secret", shard=0))'
expect_rc 9 "a name through a symlink in the source: the entry fails" \
	"${CLIENT[@]}" run "$T/plans/bad.plan" --shard 0/2
grep -q "tree/link/secret.*symlink" "$T/err" && pass "says the symlink is not followed" ||
	fail "message: $(head -3 "$T/err")"
no_secret "a name through a symlink"
rm -rf "$T/plans/bad.plan"* "$T/mod/dst"
forge "$T/plans/bad.plan" "$F"'size = 15
entries.append(dict(f, name="tree/link/secret", shard=0, size=size, ranges=2))
entries.append(dict(f, type="range", name="tree/link/secret", shard=0, range=0, offset=0, size=8))
entries.append(dict(f, type="range", name="tree/link/secret", shard=0, range=1, offset=8, size=7))'
expect_rc 9 "a split file through a symlink in the source: its ranges fail" \
	"${CLIENT[@]}" run "$T/plans/bad.plan" --shard 0/2
no_secret "ranges through a symlink"
[ -z "$(find "$T/mod" -type f -path '*rdmacp-split*' -size +0)" ] && pass "no part of it at the destination" ||
	fail "parts: $(find "$T/mod" -path '*rdmacp-split*' | tr '\n' ' ')"

# ---- 2. shard numbers ---------------------------------------------------------------------
hostile_plan "an entry in shard 7 of 2" "shard 7, but the plan has 2 shards" \
	'entries[3]["shard"] = 7'
hostile_plan "a header of 0 shards" '"shards" is not 1..65536' 'header["shards"] = 0'
hostile_plan "a header of 70000 shards" '"shards" is not 1..65536' 'header["shards"] = 70000'
expect_rc 1 "--shard 2/2" "${CLIENT[@]}" run "$P" --shard 2/2
rm -rf "$T/plans/bad.plan"* "$T/mod/dst"

# ---- 3. journals --------------------------------------------------------------------------
for i in 0 1; do
	expect_rc 0 "shard $i" "${CLIENT[@]}" -q run "$P" --shard $i/2
done
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P"
expect_same_tree "the plan, run" "$S" "$T/mod/dst/tree"
J=$P.journal.0
cp "$J" "$T/j0.good"
hostile_journal() { # DESC WANT EDIT: run, finalize and report exit 19 naming the journal's line
	local desc=$1 want=$2 edit=$3 line
	cp "$T/j0.good" "$J"
	eval "$edit"
	line=$(($(wc -l <"$T/j0.good") + 1))
	expect_rc 19 "$desc: run" "${CLIENT[@]}" run "$P" --shard 0/2
	grep -q "p.plan.journal.0:$line: .*$want" "$T/err" && pass "$desc: '$(head -1 "$T/err")'" ||
		fail "$desc: message: $(head -3 "$T/err")"
	expect_rc 19 "$desc: finalize" "${CLIENT[@]}" finalize "$P"
	expect_rc 19 "$desc: report" "${CLIENT[@]}" report "$P"
}
hostile_journal "a line for a name not in the plan" "no entry of this plan" \
	'echo "{\"state\":\"copied\",\"name\":\"tree/never-planned\"}" >>"$J"'
hostile_journal "a line from another plan's journal" "no entry of this plan" \
	'echo "{\"state\":\"copied\",\"name\":\"other/x\"}" >>"$J"'
hostile_journal "a range of a file that is not split" "no entry of this plan" \
	'echo "{\"state\":\"copied\",\"name\":\"tree/a/f1\",\"range\":0,\"xxh128\":\"00000000000000000000000000000000\"}" >>"$J"'
hostile_journal "a garbled line" "" \
	'printf "{\"state\":\"copied\",\"na\n{\"run\":\"start\",\"t\":1}\n" >>"$J"'
hostile_journal "a NUL byte in a line" "NUL" \
	'printf "{\"state\":\"copied\",\"name\":\"tree/a/f1\"}\0\n{\"run\":\"start\",\"t\":1}\n" >>"$J"'
hostile_journal "a name with .. in a journal" "valid name" \
	'echo "{\"state\":\"copied\",\"name\":\"tree/../secret\"}" >>"$J"'
# What a kill or a crash leaves at the end is no record: left out, and cut by the next run.
cp "$T/j0.good" "$J"
printf '{"state":"copi' >>"$J"
expect_rc 0 "a last line cut short: report" "${CLIENT[@]}" report "$P"
expect_rc 0 "a last line cut short: run" "${CLIENT[@]}" -q run "$P" --shard 0/2
[ "$(tail -c 1 "$J" | od -An -c | tr -d ' ')" = '\n' ] && ! grep -q '"copi$' "$J" &&
	pass "the cut line is gone, the journal whole again" || fail "journal tail: $(tail -2 "$J")"
cp "$T/j0.good" "$J"
head -c 4096 /dev/zero >>"$J"
expect_rc 0 "a tail of NUL bytes: report" "${CLIENT[@]}" report "$P"
expect_rc 0 "a tail of NUL bytes: run" "${CLIENT[@]}" -q run "$P" --shard 0/2
[ "$(tr -d '\000' <"$J" | wc -c)" -eq "$(wc -c <"$J")" ] && pass "the NUL tail is cut" ||
	fail "NUL bytes left in the journal"
expect_rc 0 "finalize after the journal tails" "${CLIENT[@]}" finalize "$P"

# ---- 4. a journal that claims done what was not -------------------------------------------
P4=$T/plans/f.plan
D4=$T/mod/forged/tree
expect_rc 0 "plan for the forged journal" "${CLIENT[@]}" plan -a --shards 2 "$S" "$HOST:data/forged" -o "$P4"
id=$(head -1 "$P4" | jq -r .id)
{
	echo "{\"rdmacp_journal\":1,\"plan\":\"$id\",\"shard\":0,\"shards\":2}"
	tail -n +2 "$P4" | jq -c 'select(.shard == 0) | {state: "copied", name: .name}'
} >"$P4.journal.0"
# The file the test follows: one of shard 0's, never sent.
victim=$(tail -n +2 "$P4" | jq -r 'select(.shard == 0 and .type == "file") | .name' | head -1)
[ -n "$victim" ] || die "no file in shard 0"
expect_rc 0 "shard 0 with a forged journal (its run trusts it)" "${CLIENT[@]}" run "$P4" --shard 0/2
grep -q " 0 this run" "$T/err" && pass "shard 0 sends nothing: its journal says done" ||
	fail "shard 0: $(tail -2 "$T/err")"
expect_rc 0 "shard 1" "${CLIENT[@]}" -q run "$P4" --shard 1/2
[ ! -e "$T/mod/forged/$victim" ] || die "$victim was sent"
expect_rc 15 "finalize with a journal claiming what was not sent" "${CLIENT[@]}" finalize "$P4"
grep -q "$victim: not at the destination" "$T/err" && pass "finalize names $victim" ||
	fail "finalize said: $(head -5 "$T/err")"
[ ! -e "$T/mod/forged/$victim" ] && pass "finalize changed nothing there" || fail "finalize wrote $victim"
[ "$(jq -r --arg n "$victim" 'select(.name == $n) | .state' "$P4.journal.0" | tail -1)" = failed ] &&
	pass "$victim marked failed in shard 0's journal" || fail "journal: $(tail -3 "$P4.journal.0")"
expect_rc 9 "finalize again before the shard runs: not finished" "${CLIENT[@]}" finalize "$P4"
expect_rc 0 "shard 0 again" "${CLIENT[@]}" -q run "$P4" --shard 0/2
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P4"
expect_same_tree "after the forged journal" "$S" "$D4"

# A copy at the destination that lost bytes (its mtime kept): the journal says done, finalize disagrees.
truncate -s 3 "$D4/a/b/g3"
touch -r "$S/a/b/g3" "$D4/a/b/g3"
expect_rc 15 "finalize with a copy of another size" "${CLIENT[@]}" finalize "$P4"
grep -q "tree/a/b/g3: not at the destination" "$T/err" && pass "finalize names tree/a/b/g3" ||
	fail "finalize said: $(head -5 "$T/err")"
shard=$(tail -n +2 "$P4" | jq -r 'select(.name == "tree/a/b/g3") | .shard')
expect_rc 0 "its shard again" "${CLIENT[@]}" -q run "$P4" --shard "$shard/2"
expect_rc 0 "finalize" "${CLIENT[@]}" finalize "$P4"
expect_same_tree "after the shorter copy" "$S" "$D4"

finish
