/* block_range, the balanced block partition (common/partition.h), alone in
 * its file on purpose.
 *
 * Lesson 02's students write this same function (TODO 1 in rows.c), and
 * their programs link their object before libcommon.a. A linker pulls an
 * archive member only to resolve a symbol still undefined, so this member
 * is never pulled into those programs: theirs is already defined. Were it
 * in one file with block_size and block_owner, a program that calls either
 * would pull this definition in too, beside the student's: a duplicate
 * symbol. Keep it alone. */
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
