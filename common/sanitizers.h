/* Whether this file is compiled for AddressSanitizer or ThreadSanitizer,
 * whose allocators replace malloc (GCC says so with __SANITIZE_*__, clang
 * with __has_feature): code that counts or replaces the allocator steps
 * aside under them. Defines ZZ_SANITIZER_ALLOCATOR to 1 when so. */
#ifndef ZZ_SANITIZERS_H
#define ZZ_SANITIZERS_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ZZ_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ZZ_SANITIZER_ALLOCATOR 1
#endif
#endif

#endif
