# SPDX-License-Identifier: MIT
# A one-node Slurm cluster for the tests (sourced, not run): munged, slurmctld
# and slurmd on this machine, all their state under a directory of the test.
# slurm_start DIR: 0 with SLURM_CONF exported, or 1 with the reason in
# SLURM_WHY (not installed, not root, a daemon that would not start);
# slurm_stop DIR. Nothing is installed here: slurm-wlm and munge must be.
# No cgroups (proctrack/linuxproc, task/none). Ports of its own (free_port,
# lib.sh): another test's cluster may run beside it.

slurm_start() {
	local S=$1 H cpus
	SLURM_WHY=
	for c in slurmctld slurmd munged sbatch squeue; do
		command -v "$c" >/dev/null || PATH=$PATH:/usr/sbin command -v "$c" >/dev/null ||
			{ SLURM_WHY="$c not installed (slurm-wlm, munge)"; return 1; }
	done
	[ "$(id -u)" -eq 0 ] || { SLURM_WHY="not root"; return 1; }
	mkdir -p "$S"/{state,spool,log,run}
	H=$(hostname -s)
	cpus=$(nproc)
	if [ ! -s /etc/munge/munge.key ]; then
		mkdir -p /etc/munge
		head -c 1024 /dev/urandom >/etc/munge/munge.key
		chown munge:munge /etc/munge/munge.key 2>/dev/null
		chmod 400 /etc/munge/munge.key
	fi
	mkdir -p /run/munge
	chown munge:munge /run/munge 2>/dev/null
	munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || su -s /bin/sh munge -c /usr/sbin/munged ||
		{ SLURM_WHY="munged did not start"; return 1; }
	cat >"$S/slurm.conf" <<CONF
ClusterName=rdmacptest
SlurmctldHost=$H
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1,sched_min_interval=100000
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
NodeName=$H CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$H Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
	export SLURM_CONF=$S/slurm.conf
	/usr/sbin/slurmctld -f "$SLURM_CONF" || { SLURM_WHY="slurmctld did not start"; return 1; }
	/usr/sbin/slurmd -f "$SLURM_CONF" || { SLURM_WHY="slurmd did not start"; slurm_stop "$S"; return 1; }
	for _ in $(seq 50); do
		sinfo -h -o %T 2>/dev/null | grep -q idle && return 0
		sleep 0.2
	done
	SLURM_WHY="the node did not come up: $(tail -3 "$S/log/slurmd.log" 2>/dev/null | tr '\n' '|')"
	slurm_stop "$S"
	return 1
}

slurm_stop() {
	local p
	for p in "$1/run/slurmd.pid" "$1/run/slurmctld.pid"; do
		[ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null
	done
	return 0
}
