/* Internal: the CUDA toolkit whose headers a compile includes, covered by
 * its identity rather than by reading them (toolkit.c; docs/KEY.md,
 * "Toolkit headers"). */
#ifndef PROGCACHE_KEY_TOOLKIT_H
#define PROGCACHE_KEY_TOOLKIT_H

#include <stddef.h>

/* The include directory of the toolkit the loaded NVRTC belongs to (the
 * real path of <NVRTC library>/../include, when it holds cuda.h or
 * nvrtc.h), found once per process; NULL when there is none. */
const char *progcache__toolkit_include(void);

/* Whether real_path (a real path, as realpath() gives) lies inside the
 * toolkit's include directory. */
int progcache__toolkit_contains(const char *real_path);

/* The names directly inside the toolkit's include directory and its cccl/
 * subdirectory (cuda_fp16.h, cuda, cub, thrust, ...): what an include
 * directory searched before the toolkit's must not hold, or it could take
 * the place of a header a toolkit header includes. *n gets the count;
 * NULL when there is no toolkit. Read once per process. */
const char *const *progcache__toolkit_top_names(size_t *n);

/* The toolkit's identity: SHA-256 over the NVRTC version, the include
 * directory's path, the NVRTC library's real path, and the size and
 * modification time of the library and of a few files that every
 * toolkit update touches (cuda.h, cuda_runtime_api.h, cuda_fp16.hpp,
 * cuda_bf16.hpp, crt/host_defines.h, CCCL's version.h). A stat per file:
 * read on every call, so an update in place is seen at once.
 * PROGCACHE_OK, PROGCACHE_ENOTFOUND (no toolkit: no message) or an error
 * (NVRTC's version, out of memory). */
int progcache__toolkit_identity(unsigned char out[32]);

#endif
