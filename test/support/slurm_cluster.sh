#!/usr/bin/env bash
# A single-machine Slurm cluster for the tests, from Debian's packages, in a directory of its
# own: munged with a fresh key, slurmctld and slurmd on loopback ports given by the caller.
#   slurm_cluster.sh start DIR CTLD_PORT SLURMD_PORT   prints SLURM_CONF=DIR/slurm.conf once
#                                                      the node is idle (exit 1 with the logs if not)
#   slurm_cluster.sh stop DIR                          stops all three
# Needs root (the daemons run as root; without a mounted /sys/fs/cgroup, slurmd gets a private one).
set -euo pipefail
cmd=$1 dir=$2
stop() {
  for pid in "$dir"/run/slurmd.pid "$dir"/run/slurmctld.pid "$dir"/run/munged.pid; do
    [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  sleep 0.5
  for pid in "$dir"/run/slurmd.pid "$dir"/run/slurmctld.pid "$dir"/run/munged.pid; do
    [ -f "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null || true
  done
}
if [ "$cmd" = stop ]; then stop; exit 0; fi
ctld_port=$3 slurmd_port=$4
# any step that fails says why: the daemons' logs
trap 'echo "slurm_cluster: failed at line $LINENO" >&2; tail -n 30 "$dir"/log/*.log >&2 2>/dev/null; stop' ERR
rm -rf "$dir" && mkdir -p "$dir"/{run,log,state,spool}
chmod 700 "$dir" "$dir/run"
head -c 1024 /dev/urandom >"$dir/munge.key" && chmod 400 "$dir/munge.key"
munged --force --origin=127.0.0.1 --socket="$dir/run/munge.sock" --key-file="$dir/munge.key" --log-file="$dir/log/munged.log" \
  --pid-file="$dir/run/munged.pid" --seed-file="$dir/run/munged.seed"
cpus=$(nproc)
cat >"$dir/slurm.conf" <<CONF
ClusterName=cohorttest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/run/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
if mountpoint -q /sys/fs/cgroup; then
  slurmd -f "$SLURM_CONF" -N localhost
else
  # no cgroup file system (a chroot binds /sys without its mounts): slurmd's cgroup plugin needs
  # one even with proctrack/linuxproc and task/none, so it gets one of its own, in a mount
  # namespace that only it sees (a tmpfs with an empty named v1 hierarchy); nothing outside changes
  unshare -m sh -c 'mount -t tmpfs cgroup_root /sys/fs/cgroup && mkdir /sys/fs/cgroup/systemd &&
    mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd && exec slurmd -f "$0" -N localhost' "$SLURM_CONF"
fi
for _ in $(seq 1 120); do
  if sinfo -h -o %T 2>/dev/null | grep -q idle; then echo "SLURM_CONF=$SLURM_CONF"; exit 0; fi
  sleep 0.5
done
echo "slurm_cluster: the node never became idle" >&2
tail -n 20 "$dir"/log/*.log >&2 || true
stop
exit 1
