# Lesson 00's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means).
LESSON := 00-setup
$(LESSON)_TITLE     := 00 setup
$(LESSON)_EDITED    := hello_mpi.c hello_omp.c
$(LESSON)_PROGRAMS  := hello_mpi hello_omp stream pingpong
$(LESSON)_hello_mpi_OBJS := hello_mpi.o
$(LESSON)_hello_omp_OBJS := hello_omp.o
$(LESSON)_stream_OBJS    := stream_main.o
$(LESSON)_pingpong_OBJS  := pingpong.o
$(LESSON)_PRODUCER_OBJS :=
$(LESSON)_MPI       := hello_mpi.c pingpong.c
$(LESSON)_OPENMP    := hello_omp.c
# Its code runs threads (hello_omp's parallel region): make grade runs
# its tests once more under ThreadSanitizer.
$(LESSON)_TSAN      := yes
