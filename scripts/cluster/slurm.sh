#!/usr/bin/env bash
# A real Slurm on the hosts of scripts/cluster/hosts.sh: munge, slurmctld
# on node1 and one slurmd on every host, so that a --nodes=2 job gets two
# nodes. Then COMMAND runs with sbatch, srun, sinfo, squeue and scontrol on
# its PATH, and Slurm is stopped and its state removed, whatever happens.
#
#   scripts/cluster/slurm.sh [--hosts N] [--cpus C] -- COMMAND [ARG...]
#   scripts/cluster/slurm.sh --check     is Slurm installed here? (0, or 77)
#
# For instance, a shell with a two-node Slurm to try things in:
#   scripts/cluster/slurm.sh -- bash
#   $ sinfo                                  node1 and node2, idle
#   $ srun --nodes=2 --ntasks=4 hostname     two on each
#
# Run from outside the hosts, it makes them first (hosts.sh, N hosts, 2 by
# default); run from inside (ZZ_CLUSTER_DIR set), it uses those.
#
# What runs where. Every daemon runs in the foreground as a child of this
# script, in a host's network and UTS namespaces (so hosts.sh takes down
# anything left there too): munged, with its own key and socket; slurmctld
# on node1 (10.99.0.1); slurmd on each host, which finds its node by its
# host name. One slurm.conf, with every per-node path (spool, pid, log)
# by %n; proctrack/linuxproc and task/none (no cgroups); no accounting.
# Each node says it has C CPUs (8 unless told; SlurmdParameters=
# config_overrides, so a job may ask for more than this machine has) and
# MpiDefault is none, as on many clusters: srun starts MPI ranks only when
# told --mpi=pmix. The commands on COMMAND's PATH enter node1's namespaces,
# where slurmctld is reached, with SLURM_CONF set.
#
# COMMAND sees, beside hosts.sh's variables:
#   ZZ_SLURM_DIR   this Slurm's folder: slurm.conf, the logs (slurmctld.log,
#                  NODE/slurmd.log), munge's key and socket, bin/
#   SLURM_CONF     its slurm.conf
# Exit status: COMMAND's; 77 (after saying why) where hosts cannot be made
# or Slurm or munge is not installed (scripts/install-deps.sh --cluster);
# 1 when Slurm does not come up (the logs' last lines are shown).
set -euo pipefail

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
hosts=2
cpus=8
check_only=false
while [ $# -gt 0 ]; do
    case "$1" in
        --hosts) hosts=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
        --cpus) cpus=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
        --check) check_only=true; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) echo "slurm.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
case "$cpus" in [1-9]|[1-9][0-9]) ;; *) echo "slurm.sh: --cpus takes 1 to 99, not '$cpus'" >&2; exit 2 ;; esac

skip() { echo "slurm.sh: cannot start Slurm here: $*; skipped" >&2; exit 77; }
missing=
for tool in munged slurmctld slurmd sbatch srun sinfo; do
    command -v "$tool" >/dev/null 2>&1 || missing+=" $tool"
done
[ -z "$missing" ] || skip "not installed:$missing (scripts/install-deps.sh --cluster installs Slurm and munge)"
if $check_only; then
    echo "slurm.sh: Slurm $(slurmctld -V 2>/dev/null | awk '{ print $2 }') and munge are installed"
    exit 0
fi
if ! $check_only && [ $# -eq 0 ]; then
    echo "slurm.sh: say what to run: slurm.sh -- COMMAND (try --help)" >&2
    exit 2
fi

# Outside the hosts: make them, and come back inside.
if [ -z "${ZZ_CLUSTER_DIR:-}" ]; then
    exec "$(dirname "$0")/hosts.sh" --hosts "$hosts" -- "$0" --cpus "$cpus" -- "$@"
fi

read -r -a names <<< "$ZZ_CLUSTER_HOSTS"
host_pid() { awk -v host="$1" '$1 == host { print $2 }' "$ZZ_CLUSTER_DIR/hosts"; }
host_addr() { awk -v host="$1" '$1 == host { print $3 }' "$ZZ_CLUSTER_DIR/hosts"; }
# Starts a daemon on a host; run in the background, so that $! is the
# daemon itself (nsenter execs it).
on_host() { local pid; pid=$(host_pid "$1"); shift; exec nsenter -t "$pid" -n -u -- "$@"; }

state=
daemons=()
cleanup() {
    local status=$? pid
    trap - EXIT INT TERM
    # slurmd first (it ends its jobs' steps), then slurmctld, then munged.
    for pid in "${daemons[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${daemons[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    [ -z "$state" ] || rm -rf "$state"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

state=$(mktemp -d "$ZZ_CLUSTER_DIR/slurm-XXXXXX")
chmod 700 "$state"
export ZZ_SLURM_DIR=$state
export SLURM_CONF=$state/slurm.conf

# munge: a key of its own (munged insists on 0400 and on folders no one
# else may write), and a socket that slurm.conf names (AuthInfo).
mkdir -m 700 "$state/munge"
dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$state/munge/munge.key"
socket=$state/munge/munge.socket
# munged needs no network: it runs in node1's namespaces only so that
# hosts.sh takes it down too, should this script be killed.
on_host node1 munged --foreground --force --socket="$socket" \
    --key-file="$state/munge/munge.key" --log-file="$state/munge/munged.log" \
    --pid-file="$state/munge/munged.pid" --seed-file="$state/munge/munged.seed" \
    2>>"$state/munge/munged.log" &
munged_pid=$!

first_addr=$(host_addr node1)
{
    echo "# A Slurm on the hosts of scripts/cluster/hosts.sh (scripts/cluster/slurm.sh)."
    echo "ClusterName=zz"
    echo "SlurmctldHost=node1($first_addr)"
    echo "SlurmUser=$(id -un)"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$socket"
    echo "StateSaveLocation=$state/slurmctld"
    echo "SlurmctldPidFile=$state/slurmctld.pid"
    echo "SlurmctldLogFile=$state/slurmctld.log"
    echo "SlurmdSpoolDir=$state/%n/spool"
    echo "SlurmdPidFile=$state/%n/slurmd.pid"
    echo "SlurmdLogFile=$state/%n/slurmd.log"
    echo "SlurmdParameters=config_overrides"
    echo "TmpFS=$state/%n/tmp"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "MpiDefault=none"
    echo "SchedulerType=sched/backfill"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "ReturnToService=2"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    echo "MinJobAge=300"
    echo "SlurmctldTimeout=30"
    echo "SlurmdTimeout=60"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    for name in "${names[@]}"; do
        echo "NodeName=$name NodeAddr=$(host_addr "$name") CPUs=$cpus RealMemory=1024 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$SLURM_CONF"
mkdir "$state/slurmctld"
for name in "${names[@]}"; do mkdir -p "$state/$name/spool" "$state/$name/tmp"; done

# The commands, for COMMAND: in node1's namespaces (where slurmctld is);
# as they are where a job runs them (already on a host).
mkdir "$state/bin"
own_net=$(readlink /proc/self/ns/net)
for tool in sbatch srun salloc sinfo squeue scontrol scancel sacct; do
    real=$(command -v "$tool" 2>/dev/null) || continue
    cat > "$state/bin/$tool" <<WRAPPER
#!/bin/sh
# $tool for the Slurm of scripts/cluster/slurm.sh: run on node1.
export SLURM_CONF='$SLURM_CONF'
[ "\$(readlink /proc/self/ns/net)" = '$own_net' ] || exec $real "\$@"
exec nsenter -t $(host_pid node1) -n -u -- $real "\$@"
WRAPPER
    chmod +x "$state/bin/$tool"
done
export PATH=$state/bin:$PATH

# Waits up to 60 s for munged's socket, then starts slurmctld and the
# slurmds, and waits up to 60 s for every node to be idle.
for _ in $(seq 600); do [ -S "$socket" ] && break; kill -0 "$munged_pid" 2>/dev/null || break; sleep 0.1; done
if [ ! -S "$socket" ]; then
    echo "slurm.sh: munged did not start:" >&2
    tail -5 "$state/munge/munged.log" >&2
    exit 1
fi
daemons=("$munged_pid")
on_host node1 slurmctld -D -i > "$state/slurmctld.out" 2>&1 &
daemons=("$!" "${daemons[@]}")
for name in "${names[@]}"; do
    on_host "$name" slurmd -D > "$state/$name/slurmd.out" 2>&1 &
    daemons=("$!" "${daemons[@]}")
done
idle=false
for _ in $(seq 120); do
    if [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' | wc -l)" = "${#names[@]}" ]; then
        idle=true
        break
    fi
    sleep 0.5
done
if ! $idle; then
    echo "slurm.sh: the nodes did not come up within 60 s; sinfo says:" >&2
    sinfo -N >&2 2>&1 || true
    for log in "$state/slurmctld.log" "$state"/node*/slurmd.log "$state/slurmctld.out" "$state"/node*/slurmd.out; do
        [ -s "$log" ] || continue
        echo "--- ${log#"$state"/}" >&2
        tail -5 "$log" >&2
    done
    exit 1
fi
echo "slurm.sh: Slurm $(sinfo --version | awk '{ print $2 }') is up: $(sinfo -h -N -o '%N/%c CPUs' | tr '\n' ' ')(slurmctld on node1)"

# COMMAND, as hosts.sh runs it: a signal to this script is passed on.
if [ -t 0 ]; then
    "$@" && exit 0 || exit $?
fi
"$@" < /dev/stdin &
command_pid=$!
trap 'kill -TERM "$command_pid" 2>/dev/null' INT TERM
while :; do
    wait "$command_pid" && command_status=0 || command_status=$?
    kill -0 "$command_pid" 2>/dev/null || break
done
exit "$command_status"
