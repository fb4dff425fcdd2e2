# The failures of a long run, gathered at its end: CI shows only the tail
# of a log, and a failure an hour earlier would otherwise be out of sight.
# Reads the run's whole output; prints each failure under the "==" heading
# and the title (an unindented line: a suite's, a fixture's) it came under,
# or nothing when none failed.
/^== /          { heading = $0; title = ""; next }
/^[^ \t]/       { title = $0; next }
/^  \[(FAIL|PASSES ON SKELETON|todo)\]/ || /^      \[FAIL\]/ {
    if (!shown++) print "== what failed, gathered from above"
    if (heading != last_heading) { print heading; last_heading = heading; last_title = "" }
    if (title != "" && title != last_title) { print "  " substr(title, 1, 200); last_title = title }
    print substr($0, 1, 300)
}
END { if (shown) print "" }
