/* The device layer's cuda backend (device_cuda.h): a GPU through the CUDA
 * runtime. Host code in C; it links the runtime (cudart), never the
 * driver library, so it builds on machines without a GPU.
 *
 * Device memory is cudaMalloc's, and the memory ledger counts its bytes
 * (ledger_count_external) before it is asked for, so the capacity refuses
 * exactly as the cpu backend's does, with the same line. Host memory for
 * copies is pinned (cudaMallocHost): a copy from pageable memory is not
 * asynchronous at all. The ledger cannot read a GPU block's size from the
 * block, so each block's size and category are kept here, in a list.
 *
 * Copies go through one stream, in the order they start, as through one
 * copy engine. It is an ordinary (blocking) stream, so it waits for the
 * kernels launched before a copy on the default stream, and they for it:
 * a copy never reads what a kernel has not finished writing. Each
 * asynchronous copy records an event, which device_wait synchronizes
 * with. */
#define _POSIX_C_SOURCE 200809L
#include "device_cuda.h"

#include "check_cuda.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct cuda_block {
    void *address;
    size_t bytes;
    memory_category category;
    struct cuda_block *next;
} cuda_block;

static cuda_block *device_blocks, *host_blocks;
static cudaStream_t copy_stream;

/* A pointer that no allocation of this backend returned: a bug in the
 * caller, which would crash the CUDA runtime later in a less clear way. */
static void unknown_block_check_failed(const char *function,
                                       const void *block)
{
    fprintf(stderr, "%s: %p is not a block this device allocated\n",
            function, block);
    exit(1);
}

static cuda_block *find(cuda_block *list, const void *address,
                        const char *function)
{
    for (cuda_block *b = list; b != NULL; b = b->next)
        if (b->address == address)
            return b;
    unknown_block_check_failed(function, address);
    return NULL;
}

static void unlink_block(cuda_block **list, const cuda_block *block)
{
    while (*list != block)
        list = &(*list)->next;
    *list = block->next;
}

static int cuda_open(size_t capacity, int rank, char *error,
                     size_t error_len)
{
    (void)capacity;   /* the ledger's cap, which device.c sets */
    char why[192];
    int count = cuda_devices_available(why, sizeof why);
    if (count == 0) {
        snprintf(error, error_len, "cuda: %s", why);
        return -1;
    }
    /* Ranks on a node with several GPUs take one each, in turn. */
    cudaError_t status = cudaSetDevice(rank > 0 ? rank % count : 0);
    if (status == cudaSuccess)
        status = cudaStreamCreate(&copy_stream);
    if (status != cudaSuccess) {
        snprintf(error, error_len, "cuda: cannot set up the device: %s",
                 cudaGetErrorString(status));
        return -1;
    }
    return 0;
}

static int cuda_close(char *error, size_t error_len)
{
    cudaError_t status = cudaStreamDestroy(copy_stream);
    if (status != cudaSuccess) {
        snprintf(error, error_len, "cuda: cudaStreamDestroy: %s",
                 cudaGetErrorString(status));
        return -1;
    }
    return 0;
}

/* Counts, allocates with `allocate` (cudaMalloc or cudaMallocHost), and
 * records the block in `list`; NULL with the ledger's line when the cap,
 * the GPU or the host refuses. */
static void *allocate_block(cuda_block **list, memory_category category,
                            size_t bytes,
                            cudaError_t (*allocate)(void **, size_t),
                            const char *allocator)
{
    if (ledger_count_external(category, bytes) != 0)
        return NULL;
    cuda_block *block = malloc(sizeof *block);
    void *address = NULL;
    cudaError_t status = cudaSuccess;
    if (block != NULL)
        status = allocate(&address, bytes > 0 ? bytes : 1);
    if (block == NULL || status != cudaSuccess) {
        char why[160];
        snprintf(why, sizeof why, "%s: %s", block == NULL ? "malloc" :
                 allocator, block == NULL ? "no host memory for its record"
                                          : cudaGetErrorString(status));
        free(block);
        ledger_uncount_external(category, bytes);
        ledger_refuse_external(category, bytes, why);
        return NULL;
    }
    *block = (cuda_block){ address, bytes, category, *list };
    *list = block;
    return address;
}

static cudaError_t device_malloc(void **address, size_t bytes)
{
    return cudaMalloc(address, bytes);
}

static cudaError_t pinned_malloc(void **address, size_t bytes)
{
    return cudaMallocHost(address, bytes);
}

static void *cuda_alloc(memory_category category, size_t bytes)
{
    return allocate_block(&device_blocks, category, bytes, device_malloc,
                          "cudaMalloc");
}

static void *cuda_host_alloc(memory_category category, size_t bytes)
{
    return allocate_block(&host_blocks, category, bytes, pinned_malloc,
                          "cudaMallocHost");
}

static size_t cuda_block_bytes(const void *block)
{
    return find(device_blocks, block, "device_free")->bytes;
}

static size_t cuda_host_block_bytes(const void *block)
{
    return find(host_blocks, block, "device_host_free")->bytes;
}

static void cuda_free(void *address)
{
    cuda_block *block = find(device_blocks, address, "device_free");
    CUDA_CHECK(cudaFree(address));
    ledger_uncount_external(block->category, block->bytes);
    unlink_block(&device_blocks, block);
    free(block);
}

static void cuda_host_free(void *address)
{
    cuda_block *block = find(host_blocks, address, "device_host_free");
    CUDA_CHECK(cudaFreeHost(address));
    ledger_uncount_external(block->category, block->bytes);
    unlink_block(&host_blocks, block);
    free(block);
}

static int failed(const char *call, cudaError_t status, char *error,
                  size_t error_len)
{
    snprintf(error, error_len, "cuda: %s: %s", call,
             cudaGetErrorString(status));
    return -1;
}

static int cuda_copy(void *dst, const void *src, size_t bytes, int to_device,
                     char *error, size_t error_len)
{
    cudaError_t status = cudaMemcpyAsync(dst, src, bytes, to_device ?
                                         cudaMemcpyHostToDevice :
                                         cudaMemcpyDeviceToHost, copy_stream);
    if (status != cudaSuccess)
        return failed("cudaMemcpyAsync", status, error, error_len);
    status = cudaStreamSynchronize(copy_stream);
    if (status != cudaSuccess)
        return failed("cudaStreamSynchronize", status, error, error_len);
    return 0;
}

static int cuda_copy_async(device_copy *copy, char *error, size_t error_len)
{
    cudaEvent_t event;
    cudaError_t status = cudaEventCreateWithFlags(&event,
                                                  cudaEventDisableTiming);
    if (status != cudaSuccess)
        return failed("cudaEventCreateWithFlags", status, error, error_len);
    status = cudaMemcpyAsync(copy->dst, copy->src, copy->bytes,
                             copy->to_device ? cudaMemcpyHostToDevice
                                             : cudaMemcpyDeviceToHost,
                             copy_stream);
    if (status == cudaSuccess)
        status = cudaEventRecord(event, copy_stream);
    if (status != cudaSuccess) {
        cudaEventDestroy(event);
        return failed("cudaMemcpyAsync", status, error, error_len);
    }
    copy->event = event;
    return 0;
}

static int cuda_wait(device_copy *copy, char *error, size_t error_len)
{
    cudaEvent_t event = copy->event;
    cudaError_t status = cudaEventSynchronize(event);
    cudaEventDestroy(event);
    copy->event = NULL;
    if (status != cudaSuccess)
        return failed("cudaEventSynchronize", status, error, error_len);
    return 0;
}

static const device_cuda_backend backend = {
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .block_bytes = cuda_block_bytes,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_block_bytes = cuda_host_block_bytes,
    .copy = cuda_copy,
    .copy_async = cuda_copy_async,
    .wait = cuda_wait,
};

/* Replaces device.c's weak stand-in. */
const device_cuda_backend *device_cuda_linked(void)
{
    return &backend;
}
