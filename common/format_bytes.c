/* Byte counts the way people read them. */
#include "format_bytes.h"

#include <stdio.h>

void format_bytes(double bytes, char *buf, size_t len)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB",
                                         "PiB", "EiB" };
    int unit = 0;
    while (bytes >= 1024.0 && unit < 6) {
        bytes /= 1024.0;
        unit++;
    }
    if (unit == 0)
        snprintf(buf, len, "%.0f B", bytes);
    else
        snprintf(buf, len, "%.1f %s", bytes, units[unit]);
}
