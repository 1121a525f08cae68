/*
 * The codec module's one allocator, included before every source file (scripts/build-opus.mjs
 * passes it with -include): libopus's wrappers for malloc, realloc and free (celt/os_support.h
 * lets a build replace them) become the shim's counting ones (wasm/opus/shim.c), and the shim
 * allocates through them too. tutti_opus_allocations() then tells how many calls the module has
 * made to the heap, so a test can show that encoding and decoding frames make none.
 */
#ifndef TUTTI_OPUS_ALLOC_H
#define TUTTI_OPUS_ALLOC_H

#include <stddef.h>

#define OVERRIDE_OPUS_ALLOC
#define OVERRIDE_OPUS_REALLOC
#define OVERRIDE_OPUS_FREE

void *opus_alloc(size_t size);
void *opus_realloc(void *ptr, size_t size);
void opus_free(void *ptr);

#endif
