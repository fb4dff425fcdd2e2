# Lesson 01's build, read by the top Makefile.
#   EDITED:    the files the student edits (solutions/ holds their answers)
#   PROGRAMS:  what `make` builds; <program>_OBJS the objects of each;
#              <program>_EARLIER objects of earlier lessons it links, as
#              LESSON/OBJECT, from the same build: the student's own code
#              of that lesson (lesson 07 runs on the student's lesson 06)
#   PRODUCER_OBJS: the lesson objects linked into the tests' producer (the
#              student's code the tests run; the tests themselves link none)
#   MPI/OPENMP: sources that need mpicc / OpenMP flags
#   TSAN:      yes where the student's code runs threads: make grade runs
#              the lesson's tests once more, built with clang under
#              ThreadSanitizer (scripts/grade.sh)
#   BENCH_OBJS: solution objects bench/bench_NN.c links; BENCH_MPI: set if it
#              is an MPI program
#   DEVICE_CUDA: yes to link the device layer's cuda backend (common/device.h)
#              where nvcc is found, with the CUDA runtime; without it (or
#              without nvcc) device_open("cuda") says why it cannot
#   SELF_CHECKING: the programs that check the student's results against
#              the lesson's reference themselves, which alone may hold it
#              (tests/symbols/LESSON.txt's reference lines): every other
#              program that runs the student's code, the producer first,
#              must not (scripts/check-program.sh)
LESSON := 01-serial-matvec
$(LESSON)_TITLE     := 01 serial matvec
$(LESSON)_EDITED    := matvec.c
$(LESSON)_PROGRAMS  := matvec
$(LESSON)_matvec_OBJS := main.o matvec.o
$(LESSON)_PRODUCER_OBJS := matvec.o
$(LESSON)_MPI       :=
$(LESSON)_OPENMP    :=
$(LESSON)_BENCH_OBJS := matvec.o
# The driver tells you whether your kernels are right before it times them,
# against the reference; the tests judge only the producer.
$(LESSON)_SELF_CHECKING := matvec
