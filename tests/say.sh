# Sourced by the toolkit's check scripts (tests/check-*.sh): one [pass],
# [FAIL] or [skip] line per check, counted into make test's tally.
#   say_to TALLY_FILE NAME      where the counts go ("" for nowhere)
#   say yes|no|skip TEXT [LOG]  the line; a [FAIL] quotes LOG's last lines
# $say_failed is 1 once any check has failed.
say_tally="" say_name="" say_failed=0
say_to() {
    say_tally=$1 say_name=$2
}
say() {
    local counts
    case "$1" in
        yes) echo "  [pass] $2"; counts="1 0 0" ;;
        skip) echo "  [skip] $2"; counts="0 0 1" ;;
        *) echo "  [FAIL] $2"
           [ -z "${3:-}" ] || sed 's/^/    | /' "$3" | tail -20
           counts="0 1 0"; say_failed=1 ;;
    esac
    [ -z "$say_tally" ] || echo "$counts $say_name" >> "$say_tally"
}
