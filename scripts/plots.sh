#!/usr/bin/env bash
# make plots: draws build/bench/results.csv (what make bench writes) as PNG
# figures in build/plots, with gnuplot:
#   01-bandwidth.png        lesson 01: y = Ax's GB/s, kernel by kernel,
#                           against STREAM's triad (a line)
#   02-strong-scaling.png   lesson 02: the row split's speedup T(1)/T(P),
#                           in all and computing alone, against ideal P
#   05-allreduce-busbw.png  lesson 05: bus bandwidth against message size,
#                           the ring allreduce and MPI_Allreduce, each P
#   06-bytes-per-rank.png   lesson 06: the model state rank 0 holds against
#                           P at each ZeRO stage (the memory ledger, points)
#                           and the ZeRO paper's formulas (lines)
#   07-cpu-adam.png         lesson 07: the CPU Adam's GB/s against the
#                           read-modify-write stream, per size and threads
# Prints one line per figure: the file written and what it shows, or
# "[skip]" and the rows it lacks (a figure is never drawn empty, and an old
# one of that name is removed). Where a row was written twice (two runs
# appended to one CSV), the later one counts.
#
#   scripts/plots.sh [--csv FILE] [--out DIR]   (defaults: build/bench/results.csv, build/plots)
#
# Exit status 0 when every figure that has its rows was written, 1 when
# gnuplot is missing, the CSV is missing or not make bench's, nothing could
# be drawn, or gnuplot failed; 2 on bad usage. $GNUPLOT names another
# gnuplot.
set -euo pipefail
csv=build/bench/results.csv
out=build/plots
while [ $# -gt 0 ]; do
    case "$1" in
        --csv) csv=${2:?--csv needs a file}; shift 2 ;;
        --out) out=${2:?--out needs a folder}; shift 2 ;;
        -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "plots: unknown argument '$1' (usage: scripts/plots.sh [--csv FILE] [--out DIR])" >&2; exit 2 ;;
    esac
done
gnuplot=${GNUPLOT:-gnuplot}
if ! command -v "$gnuplot" >/dev/null 2>&1; then
    echo "plots: gnuplot is not installed: scripts/install-deps.sh --extras installs it (with pandoc), or your package manager's gnuplot" >&2
    exit 1
fi
if [ ! -s "$csv" ]; then
    echo "plots: no $csv: run make bench first (it writes the results this draws)" >&2
    exit 1
fi
header=$(head -n 1 "$csv" | tr -d '\r')
if [ "$header" != "lesson,variant,size,threads,ranks,metric,value,unit,baseline,ratio" ]; then
    echo "plots: $csv does not start with make bench's header (lesson,variant,size,threads,ranks,metric,value,unit,baseline,ratio)" >&2
    exit 1
fi
mkdir -p "$out"
data=$(mktemp -d "${TMPDIR:-/tmp}/zz-plots-XXXXXX")
trap 'rm -rf "$data"' EXIT
trap 'echo "plots: stopped by a failed command at line $LINENO" >&2' ERR

# pngcairo draws smoother lines and any UTF-8 text; the plain png terminal
# is in every gnuplot that can write PNG.
if "$gnuplot" -e 'set terminal pngcairo' </dev/null >/dev/null 2>&1; then
    terminal='pngcairo size 960,600 font ",11"'
else
    terminal='png size 960,600'
fi

written=0 failed=0
# rows AWK-PROGRAM [awk options]: runs the program on the CSV's rows (the
# header left out, fields split at commas, carriage returns dropped), the
# last of each repeated row kept: key[lesson, variant, size, threads,
# ranks, metric] is its value; order[] and rows list the keys as first
# written.
rows() {
    local program=$1
    shift
    awk -F, "$@" '
        NR == 1 { next }
        { sub(/\r$/, "") }
        NF >= 7 {
            k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5 SUBSEP $6
            if (!(k in value)) order[++rows] = k
            value[k] = $7 + 0
        }
        function field(k, i,    parts) { split(k, parts, SUBSEP); return parts[i] }
    '"$program" "$csv"
}
# draw NAME WHAT: gnuplot's commands on standard input, after the common
# settings; reports the figure, or gnuplot's complaint.
draw() {
    local name=$1 what=$2 file=$out/$1.png
    local commands
    commands=$(cat)
    rm -f "$file"
    if { printf 'set terminal %s\nset output "%s"\nset encoding utf8\n' "$terminal" "$file"
         # Names such as MPI_Allreduce are text, not subscripts.
         printf 'set termoption noenhanced\nset grid lc rgb "#dddddd"\nset key box opaque Left reverse\nset datafile missing "?"\n'
         printf '%s\n' "$commands"; } | "$gnuplot" > "$data/$name.log" 2>&1 && [ -s "$file" ]; then
        echo "  wrote $file: $what"
        written=$((written + 1))
    else
        echo "  [FAIL] $name.png: gnuplot did not write it:"
        sed 's/^/    /' "$data/$name.log"
        rm -f "$file"
        failed=$((failed + 1))
    fi
}
skip() {   # skip NAME WHY
    rm -f "$out/$1.png"
    echo "  [skip] $1.png: $2"
}

echo "plots: from $csv, into $out/"

# Each figure: an awk program that writes the figure's data under $data
# and prints "ok" and what gnuplot needs, or "skip" and the reason.
# ---- lesson 01: each kernel's bandwidth, the STREAM triad as a line ------
info=$(rows '
    END {
        for (r = 1; r <= rows; r++) {
            k = order[r]
            if (field(k, 1) != "01" || field(k, 6) != "bandwidth") continue
            v = field(k, 2)
            if (v == "stream_triad") { stream = value[k]; continue }
            if (!(v in gbs)) names[++n] = v
            gbs[v] = value[k]; size = field(k, 3); threads = field(k, 4)
        }
        if (stream == "") { print "skip no stream_triad bandwidth row for lesson 01 (bench/bench_01.c writes it)"; exit }
        if (n == 0) { print "skip no kernel bandwidth rows for lesson 01 (bench/bench_01.c writes them)"; exit }
        top = stream
        for (i = 1; i <= n; i++) {
            printf "%s %.6g\n", names[i], gbs[names[i]] > (dir "/01.dat")
            if (gbs[names[i]] > top) top = gbs[names[i]]
        }
        printf "ok %d %.6g %.6g %s %s\n", n, stream, top, size, threads
    }' -v dir="$data")
if [ "${info%% *}" = ok ]; then
    read -r _ count stream top size threads <<< "$info"
    draw 01-bandwidth "lesson 01, y = Ax's bandwidth, kernel by kernel, against the STREAM triad" <<GNUPLOT
set title "Lesson 01: y = Ax, A $size doubles, $threads thread: bandwidth against STREAM"
set ylabel "GB/s (A, x and y once, over the time)"
set style fill solid 0.85 border -1
set boxwidth 0.6
set xrange [-0.6:$count - 0.4]
set yrange [0:$top * 1.25]
set key top left
plot "$data/01.dat" using 0:2:xtic(1) with boxes lc rgb "#4477aa" title "y = Ax", \
     "" using 0:2:(sprintf("%.1f", \$2)) with labels offset 0,0.8 notitle, \
     $stream with lines dt 2 lw 2 lc rgb "#cc3311" title sprintf("STREAM triad: %.1f GB/s, what the memory gives one core", $stream)
GNUPLOT
else
    skip 01-bandwidth "${info#* }"
fi

# ---- lesson 02: strong scaling against ideal -----------------------------
info=$(rows '
    END {
        for (r = 1; r <= rows; r++) {
            k = order[r]
            if (field(k, 1) != "02" || field(k, 2) != "rows") continue
            m = field(k, 6); p = field(k, 5) + 0
            if (m == "total_time") { total[p] = value[k]; size = field(k, 3) }
            if (m == "compute_time") compute[p] = value[k]
        }
        if (!(1 in total)) { print "skip no total_time row at P = 1 for lesson 02, the baseline (bench/bench_02.sh writes it)"; exit }
        n = 0
        for (p in total) if (p + 0 > 1 && total[p] > 0) n++
        if (n == 0) { print "skip lesson 02 has total_time rows at P = 1 only: strong scaling needs a second rank count"; exit }
        most = 1
        for (p = 1; p <= 4096; p++) {
            if (!(p in total) || total[p] <= 0) continue
            c = (1 in compute) && (p in compute) && compute[p] > 0 ? compute[1] / compute[p] : "?"
            printf "%d %.6g %s\n", p, total[1] / total[p], c > (dir "/02.dat")
            most = p
            tics = tics (tics == "" ? "" : ", ") p
        }
        printf "ok %d %s %s\n", most, size, tics
    }' -v dir="$data")
if [ "${info%% *}" = ok ]; then
    read -r _ most size tics <<< "$info"
    draw 02-strong-scaling "lesson 02, the row split's speedup against P, with the ideal" <<GNUPLOT
set title "Lesson 02: strong scaling of the row split, A $size"
set xlabel "MPI ranks P"
set ylabel "speedup T(1) / T(P)"
set xtics ($tics)
set xrange [0.8:$most + 0.2]
set yrange [0:$most * 1.15]
set key top left
plot x with lines dt 2 lw 2 lc rgb "#888888" title "ideal: P", \
     "$data/02.dat" using 1:3 with linespoints pt 6 ps 1.5 lw 2 lc rgb "#66ccee" title "computing alone", \
     "" using 1:2 with linespoints pt 7 ps 1.5 lw 2 lc rgb "#4477aa" title "in all: computing and communicating", \
     "" using 1:2:(sprintf("%.2f", \$2)) with labels offset 0,-1.2 notitle
GNUPLOT
else
    skip 02-strong-scaling "${info#* }"
fi

# ---- lesson 05: bus bandwidth against message size -----------------------
info=$(rows '
    END {
        for (r = 1; r <= rows; r++) {
            k = order[r]
            if (field(k, 1) != "05" || field(k, 6) != "busbw") continue
            v = field(k, 2)
            if (v != "ring_allreduce" && v != "mpi_allreduce") continue
            p = field(k, 5); b = field(k, 3) + 0
            if (!((v, p) in series)) { series[v, p] = 1; count[v]++ }
            if (!(p in ranks)) { ranks[p] = 1; ranklist[++np] = p }
            if (!(b in sizes)) { sizes[b] = 1; sizelist[++nb] = b }
            got[v, p, b] = value[k]
        }
        if (!count["ring_allreduce"] || !count["mpi_allreduce"]) {
            print "skip lesson 05 needs busbw rows of both ring_allreduce and mpi_allreduce (bench/bench_05.c writes them)"; exit
        }
        # Ascending, rank counts and sizes (a handful each).
        for (i = 1; i <= np; i++) for (j = i + 1; j <= np; j++)
            if (ranklist[j] + 0 < ranklist[i] + 0) { t = ranklist[i]; ranklist[i] = ranklist[j]; ranklist[j] = t }
        for (i = 1; i <= nb; i++) for (j = i + 1; j <= nb; j++)
            if (sizelist[j] < sizelist[i]) { t = sizelist[i]; sizelist[i] = sizelist[j]; sizelist[j] = t }
        line = ""
        for (i = 1; i <= np; i++) {
            p = ranklist[i]
            for (w = 1; w <= 2; w++) {
                v = w == 1 ? "ring_allreduce" : "mpi_allreduce"
                if (!((v, p) in series)) continue
                file = dir "/05-" v "-" p ".dat"
                for (j = 1; j <= nb; j++)
                    if ((v, p, sizelist[j]) in got) printf "%d %.6g\n", sizelist[j], got[v, p, sizelist[j]] > file
                close(file)
                line = line " " v ":" p
            }
        }
        tics = ""
        for (j = 1; j <= nb; j++) {
            b = sizelist[j]
            label = b >= 1048576 && b % 1048576 == 0 ? (b / 1048576) " MB" : b >= 1024 && b % 1024 == 0 ? (b / 1024) " KB" : b " B"
            tics = tics (j > 1 ? ", " : "") "\"" label "\" " b
        }
        print "ok" line
        print tics
    }' -v dir="$data")
if [ "${info%% *}" = ok ]; then
    plot="" k=0
    read -ra series <<< "$(sed -n 1p <<< "$info")"
    for entry in "${series[@]:1}"; do
        variant=${entry%:*} ranks=${entry#*:}
        if [ "$variant" = ring_allreduce ]; then
            colour='#4477aa' name="ring allreduce"
        else
            colour='#cc3311' name="MPI_Allreduce"
        fi
        k=$((k + 1))
        plot="$plot${plot:+, }\"$data/05-$variant-$ranks.dat\" using 1:2 with linespoints lw 2 lc rgb \"$colour\" dt $(( (k + 1) / 2 )) pt $(( (k + 1) / 2 * 2 + 3 )) title \"$name, P = $ranks\""
    done
    draw 05-allreduce-busbw "lesson 05, bus bandwidth against message size, the ring and MPI_Allreduce" <<GNUPLOT
set title "Lesson 05: allreduce of floats, bus bandwidth = bytes / time x 2(P-1)/P"
set xlabel "message (bytes of floats on each rank)"
set ylabel "bus bandwidth (GB/s)"
set logscale x
set xtics ($(sed -n 2p <<< "$info"))
set yrange [0:*]
set key top left
plot $plot
GNUPLOT
else
    skip 05-allreduce-busbw "${info#* }"
fi

# ---- lesson 06: bytes per rank against P, each stage, and the formulas ----
# The lines are common/zero_memory.h's formulas for Ψ parameters, mixed
# precision (2 bytes a parameter, 2 a gradient, K = 12 of optimizer state):
# stage 0 16Ψ, stage 1 4Ψ + 12Ψ/P, stage 2 2Ψ + 14Ψ/P, stage 3 16Ψ/P.
info=$(rows '
    END {
        for (r = 1; r <= rows; r++) {
            k = order[r]
            if (field(k, 1) == "06" && field(k, 2) == "model" && field(k, 6) == "parameters") {
                psi = value[k]; size = field(k, 3)
            }
        }
        if (psi == "") { print "skip no parameters row for lesson 06, the Ψ of the formulas (bench/bench_06.sh writes it: run make bench again)"; exit }
        most = 0
        for (r = 1; r <= rows; r++) {
            k = order[r]
            if (field(k, 1) != "06" || field(k, 3) != size || field(k, 6) != "model_state_bytes") continue
            v = field(k, 2)
            if (v !~ /^stage[0-3]$/) continue
            p = field(k, 5) + 0
            printf "%d %d %.6g\n", substr(v, 6), p, value[k] > (dir "/06.dat")
            n++
            if (p > most) most = p
        }
        if (n == 0) { print "skip no model_state_bytes rows for lesson 06 of " size " (bench/bench_06.sh writes them: run make bench again)"; exit }
        printf "ok %.0f %d %s\n", psi, most, size
    }' -v dir="$data")
if [ "${info%% *}" = ok ]; then
    read -r _ psi most size <<< "$info"
    draw 06-bytes-per-rank "lesson 06, bytes per rank against P for each ZeRO stage, with the formulas' lines" <<GNUPLOT
set title "Lesson 06: model state on rank 0, $size, Ψ = $psi parameters"
set xlabel "data-parallel ranks P"
set ylabel "MB on rank 0 (10^6 bytes): parameters, gradients, optimizer state"
set xtics 1
set xrange [0.8:$most + 0.2]
set yrange [0:*]
set samples 200
set key top right
set termoption enhanced
psi = $psi / 1e6
colour(s) = s == 0 ? "#888888" : s == 1 ? "#4477aa" : s == 2 ? "#228833" : "#cc3311"
plot 16 * psi                   with lines lw 2 lc rgb colour(0) title "stage 0, plain data parallel: 16Ψ", \
     4 * psi + 12 * psi / x     with lines lw 2 lc rgb colour(1) title "stage 1, P_{os}: 4Ψ + 12Ψ/P", \
     2 * psi + 14 * psi / x     with lines lw 2 lc rgb colour(2) title "stage 2, P_{os+g}: 2Ψ + 14Ψ/P", \
     16 * psi / x               with lines lw 2 lc rgb colour(3) title "stage 3, P_{os+g+p}: 16Ψ/P", \
     for [s = 0:3] "$data/06.dat" using (\$1 == s ? \$2 : 1/0):(\$3 / 1e6) with points pt 7 ps 1.6 lc rgb colour(s) notitle, \
     1/0 with points pt 7 ps 1.6 lc rgb "black" title "the memory ledger, rank 0"
GNUPLOT
else
    skip 06-bytes-per-rank "${info#* }"
fi

# ---- lesson 07: the CPU Adam against the stream ---------------------------
info=$(rows '
    END {
        split("fused unfused adamw_step_mixed torch_adamw torch_adamw_bf16 stream_rmw", kinds, " ")
        for (r = 1; r <= rows; r++) {
            k = order[r]
            if (field(k, 1) != "07" || field(k, 6) != "bandwidth") continue
            g = "\"" field(k, 3) "\" \"" field(k, 4) " thread" (field(k, 4) == 1 ? "" : "s") "\""
            if (!(g in groups)) { groups[g] = 1; grouplist[++ng] = g }
            got[g, field(k, 2)] = value[k]; have[field(k, 2)] = 1
        }
        if (!have["fused"]) { print "skip no bandwidth rows of the fused CPU Adam for lesson 07 (bench/bench_07.c writes them)"; exit }
        if (!have["stream_rmw"]) { print "skip no stream_rmw bandwidth rows for lesson 07 (bench/bench_07.c writes them)"; exit }
        # A line per size and thread count: the two, quoted, then each
        # variant'"'"'s GB/s ("?" where a run has none).
        file = dir "/07.dat"
        columns = ""
        for (i = 1; i <= 6; i++) if (have[kinds[i]]) columns = columns " " kinds[i]
        top = 0
        for (j = 1; j <= ng; j++) {
            g = grouplist[j]
            printf "%s", g > file
            for (i = 1; i <= 6; i++) {
                if (!have[kinds[i]]) continue
                if ((g, kinds[i]) in got) {
                    printf " %.6g", got[g, kinds[i]] > file
                    if (got[g, kinds[i]] > top) top = got[g, kinds[i]]
                } else printf " ?" > file
            }
            printf "\n" > file
        }
        printf "ok %d %.6g%s\n", ng, top, columns
    }' -v dir="$data")
if [ "${info%% *}" = ok ]; then
    read -r _ groups top columns <<< "$info"
    plot="" column=2
    for kind in $columns; do
        column=$((column + 1))
        case $kind in
            fused) colour='#4477aa' name="fused (the lesson's)" ;;
            unfused) colour='#66ccee' name="unfused: a pass per operation" ;;
            adamw_step_mixed) colour='#228833' name="adamw_step_mixed, scalar" ;;
            torch_adamw) colour='#ccbb44' name="PyTorch AdamW(fused=True)" ;;
            torch_adamw_bf16) colour='#ee6677' name="PyTorch, with the bf16 copy" ;;
            stream_rmw) colour='#555555' name="stream a[i] += b[i]: the memory's bound" ;;
        esac
        labels=""
        [ "$column" != 3 ] || labels=':xtic(strcol(1) . " parameters\n" . strcol(2))'
        plot="$plot${plot:+, }\"$data/07.dat\" using $column$labels lc rgb \"$colour\" title \"$name\""
    done
    draw 07-cpu-adam "lesson 07, the CPU Adam's GB/s against the stream" <<GNUPLOT
set title "Lesson 07: CPU Adam at 28 bytes a parameter, against a read-modify-write stream"
set ylabel "GB/s"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set bmargin 4
set xrange [-0.6:$groups - 0.4]
set yrange [0:$top * 1.35]
set key top left
plot $plot
GNUPLOT
else
    skip 07-cpu-adam "${info#* }"
fi

if [ "$failed" -gt 0 ]; then
    echo "plots: $failed figure(s) failed" >&2
    exit 1
fi
if [ "$written" -eq 0 ]; then
    echo "plots: nothing in $csv to draw (see above): run make bench" >&2
    exit 1
fi
