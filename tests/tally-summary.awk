# The closing lines of make test and its siblings, from a tally file of
# lines "PASSED FAILED SKIPPED TITLE": Check's summary, then "N passed, N
# failed" (", N skipped" when some were).
{ passed += $1; failed += $2; skipped += $3 }
END {
    total = passed + failed
    percent = total ? int(100 * passed / total) : 100
    printf "%d%%: Checks: %d, Failures: %d, Errors: 0\n", percent, total, failed
    if (skipped) printf "%d passed, %d failed, %d skipped\n", passed, failed, skipped
    else printf "%d passed, %d failed\n", passed, failed
}
