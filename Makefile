# zero-to-zero: from a serial y = Ax to ZeRO-Offload, one lesson at a time.
# `make` lists the targets. All output goes under build/.

.DEFAULT_GOAL := help
SHELL := /bin/bash
.DELETE_ON_ERROR:

# ---- Tools and flags (override any of them: make CC=clang) ---------------
CC       ?= cc
MPICC    ?= mpicc
NVCC     ?= nvcc
PKG_CONFIG ?= pkg-config
# -march=native: the kernels are meant to use this machine's vector unit.
ARCH_FLAGS ?= $(if $(filter arm64 aarch64,$(shell uname -m)),-mcpu=native,-march=native)
OPT_FLAGS  ?= -O3 $(ARCH_FLAGS)
# WERROR=1 (as CI sets) turns every warning into an error.
WARN_FLAGS ?= -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes $(if $(WERROR),-Werror)
CFLAGS   ?=
LDFLAGS  ?=
OPENMP_FLAGS ?= -fopenmp
SANITIZE_FLAGS ?= -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

# CUDA is optional: lessons with CUDA sources build whenever $(NVCC) is found
# (for sm_90, plus PTX for compute_75, the oldest this toolkit targets, which
# any newer GPU can compile at load time), and are reported skipped without it.
# Programs link the runtime library (cudart) and cuBLAS, never the driver
# (-lcuda), so they build on machines without a GPU or its driver.
HAVE_NVCC  := $(shell command -v $(NVCC) 2>/dev/null)
CUDA_HOME  ?= $(patsubst %/bin/,%,$(dir $(HAVE_NVCC)))
CUDA_ARCH_FLAGS ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
NVCC_FLAGS ?= -O3 -std=c++17 $(CUDA_ARCH_FLAGS) -Xcompiler -Wall,-Wextra$(if $(WERROR),$(comma)-Werror) $(if $(WERROR),-Werror all-warnings)
CUDA_CFLAGS := -I$(CUDA_HOME)/include
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
comma := ,

CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
BLAS_PC      ?= openblas
BLAS_CFLAGS  := $(shell $(PKG_CONFIG) --cflags $(BLAS_PC) 2>/dev/null)
BLAS_LIBS    := $(shell $(PKG_CONFIG) --libs $(BLAS_PC) 2>/dev/null)

# How MPI programs are launched: everywhere, through this one variable.
# On one machine more ranks than cores need --oversubscribe; Open MPI refuses
# to run as root unless told twice. For MPICH: make MPIRUN=mpiexec MPIRUN_TIMEOUT_FLAG=
ROOT_ENV := $(if $(filter 0,$(shell id -u)),env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
MPIRUN   ?= $(ROOT_ENV) mpirun --oversubscribe
# mpirun's own time limit flag, used by the test harness (empty: none).
MPIRUN_TIMEOUT_FLAG ?= --timeout

export ZZ_MPIRUN := $(MPIRUN)
export ZZ_MPIRUN_TIMEOUT_FLAG := $(MPIRUN_TIMEOUT_FLAG)

# ---- What there is ----------------------------------------------------------
LESSONS := $(sort $(notdir $(patsubst %/lesson.mk,%,$(wildcard lessons/*/lesson.mk))))
include $(foreach lesson,$(LESSONS),lessons/$(lesson)/lesson.mk)
# Lessons with CUDA sources (lesson.mk's CUDA list) need nvcc to build.
CUDA_LESSONS  := $(foreach lesson,$(LESSONS),$(if $($(lesson)_CUDA),$(lesson)))
BUILT_LESSONS := $(if $(HAVE_NVCC),$(LESSONS),$(filter-out $(CUDA_LESSONS),$(LESSONS)))

# The shared library; not_done.o and the MPI parts are linked explicitly
# (tests replace not_done.o with the harness's version; the communication
# ledger must be linked as an object for its MPI_* definitions to win).
COMMON_MPI_SOURCES := common/check_mpi.c common/comm_ledger.c
COMMON_MPI_OBJS = $(patsubst common/%.c,build/$(SHARED_$(1))/common/%.o,$(COMMON_MPI_SOURCES))
COMMON_SOURCES := $(filter-out common/not_done.c $(COMMON_MPI_SOURCES) common/check_cuda.c,$(wildcard common/*.c))
HARNESS_OBJS   := harness/harness.o harness/runner.o harness/not_done_check.o

# Variants: student (lessons/ alone: the skeletons, or the student's work),
# solution (edited files from solutions/, the rest from lessons/), sanitize
# (the solution under AddressSanitizer and UndefinedBehaviorSanitizer).
VARIANTS := student solution sanitize
# Where a variant takes the shared library and the compiled tests from: its
# own build, except for grading builds (below), which share the solution's.
$(foreach variant,$(VARIANTS),$(eval SHARED_$(variant) := $(variant)))
# A skeleton is unfinished on purpose: its parameters and variables wait for
# the student's code, so "unused" is not a warning there.
student_FLAGS  := $(OPT_FLAGS) -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable -Wno-unused-function
solution_FLAGS := $(OPT_FLAGS)
sanitize_FLAGS := $(SANITIZE_FLAGS)

# For scripts: the lessons, and each lesson's edited files as LESSON/FILE.
export ZZ_LESSONS := $(LESSONS)
# Lessons that cannot be built here, and why: reported as skipped.
export ZZ_UNBUILT := $(filter-out $(BUILT_LESSONS),$(LESSONS))
export ZZ_UNBUILT_REASON := nvcc (the CUDA toolkit) was not found, so the CUDA lessons were not built
export ZZ_CUDA_LESSONS := $(CUDA_LESSONS)
export ZZ_EDITED := $(foreach lesson,$(LESSONS),$(addprefix $(lesson)/,$($(lesson)_EDITED)))

# L=1, L=01 or L=01-serial-matvec all name lesson 01.
lesson_of = $(firstword $(filter $(if $(filter 0 1 2 3 4 5 6 7 8 9,$(1)),0$(1),$(1))%,$(LESSONS)))
LESSON_DIR := $(if $(L),$(call lesson_of,$(L)))

# ---- Rules for one variant ------------------------------------------------
# $(1): variant
define variant_rules
build/$(1)/common/%.o: common/%.c
	@mkdir -p $$(@D)
	$$(COMPILER) $$(CFLAGS) $$($(1)_FLAGS) $$(WARN_FLAGS) $$(OPENMP_FLAGS) $$(EXTRA_FLAGS) -Icommon -MMD -MP -c $$< -o $$@
build/$(1)/tests/%.o: tests/%.c
	@mkdir -p $$(@D)
	$$(COMPILER) $$(CFLAGS) $$($(1)_FLAGS) $$(WARN_FLAGS) -Wno-unused-parameter $$(OPENMP_FLAGS) $$(EXTRA_FLAGS) $$(CHECK_CFLAGS) -Icommon -Itests/harness -Ilessons/$$(patsubst test_%,%,$$(notdir $$*)) -MMD -MP -c $$< -o $$@
build/$(1)/common/libcommon.a: $$(patsubst common/%.c,build/$(1)/common/%.o,$$(COMMON_SOURCES))
	$$(AR) rcs $$@ $$^
build/$(1)/common/check_mpi.o build/$(1)/common/comm_ledger.o: COMPILER = $$(MPICC)
build/$(1)/common/check_cuda.o: EXTRA_FLAGS = $$(CUDA_CFLAGS)
endef

# Lesson sources: a solution build looks in solutions/ first.
define lesson_source_rules
build/$(1)/%.o: $(2)/%.c
	@mkdir -p $$(@D)
	$$(COMPILER) $$(CFLAGS) $$($(1)_FLAGS) $$(WARN_FLAGS) $$(EXTRA_FLAGS) -Icommon -Ilessons/$$(*D) -MMD -MP -c $$< -o $$@
build/$(1)/%.o: $(2)/%.cu
	@mkdir -p $$(@D)
	$$(NVCC) $$(NVCC_FLAGS) -Icommon -Ilessons/$$(*D) -MMD -MP -c $$< -o $$@
endef

# The checks on the files a student edits (scripts/check-submission.sh):
# nothing links them before they pass. Not for the sanitizer's build (its
# instrumentation calls are not a student's), which compiles the solutions.
EDITED_OBJS = $(patsubst %.cu,%.o,$(patsubst %.c,%.o,$($(1)_EDITED)))
# GRADE_SYMBOL_CHECK=0 turns the check off for a grading build only: make
# test does so to prove that the sandbox alone stops what the check stops.
SUBMISSION_CHECK = $(if $(filter sanitize,$(1)),,$(if $(and $(filter graded/%,$(1)),$(filter 0,$(GRADE_SYMBOL_CHECK))),,build/$(1)/$(2)/submission.ok))
define submission_check_rules
build/$(1)/$(2)/submission.ok: $(addprefix build/$(1)/$(2)/,$(call EDITED_OBJS,$(2))) build/$(SHARED_$(1))/common/libcommon.a scripts/check-submission.sh tests/symbols/all.txt $(wildcard tests/symbols/$(2).txt)
	@scripts/check-submission.sh $(2) build/$(SHARED_$(1))/common/libcommon.a $$(filter %.o,$$^)
	@touch $$@
endef

# $(1): variant, $(2): lesson, $(3): program
define program_rules
build/$(1)/$(2)/$(3): $(call SUBMISSION_CHECK,$(1),$(2)) $(addprefix build/$(1)/$(2)/,$($(2)_$(3)_OBJS)) build/$(SHARED_$(1))/common/libcommon.a build/$(SHARED_$(1))/common/not_done.o $(if $(filter $($(2)_$(3)_OBJS),$($(2)_MPI:.c=.o)),$(COMMON_MPI_OBJS)) $(if $($(2)_CUDA),build/$(SHARED_$(1))/common/check_cuda.o)
	$$(if $$(filter $$($(2)_$(3)_OBJS),$$($(2)_MPI:.c=.o)),$$(MPICC),$$(CC)) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) $$(filter %.o,$$^) build/$(SHARED_$(1))/common/libcommon.a $(if $($(2)_CUDA),$$(CUDA_LIBS)) -lm -o $$@
endef

# $(1): variant, $(2): lesson
define lesson_rules
$(foreach source,$($(2)_MPI),build/$(1)/$(2)/$(source:.c=.o)): COMPILER = $$(MPICC)
$(foreach source,$($(2)_OPENMP),build/$(1)/$(2)/$(source:.c=.o)): EXTRA_FLAGS = $$(OPENMP_FLAGS)
# A lesson with CUDA: its host code and tests see the CUDA runtime's headers.
$(if $($(2)_CUDA),build/$(1)/$(2)/%.o build/$(SHARED_$(1))/tests/test_$(2).o: EXTRA_FLAGS += $$(CUDA_CFLAGS))
# A lesson with MPI has headers that include mpi.h: its tests need mpicc too.
$(if $($(2)_MPI),build/$(SHARED_$(1))/tests/test_$(2).o: COMPILER = $$(MPICC))
$(if $(call SUBMISSION_CHECK,$(1),$(2)),$(eval $(call submission_check_rules,$(1),$(2))))
$(foreach program,$($(2)_PROGRAMS),$(eval $(call program_rules,$(1),$(2),$(program))))
# The producer: the student's files (PRODUCER_OBJS) with the given code that
# runs them on the tests' inputs (tests/producer/LESSON.c). The judge (the
# test program) links no lesson object: it runs the producer.
build/$(1)/$(2)/producer: $(call SUBMISSION_CHECK,$(1),$(2)) build/$(SHARED_$(1))/tests/producer/$(2).o build/$(SHARED_$(1))/tests/harness/producer.o $(addprefix build/$(1)/$(2)/,$($(2)_PRODUCER_OBJS)) $(if $(filter $($(2)_PRODUCER_OBJS),$($(2)_MPI:.c=.o)),$(COMMON_MPI_OBJS)) $(if $($(2)_CUDA),build/$(SHARED_$(1))/common/check_cuda.o) build/$(SHARED_$(1))/common/libcommon.a build/$(SHARED_$(1))/common/not_done.o
	@mkdir -p $$(@D)
	$(if $(filter $($(2)_PRODUCER_OBJS),$($(2)_MPI:.c=.o)),$$(MPICC),$$(CC)) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) $$(filter %.o %.a,$$^) $(if $($(2)_CUDA),$$(CUDA_LIBS)) -lm -o $$@
$(if $(filter $($(2)_PRODUCER_OBJS),$($(2)_MPI:.c=.o)),build/$(SHARED_$(1))/tests/producer/$(2).o: COMPILER = $$(MPICC))
$(if $($(2)_OPENMP),build/$(SHARED_$(1))/tests/producer/$(2).o: EXTRA_FLAGS += $$(OPENMP_FLAGS))
$(if $($(2)_CUDA),build/$(SHARED_$(1))/tests/producer/$(2).o: EXTRA_FLAGS += $$(CUDA_CFLAGS))
$(if $(and $($(2)_PRODUCER_OBJS),$(if $(wildcard tests/producer/$(2).c),,missing)),$(error lessons/$(2)/lesson.mk lists PRODUCER_OBJS but tests/producer/$(2).c does not exist: the tests run a student's code only through a producer))
build/$(1)/tests/test_$(2): build/$(SHARED_$(1))/tests/test_$(2).o $(patsubst tests/%.c,build/$(SHARED_$(1))/tests/%.o,$(wildcard tests/hidden/test_$(2).c)) $(addprefix build/$(SHARED_$(1))/tests/,$(HARNESS_OBJS)) $(if $($(2)_CUDA),build/$(SHARED_$(1))/common/check_cuda.o) build/$(SHARED_$(1))/common/libcommon.a | $(addprefix build/$(1)/$(2)/,$($(2)_PROGRAMS) $(if $($(2)_PRODUCER_OBJS),producer))
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) $$(filter %.o %.a,$$^) $$(CHECK_LIBS) $(if $($(2)_CUDA),$$(CUDA_LIBS)) -lm -o $$@
PROGRAMS_$(1) += $(addprefix build/$(1)/$(2)/,$($(2)_PROGRAMS))
TESTS_$(1) += build/$(1)/tests/test_$(2)
endef

# Grading (scripts/grade.sh): a submission's edited files, copied into
# $(GRADE_SRC)/LESSON/, built with this repository's given files, tests and
# library, never the submission's; files it lacks come from lessons/. The
# broken submissions in tests/fixtures/ are graded the same way by make test.
# Warnings are not errors here: a student's unused variable costs nothing.
# $(1): lesson
define graded_rules
build/$(GRADE_VARIANT)/$(1)/%.o: $(GRADE_SRC)/$(1)/%.c
	@mkdir -p $$(@D)
	$$(COMPILER) $$(CFLAGS) $$(student_FLAGS) $$(filter-out -Werror,$$(WARN_FLAGS)) $$(EXTRA_FLAGS) -Icommon -Ilessons/$(1) -MMD -MP -c $$< -o $$@
build/$(GRADE_VARIANT)/$(1)/%.o: lessons/$(1)/%.c
	@mkdir -p $$(@D)
	$$(COMPILER) $$(CFLAGS) $$(student_FLAGS) $$(filter-out -Werror,$$(WARN_FLAGS)) $$(EXTRA_FLAGS) -Icommon -Ilessons/$(1) -MMD -MP -c $$< -o $$@
build/$(GRADE_VARIANT)/$(1)/%.o: $(GRADE_SRC)/$(1)/%.cu
	@mkdir -p $$(@D)
	$$(NVCC) $$(NVCC_FLAGS) -Icommon -Ilessons/$(1) -MMD -MP -c $$< -o $$@
build/$(GRADE_VARIANT)/$(1)/%.o: lessons/$(1)/%.cu
	@mkdir -p $$(@D)
	$$(NVCC) $$(NVCC_FLAGS) -Icommon -Ilessons/$(1) -MMD -MP -c $$< -o $$@
endef
GRADE_ID ?= default
GRADE_VARIANT := graded/$(GRADE_ID)
SHARED_$(GRADE_VARIANT) := solution
$(GRADE_VARIANT)_FLAGS := $(student_FLAGS)

COMPILER = $(CC)
$(foreach variant,$(VARIANTS),$(eval $(call variant_rules,$(variant))))
$(eval $(call lesson_source_rules,student,lessons))
$(eval $(call lesson_source_rules,solution,solutions))
$(eval $(call lesson_source_rules,solution,lessons))
$(eval $(call lesson_source_rules,sanitize,solutions))
$(eval $(call lesson_source_rules,sanitize,lessons))
$(foreach variant,$(VARIANTS),$(foreach lesson,$(BUILT_LESSONS),$(eval $(call lesson_rules,$(variant),$(lesson)))))
ifneq ($(GRADE_SRC),)
$(foreach lesson,$(BUILT_LESSONS),$(eval $(call graded_rules,$(lesson))))
$(foreach lesson,$(BUILT_LESSONS),$(eval $(call lesson_rules,$(GRADE_VARIANT),$(lesson))))
endif

# The grader's own tools, built from this repository alone.
build/grade-tool/grade: tests/harness/grade.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -O2 $(WARN_FLAGS) $< -o $@

# The communication ledger's test program (an MPI program the tests launch).
define probe_rules
build/$(1)/tests/common/ledger_probe: build/$(1)/tests/common/ledger_probe.o $(COMMON_MPI_OBJS) build/$(1)/common/libcommon.a
	$$(MPICC) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) $$^ -o $$@
build/$(1)/tests/common/ledger_probe.o: COMPILER = $$(MPICC)
PROGRAMS_$(1) += build/$(1)/tests/common/ledger_probe
endef
$(foreach variant,solution sanitize,$(eval $(call probe_rules,$(variant))))

# The shared library's own unit tests.
COMMON_TESTS := $(patsubst tests/common/%.c,%,$(wildcard tests/common/test_*.c))
define common_test_rules
build/$(1)/tests/common/$(2): build/$(1)/tests/common/$(2).o $(addprefix build/$(1)/tests/,$(HARNESS_OBJS)) build/$(1)/common/libcommon.a | $(PROGRAMS_$(1))
	$$(CC) $$(CFLAGS) $$($(1)_FLAGS) $$(OPENMP_FLAGS) $$(LDFLAGS) $$(filter %.o %.a,$$^) $$(CHECK_LIBS) -lm -o $$@
TESTS_$(1) += build/$(1)/tests/common/$(2)
endef
$(foreach variant,solution sanitize,$(foreach test,$(COMMON_TESTS),$(eval $(call common_test_rules,$(variant),$(test)))))


# Benchmarks: bench/bench_NN.c times lesson NN's solution against baselines
# (OpenBLAS, STREAM); it links the objects that lesson.mk lists in
# NN-*_BENCH_OBJS, and MPI when NN-*_BENCH_MPI is set.
# A benchmark of a lesson that is not built here (CUDA without nvcc) is not
# built either; scripts/bench.sh reports it skipped.
BENCHES := $(foreach bench,$(patsubst bench/%.c,%,$(wildcard bench/bench_*.c)),$(if $(filter $(call lesson_of,$(patsubst bench_%,%,$(bench))),$(BUILT_LESSONS)),build/bench/$(bench)))
# $(1): bench name (bench_01), $(2): lesson
define bench_rules
build/bench/$(1): bench/$(1).c $(addprefix build/solution/$(2)/,$($(2)_BENCH_OBJS)) build/solution/common/libcommon.a $(if $($(2)_BENCH_MPI),$(call COMMON_MPI_OBJS_OF,solution)) $(if $($(2)_CUDA),build/solution/common/check_cuda.o)
	@mkdir -p $$(@D)
	$(if $($(2)_BENCH_MPI),$$(MPICC),$$(CC)) $$(CFLAGS) $$(solution_FLAGS) $$(WARN_FLAGS) $$(OPENMP_FLAGS) $$(BLAS_CFLAGS) $(if $($(2)_CUDA),$$(CUDA_CFLAGS)) -Icommon -Ilessons/$(2) $$(LDFLAGS) $$(filter %.c %.o,$$^) build/solution/common/libcommon.a $$(BLAS_LIBS) $(if $($(2)_CUDA),$$(CUDA_LIBS)) -lm -o $$@
endef
COMMON_MPI_OBJS_OF = $(patsubst common/%.c,build/$(1)/common/%.o,$(COMMON_MPI_SOURCES))
$(foreach bench,$(BENCHES),$(eval $(call bench_rules,$(notdir $(bench)),$(call lesson_of,$(patsubst bench_%,%,$(notdir $(bench)))))))

-include $(shell find build -name '*.d' 2>/dev/null)

# ---- Targets ------------------------------------------------------------------
.PHONY: grade-fixture test-full help deps deps-ready all build-student build-solution build-sanitize demo test check watch student-release gradescope-zip print-edited grade grade-all progress bench slides clean

help: ## list the targets
	@echo "zero-to-zero: from a serial y = Ax to ZeRO-Offload"
	@echo
	@grep -hE '^[a-z-]+:.*## ' Makefile | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 24
	@echo
	@echo "Lessons: $(LESSONS)"
	@echo "Variables: CC MPICC NVCC CFLAGS OPT_FLAGS OPENMP_FLAGS MPIRUN BLAS_PC WERROR=1"

deps: ## install what the toolkit needs (MPI, Check, OpenBLAS, pkg-config)
	@scripts/install-deps.sh

# Installs only when something is missing, then lets a fresh make read the
# flags that pkg-config now knows.
deps-ready:
	@scripts/install-deps.sh --check >/dev/null 2>&1 || scripts/install-deps.sh

build-student: $(PROGRAMS_student) $(TESTS_student)
build-solution: $(PROGRAMS_solution) $(TESTS_solution)
build-sanitize: $(TESTS_sanitize)

all: ## build every lesson: your files and the solutions, with their tests
	@$(MAKE) --no-print-directory build-student build-solution

demo: deps-ready ## build the solutions and run every lesson at its default size
	@$(MAKE) --no-print-directory build-solution
	@scripts/demo.sh

test: deps-ready ## the toolkit's own tests: solutions pass, skeletons fail, sanitizers
	@$(MAKE) -j2 --no-print-directory build-student build-solution build-sanitize build/grade-tool/grade
	@tests/run-all.sh $(BUILT_LESSONS)

test-full: deps-ready ## the slower suites: the attack fixtures (each defence of the grader, alone)
	@$(MAKE) -j2 --no-print-directory build-student build-solution build-sanitize build/grade-tool/grade
	@tests/run-all.sh --full $(BUILT_LESSONS)

check: ## run one lesson's tests on your files: make check L=01
	@test -n "$(L)" || { echo "make check: say which lesson, e.g. make check L=01 (lessons: $(LESSONS))" >&2; exit 2; }
	@test -n "$(LESSON_DIR)" || { echo "make check: there is no lesson L=$(L) (lessons: $(LESSONS))" >&2; exit 2; }
	@if [ -n "$(filter $(LESSON_DIR),$(ZZ_UNBUILT))" ]; then \
	    echo "lesson $(LESSON_DIR): [skip] every test: $(ZZ_UNBUILT_REASON) (nvcc on PATH, or make NVCC=/path/to/nvcc)"; \
	else \
	    mkdir -p build/check; rm -f build/check/$(LESSON_DIR).results build/check/$(LESSON_DIR).build.log; \
	    if $(MAKE) -s --no-print-directory build/student/tests/test_$(LESSON_DIR) 2> >(tee build/check/$(LESSON_DIR).build.log >&2); then \
	        rm -f build/check/$(LESSON_DIR).build.log; \
	        ZZ_BUILD_DIR=build/student build/student/tests/test_$(LESSON_DIR) --title "lesson $($(LESSON_DIR)_TITLE), your files in lessons/$(LESSON_DIR)" --mode student --results build/check/$(LESSON_DIR).results; \
	    else exit 2; fi; \
	fi

grade: deps-ready ## score your lessons: L=NN one, SUBMISSION=DIR another tree, SANDBOX=1
	@test -z "$(L)" -o -n "$(LESSON_DIR)" || { echo "make grade: there is no lesson L=$(L) (lessons: $(LESSONS))" >&2; exit 2; }
	@scripts/grade.sh $(if $(L),--lesson $(LESSON_DIR)) $(if $(SUBMISSION),--submission $(SUBMISSION)) $(if $(SANDBOX),--sandbox)

# make -jN grade-all (or JOBS=N): N gradings at once.
GRADE_JOBS = $(or $(JOBS),$(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS))))
grade-all: deps-ready ## grade every submission in SUBMISSIONS=DIR (-jN: N at once): a CSV roster, a log each
	@test -n "$(SUBMISSIONS)" || { echo "make grade-all: say where: make grade-all SUBMISSIONS=folder-of-submissions" >&2; exit 2; }
	@scripts/grade-all.sh $(SUBMISSIONS) $(if $(GRADE_JOBS),--jobs $(GRADE_JOBS)) $(if $(SANDBOX),--sandbox)

# For maintainers: grade one broken submission as make test does, e.g.
# make grade-fixture F=tests/fixtures/01-serial-matvec/segfault
grade-fixture:
	@test -d "$(F)" || { echo "make grade-fixture: F=tests/fixtures/LESSON/NAME, a folder" >&2; exit 2; }
	@scripts/grade-fixture.sh $(F)

watch: ## run a lesson's checks again each time you save: make watch L=01
	@test -n "$(LESSON_DIR)" || { echo "make watch: say which lesson, e.g. make watch L=01 (lessons: $(LESSONS))" >&2; exit 2; }
	@scripts/watch.sh $(LESSON_DIR)

gradescope-zip: ## build/gradescope-autograder.zip: this repository with setup.sh and run_autograder
	@mkdir -p build
	@git archive --format=zip --add-file=scripts/gradescope/setup.sh --add-file=scripts/gradescope/run_autograder --prefix=zero-to-zero/ HEAD -o build/gradescope-autograder.zip
	@echo "build/gradescope-autograder.zip: upload it as the autograder (docs/instructors.md)"

print-edited:
	@echo $(ZZ_EDITED)

student-release: ## a tarball for students: no solutions, fixtures or hidden tests
	@scripts/student-release.sh

progress: ## one line per lesson and TODO, from your last make check and make grade
	@$(MAKE) -s --no-print-directory build/grade-tool/grade
	@scripts/progress.sh

bench: deps-ready ## time the solutions against OpenBLAS and STREAM, side by side
	@$(MAKE) -j2 --no-print-directory $(BENCHES) $(PROGRAMS_solution)
	@scripts/bench.sh

slides: ## render slides/*.md to self-contained HTML in build/slides (needs pandoc)
	@scripts/slides.sh

clean: ## remove build/
	rm -rf build
