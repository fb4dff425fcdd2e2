#!/usr/bin/env bash
# The rule for errors in common/, checked (make test runs this):
#
#   A function of the shared library reports an error by returning it, with
#   a one-line message for the caller. Only drivers end the process, and the
#   few functions they call to do so say it in their names: *exit* (such as
#   matrix_alloc_or_exit, mpi_exit_all), *_check_failed (what the _CHECK
#   macros call: a failed call is a bug, not bad input), not_done (the
#   skeletons' marker).
#
# One file is apart: comm_ledger.c stands in for MPI's own functions, whose
# callers cannot be made to check a new error, so what it cannot count or
# cannot hold ends every rank, with a message naming the call.
#
# So a call that ends the process (exit, _Exit, abort, MPI_Abort, or one of
# those functions) may appear only inside a function whose name says so.
# Prints each offence as FILE:LINE: FUNCTION ends the process (CALL) and
# exits 1; prints one line and exits 0 when there is none.
set -uo pipefail
cd "$(dirname "$0")/.."

awk '
    function allowed(name) {
        return name ~ /exit/ || name ~ /_check_failed$/ || name ~ /^not_done/
    }
    FNR == 1 { function_name = pending = "" }
    # A definition: a line at column 0 that names a function, [static]
    # [inline] TYPE NAME(..., and then a body opening at column 0. (A
    # declaration has no body.)
    /^[A-Za-z_][A-Za-z0-9_ \t*]*[ \t*]([A-Za-z_][A-Za-z0-9_]*)\(/ {
        line = $0
        sub(/\(.*/, "", line)
        n = split(line, words, /[ \t*]+/)
        pending = words[n]
    }
    /^\{/ { function_name = pending }
    /^\}/ { function_name = "" }
    /^[ \t]/ && function_name != "" {
        code = $0
        sub(/\/\*.*$/, "", code)       # the rest of the line after a comment opens
        if (code ~ /^[ \t]*\*/) next   # inside a block comment
        if (match(code, /(^|[^A-Za-z0-9_])([A-Za-z_]*exit[A-Za-z0-9_]*|_Exit|[A-Za-z_]*(abort|Abort)[A-Za-z0-9_]*|not_done[a-z_]*)[ \t]*\(/)) {
            call = substr(code, RSTART, RLENGTH)
            gsub(/^[^A-Za-z_]+|[ \t]*\($/, "", call)
            if (!allowed(function_name)) {
                printf "%s:%d: %s ends the process (%s); return an error instead, or name it *_or_exit\n", FILENAME, FNR, function_name, call
                bad++
            }
        }
    }
    END {
        if (bad) exit 1
        print "common/: every function that ends the process says so in its name"
    }
' $(ls common/*.c common/*.h | grep -v '^common/comm_ledger\.c$')
