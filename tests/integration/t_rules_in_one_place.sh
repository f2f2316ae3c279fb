#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The rules live in one place (issue 31; DESIGN "rules live in one place"), a
# check of the source rather than of a daemon:
#   1. only daemon/policy*.c (and the config loader, config*.c, which loads
#      them) reads a module's rules: allow lists, read only, write only, keep
#      setid, preserve owner, byte caps, relay to and relay from. Every other
#      daemon file gets them from a grant;
#   2. only daemon/policy.c finds a module by a path (resolve_module,
#      daemon_config_module), so nothing reaches a module without a grant;
#   3. the daemon/serve*.c files open a module's root only in
#      serve_enter_module, which asserts a grant, and every request handler
#      that names a module asks serve_decide();
#   4. an owner is set in src/ only where the metadata rule says so: every
#      chown is in meta_policy.c or on a line that asks rx_meta_policy();
#   5. both config loaders read their file through src/conffile.c (only a
#      regular file within its caps), and no file of theirs reads one itself.
#   6. a file's digest kind and where a tree's chunks hash are chosen in
#      src/engine_digest.c: outside it, only the sums worker (its own read
#      back) asks engine_digest_chunk(); the roles ask engine_digest_folds().
# A new request type or path that re-implements a rule fails here.
#
# Exit 0 pass, 1 fail.
. "$(dirname "$0")/lib.sh"

cd "$SRC_DIR" || die "no source tree"
fields='read_only|write_only|keep_setid|preserve_owner|max_session_bytes|max_file_size|allow|nallow|bench_allow|nbench_allow|relay_to|nrelay_to|relay_from|nrelay_from'
hits=$(grep -nE "[A-Za-z_]+(->|\.)($fields)\b" daemon/*.c | grep -vE '^daemon/(policy(_[a-z]+)?|config(_[a-z]+)?)\.c:' |
	grep -vE '\b(gr|g)(->|\.)')
[ -z "$hits" ] && pass "module rules are read in daemon/policy.c only" || fail "rules read elsewhere: $hits"

hits=$(grep -nE '\b(resolve_module|daemon_config_module)\(' daemon/*.c | grep -vE '^daemon/(policy|config)\.c:')
[ -z "$hits" ] && pass "a module is found by its path in daemon/policy.c only" || fail "module lookups: $hits"

hits=$(grep -nE '\bopen_module_root\(' daemon/serve*.c | grep -vE 'static int open_module_root|return open_module_root\(c, gr->m')
[ -z "$hits" ] && pass "a module root is opened only in serve_enter_module" || fail "open_module_root: $hits"
body=$(awk '/^int serve_enter_module\(/ { on = 1 } on { print } on && /^}/ { exit }' daemon/serve*.c)
grep -q 'assert(policy_grant_valid(gr)' <<<"$body" && pass "serve_enter_module asserts a grant" ||
	fail "serve_enter_module does not assert its grant"
for h in serve_open list_path serve_assemble serve_bench; do
	body=$(awk -v h="$h" '$0 ~ "^(static )?int " h "\\(" { on = 1 } on { print } on && /^}/ { exit }' daemon/serve*.c)
	grep -q 'serve_decide(c, &rq, &gr)' <<<"$body" && pass "$h asks the policy" || fail "$h does not call serve_decide()"
done

hits=$(grep -nE '\b(f|l)?chown(at)?\(' src/*.c | grep -vE '^src/meta_policy\.c:' | grep -v 'rx_meta_policy(')
[ -z "$hits" ] && pass "owners are set by the metadata rule only" || fail "chown elsewhere: $hits"

for f in client/config.c daemon/config.c; do
	grep -q 'conffile_read(' "$f" && pass "$f reads its config with conffile_read" ||
		fail "$f does not call conffile_read"
done
for f in client/config.c daemon/config*.c; do
	hits=$(grep -nE '\b(fopen|getline|fgets|read|ini_parse|ini_parse_file)\(' "$f")
	[ -z "$hits" ] && pass "$f reads no file itself" || fail "$f reads a file itself: $hits"
done
hits=$(grep -nE '\bengine_digest_chunk\(' src/*.c | grep -vE '^src/engine_(digest|sums)\.c:')
[ -z "$hits" ] && pass "a file's digest kind is chosen in src/engine_digest.c" ||
	fail "engine_digest_chunk asked elsewhere: $hits"
for f in src/engine_rx.c src/engine_tx_read.c; do
	grep -q 'engine_digest_folds(e, f)' "$f" && pass "$f asks engine_digest_folds" ||
		fail "$f does not ask engine_digest_folds"
done
finish
