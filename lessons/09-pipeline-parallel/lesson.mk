# Lesson 09's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means).
LESSON := 09-pipeline-parallel
$(LESSON)_TITLE     := 09 pipeline parallelism
$(LESSON)_EDITED    := pipeline.c
$(LESSON)_PROGRAMS  := train_pp
$(LESSON)_train_pp_OBJS := main.o pp_state.o pipeline.o
$(LESSON)_MPI       := main.c pp_state.c pipeline.c
$(LESSON)_OPENMP    :=
$(LESSON)_PRODUCER_OBJS := pipeline.o pp_state.o
