# Lesson 05's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means).
LESSON := 05-data-parallel
$(LESSON)_TITLE     := 05 data-parallel SGD
$(LESSON)_EDITED    := data_parallel.c
$(LESSON)_PROGRAMS  := train ring_check
$(LESSON)_train_OBJS := main.o data_parallel.o
$(LESSON)_ring_check_OBJS := ring_check.o thread_heap.o data_parallel.o
$(LESSON)_PRODUCER_OBJS := data_parallel.o
$(LESSON)_MPI       := main.c ring_check.c data_parallel.c
$(LESSON)_OPENMP    :=
$(LESSON)_BENCH_OBJS := data_parallel.o
$(LESSON)_BENCH_MPI := yes
