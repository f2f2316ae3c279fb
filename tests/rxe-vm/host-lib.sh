# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Sourced by the tests that boot the VM from this machine (t_verbs_vm.sh,
# t_crash_vm.sh, t_verbs_hostile_vm.sh). They set RUN (tests/rxe-vm/run), CACHE (RXEVM_CACHE) and
# BUILD_DIR, and define skip and die.

cache_var() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; }

# The VM emulates its CPU: its tests run in the normal build only.
rxevm_skip_asan() {
	[ "$(cache_var ENABLE_ASAN)" = ON ] &&
		skip "VM test runs in the normal build only (this build has ENABLE_ASAN=ON)"
	return 0
}

# rxevm_require_tools [TOOL...] -- [PACKAGE...]: what booting the VM needs (qemu, cpio,
# xz, rdma, busybox, the Soft-RoCE provider) and the test's own TOOLs: skip, naming
# the Debian packages (the VM's and the test's PACKAGEs), when one is missing.
rxevm_require_tools() {
	local tools=(qemu-system-x86_64 cpio xz rdma) pkgs=(qemu-system-x86 cpio xz-utils iproute2) t

	while [ $# -gt 0 ] && [ "$1" != -- ]; do tools+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	pkgs+=("$@")
	for t in "${tools[@]}"; do
		command -v "$t" >/dev/null || skip "$t not installed (apt-get install ${pkgs[*]})"
	done
	[ -x /bin/busybox ] || skip "/bin/busybox missing (apt-get install busybox-static)"
	ls /usr/lib/*/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 ||
		skip "no Soft-RoCE userspace provider (apt-get install ibverbs-providers)"
}

# First use builds the kernel + initramfs from Debian's archive (apt-get
# download). Without network and without a cached image that cannot work: skip.
rxevm_require_kernel() {
	local out rc

	[ -s "$CACHE/vmlinux" ] && [ -s "$CACHE/initrd.gz" ] && return 0
	out=$("$RUN" true 2>&1)
	rc=$?
	[ $rc -eq 0 ] && return 0
	if ! [ -s "$CACHE/vmlinux" ]; then
		echo "$out" | tail -n 8
		skip "no kernel image in $CACHE and it could not be fetched (rxe-vm rc $rc; needs apt access to Debian's linux-image-amd64 once)"
	fi
	echo "$out" | tail -n 30
	die "the VM did not boot (rc $rc)"
}
