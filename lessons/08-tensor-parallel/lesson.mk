# Lesson 08's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means).
LESSON := 08-tensor-parallel
$(LESSON)_TITLE     := 08 tensor parallelism
$(LESSON)_EDITED    := tensor_parallel.c
$(LESSON)_PROGRAMS  := train_tp
$(LESSON)_train_tp_OBJS := main.o tp_state.o tensor_parallel.o
$(LESSON)_MPI       := main.c tp_state.c tensor_parallel.c
$(LESSON)_OPENMP    :=
$(LESSON)_PRODUCER_OBJS := tensor_parallel.o tp_state.o
