# Lesson 03's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means).
LESSON := 03-openmp
$(LESSON)_TITLE     := 03 OpenMP
$(LESSON)_EDITED    := omp_matvec.c counters.c hybrid.c
$(LESSON)_PROGRAMS  := openmp hybrid
$(LESSON)_openmp_OBJS := main.o omp_matvec.o counters.o
$(LESSON)_hybrid_OBJS := hybrid.o omp_matvec.o
$(LESSON)_PRODUCER_OBJS := omp_matvec.o counters.o
$(LESSON)_MPI       := hybrid.c
$(LESSON)_OPENMP    := main.c omp_matvec.c counters.c hybrid.c
$(LESSON)_BENCH_OBJS := omp_matvec.o counters.o
$(LESSON)_BENCH_MPI :=
