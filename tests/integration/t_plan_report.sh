#!/bin/bash
# SPDX-License-Identifier: MIT
#
# rdmacp report says what the journals hold, and no more (issue 32 item 9),
# plain processes against a real daemon:
#   1. a plan of 2 shards, one holding only the tree's directory, the other
#      its file: the file's shard runs (making the directory above its file);
#      the other shard, never run, is done, and report says so instead of
#      "never run"; finalize exits 0;
#   2. a shard's rate is its ended runs' bytes over their seconds: after one
#      run, rate = sent / seconds; after a run killed (its journal's end line
#      gone) and a run that sent nothing, 2 runs, 1 ended, the bytes of both,
#      rate 0 (it was all the bytes over the last run's seconds); the text
#      says runs were cut short;
#   3. with split files the shards' lines and the split files' line add up to
#      the totals (entries, done, failed, pending), before and after finalize
#      assembles them; the text has the split files' line; finalize's --json summary
#      (its own journal read again, the shards' kept as loaded) is the report's.
#
# Exit 0 pass, 1 fail, 77 skip (reason printed).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || skip "jq not installed"
setup_standard
HOST=127.0.0.1

# shard_of PLAN NAME: the shard of the plan's entry NAME.
shard_of() { tail -n +2 "$1" | jq -r --arg n "$2" 'select(.name == $n and .type != "range") | .shard'; }

# ---- 1. a shard whose only entry is a directory another shard made ------------------------
S=$T/src/one
mkdir -p "$S"
head -c 300000 /dev/urandom >"$S/f"
P=$T/one.plan
expect_rc 0 "plan of a directory and its file, 2 shards" "${CLIENT[@]}" plan -r --shards 2 "$S" "$HOST:data/one" -o "$P"
D=$(shard_of "$P" one)
F=$(shard_of "$P" one/f)
[ -n "$D" ] && [ -n "$F" ] && [ "$D" != "$F" ] || die "the directory and the file share shard $D: the test needs them apart"
expect_rc 0 "the file's shard ($F)" "${CLIENT[@]}" -q run "$P" --shard "$F/2"
expect_rc 0 "report" "${CLIENT[@]}" report "$P"
line=$(grep "shard $D:" "$T/out")
echo "    $line"
grep -q "never run" <<<"$line" && fail "shard $D, all done, is said never run" ||
	pass "shard $D, its directory made by shard $F: not said never run"
grep -q "1 entries, 1 done.*no run of its own" <<<"$line" && pass "it says its entries were made by other shards" ||
	fail "shard $D: '$line'"
"${CLIENT[@]}" report "$P" --json >"$T/rep.json"
[ "$(jq -r --argjson d "$D" 'select(.event == "shard" and .shard == $d) | "\(.done) \(.entries) \(.runs)"' "$T/rep.json")" = "1 1 0" ] &&
	pass "report --json: shard $D done, 0 runs" || fail "report --json: $(grep '"shard"' "$T/rep.json")"
expect_rc 0 "finalize with shard $D never run, all done" "${CLIENT[@]}" finalize "$P"

# ---- 2. the rate: the runs that ended, over their own seconds --------------------------------
jf() { "${CLIENT[@]}" report "$P" --json | jq -r --argjson f "$F" "select(.event == \"shard\" and .shard == \$f) | $1"; }
[ "$(jf '"\(.runs) \(.ended) \(.sent) \((.rate - .sent / .seconds) | fabs <= 1)"')" = "1 1 300000 true" ] &&
	pass "one run: rate = sent / seconds" || fail "one run: $(jf .)"
# A run killed after it copied: its journal has no end line.
sed -i '/"run":"end"/d' "$P.journal.$F"
expect_rc 0 "shard $F again, nothing to send" "${CLIENT[@]}" -q run "$P" --shard "$F/2"
[ "$(jf '"\(.runs) \(.ended) \(.sent) \(.rate)"')" = "2 1 300000 0" ] &&
	pass "a run cut short, one that sent nothing: 2 runs, 1 ended, rate 0 (the ended run's)" ||
	fail "after a cut run: $(jf .)"
[ "$("${CLIENT[@]}" report "$P" --json | jq -r 'select(.event == "report") | "\(.runs) \(.ended) \(.sent) \(.rate)"')" = "2 1 300000 0" ] &&
	pass "the totals: the same runs, bytes and rate" || fail "totals: $("${CLIENT[@]}" report "$P" --json | grep '"report"')"
"${CLIENT[@]}" report "$P" >"$T/rep.txt"
grep "shard $F:" "$T/rep.txt" | grep -q "300000 bytes sent in 2 runs (some cut short, or running); .* in the 1 that ended" &&
	pass "the text: 2 runs, some cut short, the rate of the 1 that ended" || fail "text: $(cat "$T/rep.txt")"

# ---- 3. split files: the lines add up to the totals -----------------------------------------
S2=$T/src/sp
mkdir -p "$S2/d"
head -c 20000 /dev/urandom >"$S2/d/big"
head -c 9000 /dev/urandom >"$S2/big2"
for i in 1 2 3; do echo "$i" >"$S2/d/s$i"; done
P2=$T/sp.plan
expect_rc 0 "plan --split-size 4K --chunk-size 4K --shards 3" "${CLIENT[@]}" plan -r --shards 3 --split-size 4K --chunk-size 4K "$S2" "$HOST:data/sp" -o "$P2"
# adds_up: sum over the shard objects and the assembly object = the report object's.
adds_up() {
	"${CLIENT[@]}" report "$P2" --json | jq -s -r '
		(map(select(.event == "report"))[0]) as $r |
		(map(select(.event == "shard" or .event == "assembly"))) as $l |
		[($l | map(.entries) | add) == $r.entries,
		 ($l | map(.done) | add) == ($r.copied + $r.skipped + $r.resumed),
		 ($l | map(.failed) | add) == $r.failed,
		 ($l | map(.pending) | add) == $r.pending,
		 (map(select(.event == "assembly")) | length) == 1] | all'
}
expect_rc 0 "shard 0" "${CLIENT[@]}" -q run "$P2" --shard 0/3
[ "$(adds_up)" = true ] && pass "one shard run: the shards' and split files' lines add up to the totals" ||
	fail "lines don't add up: $("${CLIENT[@]}" report "$P2" --json | grep -v '"entry"')"
"${CLIENT[@]}" report "$P2" >"$T/rep2.txt"
grep -q "split files (finalize assembles them): 2 entries, 0 done" "$T/rep2.txt" && pass "the text: the split files' line" ||
	fail "text: $(cat "$T/rep2.txt")"
expect_rc 0 "shard 1" "${CLIENT[@]}" -q run "$P2" --shard 1/3
expect_rc 0 "shard 2" "${CLIENT[@]}" -q run "$P2" --shard 2/3
expect_rc 0 "finalize assembles" "${CLIENT[@]}" finalize "$P2" --json
cp "$T/out" "$T/fin2.json"
# finalize's summary counts its own journal again without reading the shards' again: it
# must say what a report made from every journal afresh says.
summary() { jq -c 'select(.event == "report" or .event == "shard" or .event == "assembly" or .event == "destination") | del(.rate, .seconds)'; }
if [ -n "$(summary <"$T/fin2.json")" ] && [ "$(summary <"$T/fin2.json")" = "$("${CLIENT[@]}" report "$P2" --json | summary)" ]; then
	pass "finalize's summary is the report's"
else
	fail "finalize's summary: $(summary <"$T/fin2.json"); report's: $("${CLIENT[@]}" report "$P2" --json | summary)"
fi
[ "$(adds_up)" = true ] && [ "$("${CLIENT[@]}" report "$P2" --json | jq -r 'select(.event == "assembly") | "\(.done) \(.pending)"')" = "2 0" ] &&
	pass "after finalize: 2 split files done, the lines add up" ||
	fail "after finalize: $("${CLIENT[@]}" report "$P2" --json | grep -v '"entry"')"
finish
