#!/bin/bash
# SPDX-License-Identifier: MIT
#
# --slots against the locked memory limit (issue 35 item 4): as user nobody
# with RLIMIT_MEMLOCK 8 MiB and no CAP_IPC_LOCK, a pull asking for 64 slots
# of 1 MiB (64 MiB, which the limit can't pin) gets a ring that fits, copies
# byte-exact, and -v says the ring is smaller than asked and why.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
trap cleanup EXIT

[ "$(id -u)" -eq 0 ] || skip "needs root to run the client as user nobody"
command -v setpriv >/dev/null || skip "setpriv not installed (util-linux)"
command -v prlimit >/dev/null || skip "prlimit not installed (util-linux)"
NOGROUP=$(id -gn nobody 2>/dev/null) || skip "no user nobody"

setup_standard
chmod 0711 "$T"
mkdir -p "$T/u/got"
cp -r "$T/certs" "$T/u/certs"
chown -R nobody:"$NOGROUP" "$T/u"
head -c $((24 << 20)) /dev/urandom >"$T/mod/big.bin"
UCLIENT=("$RDMACP" --config /dev/null --cert "$T/u/certs/client.crt" --key "$T/u/certs/client.key"
	--ca "$T/u/certs/ca.crt" -P "$PORT" --transport tcp)

as_nobody() {
	prlimit --memlock=$((8 << 20)):$((8 << 20)) \
		setpriv --reuid=nobody --regid="$NOGROUP" --clear-groups --inh-caps=-all -- "$@"
}

as_nobody "${UCLIENT[@]}" -v --slots 64 127.0.0.1:data/big.bin "$T/u/got/big.bin" \
	>"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$T/mod/big.bin" "$T/u/got/big.bin"; then
	pass "pull --slots 64 as nobody with memlock 8 MiB: byte-exact"
else
	fail "pull --slots 64 with memlock 8 MiB: exit $rc"
	sed 's/^/    /' "$T/err" | head
fi
if grep -Eq "ring: [0-9]+ slots of [0-9]+ KiB, not the 64 asked for: the locked memory limit \(RLIMIT_MEMLOCK\) holds no more" "$T/err"; then
	pass "-v says the ring was fitted: $(grep 'not the 64' "$T/err")"
else
	fail "-v does not say the ring was fitted:"
	sed 's/^/    /' "$T/err" | head
fi
finish
