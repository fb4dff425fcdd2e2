# Lesson 06's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means). memory_calculator is a plain C program: the
# paper's formulas need no MPI.
LESSON := 06-zero
$(LESSON)_TITLE     := 06 ZeRO stages 1-3
$(LESSON)_EDITED    := zero.c
$(LESSON)_PROGRAMS  := train_zero memory_calculator
$(LESSON)_train_zero_OBJS := main.o find_batch.o zero_state.o zero_stages.o zero.o
$(LESSON)_memory_calculator_OBJS := memory_calculator.o
$(LESSON)_PRODUCER_OBJS := zero.o zero_stages.o zero_state.o
$(LESSON)_MPI       := main.c find_batch.c zero_state.c zero_stages.c zero.c
$(LESSON)_OPENMP    :=
