# Lesson 02's build, read by the top Makefile (see lessons/01-*/lesson.mk for
# what each variable means).
LESSON := 02-mpi-matvec
$(LESSON)_TITLE     := 02 MPI matvec
$(LESSON)_EDITED    := rows.c columns.c
$(LESSON)_PROGRAMS  := matvec_mpi
$(LESSON)_matvec_mpi_OBJS := main.o rows.o columns.o
$(LESSON)_PRODUCER_OBJS := rows.o
$(LESSON)_MPI       := main.c rows.c columns.c
$(LESSON)_OPENMP    :=
