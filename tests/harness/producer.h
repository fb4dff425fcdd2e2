/* The producer side of a lesson's tests.
 *
 * A lesson's producer (tests/producer/LESSON.c) is a small program linked
 * with the student's files. Asked for one case, it reads the inputs that the
 * test left in a folder, runs the student's code on them, and writes what
 * came out into the same folder, as raw binary files. It decides nothing:
 * the lesson's tests (the judge) make the inputs, run the producer as a
 * separate process, read its outputs and compare them with references
 * computed in the judge, which never links, loads or runs a student's code.
 * Whatever the student's code does in its own process (constructors,
 * destructors, exit(0), writing files), all it can change is what its own
 * case's outputs say.
 *
 *   producer CASE DIR [ARG...]
 *
 * exits 0 when the case ran, 2 on a bad command line, 3 at a NOT_DONE(). */
#ifndef ZZ_PRODUCER_H
#define ZZ_PRODUCER_H

#include <stdbool.h>
#include <stddef.h>

/* The most ARGs a producer takes (harness_produce passes no more). */
enum { PRODUCER_MAX_ARGS = 16 };

/* One kind of case: `run` reads its inputs (producer_input, producer_arg),
 * runs the student's code, and writes its outputs (produce). */
typedef struct {
    const char *name;
    int arg_count;      /* how many ARGs it takes */
    void (*run)(void);
    bool counted;       /* its regions' instructions are counted (below) */
} producer_case;

/* A counted case runs in a child process that the producer single-steps
 * (ptrace, Linux only), from outside the boundary and outside the child:
 * between each pair of producer_region calls the child makes, the
 * producer counts the instructions the child executes, and writes the
 * counts, one uint64 a region, to DIR/instructions.bin. What the code
 * does, not what its binary holds: a loop one element at a time executes
 * some instructions for every element, a vectorised one a fraction of
 * them. Where single-stepping cannot run (not Linux; ptrace refused),
 * the case exits with status PRODUCER_NOT_COUNTED, its reason on
 * stderr. */
enum { PRODUCER_NOT_COUNTED = 5 };
void producer_region(void);

/* The producer's main: finds the case and runs it. */
int producer_main(int argc, char **argv, const producer_case *cases,
                  size_t count);

/* ARG number k (0-based) as a non-negative integer. */
size_t producer_arg(int k);

/* DIR/NAME.bin, which must hold exactly `count` elements of `size` bytes,
 * in fresh memory (at least one byte, so count 0 is fine). */
void *producer_input(const char *name, size_t size, size_t count);

/* Writes `count` elements of `size` bytes to DIR/NAME.bin. */
void produce(const char *name, const void *values, size_t size, size_t count);

/* `count` elements of `size` bytes, zeroed, or exits naming `what`. */
void *producer_alloc(size_t count, size_t size, const char *what);

#endif
