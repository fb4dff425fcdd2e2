/* The balanced block partition: sizes and owners, from block_range
 * (common/block_range.c, alone in its own file: see there why). */
#include "partition.h"

size_t block_size(size_t total, size_t parts, size_t index)
{
    size_t begin, end;
    block_range(total, parts, index, &begin, &end);
    return end - begin;
}

size_t block_owner(size_t total, size_t parts, size_t item)
{
    size_t base = total / parts, extra = total % parts;
    /* The first `extra` parts hold base+1 items each. */
    size_t in_big_parts = extra * (base + 1);
    if (item < in_big_parts)
        return item / (base + 1);
    return extra + (item - in_big_parts) / base;
}
