# Lesson 03's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means). The student edits omp_matvec.c, counters.c and
# hybrid.c; compute_rows.c, false_sharing.c, main.c and hybrid_main.c are
# given.
LESSON := 03-openmp
$(LESSON)_TITLE     := 03 OpenMP
$(LESSON)_EDITED    := omp_matvec.c counters.c hybrid.c
$(LESSON)_PROGRAMS  := openmp hybrid
$(LESSON)_openmp_OBJS := main.o omp_matvec.o compute_rows.o counters.o false_sharing.o
$(LESSON)_hybrid_OBJS := hybrid_main.o hybrid.o omp_matvec.o compute_rows.o
$(LESSON)_PRODUCER_OBJS := omp_matvec.o compute_rows.o counters.o false_sharing.o
$(LESSON)_MPI       := hybrid.c hybrid_main.c
$(LESSON)_OPENMP    := main.c omp_matvec.c compute_rows.c counters.c false_sharing.c hybrid.c hybrid_main.c
# Its code runs threads (its OpenMP loops): make grade runs its tests
# once more under ThreadSanitizer.
$(LESSON)_TSAN      := yes
$(LESSON)_BENCH_OBJS := omp_matvec.o compute_rows.o counters.o false_sharing.o
$(LESSON)_BENCH_MPI :=
