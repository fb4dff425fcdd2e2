# zero-to-zero: from a serial y = Ax to ZeRO-Offload, one lesson at a time.
# `make` lists the targets. All output goes under build/.
#
# This file, top to bottom:
#   1. tools and flags (set any of them on the command line: make CC=clang)
#   2. what there is: the lessons, each described by its own
#      lessons/NN-*/lesson.mk (a new lesson needs no change here), and
#      solutions/ (a student release has none)
#   3. the builds, one folder each under build/: where each takes its files
#      from, and its flags
#   4. how any C file is compiled and any program linked
#   5. the shared library and the tests' objects, in each build
#   6. each lesson's programs, producer and judge, in each build
#   7. the library's own tests, the grader's tool, the benchmarks
#   8. the targets you type

.DEFAULT_GOAL := help
# The system, once (macOS: Darwin).
UNAME_S := $(shell uname -s)
# The recipes' shell: bash, on macOS Homebrew's (its /bin/bash is 3.2;
# scripts/install-deps.sh installs a current one), else its own.
ifeq ($(UNAME_S),Darwin)
SHELL := $(firstword $(wildcard /opt/homebrew/bin/bash /usr/local/bin/bash) /bin/bash)
else
SHELL := /bin/bash
endif
.DELETE_ON_ERROR:

# ---- 1. Tools and flags ------------------------------------------------------
CC         ?= cc
NVCC       ?= nvcc
PKG_CONFIG ?= pkg-config
# make test-clang builds and tests everything again with this compiler.
CLANG      ?= clang

# Every C file, whatever the compiler: C11, and a*b+c never fused into one
# multiply-add behind the code's back (clang fuses by default, gcc in C11
# mode does not), so that results that must be bitwise equal stay so.
LANG_FLAGS := -std=c11 -ffp-contract=off
# Each function and variable in a section of its own, and every section that
# nothing a program runs refers to dropped when it is linked: an object
# linked for one of its functions brings none of its others, so a program
# that runs a student's code holds only the code it can run (no reference
# that shares an object with an allowed function, no code of an earlier
# lesson's file that this lesson never calls: scripts/check-program.sh
# checks what is left).
SECTION_FLAGS := -ffunction-sections -fdata-sections
ifeq ($(UNAME_S),Darwin)
GC_LDFLAGS ?= -Wl,-dead_strip
else
GC_LDFLAGS ?= -Wl,--gc-sections
endif
# The lessons' files are compiled with the size of each function's stack
# frame written beside the object (X.su), which the checks on a student's
# files read (scripts/check-submission.sh).
STACK_USAGE_FLAGS := -fstack-usage
# -march=native: the kernels are meant to use this machine's vector unit.
MACHINE    := $(shell uname -m)
ARCH_FLAGS ?= $(if $(filter arm64 aarch64,$(MACHINE)),-mcpu=native,-march=native)
OPT_FLAGS  ?= -O3 $(ARCH_FLAGS)
# WERROR=1 (as CI sets) turns every warning into an error.
WARN_FLAGS ?= -Wall -Wextra -Wshadow -Wstrict-prototypes $(if $(WERROR),-Werror)
CFLAGS     ?=
LDFLAGS    ?=
# OpenMP: -fopenmp, which GCC and LLVM's clang take. Apple's clang (macOS's
# cc) refuses it: it takes OpenMP through its preprocessor only, and has
# no runtime of its own, so Homebrew's libomp gives the header and the
# library (scripts/install-deps.sh installs it).
ifeq ($(UNAME_S),Darwin)
APPLE_CLANG := $(shell $(CC) --version 2>/dev/null | grep -q 'Apple clang' && echo yes)
endif
ifneq ($(APPLE_CLANG),)
BREW         ?= brew
LIBOMP_PREFIX ?= $(shell $(BREW) --prefix libomp 2>/dev/null)
OPENMP_FLAGS ?= -Xpreprocessor -fopenmp -I$(LIBOMP_PREFIX)/include
LDFLAGS      += -L$(LIBOMP_PREFIX)/lib -lomp
endif
OPENMP_FLAGS ?= -fopenmp
SANITIZE_FLAGS ?= -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
# ThreadSanitizer's build (make grade's race pass) is clang's, with LLVM's
# OpenMP runtime and its Archer tool: libgomp's barriers are not
# instrumented, so ThreadSanitizer would take them for races.
TSAN_FLAGS ?= -O1 -g -fno-omit-frame-pointer -fsanitize=thread

# MPI: one library's compiler wrapper with that library's own launcher
# (another MPI's launcher starts every rank alone, in a world of 1).
# MPI=openmpi, the default, or MPI=mpich (where Debian has both installed,
# by MPICH's own names, mpicc.mpich and mpiexec.mpich). Or set MPICC,
# MPIRUN and MPIRUN_TIMEOUT_FLAG yourself. Whichever: make checks that the
# two belong together before it runs anything (build/mpi-launcher.ok).
MPI ?= openmpi
ifeq ($(MPI),openmpi)
MPICC  ?= mpicc
# More ranks than cores need --oversubscribe; Open MPI refuses to run as
# root unless told twice.
ROOT_ENV := $(if $(filter 0,$(shell id -u)),env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
MPIRUN ?= $(ROOT_ENV) mpirun --oversubscribe
# mpirun's own time limit flag, used by the test harness (empty: none).
MPIRUN_TIMEOUT_FLAG ?= --timeout
else ifeq ($(MPI),mpich)
MPICH_SUFFIX := $(if $(shell command -v mpicc.mpich),.mpich)
MPICC  ?= mpicc$(MPICH_SUFFIX)
# MPICH's launcher oversubscribes by itself, and takes a time limit only
# from its environment (MPIEXEC_TIMEOUT): the harness's own limit applies.
# It binds no rank unless told (Open MPI's mpirun binds each of 2 ranks to
# a core): unbound, each rank's OpenMP runtime starts a thread per core of
# the machine, and their spinning starved MPICH's own polling, 2 ranks of
# lesson 09 taking 21 s where bound they took 0.04. On Linux, where hwloc
# can bind, every rank gets a core, as with Open MPI.
MPIRUN ?= mpiexec$(MPICH_SUFFIX)$(if $(filter Linux,$(shell uname -s)), -bind-to core)
MPIRUN_TIMEOUT_FLAG ?=
# MPICH's MPI_STATUSES_IGNORE is the address 1, which gcc takes for an
# array of no room and warns about in every correct call such as
# MPI_Waitall(n, requests, MPI_STATUSES_IGNORE) (MPICH will not change it:
# pmodels/mpich#5687). Off for the files mpicc compiles, where gcc knows
# the warning (clang neither has nor gives it).
MPI_WARNINGS := $(shell $(CC) -Werror -Wno-stringop-overflow -fsyntax-only -x c /dev/null 2>/dev/null && echo -Wno-stringop-overflow)
else
$(error MPI=$(MPI): say MPI=openmpi (the default) or MPI=mpich, or set MPICC and MPIRUN)
endif
# The MPI wrapper compiles and links with $(CC), as every other file is:
# one compiler for every object of a program (clang's OpenMP runtime is not
# gcc's).
export OMPI_CC = $(CC)
export MPICH_CC = $(CC)
MPI_COMPILER = $(MPICC) $(MPI_WARNINGS)
# The other MPI's wrapper, where Debian's names find one: a student's file
# may define no symbol that either MPI's library defines, whichever of the
# two builds it (scripts/library-symbols.sh).
OTHER_MPICC := $(shell command -v $(if $(filter mpich,$(MPI)),mpicc.openmpi,mpicc.mpich) 2>/dev/null)
export ZZ_MPIRUN := $(MPIRUN)
# Which MPI the tests run (the harness sets each one's transports).
export ZZ_MPI := $(MPI)
export ZZ_MPIRUN_TIMEOUT_FLAG := $(MPIRUN_TIMEOUT_FLAG)

# CUDA is optional: lessons with CUDA sources build whenever $(NVCC) is found
# (for sm_90, plus PTX for compute_75, the oldest this toolkit targets, which
# any newer GPU can compile at load time), and are reported skipped without it.
# Programs link the runtime library (cudart) and cuBLAS, never the driver
# (-lcuda), so they build on machines without a GPU or its driver.
HAVE_NVCC  := $(shell command -v $(NVCC) 2>/dev/null)
CUDA_HOME  ?= $(patsubst %/bin/,%,$(dir $(HAVE_NVCC)))
CUDA_ARCH_FLAGS ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
comma := ,
space := $() $()
NVCC_FLAGS ?= -O3 -std=c++17 $(CUDA_ARCH_FLAGS) -Xcompiler -Wall,-Wextra$(if $(WERROR),$(comma)-Werror) $(if $(WERROR),-Werror all-warnings)
CUDA_CFLAGS := $(if $(HAVE_NVCC),-I$(CUDA_HOME)/include)
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++

# Homebrew keeps OpenBLAS apart (keg-only, so as not to shadow macOS's
# Accelerate): pkg-config finds it through its keg's folder.
ifeq ($(UNAME_S),Darwin)
BREW ?= brew
OPENBLAS_KEG := $(shell $(BREW) --prefix openblas 2>/dev/null)
ifneq ($(OPENBLAS_KEG),)
export PKG_CONFIG_PATH := $(OPENBLAS_KEG)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
endif
endif
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
BLAS_PC      ?= openblas
BLAS_CFLAGS  := $(shell $(PKG_CONFIG) --cflags $(BLAS_PC) 2>/dev/null)
BLAS_LIBS    := $(shell $(PKG_CONFIG) --libs $(BLAS_PC) 2>/dev/null)

# ---- 2. What there is ------------------------------------------------------------
# Each lessons/NN-name/lesson.mk says what to build (lessons/01-*/lesson.mk
# explains each variable).
LESSONS := $(sort $(notdir $(patsubst %/lesson.mk,%,$(wildcard lessons/*/lesson.mk))))
include $(foreach lesson,$(LESSONS),lessons/$(lesson)/lesson.mk)
$(foreach lesson,$(LESSONS),$(if $($(lesson)_TITLE),,$(error lessons/$(lesson)/lesson.mk must set $(lesson)_TITLE (LESSON := $(lesson) first))))
# Lessons with CUDA sources (lesson.mk's CUDA list) need nvcc to build.
CUDA_LESSONS  := $(foreach lesson,$(LESSONS),$(if $($(lesson)_CUDA),$(lesson)))
# A lesson that sets DEVICE_CUDA := yes gets the device layer's cuda backend
# (common/device_cuda.c, with check_cuda.c and the CUDA runtime) where nvcc
# is found; it builds without it elsewhere, and there device_open("cuda")
# says the toolkit was built without nvcc. Other lessons never link cudart.
device_cuda = $(if $(HAVE_NVCC),$($(1)_DEVICE_CUDA))
BUILT_LESSONS := $(if $(HAVE_NVCC),$(LESSONS),$(filter-out $(CUDA_LESSONS),$(LESSONS)))
# A student release (make student-release) has no solutions/.
HAVE_SOLUTIONS := $(wildcard solutions)

# The shared library. not_done.o and the MPI parts are linked as objects:
# the tests replace not_done.o with the harness's version, and the
# communication ledger's MPI_* definitions must win over the MPI library's.
COMMON_MPI_SOURCES := common/check_mpi.c common/comm_ledger.c common/collectives.c common/train.c
COMMON_SOURCES := $(filter-out common/not_done.c $(COMMON_MPI_SOURCES) common/check_cuda.c common/device_cuda.c,$(wildcard common/*.c))
HARNESS_OBJS   := harness/harness.o harness/runner.o harness/remove_tree.o harness/not_done_check.o harness/training_reference.o
COMMON_TESTS   := $(patsubst tests/common/%.c,%,$(wildcard tests/common/test_*.c))

# For scripts: the lessons, and each lesson's edited files as LESSON/FILE.
export ZZ_LESSONS := $(LESSONS)
# Lessons that cannot be built here, and why: reported as skipped.
export ZZ_UNBUILT := $(filter-out $(BUILT_LESSONS),$(LESSONS))
export ZZ_UNBUILT_REASON := nvcc (the CUDA toolkit) was not found, so the CUDA lessons were not built
export ZZ_CUDA_LESSONS := $(CUDA_LESSONS)
# The lessons whose code runs threads (lesson.mk's TSAN): make grade runs
# their tests once more under ThreadSanitizer.
export ZZ_TSAN_LESSONS := $(foreach lesson,$(BUILT_LESSONS),$(if $($(lesson)_TSAN),$(lesson)))
export ZZ_EDITED := $(foreach lesson,$(LESSONS),$(addprefix $(lesson)/,$($(lesson)_EDITED)))

# L=1, L=01 or L=01-serial-matvec all name lesson 01.
lesson_of = $(firstword $(filter $(if $(filter 0 1 2 3 4 5 6 7 8 9,$(1)),0$(1),$(1))%,$(LESSONS)))
LESSON_DIR := $(if $(L),$(call lesson_of,$(L)))

# ---- 3. The builds -----------------------------------------------------------
# Each build ("variant") has its own folder, build/VARIANT/:
#   student    lessons/ alone: the skeletons, or the student's work
#   solution   the edited files from solutions/, everything else from lessons/
#   sanitize   the solution under AddressSanitizer and UBSan; its library
#              and tests are what a grading's sanitized pass links
#   tsan       the same under ThreadSanitizer, always built with clang
#              (make CC=$(CLANG) ...; scripts/grade.sh does so) for the
#              race pass of the lessons whose code runs threads
#   graded/ID  a submission being graded (scripts/grade.sh): its edited files
#              from GRADE_SRC/LESSON/, everything else from lessons/
# and for each, these variables:
#   VARIANT_SOURCES   the folders its lesson files come from; the first that
#                     has a file wins
#   VARIANT_FLAGS     optimisation or sanitizer flags
#   VARIANT_WARNINGS  warning flags
#   VARIANT_LIBRARY   the build whose shared library and compiled tests it links
#   VARIANT_CHECKED   set: scripts/check-submission.sh checks its edited files
#                     before anything links them, and scripts/check-program.sh
#                     each program that runs them once it is linked
# A student release has the student build, and the sanitize build's library
# and tests for make grade.
OWN_VARIANTS := student $(if $(HAVE_SOLUTIONS),solution) sanitize tsan

# A skeleton is unfinished on purpose: its parameters and variables wait for
# the student's code, so "unused" is not a warning there. (After WARN_FLAGS:
# for clang, unlike gcc, a later -Wextra turns them back on.)
SKELETON_WARNINGS := -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable -Wno-unused-function

student_SOURCES   := lessons
student_FLAGS     := $(OPT_FLAGS)
student_WARNINGS  := $(WARN_FLAGS) $(SKELETON_WARNINGS)
student_CHECKED   := yes
solution_SOURCES  := solutions lessons
solution_FLAGS    := $(OPT_FLAGS)
solution_WARNINGS := $(WARN_FLAGS)
solution_CHECKED  := yes
# Not checked: the sanitizers' instrumentation calls are not a student's.
sanitize_SOURCES  := solutions lessons
sanitize_FLAGS    := $(SANITIZE_FLAGS)
sanitize_WARNINGS := $(WARN_FLAGS)
tsan_SOURCES      := solutions lessons
tsan_FLAGS        := $(TSAN_FLAGS)
tsan_WARNINGS     := $(WARN_FLAGS)
$(foreach variant,$(OWN_VARIANTS),$(eval $(variant)_LIBRARY := $(variant)))

# Grading (scripts/grade.sh): a submission's edited files, copied into
# $(GRADE_SRC)/LESSON/, built with this repository's given files, tests and
# library, never the submission's; files it lacks come from lessons/. The
# broken submissions in tests/fixtures/ are graded the same way by make test.
# Warnings are not errors here: a student's unused variable costs nothing.
# GRADE_SYMBOL_CHECK=0 turns the checks off for a grading build only: make
# test does so to prove that the sandbox alone stops what they stop.
GRADE_ID ?= default
GRADE_VARIANT := graded/$(GRADE_ID)
$(GRADE_VARIANT)_SOURCES  := $(GRADE_SRC) lessons
# GRADE_SANITIZE=1: the same files under AddressSanitizer and UBSan, linked
# with the sanitize build's library and tests, for grade.sh's second pass;
# GRADE_SANITIZE=thread, under ThreadSanitizer with the tsan build's, for
# its race pass (their symbols were checked in the plain build of the same
# files).
GRADE_TSAN := $(filter thread,$(GRADE_SANITIZE))
$(GRADE_VARIANT)_FLAGS    := $(if $(GRADE_TSAN),$(TSAN_FLAGS),$(if $(GRADE_SANITIZE),$(SANITIZE_FLAGS),$(OPT_FLAGS)))
$(GRADE_VARIANT)_WARNINGS := $(filter-out -Werror,$(student_WARNINGS))
$(GRADE_VARIANT)_LIBRARY  := $(if $(GRADE_TSAN),tsan,$(if $(GRADE_SANITIZE),sanitize,$(if $(HAVE_SOLUTIONS),solution,student)))
$(GRADE_VARIANT)_CHECKED  := $(if $(or $(GRADE_SANITIZE),$(filter 0,$(GRADE_SYMBOL_CHECK))),,yes)

VARIANTS := $(OWN_VARIANTS) $(if $(GRADE_SRC),$(GRADE_VARIANT))

# ---- 4. Compiling and linking --------------------------------------------------
# One command compiles every C file of every build. VARIANT (the build the
# file is in) picks the build's flags; what a file needs beyond those is set
# for that file in sections 5 and 6:
#   COMPILER    $(CC), or $(MPICC) for a file that includes mpi.h
#               (MPI_COMPILER: with MPI_WARNINGS)
#   FILE_FLAGS  OpenMP's, CUDA's and Check's flags
#   LESSON_FLAGS  what a lesson's lesson.mk asks for its own C files (its
#               CFLAGS, such as -fno-math-errno)
#   INCLUDES    the folders besides common/ that its #includes need
COMPILER = $(CC)
#   STACK_USAGE  $(STACK_USAGE_FLAGS) for a lesson's files
COMPILE_C  = $(COMPILER) $(CFLAGS) $(LANG_FLAGS) $(SECTION_FLAGS) $($(VARIANT)_FLAGS) $($(VARIANT)_WARNINGS) $(FILE_FLAGS) $(LESSON_FLAGS) $(STACK_USAGE) -Icommon $(INCLUDES) -MMD -MP -c $< -o $@
COMPILE_CU = $(NVCC) $(NVCC_FLAGS) -Xcompiler -ffp-contract=off $(if $(STACK_USAGE),-Xcompiler $(STACK_USAGE)) -Icommon $(INCLUDES) -MMD -MP -c $< -o $@
$(foreach variant,$(VARIANTS),$(eval build/$(variant)/%: VARIANT := $(variant)))

# $(call compile_rules,OBJECT_FOLDER,SOURCE_FOLDER,VARIANT): each
# OBJECT_FOLDER/X.o from SOURCE_FOLDER/X.c or X.cu.
define compile_rules
$(1)/%.o: $(2)/%.c build/$(3)/flags.txt
	@mkdir -p $$(@D)
	$$(COMPILE_C)
$(1)/%.o: $(2)/%.cu build/$(3)/flags.txt
	@mkdir -p $$(@D)
	$$(COMPILE_CU)
endef

# $(call link_rule,PROGRAM,PREREQUISITES,LINKER,LIBRARIES[,THEN]): PROGRAM
# from the objects and archives among PREREQUISITES, in their order. LINKER
# and LIBRARIES name variables: CC or MPICC; CHECK_LIBS, CUDA_LIBS. THEN, a
# command run once it is linked (a failure removes it).
define link_rule
$(1): $(2)
	@mkdir -p $$(@D)
	$$($(strip $(3))) $$(CFLAGS) $$($$(VARIANT)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) $$(GC_LDFLAGS) $$(filter %.o %.a,$$^) $(foreach library,$(4),$$($(library))) -lm -o $$@
	$(if $(strip $(5)),@$(strip $(5)))
endef

# Each build remembers the tools and flags it was made with, in
# build/VARIANT/flags.txt, which everything in it depends on: make CC=clang,
# MPI=mpich or WERROR=1 rebuilds what was built otherwise.
build_config = $(CC) $(MPICC) $(NVCC) $(CFLAGS) $(LANG_FLAGS) $(SECTION_FLAGS) $(STACK_USAGE_FLAGS) $($(1)_FLAGS) $($(1)_WARNINGS) $(OPENMP_FLAGS) $(LDFLAGS) $(GC_LDFLAGS) $(NVCC_FLAGS)
shell_quote = '$(subst ','\'',$(1))'
build/%/flags.txt: FORCE
	@mkdir -p $(@D)
	@printf '%s\n' $(call shell_quote,$(call build_config,$*)) | cmp -s - $@ || printf '%s\n' $(call shell_quote,$(call build_config,$*)) > $@
FORCE:
# Named here, or make would delete them as intermediate files.
$(foreach variant,$(VARIANTS),build/$(variant)/flags.txt):

# A lesson's files, in each build, from the first of its SOURCES that has them.
$(foreach variant,$(VARIANTS),$(foreach folder,$($(variant)_SOURCES),$(eval $(call compile_rules,build/$(variant),$(folder),$(variant)))))

# ---- 5. The shared library and the tests' objects ------------------------------
# Built in each build of its own (a grading build links its LIBRARY's).
# The library is compiled with OpenMP (the progress line, the CPU device);
# its MPI parts by mpicc; check_cuda.c with CUDA's headers. The tests see
# Check's headers and the harness's; Check's START_TEST gives each test a
# parameter it need not use.
common_mpi_objects = $(patsubst common/%.c,build/$(1)/common/%.o,$(COMMON_MPI_SOURCES))
define library_rules
$(call compile_rules,build/$(1)/common,common,$(1))
$(call compile_rules,build/$(1)/tests,tests,$(1))
build/$(1)/common/libcommon.a: $(patsubst common/%.c,build/$(1)/common/%.o,$(COMMON_SOURCES))
	rm -f $$@
	$$(AR) rcs $$@ $$^
build/$(1)/common/%.o: FILE_FLAGS = $$(OPENMP_FLAGS)
$(call common_mpi_objects,$(1)): COMPILER = $$(MPI_COMPILER)
build/$(1)/common/check_cuda.o build/$(1)/common/device_cuda.o: FILE_FLAGS += $$(CUDA_CFLAGS)
build/$(1)/tests/%.o: FILE_FLAGS = $$(OPENMP_FLAGS) $$(CHECK_CFLAGS) -Wno-unused-parameter
build/$(1)/tests/%.o: INCLUDES = -Itests/harness
# What the shared libraries of each kind of program define, read from the
# libraries (scripts/library-symbols.sh): a program of C and OpenMP, one of
# MPI (either MPI's, where both are installed), one with CUDA's libraries.
# A student's file may define none of it (scripts/check-submission.sh).
build/$(1)/libraries/c.txt: scripts/library-symbols.sh build/$(1)/flags.txt
	@mkdir -p $$(@D)
	@scripts/library-symbols.sh $$@ $$(CC) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) -lm
build/$(1)/libraries/mpi.txt: scripts/library-symbols.sh build/$(1)/flags.txt
	@mkdir -p $$(@D)
	@scripts/library-symbols.sh $$@ $$(MPICC) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) -lm \
	    $$(if $$(OTHER_MPICC),-- $$(OTHER_MPICC) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) -lm)
# The symbols MPI's predefined constants refer to (MPI_REQUEST_NULL is a
# variable of Open MPI's), from mpi.h of each MPI installed: a student's
# file may use every one (scripts/mpi-constants.sh).
build/$(1)/libraries/mpi-constants.txt: scripts/mpi-constants.sh build/$(1)/flags.txt
	@mkdir -p $$(@D)
	@scripts/mpi-constants.sh $$@ $$(MPICC) $$(CFLAGS) $$($(1)_FLAGS) \
	    $$(if $$(OTHER_MPICC),-- $$(OTHER_MPICC) $$(CFLAGS) $$($(1)_FLAGS))
build/$(1)/libraries/cuda.txt: scripts/library-symbols.sh build/$(1)/flags.txt
	@mkdir -p $$(@D)
	@scripts/library-symbols.sh $$@ $$(CC) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) $$(CUDA_LIBS) -lm
endef
$(foreach variant,$(OWN_VARIANTS),$(eval $(call library_rules,$(variant))))

# ---- 6. Each lesson, in each build --------------------------------------------
# A lesson's objects from its source names; those among OBJECTS that use MPI.
objects = $(patsubst %.cu,%.o,$(patsubst %.c,%.o,$(1)))
uses_mpi = $(filter $(2),$(call objects,$($(1)_MPI)))
submission_stamp = $(if $($(1)_CHECKED),build/$(1)/$(2)/submission.ok)
library_dir = build/$($(1)_LIBRARY)

# Everything of build/VARIANT/ that a grading build links: built once before
# gradings run side by side (make grade-all), which would otherwise all build
# it at once.
library_parts = $(addprefix build/$(1)/,common/libcommon.a common/not_done.o \
    $(patsubst %.c,%.o,$(COMMON_MPI_SOURCES)) $(if $(filter $(CUDA_LESSONS),$(BUILT_LESSONS)),common/check_cuda.o) \
    $(if $(foreach lesson,$(BUILT_LESSONS),$(call device_cuda,$(lesson))),common/device_cuda.o common/check_cuda.o) \
    libraries/c.txt libraries/mpi.txt libraries/mpi-constants.txt $(if $(HAVE_NVCC),libraries/cuda.txt) \
    $(addprefix tests/,$(HARNESS_OBJS) harness/producer.o harness/rank_watch.o) \
    $(foreach lesson,$(BUILT_LESSONS),tests/test_$(lesson).o $(if $($(lesson)_PRODUCER_OBJS),tests/producer/$(lesson).o)) \
    $(patsubst %.c,%.o,$(wildcard tests/hidden/test_*.c)))

# A lesson's objects of the shared library that use CUDA: check_cuda.o for
# its CUDA sources or the device's cuda backend, and that backend.
# $(1): variant, $(2): lesson
cuda_objects = $(if $(or $($(2)_CUDA),$(call device_cuda,$(2))),$(call library_dir,$(1))/common/check_cuda.o) \
    $(if $(call device_cuda,$(2)),$(call library_dir,$(1))/common/device_cuda.o)

# A program's objects of earlier lessons (lesson.mk's PROGRAM_EARLIER, as
# LESSON/OBJECT), and those lessons: their headers are seen, and their
# files pass the same checks first.
lessons_of = $(sort $(foreach object,$(1),$(firstword $(subst /, ,$(object)))))
earlier_lessons = $(call lessons_of,$(foreach program,$($(1)_PROGRAMS),$($(1)_$(program)_EARLIER)))

# A lesson's objects that the student edits; every object its programs and
# its producer link; the earlier lessons' objects they link (LESSON/OBJECT),
# those of them that the student edits there, and the others (given).
edited_objects = $(call objects,$($(1)_EDITED))
program_objects = $(sort $(foreach program,$($(1)_PROGRAMS),$($(1)_$(program)_OBJS)) $($(1)_PRODUCER_OBJS))
earlier_objects = $(sort $(foreach program,$($(1)_PROGRAMS),$($(1)_$(program)_EARLIER)))
is_edited = $(filter $(notdir $(1)),$(call edited_objects,$(firstword $(subst /, ,$(1)))))
earlier_edited = $(foreach object,$(1),$(if $(call is_edited,$(object)),$(object)))
# $(call student_objects_of,VARIANT,LESSON,OBJECTS,EARLIER): those of a
# program's objects that hold the student's code.
student_objects_of = $(addprefix build/$(1)/$(2)/,$(filter $(call edited_objects,$(2)),$(3))) \
    $(addprefix build/$(1)/,$(call earlier_edited,$(4)))

# $(call program_parts,VARIANT,LESSON,OBJECTS,FIRST,EARLIER): the objects a
# program links besides the shared library: the lesson's OBJECTS after
# FIRST (objects from elsewhere), EARLIER (objects of earlier lessons in the
# same build: the student's own), not_done.o, and MPI's and CUDA's parts.
program_parts = $(4) $(addprefix build/$(1)/$(2)/,$(3)) $(addprefix build/$(1)/,$(5)) \
    $(if $(call uses_mpi,$(2),$(3)),$(call common_mpi_objects,$($(1)_LIBRARY))) \
    $(call cuda_objects,$(1),$(2)) $(call library_dir,$(1))/common/not_done.o
# Each of a lesson's programs and its producer, for the checks on the
# student's files, as "--program PART,PART,...", and the lists of what
# their shared libraries define: a student's file may define no symbol that
# anything linked with it defines (scripts/check-submission.sh).
# $(1): variant, $(2): lesson
producer_first = $(call library_dir,$(1))/tests/producer/$(2).o $(call library_dir,$(1))/tests/harness/producer.o
lesson_program_lists = $(foreach program,$($(2)_PROGRAMS),--program $(subst $(space),$(comma),$(strip \
        $(call program_parts,$(1),$(2),$($(2)_$(program)_OBJS),,$($(2)_$(program)_EARLIER))))) \
    $(if $($(2)_PRODUCER_OBJS),--program $(subst $(space),$(comma),$(strip \
        $(call program_parts,$(1),$(2),$($(2)_PRODUCER_OBJS),$(call producer_first,$(1),$(2))))))
lesson_program_parts = $(sort $(subst $(comma),$(space),$(filter-out --program,$(call lesson_program_lists,$(1),$(2)))))
lesson_libraries = $(addprefix $(call library_dir,$(1))/libraries/,c.txt $(if $($(2)_MPI),mpi.txt) \
    $(if $(or $($(2)_CUDA),$(call device_cuda,$(2))),cuda.txt))
lesson_constants = $(if $($(2)_MPI),$(call library_dir,$(1))/libraries/mpi-constants.txt)

# $(call lesson_link,VARIANT,LESSON,PROGRAM,OBJECTS,FIRST,EARLIER): a
# program of the lesson's OBJECTS (after FIRST, objects from elsewhere, and
# EARLIER, objects of earlier lessons in the same build: the student's own),
# linked with what they need: the shared library, not_done.o, MPI's and
# CUDA's parts, and mpicc when one of them uses MPI. Nothing is linked
# before the checks on the student's files pass.
# Once linked, a program that runs the student's code (in a build whose
# files are checked) must hold none of the lesson's references
# (scripts/check-program.sh), unless lesson.mk names it among those that
# check the student's results against the reference themselves
# (SELF_CHECKING).
lesson_link = $(eval $(call link_rule,build/$(1)/$(2)/$(3),\
    $(call submission_stamp,$(1),$(2)) $(foreach lesson,$(call lessons_of,$(6)),$(call submission_stamp,$(1),$(lesson))) \
    $(call program_parts,$(1),$(2),$(4),$(5),$(6)) $(call library_dir,$(1))/common/libcommon.a,\
    $(if $(call uses_mpi,$(2),$(4)),MPICC,CC),$(if $(or $($(2)_CUDA),$(call device_cuda,$(2))),CUDA_LIBS),\
    $(if $(and $($(1)_CHECKED),$(call student_objects_of,$(1),$(2),$(4),$(6)),$(if $(filter $(3),$($(2)_SELF_CHECKING)),,yes)),\
        scripts/check-program.sh $(2) $$@ $(call student_objects_of,$(1),$(2),$(4),$(6)))))

# The producer: the student's code the tests run (PRODUCER_OBJS), with the
# given code that runs it on the tests' inputs (tests/producer/LESSON.c).
lesson_producer = $(if $($(2)_PRODUCER_OBJS),$(call lesson_link,$(1),$(2),producer,\
    $($(2)_PRODUCER_OBJS),\
    $(call library_dir,$(1))/tests/producer/$(2).o $(call library_dir,$(1))/tests/harness/producer.o))

# The judge (the lesson's test program, with the instructor's hidden tests
# when there are some) links no lesson object: it runs the lesson's
# programs and its producer, and those of the earlier lessons whose objects
# they link (to tell a failure that comes from the student's earlier code).
lesson_judge = $(eval $(call link_rule,build/$(1)/tests/test_$(2),\
    $(call library_dir,$(1))/tests/test_$(2).o \
    $(patsubst tests/%.c,$(call library_dir,$(1))/tests/%.o,$(wildcard tests/hidden/test_$(2).c)) \
    $(addprefix $(call library_dir,$(1))/tests/,$(HARNESS_OBJS)) \
    $(if $($(2)_CUDA),$(call library_dir,$(1))/common/check_cuda.o) \
    $(call library_dir,$(1))/common/libcommon.a \
    | $(addprefix build/$(1)/$(2)/,$($(2)_PROGRAMS) $(if $($(2)_PRODUCER_OBJS),producer)) build/$(1)/tests/rank_watch \
    $(foreach lesson,$(call earlier_lessons,$(2)),$(addprefix build/$(1)/$(lesson)/,$($(lesson)_PROGRAMS))),\
    CC,CHECK_LIBS $(if $($(2)_CUDA),CUDA_LIBS)))

# Every object a lesson's programs, producer and benchmark link: those
# that its CFLAGS apply to are compiled again when lesson.mk changes.
lesson_objects = $(sort $(foreach program,$($(1)_PROGRAMS),$($(1)_$(program)_OBJS)) $($(1)_PRODUCER_OBJS) $($(1)_BENCH_OBJS))

# $(1): variant, $(2): lesson
define lesson_rules
# Its files: its folder's headers, and what lesson.mk asks for each.
build/$(1)/$(2)/%.o: INCLUDES = -Ilessons/$(2) $(addprefix -Ilessons/,$(call earlier_lessons,$(2)))
build/$(1)/$(2)/%.o: STACK_USAGE = $$(STACK_USAGE_FLAGS)
$(addprefix build/$(1)/$(2)/,$(call objects,$($(2)_MPI))): COMPILER = $$(MPI_COMPILER)
$(addprefix build/$(1)/$(2)/,$(call objects,$($(2)_OPENMP))): FILE_FLAGS += $$(OPENMP_FLAGS)
$(if $($(2)_CUDA),build/$(1)/$(2)/%.o: FILE_FLAGS += $$(CUDA_CFLAGS))
$(if $($(2)_CFLAGS),build/$(1)/$(2)/%.o: LESSON_FLAGS = $($(2)_CFLAGS))
$(if $($(2)_CFLAGS),$(addprefix build/$(1)/$(2)/,$(call lesson_objects,$(2))): lessons/$(2)/lesson.mk)
$(if $($(1)_CHECKED),$(eval $(call submission_rules,$(1),$(2))))
$(foreach program,$($(2)_PROGRAMS),$(call lesson_link,$(1),$(2),$(program),$($(2)_$(program)_OBJS),,$($(2)_$(program)_EARLIER)))
$(call lesson_producer,$(1),$(2))
$(call lesson_judge,$(1),$(2))
PROGRAMS_$(1) += $(addprefix build/$(1)/$(2)/,$($(2)_PROGRAMS))
TESTS_$(1) += build/$(1)/tests/test_$(2)
endef

# The checks on the files a student edits, compiled, before anything links
# them; with them, the earlier lessons' files that the lesson's programs
# link, for what they define and what runs outside the calls (what they
# call was checked under their own lesson's rules). $(1): variant, $(2):
# lesson
define submission_rules
build/$(1)/$(2)/submission.ok: $(addprefix build/$(1)/$(2)/,$(call edited_objects,$(2))) \
        $(call lesson_program_parts,$(1),$(2)) $(call lesson_libraries,$(1),$(2)) $(call lesson_constants,$(1),$(2)) \
        build/$($(1)_LIBRARY)/common/libcommon.a scripts/check-submission.sh tests/symbols/all.txt $(wildcard tests/symbols/$(2).txt)
	@scripts/check-submission.sh $(2) build/$($(1)_LIBRARY)/common/libcommon.a \
	    $(call lesson_program_lists,$(1),$(2)) $(addprefix --libraries ,$(call lesson_libraries,$(1),$(2))) \
	    $(addprefix --mpi-constants ,$(call lesson_constants,$(1),$(2))) \
	    $(addprefix --earlier build/$(1)/,$(call earlier_edited,$(call earlier_objects,$(2)))) \
	    $(addprefix build/$(1)/$(2)/,$(call edited_objects,$(2)))
	@touch $$@
endef

# A lesson's test objects, in a build that compiles the tests: the lesson's
# headers; mpicc where they include them with mpi.h, CUDA's headers.
# $(1): variant, $(2): lesson
define lesson_test_rules
build/$(1)/tests/test_$(2).o build/$(1)/tests/hidden/test_$(2).o build/$(1)/tests/producer/$(2).o: INCLUDES += -Ilessons/$(2) $(addprefix -Ilessons/,$(call earlier_lessons,$(2)))
$(if $($(2)_MPI),build/$(1)/tests/test_$(2).o build/$(1)/tests/hidden/test_$(2).o: COMPILER = $$(MPI_COMPILER))
$(if $(call uses_mpi,$(2),$($(2)_PRODUCER_OBJS)),build/$(1)/tests/producer/$(2).o: COMPILER = $$(MPI_COMPILER))
$(if $($(2)_CUDA),build/$(1)/tests/test_$(2).o build/$(1)/tests/producer/$(2).o: FILE_FLAGS += $$(CUDA_CFLAGS))
$(if $(and $($(2)_PRODUCER_OBJS),$(if $(wildcard tests/producer/$(2).c),,missing)),$(error lessons/$(2)/lesson.mk lists PRODUCER_OBJS but tests/producer/$(2).c does not exist: the tests run a student's code only through a producer))
endef

$(foreach variant,$(VARIANTS),$(foreach lesson,$(BUILT_LESSONS),$(eval $(call lesson_rules,$(variant),$(lesson)))))
# The watch the harness starts every MPI rank under (tests/harness/
# rank_watch.c): in each build's own folder, where a grading's sandbox
# shows it.
$(foreach variant,$(VARIANTS),$(eval $(call link_rule,build/$(variant)/tests/rank_watch,$(call library_dir,$(variant))/tests/harness/rank_watch.o,CC,)))
$(foreach variant,$(OWN_VARIANTS),$(foreach lesson,$(BUILT_LESSONS),$(eval $(call lesson_test_rules,$(variant),$(lesson)))))

# ---- 7. The library's tests, the grader's tool, the benchmarks ----------------
# The device layer's test links its cuda backend in the solution build
# where nvcc is found (not under the sanitizers, whose shadow memory the
# CUDA runtime would map over); without a GPU those checks are skipped.
device_test_cuda = $(if $(and $(HAVE_NVCC),$(filter solution,$(1))),build/$(1)/common/device_cuda.o build/$(1)/common/check_cuda.o)
# The test programs of the communication ledger and of the collectives (MPI
# programs the tests launch), and the library's unit tests, which run the
# given programs (after them).
define library_test_rules
$(call link_rule,build/$(1)/tests/common/ledger_probe,build/$(1)/tests/common/ledger_probe.o $(call common_mpi_objects,$(1)) build/$(1)/common/libcommon.a,MPICC,)
build/$(1)/tests/common/ledger_probe.o: COMPILER = $$(MPI_COMPILER)
PROGRAMS_$(1) += build/$(1)/tests/common/ledger_probe
$(call link_rule,build/$(1)/tests/common/boundary_probe,build/$(1)/tests/common/boundary_probe.o build/$(1)/common/libcommon.a,CC,)
PROGRAMS_$(1) += build/$(1)/tests/common/boundary_probe
$(call link_rule,build/$(1)/tests/common/collectives_probe,build/$(1)/tests/common/collectives_probe.o $(call common_mpi_objects,$(1)) build/$(1)/common/libcommon.a,MPICC,)
build/$(1)/tests/common/collectives_probe.o: COMPILER = $$(MPI_COMPILER)
PROGRAMS_$(1) += build/$(1)/tests/common/collectives_probe
$(foreach test,$(COMMON_TESTS),$(eval $(call link_rule,build/$(1)/tests/common/$(test),build/$(1)/tests/common/$(test).o $(if $(filter test_device,$(test)),$(call device_test_cuda,$(1))) $(addprefix build/$(1)/tests/,$(HARNESS_OBJS)) build/$(1)/common/libcommon.a | $(PROGRAMS_$(1)) build/$(1)/tests/common/ledger_probe build/$(1)/tests/common/collectives_probe build/$(1)/tests/common/boundary_probe build/$(1)/tests/rank_watch,CC,CHECK_LIBS $(if $(and $(filter test_device,$(test)),$(call device_test_cuda,$(1))),CUDA_LIBS))))
build/$(1)/tests/common/test_device.o: FILE_FLAGS += $(if $(call device_test_cuda,$(1)),-DZZ_DEVICE_CUDA_LINKED=1)
TESTS_$(1) += $(addprefix build/$(1)/tests/common/,$(COMMON_TESTS))
endef
$(foreach variant,$(filter solution sanitize,$(OWN_VARIANTS)),$(eval $(call library_test_rules,$(variant))))

# Is $(MPIRUN) the launcher of the MPI that $(MPICC) builds with? A program
# started on 2 ranks must see a world of 2: another MPI's launcher starts 2
# programs of 1 rank each, and correct code then fails in ways that point
# elsewhere. Checked once per launcher and wrapper, before anything runs
# (make mpi-ready; not checked where tests/harness/mpi_world.c is missing).
MPI_WORLD := $(if $(wildcard tests/harness/mpi_world.c),build/student/tests/harness/mpi_world)
$(if $(MPI_WORLD),$(eval $(call link_rule,$(MPI_WORLD),$(MPI_WORLD).o,MPICC,)))
$(if $(MPI_WORLD),$(eval $(MPI_WORLD).o: COMPILER = $$(MPI_COMPILER)))
build/mpi-launcher.ok: $(MPI_WORLD) build/mpi-launcher.txt
	@$(MPIRUN) -np 2 $(MPI_WORLD) 2 > build/mpi-launcher.log 2>&1 || { \
	    echo "make: '$(MPIRUN) -np 2' did not start one program of 2 ranks: it is not the launcher of the MPI that $(MPICC) builds with (build/mpi-launcher.log). Use one MPI's pair: make MPI=openmpi (the default) or MPI=mpich, or set MPICC and MPIRUN." >&2; exit 2; }
	@touch $@
build/mpi-launcher.txt: FORCE
	@mkdir -p $(@D)
	@printf '%s\n' $(call shell_quote,$(MPICC) $(MPIRUN)) | cmp -s - $@ || printf '%s\n' $(call shell_quote,$(MPICC) $(MPIRUN)) > $@

# The grader's own tool, built from this repository alone.
build/grade-tool/grade: tests/harness/grade.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LANG_FLAGS) -O2 $(WARN_FLAGS) $< -o $@

# Benchmarks: bench/bench_NN.c times lesson NN's code against baselines
# (OpenBLAS, STREAM): the solution's, or in a student release (no
# solutions/) the student's own (BENCH_VARIANT). It links the objects that
# lesson.mk lists in NN-*_BENCH_OBJS, and MPI when NN-*_BENCH_MPI is set;
# the benchmarks' scripts run that build's programs (ZZ_BENCH_BUILD). A
# benchmark of a lesson that is not built here (CUDA without nvcc) is not
# built either; scripts/bench.sh reports it skipped. make bench L=NN: lesson
# NN's alone.
BENCH_VARIANT := $(if $(HAVE_SOLUTIONS),solution,student)
export ZZ_BENCH_BUILD := build/$(BENCH_VARIANT)
BENCH_LESSONS := $(if $(LESSON_DIR),$(LESSON_DIR),$(BUILT_LESSONS))
BENCHES := $(foreach bench,$(patsubst bench/%.c,%,$(wildcard bench/bench_*.c)),$(if $(filter $(call lesson_of,$(patsubst bench_%,%,$(bench))),$(BENCH_LESSONS)),build/bench/$(bench)))
# $(1): bench name (bench_01), $(2): lesson
define bench_rules
build/bench/$(1): bench/$(1).c $(addprefix build/$(BENCH_VARIANT)/$(2)/,$($(2)_BENCH_OBJS)) $(if $($(2)_BENCH_MPI),$(call common_mpi_objects,$(BENCH_VARIANT))) $(if $($(2)_CUDA),build/$(BENCH_VARIANT)/common/check_cuda.o) build/$(BENCH_VARIANT)/common/not_done.o build/$(BENCH_VARIANT)/common/libcommon.a
	@mkdir -p $$(@D)
	$(if $($(2)_BENCH_MPI),$$(MPICC),$$(CC)) $$(CFLAGS) $$(LANG_FLAGS) $$($(BENCH_VARIANT)_FLAGS) $$(WARN_FLAGS) $$(OPENMP_FLAGS) $($(2)_CFLAGS) $$(BLAS_CFLAGS) $(if $($(2)_CUDA),$$(CUDA_CFLAGS)) -Icommon -Ilessons/$(2) $$(LDFLAGS) $$(filter %.c %.o %.a,$$^) $$(BLAS_LIBS) $(if $($(2)_CUDA),$$(CUDA_LIBS)) -lm -o $$@
endef
$(foreach bench,$(BENCHES),$(eval $(call bench_rules,$(notdir $(bench)),$(call lesson_of,$(patsubst bench_%,%,$(notdir $(bench)))))))

# What each object was compiled from (the compiler's -MMD files).
-include $(wildcard $(foreach variant,$(VARIANTS),build/$(variant)/*/*.d build/$(variant)/tests/*/*.d))

# ---- 8. Targets ------------------------------------------------------------------
.PHONY: help deps deps-ready mpi-ready all cluster-up cluster-shell cluster-down build-student build-solution build-sanitize demo test test-full test-clang test-mpich test-cluster run-suites check watch tsan grade grade-all grade-fixture progress bench plots slides student-release classroom gradescope-zip print-edited print-flags print-mpirun clean

# Targets that need solutions/ (those make help lists, then the others): in
# a student release each says so instead.
SOLUTION_TARGETS := test test-full test-clang test-mpich test-cluster
SOLUTION_TARGETS += build-solution build-sanitize run-suites grade-fixture

help: ## list the targets
	@echo "zero-to-zero: from a serial y = Ax to ZeRO-Offload"
	@echo
	@grep -hE '^[a-z-]+:.*## ' Makefile $(if $(HAVE_SOLUTIONS),,| grep -vE '^($(subst $(space),|,$(strip $(SOLUTION_TARGETS)))):') | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 24
	@$(if $(HAVE_SOLUTIONS),,echo "  (make $(subst $(space),$(comma) ,$(wordlist 1,5,$(SOLUTION_TARGETS))): the toolkit's own, need solutions/, which a student release leaves out)")
	@echo
	@echo "Lessons: $(LESSONS)"
	@echo "Variables: CC MPI=openmpi|mpich MPICC MPIRUN NVCC CFLAGS OPT_FLAGS OPENMP_FLAGS BLAS_PC WERROR=1"

deps: ## install what the toolkit needs (MPI, Check, OpenBLAS, pkg-config)
	@scripts/install-deps.sh $(DEPS_OPTIONS)

# Installs only when something is missing, then lets a fresh make read the
# flags that pkg-config now knows.
DEPS_OPTIONS ?= $(if $(filter mpich,$(MPI)),--mpich)
deps-ready:
	@scripts/install-deps.sh --check $(DEPS_OPTIONS) >/dev/null 2>&1 || scripts/install-deps.sh $(DEPS_OPTIONS)

# Before running MPI programs: MPICC and MPIRUN belong to one MPI.
mpi-ready: $(if $(MPI_WORLD),build/mpi-launcher.ok)

build-student: $(PROGRAMS_student) $(TESTS_student)

all: ## build every lesson's programs and tests (yours: build/student/)
	@$(MAKE) --no-print-directory build-student $(if $(HAVE_SOLUTIONS),build-solution)

demo: deps-ready ## run every lesson's programs at their default sizes: one table
ifneq ($(HAVE_SOLUTIONS),)
	@$(MAKE) --no-print-directory build-solution mpi-ready
	@echo "demo: the reference solutions (build/solution/)"
	@scripts/demo.sh
else
	@$(MAKE) --no-print-directory build-student mpi-ready
	@echo "demo: your own files (build/student/)"
	@ZZ_BUILD_DIR=build/student scripts/demo.sh
endif

# T=N: only the tests of TODO N (scripts/check-todo.sh), for a quick verdict.
CHECK_TITLE = lesson $($(LESSON_DIR)_TITLE), your files in lessons/$(LESSON_DIR)
check: deps-ready ## run one lesson's tests on your files: make check L=01 (T=2: TODO 2's alone)
	@test -n "$(L)" || { echo "make check: say which lesson, e.g. make check L=01 (lessons: $(LESSONS))" >&2; exit 2; }
	@test -n "$(LESSON_DIR)" || { echo "make check: there is no lesson L=$(L) (lessons: $(LESSONS))" >&2; exit 2; }
	@if [ -n "$(filter $(LESSON_DIR),$(ZZ_UNBUILT))" ]; then \
	    echo "lesson $(LESSON_DIR): [skip] every test: $(ZZ_UNBUILT_REASON) (nvcc on PATH, or make NVCC=/path/to/nvcc)"; \
	else \
	    mkdir -p build/check; $(if $(T),,rm -f build/check/$(LESSON_DIR).results;) rm -f build/check/$(LESSON_DIR).build.log; \
	    if $(MAKE) -s --no-print-directory build/student/tests/test_$(LESSON_DIR) $(if $($(LESSON_DIR)_MPI),mpi-ready) 2> >(tee build/check/$(LESSON_DIR).build.log >&2); then \
	        rm -f build/check/$(LESSON_DIR).build.log; \
	        $(if $(T),scripts/check-todo.sh $(LESSON_DIR) $(call shell_quote,$(T)) "$(CHECK_TITLE)", \
	        ZZ_BUILD_DIR=build/student build/student/tests/test_$(LESSON_DIR) --title "$(CHECK_TITLE)" --mode student --results build/check/$(LESSON_DIR).results); \
	    else exit 2; fi; \
	fi

watch: ## run a lesson's checks again each time you save: make watch L=01 (T=2: TODO 2's alone)
	@test -n "$(LESSON_DIR)" || { echo "make watch: say which lesson, e.g. make watch L=01 (lessons: $(LESSONS))" >&2; exit 2; }
	@scripts/watch.sh $(LESSON_DIR) $(if $(T),$(call shell_quote,$(T)))

tsan: ## look for data races in your threaded code with ThreadSanitizer: make tsan L=03 (or 07, 00)
	@test -n "$(LESSON_DIR)" || { echo "make tsan: say which lesson, e.g. make tsan L=03 (lessons: $(LESSONS))" >&2; exit 2; }
	@$(MAKE) --no-print-directory deps-ready DEPS_OPTIONS="$(DEPS_OPTIONS) --clang"
	@CLANG=$(CLANG) scripts/tsan.sh $(LESSON_DIR) --student

# SANDBOX=1: student code under bubblewrap; SANDBOX=0: not. Unset: with it
# for SUBMISSION=DIR (or grade-all) wherever it can run, without it for
# your own tree (scripts/grade.sh).
SANDBOX_OPTION = $(if $(filter 0,$(SANDBOX)),--no-sandbox,$(if $(SANDBOX),--sandbox))
grade: deps-ready ## score your lessons: L=NN one, SUBMISSION=DIR another tree (sandboxed), SANDBOX=0|1
	@test -z "$(L)" -o -n "$(LESSON_DIR)" || { echo "make grade: there is no lesson L=$(L) (lessons: $(LESSONS))" >&2; exit 2; }
	@$(MAKE) -s --no-print-directory mpi-ready
	@scripts/grade.sh $(if $(L),--lesson $(LESSON_DIR)) $(if $(SUBMISSION),--submission $(SUBMISSION)) $(SANDBOX_OPTION)

# make -jN grade-all (or JOBS=N): N gradings at once. SLURM=1: as a Slurm
# job array, one task per submission (scripts/grade-all.sh). L=NN: one lesson.
GRADE_JOBS = $(or $(JOBS),$(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS))))
grade-all: deps-ready ## grade every submission in SUBMISSIONS=DIR (-jN: N at once; SLURM=1: a job array): a CSV roster, a log each
	@test -n "$(SUBMISSIONS)" || { echo "make grade-all: say where: make grade-all SUBMISSIONS=folder-of-submissions" >&2; exit 2; }
	@test -z "$(L)" -o -n "$(LESSON_DIR)" || { echo "make grade-all: there is no lesson L=$(L) (lessons: $(LESSONS))" >&2; exit 2; }
	@$(MAKE) -s --no-print-directory mpi-ready $(call library_parts,$($(GRADE_VARIANT)_LIBRARY)) \
	    $(if $(filter 0,$(GRADE_SANITIZERS)),,$(call library_parts,sanitize))
	@$(if $(filter 0,$(GRADE_SANITIZERS)),true,! command -v $(CLANG) > /dev/null || \
	    $(MAKE) -s --no-print-directory CC=$(CLANG) $(call library_parts,tsan) > /dev/null 2>&1 || true)
	@scripts/grade-all.sh $(SUBMISSIONS) $(if $(GRADE_JOBS),--jobs $(GRADE_JOBS)) $(SANDBOX_OPTION) $(if $(L),--lesson $(LESSON_DIR)) $(if $(SLURM),--slurm)

progress: ## one line per lesson and TODO, with its points, from your last make check and make grade
	@$(MAKE) -s --no-print-directory build/grade-tool/grade
	@scripts/progress.sh

ifneq ($(HAVE_SOLUTIONS),)
build-solution: $(PROGRAMS_solution) $(TESTS_solution)
build-sanitize: $(TESTS_sanitize)

test: deps-ready ## the toolkit's own tests: solutions pass, skeletons fail, broken submissions graded
	@$(MAKE) -j2 --no-print-directory build-student build-solution build/grade-tool/grade mpi-ready
	@tests/run-all.sh $(BUILT_LESSONS)

test-full: deps-ready ## the slower suites: sanitizers, slow and attack fixtures (each defence alone)
	@$(MAKE) -j2 --no-print-directory build-student build-solution build-sanitize build/grade-tool/grade mpi-ready
	@tests/run-all.sh --full $(BUILT_LESSONS)

# make test's solution and skeleton suites again, on the student's and the
# solution's builds made with clang (its OpenMP runtime, its warnings, its
# optimiser; the MPI wrapper uses it too) or with MPICH. The next make
# without those settings rebuilds them as they were.
# $(call suites_with,SETTINGS,INSTALL-DEPS OPTION,WHAT THE BUILDS ARE)
suites_with = $(MAKE) --no-print-directory deps-ready DEPS_OPTIONS="$(2)" && \
    $(MAKE) -j2 --no-print-directory $(1) build-student build-solution mpi-ready && \
    $(MAKE) --no-print-directory $(1) run-suites SUITES_TITLE="$(3)"
test-clang: ## make test's solution and skeleton suites, built with clang
	@$(call suites_with,CC=$(CLANG),--clang,built with $(CLANG))
# With MPICH, the correct programs that use MPI's predefined constants
# (tests/fixtures/*/uses-mpi-constants) are graded too: full marks.
test-mpich: ## make test's solution and skeleton suites, built with MPICH
	@$(call suites_with,MPI=mpich SUITES_FIXTURES=uses-mpi-constants,--mpich,built with MPICH)
run-suites:
	@scripts/test-suites.sh "$(SUITES_TITLE)" $(if $(SUITES_FIXTURES),--fixtures $(SUITES_FIXTURES)) $(BUILT_LESSONS)

# Several hosts on this machine (network namespaces, Open MPI over TCP
# between them; needs root): lessons 02, 05, 06 and 07's drivers across
# them give the one-host results (tests/cluster/run.sh says what it
# checks), then lesson 02's with MPICH. Skipped, with the reason and
# status 77, where hosts cannot be made; not part of make test.
CLUSTER_PROGRAMS := $(addprefix build/solution/,00-setup/pingpong 02-mpi-matvec/matvec_mpi 03-openmp/hybrid 05-data-parallel/train 06-zero/train_zero 07-offload/train_offload)
# Then MPICH's, where it is installed: lesson 02 and the ping-pong, built
# with MPICH (the next make without MPI=mpich rebuilds them as they were).
CLUSTER_PROGRAMS_MPICH := $(addprefix build/solution/,00-setup/pingpong 02-mpi-matvec/matvec_mpi)
test-cluster: ## run the MPI lessons across hosts made here (namespaces, TCP; as root)
	@test "$(MPI)" = openmpi || { echo "make test-cluster: the hosts run Open MPI (MPI=openmpi)" >&2; exit 2; }
	@$(MAKE) --no-print-directory deps-ready DEPS_OPTIONS="$(DEPS_OPTIONS) --cluster"
	@$(MAKE) -j2 --no-print-directory $(CLUSTER_PROGRAMS) mpi-ready
	@status=0; tests/cluster/run.sh || status=$$?; \
	if command -v mpiexec.mpich > /dev/null; then \
	    $(MAKE) -j2 --no-print-directory MPI=mpich $(CLUSTER_PROGRAMS_MPICH) && tests/cluster/run.sh --mpich || status=1; \
	else tests/cluster/run.sh --mpich; fi; \
	exit $$status

# For maintainers: grade one broken submission as make test does, e.g.
# make grade-fixture F=tests/fixtures/01-serial-matvec/segfault
grade-fixture:
	@test -d "$(F)" || { echo "make grade-fixture: F=tests/fixtures/LESSON/NAME, a folder" >&2; exit 2; }
	@scripts/grade-fixture.sh $(F)

else
$(SOLUTION_TARGETS):
	@echo "make $@: needs solutions/, which a student release leaves out (make check L=NN tests your files)" >&2; exit 2
endif

# A cluster of namespace hosts on this machine to practise on, up until
# make cluster-down (scripts/cluster/up.sh; root; docs/clusters.md).
HOSTS ?= 2
RANKS ?= 2
HOST ?= node1
cluster-up: ## bring up hosts here to practise on: HOSTS=2 RANKS=2 (a host) RATE=1gbit (each link; as root)
	@scripts/cluster/up.sh --hosts $(HOSTS) --slots $(RANKS) $(if $(RATE),--rate $(RATE))
cluster-shell: ## a shell on a host of make cluster-up's (HOST=node1)
	@scripts/cluster/up.sh --shell $(HOST)
cluster-down: ## take make cluster-up's hosts down, leaving nothing behind
	@scripts/cluster/up.sh --down

# The programs bench/bench_NN.sh runs, of the lessons benchmarked.
bench_programs = $(foreach lesson,$(BENCH_LESSONS),$(addprefix build/$(BENCH_VARIANT)/$(lesson)/,$($(lesson)_PROGRAMS)))
bench: deps-ready ## time the solutions (in a student release: your code) against OpenBLAS and STREAM; L=NN: one lesson
	@test -z "$(L)" -o -n "$(LESSON_DIR)" || { echo "make bench: there is no lesson L=$(L) (lessons: $(LESSONS))" >&2; exit 2; }
	@$(MAKE) -j2 --no-print-directory $(BENCHES) $(bench_programs) mpi-ready
	@scripts/bench.sh $(if $(L),--lesson $(LESSON_DIR))

# Reads build/bench/results.csv only: no build, no dependencies to install.
plots: ## draw build/bench/results.csv as PNG figures in build/plots (needs gnuplot)
	@scripts/plots.sh

slides: ## render slides/*.md to self-contained HTML in build/slides (needs pandoc)
	@scripts/slides.sh

student-release: ## a tarball for students: no solutions, fixtures or hidden tests (UPTO=NN: lessons up to NN)
	@scripts/student-release.sh $(if $(UPTO),--upto $(UPTO))

classroom: ## GitHub Classroom's autograding here (.github/): one test per lesson, make grade L=NN
	@scripts/classroom.sh

gradescope-zip: ## the autograder for Gradescope (L=NN: one assignment per lesson), from the committed tree
	@test -z "$(L)" -o -n "$(LESSON_DIR)" || { echo "make gradescope-zip: there is no lesson L=$(L) (lessons: $(LESSONS))" >&2; exit 2; }
	@scripts/gradescope-zip.sh $(LESSON_DIR)

print-edited:
	@echo $(ZZ_EDITED)

# For the toolkit's test of the macOS branches (tests/check-macos.sh).
print-flags:
	@echo "UNAME_S=$(UNAME_S)"; echo "SHELL=$(SHELL)"; echo "OPENMP_FLAGS=$(OPENMP_FLAGS)"
	@echo "LDFLAGS=$(strip $(LDFLAGS))"; echo "GC_LDFLAGS=$(GC_LDFLAGS)"; echo "ARCH_FLAGS=$(ARCH_FLAGS)"
	@echo "PKG_CONFIG_PATH=$(PKG_CONFIG_PATH)"

# The launcher command line, for scripts/mpirun.
print-mpirun:
	@echo $(call shell_quote,$(MPIRUN))

clean: ## remove build/
	rm -rf build
