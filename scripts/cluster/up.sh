#!/usr/bin/env bash
# A cluster on this machine that stays up while you work on it, made by
# scripts/cluster/hosts.sh (network namespaces; root needed):
#
#   scripts/cluster/up.sh [--hosts N] [--slots S] [--rate R]   bring it up
#   scripts/cluster/up.sh --shell [HOST]    a shell on HOST (node1 by default)
#   scripts/cluster/up.sh --down            take it down, nothing left behind
#
# make cluster-up HOSTS=N RANKS=S RATE=R, make cluster-shell HOST=node2 and
# make cluster-down run these (docs/clusters.md). In the shell,
# $ZZ_CLUSTER_MPIRUN starts ranks on every host (S slots each), and
# $ZZ_CLUSTER_DIR/rate R (or off) changes the links' limit. One cluster a
# checkout: its state is in build/cluster/ (hosts.sh's process, its
# folder, its log). Exit status: 0; 2 for a wrong use (one up already, none
# up); 77 where hosts cannot be made here; 1 when they did not come up.
set -euo pipefail
cd "$(dirname "$0")/../.."
state=$PWD/build/cluster

running() { [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; }

# The cluster's environment, as hosts.sh gave it to its command.
load_env() {
    running && [ -f "$state/env" ] || {
        echo "up.sh: no cluster is up (make cluster-up)" >&2
        exit 2
    }
    # shellcheck disable=SC1091
    . "$state/env"
    export ZZ_CLUSTER_DIR ZZ_CLUSTER_MPIRUN ZZ_CLUSTER_HOSTS
}

case "${1:-}" in
    --hold)   # hosts.sh's command: note the environment, then wait
        env | grep '^ZZ_CLUSTER_' | sed "s/=\(.*\)/='\1'/" > "$state/env.new"
        mv "$state/env.new" "$state/env"
        exec sleep 2147483647 ;;
    --shell)
        load_env
        host=${2:-node1}
        case " $ZZ_CLUSTER_HOSTS " in
            *" $host "*) ;;
            *) echo "up.sh: there is no host '$host' (hosts: $ZZ_CLUSTER_HOSTS)" >&2; exit 2 ;;
        esac
        echo "up.sh: a shell on $host (exit to leave it; the cluster stays up): \$ZZ_CLUSTER_MPIRUN -np N PROGRAM runs on every host"
        exec "$ZZ_CLUSTER_DIR/on" "$host" "${SHELL:-/bin/bash}" ;;
    --down)
        running || { echo "up.sh: no cluster is up"; rm -rf "$state"; exit 0; }
        pid=$(cat "$state/pid")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 200); do   # hosts.sh takes its hosts down: up to 20 s
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "up.sh: the cluster (hosts.sh, pid $pid) did not go down within 20 s: $state/log" >&2
            exit 1
        fi
        rm -rf "$state"
        echo "up.sh: the cluster is down"
        exit 0 ;;
esac

# Up: hosts.sh in a session of its own (a closed terminal leaves it up),
# its command this script's --hold.
if running; then
    echo "up.sh: a cluster is up already ($(cat "$state/summary")): make cluster-down first" >&2
    exit 2
fi
rm -rf "$state"
mkdir -p "$state"
setsid scripts/cluster/hosts.sh "$@" -- "$PWD/scripts/cluster/up.sh" --hold \
    < /dev/null > "$state/log" 2>&1 &
echo $! > "$state/pid"
for _ in $(seq 600); do   # up to 60 s for the hosts
    [ -f "$state/env" ] && break
    if ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
        wait "$(cat "$state/pid")" && status=0 || status=$?
        cat "$state/log" >&2
        rm -rf "$state"
        [ "$status" = 77 ] && exit 77
        [ "$status" = 2 ] && exit 2
        exit 1
    fi
    sleep 0.1
done
if [ ! -f "$state/env" ]; then
    echo "up.sh: the hosts did not come up within 60 s: $state/log" >&2
    "$0" --down >/dev/null 2>&1 || true
    exit 1
fi
load_env
limit=$(printf '%s' " $*" | grep -o -- '--rate [^ ]*' | sed 's/--rate /, each link limited to /' || true)
echo "$ZZ_CLUSTER_HOSTS, $(sed -n 's/.* slots=//p' "$ZZ_CLUSTER_DIR/hostfile" | head -1) ranks a host$limit" > "$state/summary"
echo "up.sh: the cluster is up: $(cat "$state/summary")"
echo "  make cluster-shell HOST=node1    a shell on a host (\$ZZ_CLUSTER_MPIRUN -np N PROGRAM there)"
echo "  make cluster-down                take it down"
