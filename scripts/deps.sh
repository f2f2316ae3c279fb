#!/usr/bin/env bash
# Install what rdmacp needs to build, test and benchmark on Debian 12 (as root).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(
	build-essential cmake pkg-config clang libclang-rt-14-dev clang-format
	libssl-dev liburing-dev libxxhash-dev libinih-dev libzstd-dev libsystemd-dev libcmocka-dev
	libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
	openssl python3 iproute2 procps util-linux jq
	# tests: systemd units and man pages, the Debian package (dpkg-shlibdeps,
	# lintian), a booted systemd container (debootstrap, systemd-nspawn),
	# the Soft-RoCE VM, helpers
	systemd man-db groff-base dpkg-dev lintian debootstrap systemd-container
	libcap2-bin xxhash
	qemu-system-x86 busybox-static cpio xz-utils
	# tests: sharded migrations under Slurm and Open MPI, the Kubernetes manifest
	slurm-wlm munge openmpi-bin python3-yaml
	# benchmarks (bench/): the tools rdmacp is compared with
	rsync netcat-openbsd iperf3
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The unprivileged system user that rdmacpd's sessions run as for a module
# without 'uid' (rdmacpd.conf(5)); the integration tests need it too.
if ! getent passwd rdmacp >/dev/null; then
	if command -v systemd-sysusers >/dev/null; then
		systemd-sysusers "$top/systemd/rdmacpd-sysusers.conf"
	else
		useradd --system --user-group --no-create-home --home-dir / \
			--shell /usr/sbin/nologin --comment "rdmacp daemon sessions" rdmacp
	fi
fi
