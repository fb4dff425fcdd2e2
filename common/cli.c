/* Command-line flags, parsed and validated from a table. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const cli_option *find_option(const cli_spec *spec, const char *name,
                                     size_t name_len)
{
    for (size_t k = 0; k < spec->count; k++) {
        const cli_option *option = &spec->options[k];
        if (strlen(option->name) == name_len &&
            strncmp(option->name, name, name_len) == 0)
            return option;
    }
    return NULL;
}

/* A whole number in decimal, digits only: strtoull alone would accept
 * leading spaces, a sign ("-5" wraps to a huge number) and trailing junk. */
static bool parse_whole(const char *text, uint64_t *value)
{
    char *end;
    if (!isdigit((unsigned char)text[0]))
        return false;
    errno = 0;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (errno == ERANGE || *end != '\0' || parsed > UINT64_MAX)
        return false;
    *value = (uint64_t)parsed;
    return true;
}

static int store_value(const cli_option *option, const char *text,
                       char *error, size_t error_len)
{
    uint64_t whole;
    switch (option->type) {
    case CLI_SIZE:
    case CLI_INT: {
        bool negative = option->type == CLI_INT && text[0] == '-';
        if (!parse_whole(negative ? text + 1 : text, &whole)) {
            snprintf(error, error_len, "--%s needs a whole number, got '%s'",
                     option->name, text);
            return CLI_ERROR;
        }
        /* Ranges are small enough that a double holds them exactly. */
        double as_double = negative ? -(double)whole : (double)whole;
        if (as_double < option->min || as_double > option->max) {
            snprintf(error, error_len, "--%s must be from %.0f to %.0f, got "
                     "'%s'", option->name, option->min, option->max, text);
            return CLI_ERROR;
        }
        if (option->type == CLI_SIZE)
            *(size_t *)option->value = (size_t)whole;
        else
            *(int *)option->value = negative ? -(int)whole : (int)whole;
        return CLI_OK;
    }
    case CLI_SEED:
        if (!parse_whole(text, &whole)) {
            snprintf(error, error_len, "--%s needs a whole number from 0 to "
                     "%" PRIu64 ", got '%s'", option->name, UINT64_MAX, text);
            return CLI_ERROR;
        }
        *(uint64_t *)option->value = whole;
        return CLI_OK;
    case CLI_DOUBLE: {
        char *end;
        errno = 0;
        double parsed = strtod(text, &end);
        if (text[0] == '\0' || isspace((unsigned char)text[0]) ||
            *end != '\0' || errno == ERANGE || !isfinite(parsed)) {
            snprintf(error, error_len, "--%s needs a number, got '%s'",
                     option->name, text);
            return CLI_ERROR;
        }
        if (parsed < option->min || parsed > option->max) {
            snprintf(error, error_len, "--%s must be from %g to %g, got '%s'",
                     option->name, option->min, option->max, text);
            return CLI_ERROR;
        }
        *(double *)option->value = parsed;
        return CLI_OK;
    }
    case CLI_STRING:
        if (text[0] == '\0') {
            snprintf(error, error_len, "--%s needs a value, got ''",
                     option->name);
            return CLI_ERROR;
        }
        *(const char **)option->value = text;
        return CLI_OK;
    case CLI_FLAG:
        break;
    }
    snprintf(error, error_len, "--%s takes no value", option->name);
    return CLI_ERROR;
}

int cli_parse(const cli_spec *spec, int argc, char **argv, char *error,
              size_t error_len)
{
    for (int k = 1; k < argc; k++) {
        const char *arg = argv[k];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return CLI_HELP;
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            snprintf(error, error_len, "unexpected argument '%s'", arg);
            return CLI_ERROR;
        }
        const char *name = arg + 2;
        const char *equals = strchr(name, '=');
        size_t name_len = equals ? (size_t)(equals - name) : strlen(name);
        const cli_option *option = find_option(spec, name, name_len);
        if (option == NULL) {
            snprintf(error, error_len, "unknown flag '--%.*s'", (int)name_len,
                     name);
            return CLI_ERROR;
        }
        if (option->type == CLI_FLAG) {
            if (equals != NULL) {
                snprintf(error, error_len, "--%s takes no value",
                         option->name);
                return CLI_ERROR;
            }
            *(bool *)option->value = true;
            continue;
        }
        const char *text = equals ? equals + 1 : NULL;
        if (text == NULL) {
            if (k + 1 >= argc) {
                snprintf(error, error_len, "--%s needs a value",
                         option->name);
                return CLI_ERROR;
            }
            text = argv[++k];
        }
        int result = store_value(option, text, error, error_len);
        if (result != CLI_OK)
            return result;
    }
    return CLI_OK;
}

static const char *placeholder(cli_type type)
{
    switch (type) {
    case CLI_SIZE:
    case CLI_INT:
    case CLI_SEED:
        return " N";
    case CLI_DOUBLE:
        return " X";
    case CLI_STRING:
        return " TEXT";
    case CLI_FLAG:
        break;
    }
    return "";
}

void cli_print_usage(const cli_spec *spec, FILE *out)
{
    fprintf(out, "usage: %s", spec->program);
    for (size_t k = 0; k < spec->count; k++)
        fprintf(out, " [--%s%s]", spec->options[k].name,
                placeholder(spec->options[k].type));
    fprintf(out, " [--help]\n");
}

static void print_default(const cli_option *option, FILE *out)
{
    switch (option->type) {
    case CLI_SIZE:
        fprintf(out, " (default %zu)", *(const size_t *)option->value);
        break;
    case CLI_INT:
        fprintf(out, " (default %d)", *(const int *)option->value);
        break;
    case CLI_SEED:
        fprintf(out, " (default %" PRIu64 ")",
                *(const uint64_t *)option->value);
        break;
    case CLI_DOUBLE:
        fprintf(out, " (default %g)", *(const double *)option->value);
        break;
    case CLI_STRING:
        if (*(const char *const *)option->value != NULL)
            fprintf(out, " (default %s)",
                    *(const char *const *)option->value);
        break;
    case CLI_FLAG:
        break;
    }
}

void cli_print_help(const cli_spec *spec, FILE *out)
{
    fprintf(out, "%s: %s\n", spec->program, spec->summary);
    cli_print_usage(spec, out);
    for (size_t k = 0; k < spec->count; k++) {
        const cli_option *option = &spec->options[k];
        fprintf(out, "  --%s%s  %s", option->name, placeholder(option->type),
                option->help);
        print_default(option, out);
        fprintf(out, "\n");
    }
}

int cli_report(const cli_spec *spec, int result, const char *error,
               bool quiet)
{
    if (result == CLI_OK)
        return -1;
    if (result == CLI_HELP) {
        if (!quiet)
            cli_print_help(spec, stdout);
        return 0;
    }
    if (!quiet) {
        fprintf(stderr, "%s: %s\n", spec->program, error);
        cli_print_usage(spec, stderr);
    }
    return 2;
}

void cli_parse_or_exit(const cli_spec *spec, int argc, char **argv,
                       bool quiet)
{
    char error[256];
    int result = cli_parse(spec, argc, argv, error, sizeof error);
    int status = cli_report(spec, result, error, quiet);
    if (status >= 0)
        exit(status);
}

void cli_no_flags_or_exit(const char *program, const char *summary, int argc,
                          char **argv)
{
    const cli_spec spec = { program, summary, NULL, 0 };
    cli_parse_or_exit(&spec, argc, argv, false);
}
