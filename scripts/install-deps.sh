#!/usr/bin/env bash
# Installs what zero-to-zero needs: Open MPI, Check, pkg-config, OpenBLAS,
# patch (the test suite's broken submissions are patches), binutils (the
# grader reads compiled files with nm and objdump), bubblewrap on Linux (the
# grader's sandbox, make grade SANDBOX=1), bash 4 or later and GNU's
# coreutils (the scripts: macOS has bash 3.2 and BSD's tools; Homebrew's
# bash and coreutils, whose names scripts/portable.sh knows), libomp for
# Apple's clang on macOS, and a C compiler with OpenMP; with
# --clang also clang with its OpenMP runtime (make test-clang, make
# CC=clang); with --mpich also MPICH (make MPI=mpich); with --extras also
# gnuplot and pandoc (plots and slides); with --cluster also what make
# test-cluster makes hosts with on Linux (iproute2's ip; util-linux's
# unshare, nsenter, setpriv) and the Slurm it starts on them (slurmctld,
# slurmd, the client commands, munge, and the PMIx plugin for srun
# --mpi=pmix). Debian/Ubuntu (apt-get), Fedora
# (dnf), macOS (Homebrew). Safe to run again: it installs only what is
# missing. CUDA is optional and never installed here.
#
#   scripts/install-deps.sh            install what is missing
#   scripts/install-deps.sh --check    only say what is missing (exit 1 if any)
#   scripts/install-deps.sh --clang    also clang and its OpenMP runtime
#   scripts/install-deps.sh --mpich    also MPICH, beside Open MPI
#   scripts/install-deps.sh --extras   also gnuplot and pandoc
#   scripts/install-deps.sh --cluster  also ip, unshare, nsenter, setpriv,
#                                      Slurm and munge
set -euo pipefail

check_only=false
extras=false
clang=false
mpich=false
cluster=false
for arg in "$@"; do
    case "$arg" in
        --check) check_only=true ;;
        --extras) extras=true ;;
        --clang) clang=true ;;
        --mpich) mpich=true ;;
        --cluster) cluster=true ;;
        -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-deps.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

# What is missing, by what the build uses: commands and pkg-config modules.
missing=()
have() { command -v "$1" >/dev/null 2>&1; }
# Homebrew keeps OpenBLAS apart (keg-only): pkg-config finds it, as the
# Makefile's does, through its keg's folder.
if [ "$(uname -s)" = Darwin ] && have brew; then
    keg=$(brew --prefix openblas 2>/dev/null) &&
        [ -n "$keg" ] && export PKG_CONFIG_PATH="$keg/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
have cc || have gcc || have clang || missing+=(compiler)
have make || missing+=(make)
have patch || missing+=(patch)
have nm && have objdump || missing+=(binutils)
[ "$(uname -s)" != Linux ] || have bwrap || missing+=(bubblewrap)
have pkg-config || missing+=(pkg-config)
have mpicc && have mpirun || missing+=(mpi)
if have pkg-config; then
    pkg-config --exists check || missing+=(check)
    pkg-config --exists openblas || missing+=(openblas)
else
    missing+=(check openblas)
fi
# The scripts need bash 4 or later and GNU's timeout, sha256sum and
# realpath -m (scripts/portable.sh); macOS has bash 3.2 and BSD's tools,
# and Homebrew's coreutils names GNU's with a g in front.
bash4=false
for candidate in "$(command -v bash 2>/dev/null)" /opt/homebrew/bin/bash /usr/local/bin/bash; do
    [ -n "$candidate" ] && [ -x "$candidate" ] &&
        "$candidate" -c '[ "${BASH_VERSINFO[0]}" -ge 4 ]' 2>/dev/null && bash4=true
done
$bash4 || missing+=(bash)
{ have timeout || have gtimeout; } && { have sha256sum || have gsha256sum; } &&
    { realpath -m / >/dev/null 2>&1 || have grealpath; } || missing+=(coreutils)
# Apple's clang (macOS's cc) has no OpenMP runtime of its own: Homebrew's
# libomp, which the Makefile finds with brew --prefix libomp.
if [ "$(uname -s)" = Darwin ] && have cc && cc --version 2>/dev/null | grep -q 'Apple clang' &&
   ! { have brew && [ -d "$(brew --prefix libomp 2>/dev/null)/lib" ]; }; then
    missing+=(libomp)
fi
# clang, and an OpenMP runtime it can link (a separate package).
if $clang && ! { have clang && echo 'int main(void) { return 0; }' |
        clang -fopenmp -x c - -o /dev/null 2>/dev/null; }; then
    missing+=(clang)
fi
# MPICH beside Open MPI: every MPICH install has mpichversion.
$mpich && ! have mpichversion && missing+=(mpich)
if $cluster && [ "$(uname -s)" = Linux ]; then
    have ip || missing+=(iproute2)
    have unshare && have nsenter && have setpriv || missing+=(util-linux)
    have slurmctld && have slurmd && have sbatch && have munged || missing+=(slurm)
fi
if $extras; then
    have pandoc || missing+=(pandoc)
    have gnuplot || missing+=(gnuplot)
fi

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: everything is installed"
    exit 0
fi
echo "install-deps: missing: ${missing[*]}"
$check_only && exit 1

# Package names per system, for what is missing.
os=$(uname -s)
if [ "$os" = Darwin ]; then
    manager=brew
elif have apt-get; then
    manager=apt-get
elif have dnf; then
    manager=dnf
else
    echo "install-deps: no apt-get, dnf or brew here; install by hand: a C" \
         "compiler, make, pkg-config, Open MPI, Check, OpenBLAS" >&2
    exit 1
fi
packages=()
for need in "${missing[@]}"; do
    case "$manager:$need" in
        apt-get:compiler) packages+=(gcc libc6-dev) ;;
        apt-get:make) packages+=(make) ;;
        apt-get:patch) packages+=(patch) ;;
        apt-get:binutils) packages+=(binutils) ;;
        apt-get:bubblewrap) packages+=(bubblewrap) ;;
        apt-get:pkg-config) packages+=(pkg-config) ;;
        apt-get:mpi) packages+=(openmpi-bin libopenmpi-dev) ;;
        apt-get:check) packages+=(check libsubunit-dev) ;;
        apt-get:openblas) packages+=(libopenblas-dev) ;;
        apt-get:clang) packages+=(clang libomp-dev) ;;
        apt-get:mpich) packages+=(mpich libmpich-dev) ;;
        apt-get:pandoc) packages+=(pandoc) ;;
        apt-get:gnuplot) packages+=(gnuplot-nox) ;;
        apt-get:iproute2) packages+=(iproute2) ;;
        apt-get:util-linux) packages+=(util-linux) ;;
        apt-get:slurm) packages+=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge) ;;
        dnf:compiler) packages+=(gcc) ;;
        dnf:make) packages+=(make) ;;
        dnf:patch) packages+=(patch) ;;
        dnf:binutils) packages+=(binutils) ;;
        dnf:bubblewrap) packages+=(bubblewrap) ;;
        dnf:pkg-config) packages+=(pkgconf-pkg-config) ;;
        dnf:mpi) packages+=(openmpi openmpi-devel) ;;
        dnf:check) packages+=(check check-devel) ;;
        dnf:openblas) packages+=(openblas-devel) ;;
        dnf:clang) packages+=(clang libomp-devel) ;;
        dnf:mpich) packages+=(mpich mpich-devel) ;;
        dnf:pandoc) packages+=(pandoc) ;;
        dnf:gnuplot) packages+=(gnuplot) ;;
        dnf:iproute2) packages+=(iproute) ;;
        dnf:util-linux) packages+=(util-linux) ;;
        dnf:slurm) packages+=(slurm-slurmctld slurm-slurmd slurm munge) ;;
        apt-get:bash|dnf:bash|brew:bash) packages+=(bash) ;;
        apt-get:coreutils|dnf:coreutils|brew:coreutils) packages+=(coreutils) ;;
        brew:libomp) packages+=(libomp) ;;
        brew:compiler) ;;  # Xcode's command line tools: xcode-select --install
        brew:make) ;;
        brew:patch) ;;     # macOS has patch
        brew:binutils) packages+=(binutils) ;;
        brew:pkg-config) packages+=(pkg-config) ;;
        brew:mpi) packages+=(open-mpi libomp) ;;
        brew:check) packages+=(check) ;;
        brew:openblas) packages+=(openblas) ;;
        brew:clang) packages+=(libomp) ;;  # Xcode's clang, with Homebrew's libomp (README)
        brew:mpich) echo "install-deps: Homebrew's mpich and open-mpi cannot be installed together: brew unlink open-mpi && brew install mpich" >&2 ;;
        brew:pandoc) packages+=(pandoc) ;;
        brew:gnuplot) packages+=(gnuplot) ;;
    esac
done

if [ ${#packages[@]} -eq 0 ]; then
    echo "install-deps: nothing here that $manager can install; see above" >&2
    exit 1
fi
case "$manager" in
    # Another install running (a second terminal, a desktop's updater) holds
    # dpkg's lock: wait for it rather than fail at once.
    apt-get) command=(apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${packages[@]}") ;;
    dnf) command=(dnf install -y "${packages[@]}") ;;
    brew) command=(brew install "${packages[@]}") ;;
esac

run() {
    echo "install-deps: $*"
    "$@"
}
if [ "$manager" = brew ]; then
    run "${command[@]}"
elif [ "$(id -u)" -eq 0 ]; then
    if [ "$manager" = apt-get ]; then
        export DEBIAN_FRONTEND=noninteractive
        run apt-get -o DPkg::Lock::Timeout=600 update -qq
    fi
    run "${command[@]}"
elif have sudo && sudo -n true 2>/dev/null; then
    [ "$manager" = apt-get ] && run sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    run sudo "${command[@]}"
else
    echo "install-deps: installing needs root. Run this, then try again:" >&2
    if [ "$manager" = apt-get ]; then
        echo "  sudo apt-get update && sudo ${command[*]}" >&2
    else
        echo "  sudo ${command[*]}" >&2
    fi
    exit 1
fi

if [ "$manager" = dnf ] && ! have mpicc; then
    echo "install-deps: on Fedora, Open MPI is a module: run 'module load mpi/openmpi-x86_64' (or add /usr/lib64/openmpi/bin to PATH)" >&2
fi
if [ "$manager" = dnf ] && $mpich && ! have mpichversion; then
    echo "install-deps: on Fedora, MPICH is a module: run 'module load mpi/mpich-x86_64' (or add /usr/lib64/mpich/bin to PATH)" >&2
fi
echo "install-deps: done"
