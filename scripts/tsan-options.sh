# ThreadSanitizer's options for a run whose races are graded or reported,
# shared by grade.sh and tsan.sh (sourced: it only sets tsan_options).
#
# history_size=7, the largest: ThreadSanitizer reports a race only when it
# can rebuild the stack of the earlier of the two accesses from that
# thread's trace, and clang 14's runtime drops the report in silence when
# the trace has moved on. With the default size a race of lesson 07's tile
# loop was missed in 9 runs of 10 on a busy machine (the other thread's
# access lay a whole tile's accesses back), and found in 8 of 8 with 7. It
# costs trace memory (megabytes a thread), not time.
#
# ignore_noninstrumented_modules=1: races inside libraries built without
# ThreadSanitizer (MPI's) are not the student's. exitcode=66 tells a race
# from the program's own failures.
tsan_options="ignore_noninstrumented_modules=1 exitcode=66 history_size=7"
