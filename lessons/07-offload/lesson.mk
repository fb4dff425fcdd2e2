# Lesson 07's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means). train_offload runs on the student's own lesson
# 06 (its zero_owned_part and stage 2), never on a given copy of it: its
# objects come from the same build's 06-zero/. -fno-math-errno lets GCC and
# Clang vectorise sqrtf (cpu_adam.h says why the bits stay the same).
LESSON := 07-offload
$(LESSON)_TITLE     := 07 ZeRO-Offload
$(LESSON)_EDITED    := cpu_adam.c offload.c
$(LESSON)_PROGRAMS  := train_offload
$(LESSON)_train_offload_OBJS := main.o offload_state.o offload.o cpu_adam.o
$(LESSON)_train_offload_EARLIER := 06-zero/zero.o 06-zero/zero_stages.o 06-zero/zero_state.o
$(LESSON)_PRODUCER_OBJS := cpu_adam.o
$(LESSON)_MPI       := main.c offload_state.c offload.c
$(LESSON)_OPENMP    := cpu_adam.c
# Its code runs threads (the CPU Adam on OpenMP threads, the delayed update on a host task): make grade runs its tests
# once more under ThreadSanitizer.
$(LESSON)_TSAN      := yes
$(LESSON)_CFLAGS    := -fno-math-errno
$(LESSON)_DEVICE_CUDA := yes
$(LESSON)_BENCH_OBJS := cpu_adam.o
$(LESSON)_BENCH_MPI :=
