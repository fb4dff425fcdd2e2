#!/usr/bin/env bash
# Every predefined constant of the MPI standard is accepted by the checks on
# a student's files, in every MPI lesson, under every MPI installed, and so
# is every MPI function that moves no data:
#   tests/check-mpi-constants.sh BUILD_DIR LESSON... [--tally FILE]
# A file that uses each of them (the standard's names, MPI 3.1's annex A,
# listed here by hand: the reference the derivation from mpi.h, in
# scripts/mpi-constants.sh, is tested against) is compiled with each MPI's
# mpicc as the Makefile compiles a student's file, and
# scripts/check-submission.sh must accept it with each lesson's rules. The
# checks can fail: the same file with a call that no lesson allows
# (getenv), a use of a library's variable that none allows (environ) and an
# MPI call that moves data where none allows it (MPI_Scan) must be refused,
# saying "calls" of the first, "uses" of the second, "moves data" of the
# third.
# BUILD_DIR holds the shared library and the lists the Makefile made
# (libraries/*.txt). An MPI that is not installed is reported as skipped.
# Prints [pass], [FAIL] or [skip] lines; exits 0 when none failed.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: tests/check-mpi-constants.sh BUILD_DIR LESSON... [--tally FILE]}
shift
lessons=() tally=""
while [ $# -gt 0 ]; do
    case "$1" in
        --tally) tally=${2:?}; shift 2 ;;
        *) lessons+=("$1"); shift ;;
    esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-mpi-constants-test-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
status=0
result() {   # result pass|FAIL|skip NAME [WHY]
    echo "  [$1] $2${3:+: $3}"
    case "$1" in
        pass) line="1 0 0" ;;
        skip) line="0 0 1" ;;
        *) line="0 1 0"; status=1 ;;
    esac
    [ -z "$tally" ] || echo "$line MPI constants: $2" >> "$tally"
}

# The standard's predefined handles and constants that a C program can use
# as values. Those MPI 4.0 added are used where the header has them.
standard="MPI_CHAR MPI_SHORT MPI_INT MPI_LONG MPI_LONG_LONG_INT MPI_LONG_LONG
MPI_SIGNED_CHAR MPI_UNSIGNED_CHAR MPI_UNSIGNED_SHORT MPI_UNSIGNED
MPI_UNSIGNED_LONG MPI_UNSIGNED_LONG_LONG MPI_FLOAT MPI_DOUBLE MPI_LONG_DOUBLE
MPI_WCHAR MPI_C_BOOL MPI_INT8_T MPI_INT16_T MPI_INT32_T MPI_INT64_T
MPI_UINT8_T MPI_UINT16_T MPI_UINT32_T MPI_UINT64_T MPI_AINT MPI_COUNT
MPI_OFFSET MPI_C_COMPLEX MPI_C_FLOAT_COMPLEX MPI_C_DOUBLE_COMPLEX
MPI_C_LONG_DOUBLE_COMPLEX MPI_BYTE MPI_PACKED MPI_FLOAT_INT MPI_DOUBLE_INT
MPI_LONG_INT MPI_2INT MPI_SHORT_INT MPI_LONG_DOUBLE_INT MPI_INTEGER MPI_REAL
MPI_DOUBLE_PRECISION MPI_COMPLEX MPI_LOGICAL MPI_CHARACTER MPI_2REAL
MPI_2DOUBLE_PRECISION MPI_2INTEGER MPI_DATATYPE_NULL
MPI_MAX MPI_MIN MPI_SUM MPI_PROD MPI_LAND MPI_BAND MPI_LOR MPI_BOR MPI_LXOR
MPI_BXOR MPI_MINLOC MPI_MAXLOC MPI_REPLACE MPI_NO_OP MPI_OP_NULL
MPI_COMM_WORLD MPI_COMM_SELF MPI_COMM_NULL MPI_GROUP_EMPTY MPI_GROUP_NULL
MPI_REQUEST_NULL MPI_MESSAGE_NULL MPI_MESSAGE_NO_PROC MPI_ERRHANDLER_NULL
MPI_INFO_NULL MPI_INFO_ENV MPI_WIN_NULL MPI_FILE_NULL MPI_ERRORS_ARE_FATAL
MPI_ERRORS_RETURN
MPI_IN_PLACE MPI_BOTTOM MPI_STATUS_IGNORE MPI_STATUSES_IGNORE
MPI_ERRCODES_IGNORE MPI_ARGV_NULL MPI_ARGVS_NULL MPI_UNWEIGHTED
MPI_WEIGHTS_EMPTY
MPI_ANY_SOURCE MPI_ANY_TAG MPI_PROC_NULL MPI_ROOT MPI_UNDEFINED MPI_SUCCESS
MPI_ERR_OTHER MPI_TAG_UB MPI_HOST MPI_IO MPI_WTIME_IS_GLOBAL MPI_THREAD_SINGLE
MPI_THREAD_FUNNELED MPI_THREAD_SERIALIZED MPI_THREAD_MULTIPLE
MPI_MAX_PROCESSOR_NAME MPI_MAX_ERROR_STRING MPI_IDENT MPI_CONGRUENT
MPI_SIMILAR MPI_UNEQUAL MPI_KEYVAL_INVALID MPI_VERSION MPI_SUBVERSION
MPI_COMM_TYPE_SHARED MPI_COMM_NULL_COPY_FN MPI_COMM_NULL_DELETE_FN
MPI_COMM_DUP_FN MPI_TYPE_NULL_COPY_FN MPI_TYPE_NULL_DELETE_FN MPI_TYPE_DUP_FN"
standard_4="MPI_ERRORS_ABORT MPI_INFO_ENV MPI_SESSION_NULL"

# The standard's functions that move none of a program's data between ranks
# (MPI 3.1's C bindings less the families that do: point-to-point,
# collectives, one-sided, file I/O, processes started or connected; and
# the keyval makers, whose callbacks run at MPI_Finalize, outside the
# lesson's calls, as atexit's would): every
# MPI lesson accepts each, read from the library, whatever it allows of the
# calls that move data. Referred to by address: nm sees a call the same way.
functions="MPI_Abort MPI_Add_error_class MPI_Add_error_code
MPI_Add_error_string MPI_Alloc_mem MPI_Buffer_attach MPI_Buffer_detach
MPI_Cancel MPI_Cart_coords MPI_Cart_create MPI_Cart_get MPI_Cart_map
MPI_Cart_rank MPI_Cart_shift MPI_Cart_sub MPI_Cartdim_get
MPI_Comm_call_errhandler MPI_Comm_compare MPI_Comm_create
MPI_Comm_create_errhandler MPI_Comm_create_group
MPI_Comm_delete_attr MPI_Comm_dup MPI_Comm_dup_with_info MPI_Comm_free
MPI_Comm_free_keyval MPI_Comm_get_attr MPI_Comm_get_errhandler
MPI_Comm_get_info MPI_Comm_get_name MPI_Comm_group MPI_Comm_idup
MPI_Comm_rank MPI_Comm_remote_group MPI_Comm_remote_size MPI_Comm_set_attr
MPI_Comm_set_errhandler MPI_Comm_set_info MPI_Comm_set_name MPI_Comm_size
MPI_Comm_split MPI_Comm_split_type MPI_Comm_test_inter MPI_Dims_create
MPI_Dist_graph_create MPI_Dist_graph_create_adjacent
MPI_Dist_graph_neighbors MPI_Dist_graph_neighbors_count MPI_Errhandler_free
MPI_Error_class MPI_Error_string MPI_Finalize MPI_Finalized MPI_Free_mem
MPI_Get_address MPI_Get_count MPI_Get_elements MPI_Get_elements_x
MPI_Get_library_version MPI_Get_processor_name MPI_Get_version
MPI_Graph_create MPI_Graph_get MPI_Graph_map MPI_Graph_neighbors
MPI_Graph_neighbors_count MPI_Graphdims_get MPI_Grequest_complete
MPI_Grequest_start MPI_Group_compare MPI_Group_difference MPI_Group_excl
MPI_Group_free MPI_Group_incl MPI_Group_intersection MPI_Group_range_excl
MPI_Group_range_incl MPI_Group_rank MPI_Group_size MPI_Group_translate_ranks
MPI_Group_union MPI_Improbe MPI_Info_create MPI_Info_delete MPI_Info_dup
MPI_Info_free MPI_Info_get MPI_Info_get_nkeys MPI_Info_get_nthkey
MPI_Info_get_valuelen MPI_Info_set MPI_Init MPI_Init_thread MPI_Initialized
MPI_Intercomm_create MPI_Intercomm_merge MPI_Iprobe MPI_Is_thread_main
MPI_Mprobe MPI_Op_commutative MPI_Op_create MPI_Op_free MPI_Pack
MPI_Pack_external MPI_Pack_external_size MPI_Pack_size MPI_Pcontrol
MPI_Probe MPI_Query_thread MPI_Reduce_local MPI_Request_free
MPI_Request_get_status MPI_Status_set_cancelled MPI_Status_set_elements
MPI_Status_set_elements_x MPI_Test MPI_Test_cancelled MPI_Testall
MPI_Testany MPI_Testsome MPI_Topo_test MPI_Type_commit MPI_Type_contiguous
MPI_Type_create_darray MPI_Type_create_hindexed
MPI_Type_create_hindexed_block MPI_Type_create_hvector
MPI_Type_create_indexed_block MPI_Type_create_resized
MPI_Type_create_struct MPI_Type_create_subarray MPI_Type_delete_attr
MPI_Type_dup MPI_Type_free MPI_Type_free_keyval MPI_Type_get_attr
MPI_Type_get_contents MPI_Type_get_envelope MPI_Type_get_extent
MPI_Type_get_extent_x MPI_Type_get_name MPI_Type_get_true_extent
MPI_Type_get_true_extent_x MPI_Type_indexed MPI_Type_match_size
MPI_Type_set_attr MPI_Type_set_name MPI_Type_size MPI_Type_size_x
MPI_Type_vector MPI_Unpack MPI_Unpack_external MPI_Wait MPI_Waitall
MPI_Waitany MPI_Waitsome MPI_Wtick MPI_Wtime"

# The file a student might write: every constant, used as a value, and every
# function above.
write_user() {   # write_user FILE [EXTRA-LINE...]
    local file=$1 name
    shift
    {
        echo '#include <mpi.h>'
        echo '#include <stdint.h>'
        echo '#include <stdlib.h>'
        echo 'extern char **environ;'
        echo 'const void *volatile constant_sink;'
        echo 'void (*volatile function_sink)(void);'
        echo 'void use_every_constant(void)'
        echo '{'
        for name in $standard; do
            echo "    constant_sink = (const void *)(uintptr_t)($name);"
        done
        for name in $standard_4; do
            echo "#ifdef $name"
            echo "    constant_sink = (const void *)(uintptr_t)($name);"
            echo "#endif"
        done
        for name in $functions; do
            echo "    function_sink = (void (*)(void))$name;"
        done
        printf '%s\n' "$@"
        echo '}'
    } > "$file"
}

lists=()
for list in "$build"/libraries/c.txt "$build"/libraries/mpi.txt; do
    [ -f "$list" ] && lists+=(--libraries "$list")
done
constants=$build/libraries/mpi-constants.txt
if [ ! -f "$constants" ] || [ ! -f "$build/common/libcommon.a" ]; then
    result FAIL "the build" "$build has no libraries/mpi-constants.txt or common/libcommon.a (build it first: make build-solution)"
    exit 1
fi

for mpi in openmpi mpich; do
    mpicc=$(command -v "mpicc.$mpi" 2>/dev/null)
    if [ -z "$mpicc" ]; then
        result skip "$mpi" "mpicc.$mpi is not installed (scripts/install-deps.sh --mpich installs MPICH)"
        continue
    fi
    folder=$work/$mpi/lesson
    mkdir -p "$folder"
    write_user "$folder/uses_constants.c"
    write_user "$folder/refused.c" '    constant_sink = getenv("HOME");' '    constant_sink = environ;' \
        '    function_sink = (void (*)(void))MPI_Scan;'
    compiled=yes
    for file in uses_constants refused; do
        if ! (cd "$folder" && "$mpicc" -std=c11 -O2 -MMD -fstack-usage -c "$file.c" -o "$file.o") > "$work/compile.log" 2>&1; then
            result FAIL "$mpi" "$mpicc does not compile $file.c: $(grep -m1 error "$work/compile.log")"
            compiled=no
        fi
    done
    [ "$compiled" = yes ] || continue
    for lesson in "${lessons[@]}"; do
        if scripts/check-submission.sh "$lesson" "$build/common/libcommon.a" "${lists[@]}" \
                --mpi-constants "$constants" "$folder/uses_constants.o" > "$work/check.log" 2>&1; then
            result pass "$mpi, lesson $lesson" "every predefined constant, and every function that moves no data, accepted"
        else
            result FAIL "$mpi, lesson $lesson" "$(head -1 "$work/check.log")"
        fi
        scripts/check-submission.sh "$lesson" "$build/common/libcommon.a" "${lists[@]}" \
            --mpi-constants "$constants" "$folder/refused.o" > "$work/check.log" 2>&1
        if grep -q "calls getenv, which code in lesson $lesson may not call" "$work/check.log" &&
                grep -q "uses environ, which code in lesson $lesson may not use" "$work/check.log" &&
                grep -q "calls MPI_Scan, which is a collective: a call that moves data" "$work/check.log" &&
                [ "$(grep -c '^refused: ' "$work/check.log")" -eq 3 ]; then
            result pass "$mpi, lesson $lesson" "a call, a variable and an MPI call that moves data, not allowed, are refused as what they are"
        else
            result FAIL "$mpi, lesson $lesson" "getenv, environ and MPI_Scan not refused as 'calls', 'uses' and 'moves data' (and nothing else): $(tr '\n' ' ' < "$work/check.log" | cut -c1-400)"
        fi
    done
done
exit $status
