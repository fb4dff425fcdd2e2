#!/usr/bin/env bash
# docs/clusters.md's commands as a user types them on the first node of a
# small cluster, run on node1 of two hosts that scripts/cluster/hosts.sh
# makes on this machine (node1 and node2, 10.99.0.1 and .2 on eth0, as in
# scripts/hostfile.example):
#
#   tests/texts/cluster-node1.sh 'COMMAND'
#
# COMMAND runs in a shell on node1, in the repository's top folder, where
# `ssh` is hosts.sh's launch agent (so Open MPI's mpirun and MPICH's
# mpiexec start their daemons on node2 as they would over ssh), `mpirun`
# is Open MPI's, and, as root, Open MPI's run-as-root settings are set, as
# the Makefile sets them. It prints what COMMAND prints, nothing of its
# own. Exit status: COMMAND's; 77 (with hosts.sh's reason) where hosts
# cannot be made here.
set -u
cd "$(dirname "$0")/../.." || exit 2
if [ $# -ne 1 ]; then
    echo "usage: tests/texts/cluster-node1.sh 'COMMAND'" >&2
    exit 2
fi
if [ -z "${ZZ_CLUSTER_DIR:-}" ]; then
    exec scripts/cluster/hosts.sh --hosts 2 --slots 2 -- "$0" "$@"
fi
bin=$ZZ_CLUSTER_DIR/bin
mkdir -p "$bin"
# ssh [OPTION...] HOST COMMAND...: the options (MPICH passes -x) mean
# nothing to the launch agent.
cat > "$bin/ssh" <<'SSH'
#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
exec "$ZZ_CLUSTER_DIR/on" "$@"
SSH
chmod +x "$bin/ssh"
# Debian names Open MPI's mpirun mpirun.openmpi beside MPICH's.
if command -v mpirun.openmpi >/dev/null 2>&1; then
    ln -sf "$(command -v mpirun.openmpi)" "$bin/mpirun"
fi
export PATH="$bin:$PATH" TMPDIR="$ZZ_CLUSTER_DIR/tmp"
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec "$ZZ_CLUSTER_DIR/on" node1 "cd '$PWD' && $1"
