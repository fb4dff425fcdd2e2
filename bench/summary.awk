# Shared by the shell benchmarks: reads the "summary: key=value ..." lines
# that drivers print into value[key] for each line (the caller's main rule
# then uses it), and gives median(list, n) of a 1-based array.
function median(list, n,    sorted, i, j, t) {
    for (i = 1; i <= n; i++) sorted[i] = list[i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (sorted[j] < sorted[i]) { t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t }
    return n % 2 ? sorted[(n + 1) / 2] : (sorted[n / 2] + sorted[n / 2 + 1]) / 2
}
/^summary:/ {
    delete value
    for (f = 2; f <= NF; f++) { split($f, kv, "="); value[kv[1]] = kv[2] }
}
