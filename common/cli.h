/* Command-line flags, parsed and validated from a table.
 *
 *     size_t m = 4096;
 *     const cli_option options[] = {
 *         { "m", CLI_SIZE, &m, "rows of A", 1, 1u << 20 },
 *     };
 *     const cli_spec spec = { "matvec", "y = Ax on one core", options, 1 };
 *     cli_parse_or_exit(&spec, argc, argv, false);
 *
 * Flags are written --name VALUE or --name=VALUE; --help prints usage.
 * Anything else (an unknown flag, a missing value, "abc" or "-5" or "0" or
 * "1e99" for a size, a value outside its range) is bad input: one line that
 * says what is wrong, a usage line, and exit status 2. */
#ifndef ZZ_CLI_H
#define ZZ_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum {
    CLI_SIZE,   /* size_t; a whole number within [min, max], min >= 0 */
    CLI_INT,    /* int; a whole number within [min, max] */
    CLI_SEED,   /* uint64_t; any whole number 0 .. 2^64-1, min/max unused */
    CLI_DOUBLE, /* double; a finite number within [min, max] */
    CLI_FLAG,   /* bool; present means true, takes no value */
    CLI_STRING, /* const char *; any non-empty text, min/max unused */
} cli_type;

typedef struct {
    const char *name;   /* without the dashes: "m" for --m */
    cli_type type;
    void *value;        /* size_t*, int*, uint64_t*, double*, bool* or
                           const char **; holds the default on entry */
    const char *help;
    double min, max;    /* the accepted range, inclusive */
} cli_option;

typedef struct cli_spec_s {
    const char *program;
    const char *summary;     /* one line: what the program does */
    const cli_option *options;
    size_t count;
} cli_spec;

enum { CLI_OK = 0, CLI_HELP = 1, CLI_ERROR = 2 };

/* Parses argv[1..argc-1] into the options' values. Returns CLI_OK,
 * CLI_HELP (--help was given), or CLI_ERROR with a one-line explanation in
 * `error`. Values given before an error may already be stored. */
int cli_parse(const cli_spec *spec, int argc, char **argv, char *error,
              size_t error_len);

/* "usage: matvec [--m N] [--n N] ..." on one line. */
void cli_print_usage(const cli_spec *spec, FILE *out);

/* The usage line, then one line per flag with its help and default. */
void cli_print_help(const cli_spec *spec, FILE *out);

/* cli_parse, then: on --help print the help and exit 0; on an error print
 * "PROGRAM: ERROR" and the usage line to stderr and exit 2. With `quiet`
 * nothing is printed (for MPI ranks other than 0, which exit the same way).
 * Under MPI, use cli_parse and mpi_exit_all instead, so MPI ends cleanly. */
void cli_parse_or_exit(const cli_spec *spec, int argc, char **argv,
                       bool quiet);

/* For a program that takes no flags (lesson 00's hello_omp): returns when
 * the command line is empty; prints help and exits 0 on --help; anything
 * else is bad input, refused as cli_parse_or_exit refuses a bad flag (one
 * line, the usage line, exit 2). MPI programs: mpi_no_flags_or_exit in
 * check_mpi.h. */
void cli_no_flags_or_exit(const char *program, const char *summary, int argc,
                          char **argv);

/* Prints what cli_parse's result calls for (nothing for CLI_OK), to stdout
 * for help and stderr for an error, unless `quiet`. Returns the exit status
 * the program should end with: 0 after help, 2 after an error, -1 to go on. */
int cli_report(const cli_spec *spec, int result, const char *error,
               bool quiet);

#endif
