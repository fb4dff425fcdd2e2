/* Lesson 00's first measuring tool: STREAM's triad, the memory bandwidth a
 * plain loop reaches on one core of this machine. Lesson 01's matvec is held
 * to this figure. You do not need to change this file. */
#include <stdio.h>

#include "cli.h"
#include "format_bytes.h"
#include "stream.h"

int main(int argc, char **argv)
{
    size_t n = TRIAD_DEFAULT_N;
    int reps = 10;
    const cli_option options[] = {
        { "n", CLI_SIZE, &n, "elements per array (three arrays of doubles)",
          1, 1u << 30 },
        { "reps", CLI_INT, &reps, "timed repetitions", 1, TRIAD_MAX_REPS },
    };
    const cli_spec spec = { "stream", "lesson 00: STREAM triad bandwidth, "
                            "a[i] = b[i] + s*c[i], on one core", options,
                            sizeof options / sizeof options[0] };
    cli_parse_or_exit(&spec, argc, argv, false);

    char human[32];
    format_bytes(3.0 * 8.0 * (double)n, human, sizeof human);
    double gbs;
    char error[256];
    if (stream_triad_gbs(n, reps, &gbs, error, sizeof error) != 0) {
        fprintf(stderr, "error: %s\n", error);
        return 2;
    }
    printf("stream: triad on 3 arrays of %zu doubles (%s), median of %d: "
           "%.2f GB/s\n", n, human, reps, gbs);
    printf("summary: triad_gbs=%.2f\n", gbs);
    return 0;
}
