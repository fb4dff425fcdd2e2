# Lesson 04's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means).
#   CUDA: the lesson's .cu sources. With them, the lesson is built only where
#         nvcc is found (elsewhere its tests are reported skipped); its .c
#         files and its tests see the CUDA headers, and its programs and
#         tests link the CUDA runtime and cuBLAS.
# The given cuda_tools.cuh and cuda_dispatch.cuh have no objects of their
# own: cuda_matvec.cu includes both, because the dispatcher and the double
# entry points instantiate the student's templates, which C++ can do only
# in the translation unit that defines them.
LESSON := 04-cuda-matvec
$(LESSON)_TITLE     := 04 CUDA matvec
$(LESSON)_EDITED    := cuda_matvec.cu
$(LESSON)_PROGRAMS  := cuda_matvec
$(LESSON)_cuda_matvec_OBJS := main.o cuda_matvec.o float_reference.o
$(LESSON)_PRODUCER_OBJS := cuda_matvec.o
$(LESSON)_MPI       :=
$(LESSON)_OPENMP    :=
$(LESSON)_CUDA      := cuda_matvec.cu
$(LESSON)_BENCH_OBJS := cuda_matvec.o float_reference.o
# The driver checks every kernel against the reference before it times
# them; the tests judge the producer's outputs (and run the driver only
# under compute-sanitizer, for its memory errors).
$(LESSON)_SELF_CHECKING := cuda_matvec
