#!/usr/bin/env bash
# Several hosts on one machine: network namespaces, each with its own host
# name and address on a private switch, and Open MPI launched across them
# without ssh. Then COMMAND runs (on this machine, as itself), and the
# hosts are taken down again, whatever happens.
#
#   scripts/cluster/hosts.sh [--hosts N] [--slots S] [--rate R] -- COMMAND [ARG...]
#   scripts/cluster/hosts.sh --check     can hosts be made here? (0, or 77)
#
# For instance, a shell with two hosts to try things in:
#   scripts/cluster/hosts.sh -- bash
#   $ZZ_CLUSTER_MPIRUN -np 4 hostname        ranks on node1 and node2
#   $ZZ_CLUSTER_DIR/on node2 ip -br addr     a command on node2
#   $ZZ_CLUSTER_DIR/rate 1gbit               each host's link limited
#
# The hosts. Each host (node1 .. nodeN) is a network and a UTS namespace,
# held open by a process of this script's that sleeps ("the holder"): its
# own host name, its own loopback, and one interface, eth0, at
# 10.99.0.K/24 (ZZ_CLUSTER_NET=10.99.0 by default), the end of a veth pair
# whose other end is a port of a bridge in one more namespace (the switch).
# Nothing is added to this machine's own network namespace: the hosts can
# reach each other and nothing else, and two runs at once each have their
# own hosts (the same names and addresses, in other namespaces). The
# holders die with this script, even when it is killed (their parent-death
# signal), and the namespaces with the last process in them.
#
# The link. --rate R (tc's units: 500mbit, 1gbit) limits each host's link
# to R each way: a token bucket (tc's tbf) on the host's eth0 for what it
# sends, and on its port of the switch for what it receives. Bandwidth
# only: this kernel has no netem, so no delay is added, and the hosts'
# latency stays this machine's. ZZ_CLUSTER_DIR/rate R, or rate off,
# changes it while the hosts are up.
#
# The launcher. COMMAND sees, in its environment:
#   ZZ_CLUSTER_MPIRUN  a mpirun for these hosts: it starts Open MPI's mpirun
#                      on node1, with the hostfile (each host S slots, 2 by
#                      default), the launch agent below in place of ssh, and
#                      TCP over eth0 as the only transport (btl tcp,self):
#                      no shared memory, even between ranks of one host
#   ZZ_CLUSTER_DIR     this run's folder: hostfile, hosts (name, holder's
#                      pid, address), on (the launch agent), mpirun, rate,
#                      switch (its holder's pid), tmp/
#   ZZ_CLUSTER_HOSTS   the hosts' names, node1 .. nodeN
# The launch agent, ZZ_CLUSTER_DIR/on HOST COMMAND...: like ssh HOST
# COMMAND..., its words joined and run by sh, but in HOST's network and UTS
# namespaces (nsenter), as the same user with the same environment. mpirun
# calls it to start its daemon (orted) on every host but node1.
#
# Exit status: COMMAND's; 77 (after saying why) where namespaces, veth
# pairs or bridges cannot be made here (no root, no CAP_SYS_ADMIN and
# CAP_NET_ADMIN, a container that forbids them, no iproute2); 2 for a
# wrong use.
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
hosts=2
slots=2
rate=
check_only=false
while [ $# -gt 0 ]; do
    case "$1" in
        --hosts) hosts=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
        --slots) slots=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
        --rate) rate=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
        --check) check_only=true; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) echo "hosts.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
case "$hosts" in [2-8]) ;; *) echo "hosts.sh: --hosts takes 2 to 8, not '$hosts'" >&2; exit 2 ;; esac
case "$slots" in [1-9]|[1-9][0-9]) ;; *) echo "hosts.sh: --slots takes 1 to 99, not '$slots'" >&2; exit 2 ;; esac
if [ -n "$rate" ] && ! [[ $rate =~ ^[1-9][0-9]*(k|m|g)?bit$ ]]; then
    echo "hosts.sh: --rate takes a whole rate in tc's units, such as 500mbit or 1gbit, not '$rate'" >&2
    exit 2
fi
if ! $check_only && [ $# -eq 0 ]; then
    echo "hosts.sh: say what to run: hosts.sh [--hosts N] -- COMMAND (try --help)" >&2
    exit 2
fi
net=${ZZ_CLUSTER_NET:-10.99.0}

skip() { echo "hosts.sh: cannot make hosts here: $*; skipped" >&2; exit 77; }
tools="ip unshare nsenter setpriv"
[ -z "$rate" ] || tools+=" tc"
for tool in $tools; do
    command -v "$tool" >/dev/null 2>&1 ||
        skip "'$tool' is not installed (iproute2, util-linux)"
done

# The processes other than the holders in our namespaces (mpirun's daemons
# and ranks, if COMMAND left any behind): only this run's processes can be
# there. By the namespaces' own ids, noted when they were made, and only
# while their holders live: the kernel gives a freed namespace's id to the
# next one made, which may be another run's (two runs at once would kill
# each other's hosts).
in_our_namespaces() {
    local pid ns k live=" "
    for k in "${!namespaces[@]}"; do
        [ "$(readlink "/proc/${namespace_holders[$k]}/ns/net" 2>/dev/null)" != "${namespaces[$k]}" ] ||
            live+="${namespaces[$k]} "
    done
    [ "$live" != " " ] || return 0
    for pid in /proc/[0-9]*; do
        case " ${holders[*]} " in *" ${pid#/proc/} "*) continue ;; esac
        ns=$(readlink "$pid/ns/net" 2>/dev/null) || continue
        case "$live" in *" $ns "*) echo "${pid#/proc/}" ;; esac
    done
}

holders=()
namespaces=()
namespace_holders=()
state=
cleanup() {
    local status=$? holder stray
    trap - EXIT INT TERM
    for _ in 1 2 3; do   # again, for any that a dying one started
        stray=$(in_our_namespaces)
        [ -n "$stray" ] || break
        kill -KILL $stray 2>/dev/null || true
        sleep 0.1
    done
    for holder in "${holders[@]}"; do   # then the holders, if they are ours
        [ "$(awk '{ print $4 }' "/proc/$holder/stat" 2>/dev/null)" != "$$" ] ||
            kill -KILL "$holder" 2>/dev/null || true
    done
    for holder in "${holders[@]}"; do   # gone (bash reaps it), within 5 s
        for _ in $(seq 100); do [ -e "/proc/$holder" ] || break; sleep 0.05; done
    done
    [ -z "$state" ] || rm -rf "$state"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A holder: a sleeping process in new network and UTS namespaces, named
# NAME, killed when this script ends however it ends. Sets $holder.
start_holder() {   # start_holder NAME
    local own_net own_uts k
    own_net=$(readlink /proc/self/ns/net)
    own_uts=$(readlink /proc/self/ns/uts)
    # Deaf to what a terminal or a time limit sends the whole process
    # group: this script ends it, when it has ended what runs on it.
    setpriv --pdeathsig KILL unshare --net --uts -- \
        sh -c "trap '' HUP INT QUIT TERM; hostname '$1' && exec sleep 2147483647" 2>"$state/holder.err" &
    holder=$!
    holders+=("$holder")
    disown "$holder"   # or bash announces its end ("Killed")
    for k in $(seq 600); do   # up to 30 s: the holder is in its namespaces
        if [ "$(readlink "/proc/$holder/ns/net" 2>/dev/null)" != "$own_net" ] &&
           [ "$(readlink "/proc/$holder/ns/uts" 2>/dev/null)" != "$own_uts" ] &&
           [ "$(nsenter -t "$holder" -u hostname 2>/dev/null)" = "$1" ]; then
            namespaces+=("$(readlink "/proc/$holder/ns/net")")
            namespace_holders+=("$holder")
            return 0
        fi
        kill -0 "$holder" 2>/dev/null ||
            skip "new network and UTS namespaces: $(head -c 300 "$state/holder.err" | tr '\n' ' ')(root, or CAP_SYS_ADMIN, is needed)"
        sleep 0.05
    done
    echo "hosts.sh: host $1 did not come up within 30 s (a machine this busy?)" >&2
    exit 1
}
in_ns() { local pid=$1; shift; nsenter -t "$pid" -n -- "$@"; }

state=$(mktemp -d "${TMPDIR:-/tmp}/zz-cluster-XXXXXX")
mkdir "$state/tmp"

# The switch: a bridge in a namespace of its own.
start_holder zz-switch
switch=$holder
in_ns "$switch" ip link add zzbr type bridge 2>"$state/ip.err" ||
    skip "a bridge: $(head -c 300 "$state/ip.err")"
in_ns "$switch" ip link set zzbr up
echo "$switch" > "$state/switch"

: > "$state/hostfile"
: > "$state/hosts"
names=()
for k in $(seq "$hosts"); do
    name=node$k
    start_holder "$name"
    # No IPv6 on the hosts: nothing but what Open MPI sends crosses.
    in_ns "$holder" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
    in_ns "$switch" ip link add "port$k" type veth peer name eth0 netns "$holder" 2>"$state/ip.err" ||
        skip "a veth pair: $(head -c 300 "$state/ip.err")"
    in_ns "$switch" ip link set "port$k" master zzbr
    in_ns "$switch" ip link set "port$k" up
    in_ns "$holder" ip link set lo up
    in_ns "$holder" ip addr add "$net.$k/24" dev eth0
    in_ns "$holder" ip link set eth0 up
    echo "$name slots=$slots" >> "$state/hostfile"
    echo "$name $holder $net.$k" >> "$state/hosts"
    names+=("$name")
done
if $check_only; then
    echo "hosts.sh: hosts can be made here ($hosts hosts came up and went down)"
    exit 0
fi

# The launch agent: ssh's way (the words joined, run by a shell), in the
# host's namespaces.
cat > "$state/on" <<'AGENT'
#!/bin/sh
# ZZ_CLUSTER_DIR/on HOST COMMAND...: run COMMAND on HOST, as ssh would.
dir=$(dirname "$0")
host=$1
shift
pid=$(awk -v host="$host" '$1 == host || $3 == host { print $2 }' "$dir/hosts")
if [ -z "$pid" ]; then
    echo "on: there is no host '$host' here (hosts: $(awk '{ printf "%s ", $1 }' "$dir/hosts"))" >&2
    exit 255
fi
exec nsenter -t "$pid" -n -u -- /bin/sh -c "$*"
AGENT
chmod +x "$state/on"

# The links' limit: a token bucket on both ends of each host's veth pair.
# Its burst holds 1 ms at the rate, and at least 16 KiB: a larger one lets
# a message of its size through at the link's own speed, and the rate
# holds only for longer ones. Packets wait up to 100 ms for tokens.
cat > "$state/rate" <<'RATE'
#!/bin/sh
# ZZ_CLUSTER_DIR/rate RATE | off: each host's link limited to RATE each
# way (tc's units: 500mbit, 1gbit), or not limited (see hosts.sh).
dir=$(dirname "$0")
limit=${1:-}
case "$limit" in
    off) burst= ;;
    [1-9]*bit) burst=$(awk -v r="$limit" 'BEGIN {
                   n = r + 0; u = substr(r, length(n "") + 1)
                   n *= (u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 1)
                   b = n / 8 / 1000; printf "%d", (b < 16384 ? 16384 : b) }') ;;
    *) echo "rate: say a rate in tc's units (500mbit, 1gbit) or off, not '$limit'" >&2; exit 2 ;;
esac
switch=$(cat "$dir/switch")
k=0
while read -r name pid address; do
    k=$((k + 1))
    for end in "$pid eth0" "$switch port$k"; do
        holder=${end% *} device=${end#* }
        if [ -z "$burst" ]; then
            nsenter -t "$holder" -n tc qdisc del dev "$device" root 2>/dev/null || true
        elif ! nsenter -t "$holder" -n tc qdisc replace dev "$device" root tbf rate "$limit" burst "$burst" latency 100ms; then
            echo "rate: tc could not limit $name's link ($device)" >&2
            exit 1
        fi
    done
done < "$dir/hosts"
RATE
chmod +x "$state/rate"
if [ -n "$rate" ]; then
    "$state/rate" "$rate" 2>"$state/tc.err" || skip "tc's token bucket: $(head -c 300 "$state/tc.err")"
fi

# Open MPI's mpirun (Debian names it mpirun.openmpi beside MPICH's).
ompi_mpirun=mpirun
command -v mpirun.openmpi >/dev/null 2>&1 && ompi_mpirun=mpirun.openmpi
"$ompi_mpirun" --version 2>/dev/null | grep -Eq "Open MPI|OpenRTE" ||
    skip "Open MPI's mpirun is not installed (scripts/install-deps.sh)"
root_env=
[ "$(id -u)" != 0 ] || root_env="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
cat > "$state/mpirun" <<LAUNCHER
#!/bin/sh
# mpirun across this run's hosts, started on node1 (see hosts.sh).
exec nsenter -t ${holders[1]} -n -u -- env TMPDIR='$state/tmp' $root_env \\
    $ompi_mpirun --hostfile '$state/hostfile' --mca plm rsh \\
    --mca plm_rsh_agent '$state/on' \\
    --mca btl tcp,self --mca btl_tcp_if_include $net.0/24 \\
    --mca oob_tcp_if_include $net.0/24 "\$@"
LAUNCHER
chmod +x "$state/mpirun"

export ZZ_CLUSTER_DIR=$state
export ZZ_CLUSTER_MPIRUN=$state/mpirun
export ZZ_CLUSTER_HOSTS="${names[*]}"
# From a terminal, COMMAND runs in the foreground, as any command would
# (^C reaches it). Otherwise in the background, so that a signal to this
# script alone (a time limit's TERM) is passed on to it at once, not after
# it ends (a background command ignores INT: it is passed on as TERM).
if [ -t 0 ]; then
    "$@" && exit 0 || exit $?
fi
"$@" < /dev/stdin &
command_pid=$!
trap 'kill -TERM "$command_pid" 2>/dev/null' INT TERM
while :; do
    wait "$command_pid" && command_status=0 || command_status=$?
    kill -0 "$command_pid" 2>/dev/null || break   # else a signal came first
done
exit "$command_status"
