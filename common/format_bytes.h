/* Byte counts the way people read them, in binary units: "512.0 MiB".
 * Messages about memory use it (the matrices' "cannot allocate 7.3 TiB",
 * the memory ledger's refusals), and so do drivers that print sizes. */
#ifndef ZZ_FORMAT_BYTES_H
#define ZZ_FORMAT_BYTES_H

#include <stddef.h>

/* Writes `bytes` into buf (at most len bytes, NUL included): below 1 KiB
 * as a whole count ("100 B"), else with one decimal in the largest unit
 * that keeps the number at 1 or more, up to EiB ("1.5 KiB"). */
void format_bytes(double bytes, char *buf, size_t len);

#endif
