#!/usr/bin/env bash
# make test-cluster: the lessons' MPI drivers across several hosts, made on
# this machine from network namespaces by scripts/cluster/hosts.sh (2 hosts,
# Open MPI started on them without ssh, TCP between them), against the
# same drivers on this machine alone (shared memory).
#
# Each case runs a solution driver four times: on 4 ranks here and on 2
# hosts x 2 ranks, then on 2 ranks here and on 2 hosts x 1 rank. It checks:
#   - results: every file of doubles the driver reports (lesson 02's x and
#     y, lessons 05-07's parameters, master weights and losses) is bitwise
#     the one-host run's; the column split, whose sums MPI_Reduce_scatter
#     adds in Open MPI's order, is allowed rounding (1e-12 of the largest
#     |y|), and says whether it was bitwise;
#   - hosts: each rank's report names its host (its first line, "host
#     NAME", MPI's processor name): on the hosts, the one mpirun's mapping
#     put it on (by slot: ranks 0-1 on node1, 2-3 on node2; by node: rank
#     0 on node1, rank 1 on node2), never this machine's own name;
#   - bytes: on 2 hosts x 1 rank, every byte the communication ledger
#     counted for a rank went to or came from the other host, and for 2
#     ranks the ledger's count of every call is the least that must cross
#     between them (common/comm_ledger.h): so each host's eth0, the veth
#     end in its namespace, sent at least what its rank's ledger sent and
#     received at least what it received. (On 2 x 2 ranks part of a rank's
#     traffic stays on its host, and a tree or ring can forward a piece
#     once for two ranks: there the counters are shown, not checked.)
# Then a table: the wall time of each run (mpirun's start included) and
# what the driver timed itself, TCP against shared memory, and the bytes
# each host's eth0 moved; lesson 00's ping-pong here and between the
# hosts (latency, bandwidth), and between them with each host's link
# limited (hosts.sh's --rate: checked that every byte each host's eth0
# moved went through the limit, tc's token buckets; the bandwidth shown);
# and the closing line "N passed, N failed".
#
# Then a real Slurm on the same hosts (scripts/cluster/slurm.sh) runs the
# job scripts of scripts/slurm/ and make grade-all's job array
# (tests/cluster/slurm.sh); skipped, with the reason, where Slurm is not
# installed (scripts/install-deps.sh --cluster installs it).
#
# With --mpich, the same checks for MPICH, on drivers built with it (make
# test-cluster builds them after the Open MPI part, where MPICH is
# installed): lesson 02's two splits on 2 hosts x 1 rank (below: why not
# 2 x 2) and the ping-pong, started by
# mpiexec on node1 as a user would (tests/texts/cluster-node1.sh), with
# UCX held to TCP on eth0. Without that, UCX finds that these hosts share
# one machine's memory and passes the ranks' messages through it, and
# nothing but the launch crosses eth0 (the byte check says so).
#
#   tests/cluster/run.sh [--mpich] (make test-cluster builds the drivers first)
# Exit status: 0 when every check passed, 1 when one failed, 77 (skipped,
# after saying why) where hosts cannot be made here, 2 when the drivers
# are not built. Everything it writes is under build/test-cluster/.
set -u
cd "$(dirname "$0")/../.."
here=$PWD
build=${ZZ_BUILD_DIR:-build/solution}
work=build/test-cluster
programs="00-setup/pingpong 02-mpi-matvec/matvec_mpi 03-openmp/hybrid 05-data-parallel/train 06-zero/train_zero 07-offload/train_offload"
mpich=false
if [ "${1:-}" = --mpich ]; then
    mpich=true
    work=build/test-cluster/mpich
    programs="00-setup/pingpong 02-mpi-matvec/matvec_mpi"
elif [ $# -gt 0 ]; then
    echo "usage: tests/cluster/run.sh [--mpich]" >&2
    exit 2
fi
# MPICH's launcher across the hosts, with UCX on TCP over eth0 only
# (--mpich; see above).
mpich_on_hosts="mpiexec.mpich -f scripts/hostfile.mpich.example -iface eth0 -genv UCX_NET_DEVICES eth0 -genv UCX_TLS tcp,self"

# First, here: the drivers, then the hosts, and this script again on them.
if [ -z "${ZZ_CLUSTER_DIR:-}" ]; then
    for program in $programs; do
        [ -x "$build/$program" ] || {
            echo "test-cluster: $build/$program is not built (make test-cluster builds it)" >&2
            exit 2
        }
    done
    if $mpich && ! command -v mpiexec.mpich > /dev/null; then
        echo "test-cluster: [skip] MPICH across the hosts: MPICH is not installed (scripts/install-deps.sh --mpich)"
        echo "0 passed, 0 failed, 1 skipped"
        exit 0
    fi
    rm -rf "$work"
    mkdir -p "$work"
    start=$(date +%s)
    scripts/cluster/hosts.sh --hosts 2 --slots 2 -- "$0" "$@"
    status=$?
    # make cluster-up's cluster, as docs/clusters.md tells a student to
    # use it: up with a limited link, a command on node2 through make
    # cluster-shell, down, and nothing of it left (its processes, its
    # folder here and in the temporary folder).
    if [ "$status" != 77 ] && [ -f "$work/tally" ] && ! $mpich; then
        echo "== make cluster-up, cluster-shell and cluster-down"
        cluster_tmp=$(mktemp -d "${TMPDIR:-/tmp}/zz-cluster-up-XXXXXX")
        {
            TMPDIR=$cluster_tmp make -s --no-print-directory cluster-up HOSTS=2 RANKS=2 RATE=1gbit &&
                pid=$(cat build/cluster/pid) &&
                echo 'hostname; tc qdisc show dev eth0; $ZZ_CLUSTER_MPIRUN -np 4 hostname' |
                    make -s --no-print-directory cluster-shell HOST=node2 &&
                make -s --no-print-directory cluster-down
        } > "$work/cluster-up.log" 2>&1 && up_status=0 || up_status=$?
        left=$(ls -A "$cluster_tmp"; [ ! -e build/cluster ] || echo build/cluster;
               [ -z "${pid:-}" ] || ! kill -0 "$pid" 2>/dev/null || echo "hosts.sh (pid $pid)")
        shell_out=$(sed -n '/a shell on node2/,$p' "$work/cluster-up.log")
        if [ "$up_status" != 0 ]; then
            echo "  [FAIL] make cluster-up, cluster-shell, cluster-down: status $up_status ($work/cluster-up.log)"
            echo "0 1" >> "$work/tally"
        elif [ "$(printf '%s\n' "$shell_out" | sed -n 2p)" != node2 ] ||
             ! printf '%s\n' "$shell_out" | grep -q "tbf .*rate 1Gbit" ||
             [ "$(printf '%s\n' "$shell_out" | grep -cx 'node[12]')" != 5 ]; then
            echo "  [FAIL] make cluster-shell HOST=node2 did not run there, with the link limited and 4 ranks on the hosts ($work/cluster-up.log)"
            echo "0 1" >> "$work/tally"
        elif [ -n "$left" ]; then
            echo "  [FAIL] make cluster-down left behind: $left"
            echo "0 1" >> "$work/tally"
        else
            echo "  [pass] make cluster-up HOSTS=2 RANKS=2 RATE=1gbit, a command on node2 (its link limited, 4 ranks across the hosts), make cluster-down: nothing left behind"
            echo "1 0" >> "$work/tally"
        fi
        make -s --no-print-directory cluster-down > /dev/null 2>&1 || true
        rm -rf "$cluster_tmp"
    fi
    if [ "$status" = 77 ]; then
        echo "test-cluster: [skip] every case: no hosts can be made here (above: why)"
        echo "0 passed, 0 failed, 1 skipped"
    elif [ -f "$work/tally" ]; then
        echo "test-cluster: $(($(date +%s) - start)) s in all"
        awk '{ p += $1; f += $2; s += $3 } END { printf "%d passed, %d failed%s\n", p, f, (s ? ", " s " skipped" : "") }' "$work/tally"
    else
        echo "test-cluster: the hosts ended with status $status before any check"
        echo "0 passed, 1 failed"
        status=1
    fi
    exit "$status"
fi

# From here on, the hosts are up (ZZ_CLUSTER_*: scripts/cluster/hosts.sh).
tally=$work/tally
: > "$tally"
! $mpich || echo "== MPICH across the hosts: mpiexec on node1, UCX on TCP over eth0 ($mpich_on_hosts)"
status=0
pass() { echo "  [pass] $*"; echo "1 0" >> "$tally"; }
fail() { echo "  [FAIL] $*"; echo "0 1" >> "$tally"; status=1; }

# The one-host launcher: the Makefile's (ZZ_MPIRUN), or Open MPI's as it
# would be.
if [ -n "${ZZ_MPIRUN:-}" ]; then
    read -r -a one_host_mpirun <<< "$ZZ_MPIRUN"
else
    one_host_mpirun=(mpirun --oversubscribe)
    [ "$(id -u)" != 0 ] || one_host_mpirun=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "${one_host_mpirun[@]}")
fi
limit=300   # seconds a run may take, here and on the hosts
machine=$(hostname)
read -r -a hosts <<< "$ZZ_CLUSTER_HOSTS"

# eth0's received and sent bytes on HOST, from its holder's /proc/PID/net
# (which shows the network namespace PID is in).
counters() {   # counters HOST -> "RX TX"
    local pid
    pid=$(awk -v host="$1" '$1 == host { print $2 }' "$ZZ_CLUSTER_DIR/hosts")
    awk '$1 == "eth0:" { print $2, $10 }' "/proc/$pid/net/dev"
}
all_counters() { local host; for host in "${hosts[@]}"; do counters "$host"; done; }

# A report's host, and its ledger's bytes sent and received, all calls.
report_host() { awk '$1 == "host" { print $2; exit }' "$1"; }
ledger_bytes() { awk '$1 == "comm" { s += $4; r += $5 } END { printf "%d %d\n", s, r }' "$1"; }

# What the driver itself timed, from its output: lesson 02's communication
# (the median of its repetitions), lessons 05-07's training steps.
driver_time() {   # driver_time LOG
    sed -nE 's/^summary: .*comm_ms=([0-9.]+).*/\1 ms/p; s/.* took ([0-9.]+) s of the run.*/\1 s/p' "$1" | head -1
}

now() { date +%s.%N; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# Runs a launcher with a time limit that ends mpirun gently first (it
# takes its ranks and daemons with it). timeout puts mpirun in a process
# group of its own, which an interrupt to this one does not reach: this
# script passes it on, and stops.
running=
launch() {   # launch LOG COMMAND...
    local log=$1 launch_status
    shift
    timeout -k 10 "$limit" "$@" > "$log" 2>&1 &
    running=$!
    wait "$running" && launch_status=0 || launch_status=$?
    running=
    return "$launch_status"
}
interrupted() {   # interrupted STATUS
    if [ -n "$running" ]; then
        kill -TERM "$running" 2>/dev/null
        wait "$running"
    fi
    echo "test-cluster: interrupted"
    exit "$1"
}
trap 'interrupted 130' INT
trap 'interrupted 143' TERM

# Compares two files of doubles: bitwise, or (TOLERANCE > 0) within
# TOLERANCE times the largest magnitude in the first. Prints what it found.
compare_doubles() {   # compare_doubles A B TOLERANCE
    if cmp -s "$1" "$2"; then
        echo bitwise
        return 0
    fi
    if [ "$(stat -c %s "$1")" != "$(stat -c %s "$2")" ]; then
        echo "of another length ($(stat -c %s "$1") and $(stat -c %s "$2") bytes)"
        return 1
    fi
    paste <(od -An -v -tf8 -w8 "$1") <(od -An -v -tf8 -w8 "$2") |
        awk -v tolerance="$3" '
            function abs(v) { return v < 0 ? -v : v }
            { if (abs($1) > largest) largest = abs($1)
              if (first == "" && $1 != $2) first = NR - 1
              if (abs($1 - $2) > worst) { worst = abs($1 - $2); at = NR - 1; a = $1; b = $2 } }
            END {
              if (tolerance > 0 && worst <= tolerance * largest) {
                  printf "within %.3g of the largest |value| (%.3g apart at most; not bitwise)\n", tolerance, worst
                  exit 0
              }
              printf "different: element %d is %.17g here, %.17g on the hosts (first difference: element %d)\n", at, a, b, first
              exit 1
            }'
}

# One case: NAME, P, the mapping on the hosts (slot or node), TOLERANCE
# for the comparison (0: bitwise), the driver and its arguments.
timings=()
run_case() {
    local name=$1 ranks=$2 map=$3 tolerance=$4 program=$5
    shift 5
    local label="$name, $ranks ranks" slug
    slug=$(echo "$name-$ranks" | tr -c 'a-zA-Z0-9-\n' '-')
    local one=$here/$work/$slug-one cluster=$here/$work/$slug-hosts
    mkdir -p "$one" "$cluster"
    echo "$label: here (shared memory) and on ${#hosts[@]} hosts by $map (TCP)"

    local one_run=("${one_host_mpirun[@]}" -np "$ranks" "$here/$build/$program" "$@" --out "$one")
    local hosts_run=("$ZZ_CLUSTER_MPIRUN" -np "$ranks" --map-by "$map" --bind-to none "$here/$build/$program" "$@" --out "$cluster")
    if $mpich; then
        local ppn=
        [ "$map" = node ] && ppn="-ppn 1 "
        one_run=(mpiexec.mpich -np "$ranks" "$here/$build/$program" "$@" --out "$one")
        # One command line, typed on node1 (the arguments have no spaces).
        hosts_run=(tests/texts/cluster-node1.sh "$mpich_on_hosts -np $ranks $ppn$here/$build/$program $* --out $cluster")
    fi

    local t0 t1 t2 ok=true
    t0=$(now)
    launch "$one.log" "${one_run[@]}" ||
        { fail "$label: here: $program ended with status $? ($one.log):"; tail -5 "$one.log" | sed 's/^/      /'; ok=false; }
    t1=$(now)
    local before after
    before=$(all_counters)
    launch "$cluster.log" "${hosts_run[@]}" ||
        { fail "$label: on the hosts: $program ended with status $? ($cluster.log):"; tail -5 "$cluster.log" | sed 's/^/      /'; ok=false; }
    t2=$(now)
    after=$(all_counters)
    $ok || return 0

    # Each rank's host.
    local r want got wrong=""
    for r in $(seq 0 $((ranks - 1))); do
        if [ "$map" = node ]; then want=${hosts[$((r % ${#hosts[@]}))]}
        else want=${hosts[$((r / (ranks / ${#hosts[@]})))]}; fi
        got=$(report_host "$cluster/rank-$r.txt")
        [ "$got" = "$want" ] && [ "$got" != "$machine" ] ||
            wrong+=" rank $r on '${got:-(none)}', not $want;"
        got=$(report_host "$one/rank-$r.txt")
        [ "$got" = "$machine" ] || wrong+=" rank $r here on '${got:-(none)}', not $machine;"
    done
    if [ -z "$wrong" ]; then
        pass "$label: each rank reports its host: $(for r in $(seq 0 $((ranks - 1))); do printf '%s ' "$(report_host "$cluster/rank-$r.txt")"; done)(here: $machine)"
    else
        fail "$label: hosts:$wrong"
    fi

    # The results.
    local file files=0 verdict worst=bitwise
    for file in "$one"/*.bin; do
        [ -e "$file" ] || continue
        files=$((files + 1))
        if [ ! -f "$cluster/${file##*/}" ]; then
            fail "$label: the hosts' run wrote no ${file##*/}"
            worst=
            continue
        fi
        if verdict=$(compare_doubles "$file" "$cluster/${file##*/}" "$tolerance"); then
            [ "$verdict" = bitwise ] || worst=$verdict
        else
            fail "$label: ${file##*/}: $verdict"
            worst=
        fi
    done
    if [ "$files" = 0 ]; then
        fail "$label: the one-host run wrote no results"
    elif [ -n "$worst" ]; then
        pass "$label: $files result files, $worst, as on one host"
    fi

    # The bytes: each host's eth0 against the ledgers of the ranks on it.
    local k host rx tx sent received s rcv line bytes=""
    for k in "${!hosts[@]}"; do
        host=${hosts[$k]}
        read -r rx tx <<< "$(paste -d' ' <(echo "$before" | sed -n "$((k + 1))p") <(echo "$after" | sed -n "$((k + 1))p") |
            awk '{ print $3 - $1, $4 - $2 }')"
        sent=0 received=0
        for r in $(seq 0 $((ranks - 1))); do
            [ "$(report_host "$cluster/rank-$r.txt")" = "$host" ] || continue
            read -r s rcv <<< "$(ledger_bytes "$cluster/rank-$r.txt")"
            sent=$((sent + s)) received=$((received + rcv))
        done
        line="$host's eth0 sent $tx and received $rx bytes; the ledger of its ranks: sent $sent, received $received"
        bytes+="$host $tx $rx "
        if [ "$map" = node ] && [ "$ranks" = "${#hosts[@]}" ]; then
            if [ "$sent" -gt 0 ] && [ "$tx" -ge "$sent" ] && [ "$rx" -ge "$received" ]; then
                pass "$label: $line"
            else
                fail "$label: $line: the veth must carry at least what the ledger counted, and the ledger count some bytes"
            fi
        else
            echo "  [info] $label: $line (not checked: part of it stays on the host)"
        fi
    done
    timings+=("$(printf '%-24s %5s %7s %7s %11s %11s   %s' "$name" "$ranks" "$(seconds "$t0" "$t1")" "$(seconds "$t1" "$t2")" "$(driver_time "$one.log")" "$(driver_time "$cluster.log")" "$bytes")")
}

b=$build
small_model=(--hidden 3 --width 149 --steps 3 --local-batch 4 --samples 40 --held-out 8)
cases() {   # cases P MAP
    run_case "02 rows" "$1" "$2" 0 02-mpi-matvec/matvec_mpi --m 32768 --n 256 --reps 5
    run_case "02 columns" "$1" "$2" 1e-12 02-mpi-matvec/matvec_mpi --columns --m 32768 --n 256 --reps 5
    $mpich && return 0   # MPICH: lesson 02 only
    run_case "05 ring allreduce" "$1" "$2" 0 05-data-parallel/train --steps 10 --local-batch 16 --samples 1024
    run_case "06 stage 3, prefetch" "$1" "$2" 0 06-zero/train_zero --stage 3 --prefetch "${small_model[@]}"
    run_case "07 offload (on stage 2)" "$1" "$2" 0 07-offload/train_offload "${small_model[@]}"
}
# MPICH: 2 hosts x 1 rank only. With two ranks a host, UCX held to TCP
# (each host's pair talking over its own eth0 address too), lesson 02's
# runs did not end within the time limit here (not looked into further).
$mpich || cases 4 slot
cases 2 node

# Latency and bandwidth between two ranks (lesson 00's ping-pong): here,
# and between the hosts. Shown, not checked.
pingpong=()
for where in here hosts; do
    pingpong_run=("$here/$build/00-setup/pingpong" --max-bytes 4194304 --reps 50)
    if $mpich && [ "$where" = here ]; then launcher=(mpiexec.mpich -np 2 "${pingpong_run[@]}")
    elif $mpich; then launcher=(tests/texts/cluster-node1.sh "$mpich_on_hosts -np 2 -ppn 1 ${pingpong_run[*]}")
    elif [ "$where" = here ]; then launcher=("${one_host_mpirun[@]}" -np 2 "${pingpong_run[@]}")
    else launcher=("$ZZ_CLUSTER_MPIRUN" -np 2 --map-by node --bind-to none "${pingpong_run[@]}"); fi
    if launch "$here/$work/pingpong-$where.log" "${launcher[@]}"; then
        pingpong+=("$(sed -n 's/^summary: //p' "$work/pingpong-$where.log")")
    else
        pingpong+=("(did not run: $work/pingpong-$where.log)")
    fi
done

# The link's limit (hosts.sh's rate, a token bucket on both ends of each
# host's veth pair): on, a ping-pong between the hosts, and every byte
# each host's eth0 sent went through the bucket on eth0 and every byte it
# received through the one on its switch port (tc's counters, which count
# each frame's Ethernet header too, so at least eth0's). The bandwidth is
# shown beside the unlimited one, not checked. (Open MPI only.)
bucket_sent() {   # bucket_sent PID DEVICE -> the bytes its tbf passed
    nsenter -t "$1" -n tc -s qdisc show dev "$2" | awk '$1 == "qdisc" { tbf = ($2 == "tbf") } tbf && $1 == "Sent" { print $2; exit }'
}
if ! $mpich; then
    link_rate=400mbit
    switch=$(cat "$ZZ_CLUSTER_DIR/switch")
    if "$ZZ_CLUSTER_DIR/rate" "$link_rate" > "$work/rate.log" 2>&1; then
        declare -A before
        k=0
        while read -r name pid _; do
            k=$((k + 1))
            read -r rx tx < <(counters "$name")
            before[$name]="$rx $tx $(bucket_sent "$pid" eth0) $(bucket_sent "$switch" "port$k")"
        done < "$ZZ_CLUSTER_DIR/hosts"
        launch "$here/$work/pingpong-limited.log" "$ZZ_CLUSTER_MPIRUN" -np 2 --map-by node --bind-to none \
            "$here/$build/00-setup/pingpong" --max-bytes 4194304 --reps 5 && limited_ok=true || limited_ok=false
        problems=
        k=0
        while read -r name pid _; do
            k=$((k + 1))
            read -r rx tx < <(counters "$name")
            read -r rx0 tx0 out0 in0 <<< "${before[$name]}"
            out=$(bucket_sent "$pid" eth0) in=$(bucket_sent "$switch" "port$k")
            if [ -z "$out0" ] || [ -z "$in0" ] || [ -z "$out" ] || [ -z "$in" ]; then
                problems+=" $name's link has no token bucket;"
            elif [ $((tx - tx0)) -le 0 ] || [ $((out - out0)) -lt $((tx - tx0)) ] || [ $((in - in0)) -lt $((rx - rx0)) ]; then
                problems+=" $name: eth0 sent $((tx - tx0)) and received $((rx - rx0)) bytes, its buckets passed $((out - out0)) and $((in - in0));"
            fi
        done < "$ZZ_CLUSTER_DIR/hosts"
        if ! $limited_ok; then
            fail "the link limited to $link_rate: the ping-pong between the hosts failed ($work/pingpong-limited.log)"
        elif [ -n "$problems" ]; then
            fail "the link limited to $link_rate: not every byte went through the token buckets:$problems"
        else
            pass "the link limited to $link_rate (hosts.sh's rate): every byte each host's eth0 sent and received went through its link's token bucket"
        fi
        pingpong+=("$(awk '$1 == 4194304 { print $3 " GB/s" }' "$work/pingpong-limited.log")")
        "$ZZ_CLUSTER_DIR/rate" off >> "$work/rate.log" 2>&1 ||
            fail "the link's limit could not be taken off again ($work/rate.log)"
    else
        fail "the link's limit: hosts.sh's rate $link_rate failed: $(head -c 300 "$work/rate.log")"
    fi
fi

echo
echo "Wall time of each run in seconds, mpirun's start included, and what the"
echo "driver timed itself (02: communication, median; 05-07: the steps): here"
echo "over shared memory, on the hosts over TCP; then the bytes each host's"
echo "eth0 sent and received."
printf '%-24s %5s %7s %7s %11s %11s   %s\n' "case" "ranks" "here" "hosts" "here" "hosts" "host sent received ..."
printf '%s\n' "${timings[@]}"
echo "ping-pong, 2 ranks: here ${pingpong[0]}; between hosts ${pingpong[1]}"
[ -z "${pingpong[2]:-}" ] || echo "ping-pong between the hosts, each link limited to $link_rate ($(awk -v r="${link_rate%mbit}" 'BEGIN { printf "%.3f", r / 8000 }') GB/s): 4 MiB messages at ${pingpong[2]}"

# A real Slurm on these hosts, its job scripts and make grade-all's job
# array (tests/cluster/slurm.sh says what it checks). Without Slurm it is
# skipped, with the reason. (Not again for MPICH.)
$mpich && exit "$status"
echo
rm -rf "$work/slurm"
scripts/cluster/slurm.sh -- tests/cluster/slurm.sh &
running=$!
wait "$running" && slurm_status=0 || slurm_status=$?
running=
case "$slurm_status" in
    0) ;;
    77) echo "  [skip] Slurm: every job (above: why)"; echo "0 0 1" >> "$tally" ;;
    *) [ -f "$work/slurm/ran" ] || fail "Slurm: it did not come up (above: why)"
       status=1 ;;
esac
exit "$status"
