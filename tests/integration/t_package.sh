#!/bin/bash
# Packaging and installation:
# (1) "cmake --install BUILD --prefix DIR" writes every file under DIR, and
#     the installed rdmacpd.service starts DIR/sbin/rdmacpd;
# (2) "cpack -G DEB" builds a Debian package from the build tree with the
#     binaries, units, sysusers.d and tmpfiles.d files, man pages, example
#     config and copyright, and its dependencies declared;
# (3) the package installs with apt (the system user and directories are made,
#     the installed units pass "systemd-analyze verify", the installed programs
#     run), is removed (an enabled unit is disabled, nothing of its files stays)
#     and purged; (4) the same with dpkg -i, -r, -P; (5) lintian reports no
#     error and no warning on the package (and does report a broken copy of
#     it); without lintian the rest runs and the test then skips.
# Installs the package on this machine, so it needs root and dpkg (skip
# otherwise), and skips if anything it would install is there already. The
# package is purged on every exit (trap), also after a failed check. Kept
# afterwards, as Debian keeps system users: the user "rdmacp" made by postinst.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "not root: installing a package needs root"
command -v dpkg >/dev/null && command -v dpkg-deb >/dev/null || skip "dpkg not installed"
command -v cmake >/dev/null && command -v cpack >/dev/null || skip "cmake/cpack not installed"
command -v flock >/dev/null || skip "flock (util-linux) not installed"

# One package test at a time on this machine (other build trees run it too).
LOCK=/run/lock
[ -d "$LOCK" ] || LOCK=/tmp
exec 9>"$LOCK/rdmacp-t_package.lock"
flock -w 200 9 || skip "another t_package run held $LOCK/rdmacp-t_package.lock for 200 s"

PKG=rdmacp
PREFIX=$T/opt
# Installed paths below a prefix (the package's is /usr).
FILES=(bin/rdmacp sbin/rdmacpd
	lib/systemd/system/rdmacpd.service lib/systemd/system/rdmacpd.socket
	lib/sysusers.d/rdmacp.conf lib/tmpfiles.d/rdmacp.conf
	share/man/man1/rdmacp.1 share/man/man5/rdmacpd.conf.5 share/man/man8/rdmacpd.8
	share/doc/rdmacp/rdmacpd.conf.example share/doc/rdmacp/copyright)
# The same in the package: /usr, man pages compressed (Debian Policy 12.1).
PKG_FILES=()
for f in "${FILES[@]}"; do
	case $f in
	share/man/*) PKG_FILES+=("/usr/$f.gz") ;;
	*) PKG_FILES+=("/usr/$f") ;;
	esac
done
# Libraries the package must depend on (Debian 12 names).
# procps: /bin/kill for the unit's ExecReload=.
DEPS=(libssl3 libsystemd0 liburing2 libxxhash0 libinih1 libzstd1 procps)
if grep -q '^ENABLE_VERBS:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
	DEPS+=(libibverbs1 librdmacm1)
fi

pkg_state() { # the package's dpkg state: installed, config-files, ... or empty
	dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null
}

# run_dpkg ARGS...: dpkg, waiting up to 2 minutes while another dpkg or apt holds the lock.
run_dpkg() {
	local rc
	for _ in $(seq 1 60); do
		dpkg "$@" >"$T/dpkg.log" 2>&1
		rc=$?
		grep -q "lock" "$T/dpkg.log" && [ "$rc" -ne 0 ] || return "$rc"
		sleep 2
	done
	return "$rc"
}

PKG_TOUCHED=0
pkg_cleanup() {
	local st
	[ "$PKG_TOUCHED" -eq 1 ] || return 0
	st=$(pkg_state)
	if [ -n "$st" ] && [ "$st" != not-installed ]; then
		echo "cleanup: purging the $PKG package (state: $st)"
		run_dpkg --purge "$PKG" || { cat "$T/dpkg.log"; run_dpkg --purge --force-all "$PKG"; }
	fi
}
trap 'pkg_cleanup; cleanup' EXIT
trap 'exit 1' INT TERM HUP

# check_unit_execs UNIT SBIN: every Exec*= that runs rdmacpd names SBIN/rdmacpd.
check_unit_execs() {
	local unit=$1 sbin=$2 bad
	if [ ! -f "$unit" ]; then
		fail "$unit missing"
		return
	fi
	if ! grep -Eq "^ExecStart=$sbin/rdmacpd( |\$)" "$unit"; then
		fail "$unit: ExecStart= does not start $sbin/rdmacpd:"
		grep '^Exec' "$unit" | sed 's/^/    /'
		return
	fi
	bad=$(grep -E '^Exec[A-Za-z]*=' "$unit" | grep 'rdmacpd' | grep -Ev "=$sbin/rdmacpd( |\$)" || true)
	if [ -n "$bad" ] || grep -q '@[A-Z_]*@' "$unit"; then
		fail "$unit: Exec lines name another rdmacpd or keep a @VARIABLE@:"
		printf '%s\n' "$bad" | sed 's/^/    /'
		return
	fi
	pass "$(basename "$unit"): ExecStart=$sbin/rdmacpd"
}

# verify_units UNIT...: systemd-analyze verify prints nothing and succeeds.
verify_units() {
	if ! command -v systemd-analyze >/dev/null; then
		echo "SKIP (part): systemd-analyze not installed: installed units not verified"
		return
	fi
	if SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$@" >"$T/verify" 2>&1 &&
		[ ! -s "$T/verify" ]; then
		pass "systemd-analyze verify $*"
	else
		fail "systemd-analyze verify $*:"
		sed 's/^/    /' "$T/verify"
	fi
}

# ---- (1) cmake --install --prefix: everything under the prefix ----
# First into a DESTDIR, which catches a file meant for outside the prefix
# without writing it onto this machine; then the plain command itself.
DEST=$T/destdir
ROOT=$PREFIX # where the prefix's files are looked for
if DESTDIR=$DEST cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$T/inst.log" 2>&1; then
	outside=$(cd "$DEST" && find . ! -type d | sed 's|^\.||' | grep -v "^$PREFIX/")
	if [ -z "$outside" ]; then
		pass "cmake --install --prefix: nothing outside the prefix (DESTDIR run)"
		if cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$T/inst.log" 2>&1; then
			pass "cmake --install $(basename "$BUILD_DIR") --prefix $PREFIX"
			if grep -v "^$PREFIX/" "$BUILD_DIR/install_manifest.txt" >"$T/outside"; then
				fail "installed outside $PREFIX:"
				sed 's/^/    /' "$T/outside"
			fi
		else
			fail "cmake --install --prefix $PREFIX:"
			tail -20 "$T/inst.log" | sed 's/^/    /'
		fi
	else
		fail "cmake --install --prefix $PREFIX writes outside the prefix:"
		printf '%s\n' "$outside" | sed 's/^/    /'
		# Check what did land in the DESTDIR's prefix instead.
		ROOT=$DEST$PREFIX
	fi
else
	fail "DESTDIR=... cmake --install --prefix $PREFIX:"
	tail -20 "$T/inst.log" | sed 's/^/    /'
fi
missing=()
for f in "${FILES[@]}"; do
	[ -f "$ROOT/$f" ] || missing+=("$f")
done
[ "${#missing[@]}" -eq 0 ] && pass "all ${#FILES[@]} files under the prefix" ||
	fail "missing under the prefix: ${missing[*]}"
check_unit_execs "$ROOT/lib/systemd/system/rdmacpd.service" "$PREFIX/sbin"
if [ "$ROOT" = "$PREFIX" ] && [ -x "$PREFIX/sbin/rdmacpd" ]; then
	verify_units "$PREFIX/lib/systemd/system/rdmacpd.service" \
		"$PREFIX/lib/systemd/system/rdmacpd.socket"
fi

# ---- (2) cpack -G DEB from the build tree, in a scratch directory ----
[ -f "$BUILD_DIR/CPackConfig.cmake" ] || die "no CPackConfig.cmake in $BUILD_DIR: no packaging"
mkdir -p "$T/cpack"
if ! (cd "$T/cpack" && cpack -G DEB --config "$BUILD_DIR/CPackConfig.cmake" -B "$T/cpack") \
	>"$T/cpack.log" 2>&1; then
	tail -30 "$T/cpack.log"
	die "cpack -G DEB failed"
fi
DEB=$(ls "$T"/cpack/"$PKG"_*.deb 2>/dev/null | head -1)
[ -n "$DEB" ] || die "cpack made no ${PKG}_*.deb: $(ls "$T/cpack")"
pass "cpack -G DEB: $(basename "$DEB")"

[ "$(dpkg-deb -f "$DEB" Package)" = "$PKG" ] || fail "Package: is not $PKG"
depends=$(dpkg-deb -f "$DEB" Depends)
for d in "${DEPS[@]}"; do
	printf '%s\n' "$depends" | tr ',|' '\n\n' | grep -q "^ *$d\b" || fail "Depends lacks $d: $depends"
done
pass "Depends: $depends"
dpkg-deb -c "$DEB" >"$T/contents"
awk '{print $6}' "$T/contents" | sed 's|^\./|/|; s|/$||' | grep -v '^$' >"$T/paths"
for f in "${PKG_FILES[@]}"; do
	grep -qx "$f" "$T/paths" || fail "package lacks $f"
done
if grep -v '^/usr\(/\|$\)' "$T/paths" >"$T/bad" || grep '^/usr/local' "$T/paths" >>"$T/bad"; then
	fail "package has files outside /usr:"
	sed 's/^/    /' "$T/bad"
fi
awk '$2 != "root/root"' "$T/contents" >"$T/bad"
[ -s "$T/bad" ] && { fail "files not owned by root/root:"; sed 's/^/    /' "$T/bad"; }
dpkg-deb --ctrl-tarfile "$DEB" | tar -t >"$T/ctrl"
for s in postinst prerm postrm; do
	grep -qx "\./$s" "$T/ctrl" || fail "no $s maintainer script"
done
dpkg-deb --fsys-tarfile "$DEB" | tar -xO ./usr/lib/systemd/system/rdmacpd.service \
	>"$T/deb.service" 2>/dev/null
check_unit_execs "$T/deb.service" /usr/sbin
grep -q "$BUILD_DIR\|$T" "$T/deb.service" && fail "packaged unit names a build or scratch path"

# ---- (5) lintian: no errors, no warnings ----
# Run now, before anything is installed; a missing lintian skips the test at
# the end, after everything else has been checked.
LINTIAN_MISSING=0
# lintian_tags DEB: lintian's E: and W: lines for DEB, in $T/lintian.
lintian_tags() {
	lintian --no-tag-display-limit "$1" 2>&1 | grep -E '^[EW]: ' >"$T/lintian"
	return 0
}
if command -v lintian >/dev/null; then
	lintian_tags "$DEB"
	if [ -s "$T/lintian" ]; then
		fail "lintian $(basename "$DEB"): errors or warnings:"
		sed 's/^/    /' "$T/lintian"
	else
		pass "lintian $(basename "$DEB"): no errors, no warnings"
	fi
	# The check must be able to fail: the same package with a bogus
	# Maintainer address is reported.
	mkdir -p "$T/bogus"
	dpkg-deb -R "$DEB" "$T/bogus/tree"
	sed -i 's/^Maintainer: .*/Maintainer: nobody <nobody@localhost>/' "$T/bogus/tree/DEBIAN/control"
	dpkg-deb --root-owner-group -b "$T/bogus/tree" "$T/bogus/${PKG}_bogus.deb" >/dev/null 2>&1 ||
		fail "dpkg-deb -b of the bogus copy failed"
	lintian_tags "$T/bogus/${PKG}_bogus.deb"
	grep -q 'bogus-mail-host' "$T/lintian" && pass "lintian reports a bogus Maintainer address" ||
		{ fail "lintian did not report nobody@localhost:"; sed 's/^/    /' "$T/lintian"; }
else
	LINTIAN_MISSING=1
	echo "lintian not installed: checked last"
fi

# Install only onto a machine without any of it: never replace an installed
# rdmacp, a hand-installed binary or unit, or an enabled unit. A skip here
# must not hide a failure above.
skip_install() {
	[ "$FAILS" -ne 0 ] && { echo "SKIP (part): $*"; finish; }
	skip "$@"
}
st=$(pkg_state)
[ -z "$st" ] || [ "$st" = not-installed ] || skip_install "package $PKG is on this machine ($st): not replacing it"
grep -v '/$' <(awk '$1 !~ /^d/ {print $6}' "$T/contents" | sed 's|^\./|/|') >"$T/regular"
while read -r f; do
	[ -e "$f" ] && skip_install "$f exists already: not overwriting it"
done <"$T/regular"
for u in /etc/systemd/system /run/systemd/system /usr/local/lib/systemd/system; do
	for n in rdmacpd.service rdmacpd.socket; do
		[ -e "$u/$n" ] && skip_install "$u/$n exists: not touching an installed rdmacpd unit"
	done
done
ls /etc/systemd/system/*.wants/rdmacpd.* >/dev/null 2>&1 &&
	skip_install "an rdmacpd unit is enabled on this machine: not touching it"
HAD_ETC=0
HAD_SRV=0
[ -e /etc/rdmacp ] && HAD_ETC=1
[ -e /srv/rdmacp ] && HAD_SRV=1

# check_installed HOW: the installed package is complete and works.
check_installed() {
	local how=$1 f missing=() v
	[ "$(pkg_state)" = installed ] && pass "$how: $PKG installed" ||
		fail "$how: $PKG state is '$(pkg_state)'"
	for f in "${PKG_FILES[@]}"; do
		[ -f "$f" ] || missing+=("$f")
	done
	[ "${#missing[@]}" -eq 0 ] && pass "$how: ${#FILES[@]} files in /usr" ||
		fail "$how: missing ${missing[*]}"
	check_unit_execs /usr/lib/systemd/system/rdmacpd.service /usr/sbin
	getent passwd rdmacp >/dev/null && pass "$how: system user rdmacp exists (sysusers)" ||
		fail "$how: no user rdmacp after postinst"
	[ -d /etc/rdmacp ] && [ -d /srv/rdmacp ] && pass "$how: /etc/rdmacp and /srv/rdmacp exist (tmpfiles)" ||
		fail "$how: /etc/rdmacp or /srv/rdmacp missing after postinst"
	verify_units /usr/lib/systemd/system/rdmacpd.service /usr/lib/systemd/system/rdmacpd.socket
	v=$(/usr/bin/rdmacp --version 2>&1)
	[[ "$v" == "rdmacp $("$RDMACP" --version | awk '{print $2}')"* ]] &&
		pass "$how: /usr/bin/rdmacp --version: $v" || fail "$how: /usr/bin/rdmacp --version: $v"
	expect_rc 0 "$how: /usr/sbin/rdmacpd --help" /usr/sbin/rdmacpd --help
	grep -q "^Usage: rdmacpd" "$T/out" || fail "$how: rdmacpd --help printed no usage"
	if command -v man >/dev/null; then
		man -w -a rdmacpd.conf 2>/dev/null | grep -qx /usr/share/man/man5/rdmacpd.conf.5.gz &&
			pass "$how: man finds rdmacpd.conf(5)" || fail "$how: man -w -a rdmacpd.conf: $(man -w -a rdmacpd.conf 2>&1)"
	fi
}

# check_removed HOW: no file of the package stays; with PURGED, nothing else either.
check_removed() {
	local how=$1 purged=$2 f left=()
	while read -r f; do
		[ -e "$f" ] && left+=("$f")
	done <"$T/regular"
	[ -e /usr/share/doc/rdmacp ] && left+=(/usr/share/doc/rdmacp)
	ls /etc/systemd/system/*.wants/rdmacpd.* >/dev/null 2>&1 &&
		left+=(/etc/systemd/system/*.wants/rdmacpd.*)
	if [ "$purged" = purged ]; then
		[ "$HAD_ETC" -eq 0 ] && [ -e /etc/rdmacp ] && left+=(/etc/rdmacp)
		[ "$HAD_SRV" -eq 0 ] && [ -e /srv/rdmacp ] && left+=(/srv/rdmacp)
		st=$(pkg_state)
		[ -z "$st" ] || [ "$st" = not-installed ] || left+=("dpkg state $st")
	fi
	[ "${#left[@]}" -eq 0 ] && pass "$how: nothing of $PKG left" || fail "$how: left behind: ${left[*]}"
}

# ---- (3) apt: install, enable, remove, purge ----
PKG_TOUCHED=1
if command -v apt-get >/dev/null; then
	# apt reads the file as its sandbox user _apt.
	chmod 755 "$T" "$T/cpack"
	APT=(apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=120)
	if DEBIAN_FRONTEND=noninteractive "${APT[@]}" install "$DEB" >"$T/apt.log" 2>&1; then
		check_installed apt
		# An administrator enables a unit; removal must not leave its link behind.
		if command -v systemctl >/dev/null &&
			systemctl enable rdmacpd.service rdmacpd.socket >"$T/enable.log" 2>&1; then
			ls /etc/systemd/system/*.wants/rdmacpd.service >/dev/null 2>&1 &&
				pass "systemctl enable rdmacpd.service rdmacpd.socket" ||
				fail "systemctl enable made no link"
		fi
		DEBIAN_FRONTEND=noninteractive "${APT[@]}" remove "$PKG" >"$T/apt.log" 2>&1 ||
			{ fail "apt-get remove $PKG:"; tail -20 "$T/apt.log" | sed 's/^/    /'; }
		check_removed "apt-get remove" removed
		DEBIAN_FRONTEND=noninteractive "${APT[@]}" purge "$PKG" >"$T/apt.log" 2>&1 ||
			{ fail "apt-get purge $PKG:"; tail -20 "$T/apt.log" | sed 's/^/    /'; }
		check_removed "apt-get purge" purged
	else
		fail "apt-get install $DEB:"
		tail -20 "$T/apt.log" | sed 's/^/    /'
	fi
	pkg_cleanup
else
	echo "SKIP (part): apt-get not installed: apt install/remove not checked"
fi

# ---- (4) dpkg: -i, -r, -P ----
if run_dpkg -i "$DEB"; then
	check_installed "dpkg -i"
	run_dpkg -r "$PKG" || { fail "dpkg -r $PKG:"; sed 's/^/    /' "$T/dpkg.log"; }
	check_removed "dpkg -r" removed
	run_dpkg -P "$PKG" || { fail "dpkg -P $PKG:"; sed 's/^/    /' "$T/dpkg.log"; }
	check_removed "dpkg -P" purged
else
	fail "dpkg -i $DEB:"
	sed 's/^/    /' "$T/dpkg.log"
fi

if [ "$LINTIAN_MISSING" -eq 1 ]; then
	# Everything else has run; report the missing part without hiding failures.
	pkg_cleanup
	[ "$FAILS" -ne 0 ] && finish
	skip "lintian not installed (apt-get install lintian): the package was not linted"
fi
finish
