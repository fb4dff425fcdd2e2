/* The cuda backend of the device layer (device.h), for device.c alone.
 *
 * device_cuda.c defines device_cuda_linked() where a program links that
 * object (a lesson.mk asks with NN_DEVICE_CUDA := yes). device.c has a
 * weak stand-in that returns NULL, so libcommon.a never needs the CUDA
 * runtime and device_open("cuda") elsewhere says the toolkit was built
 * without it. device.c holds its lock around copy, copy_async and wait:
 * they run one at a time, as the other calls do not need to. */
#ifndef ZZ_DEVICE_CUDA_H
#define ZZ_DEVICE_CUDA_H

#include "device.h"

typedef struct {
    /* 0, or -1 with a line ("cuda: no CUDA device: ..."). */
    int (*open)(size_t capacity, int rank, char *error, size_t error_len);
    int (*close)(char *error, size_t error_len);
    /* GPU memory, counted in the memory ledger (ledger_count_external):
     * NULL with the reason in memory_ledger_last_error(). */
    void *(*alloc)(memory_category category, size_t bytes);
    void (*free)(void *block);
    size_t (*block_bytes)(const void *block);
    /* Pinned host memory, counted under a MEMORY_HOST_* category. */
    void *(*host_alloc)(memory_category category, size_t bytes);
    void (*host_free)(void *block);
    size_t (*host_block_bytes)(const void *block);
    int (*copy)(void *dst, const void *src, size_t bytes, int to_device,
                char *error, size_t error_len);
    /* Starts copy (its fields set) on the copy stream, and records an
     * event in copy->event that wait synchronizes with. */
    int (*copy_async)(device_copy *copy, char *error, size_t error_len);
    int (*wait)(device_copy *copy, char *error, size_t error_len);
} device_cuda_backend;

const device_cuda_backend *device_cuda_linked(void);

#endif
