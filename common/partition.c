/* The balanced block partition. */
#include "partition.h"

void block_range(size_t total, size_t parts, size_t index, size_t *begin,
                 size_t *end)
{
    size_t base = total / parts, extra = total % parts;
    /* Parts before `index` that got an extra item: min(index, extra). */
    size_t earlier_extras = index < extra ? index : extra;
    *begin = index * base + earlier_extras;
    *end = *begin + base + (index < extra ? 1 : 0);
}

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
