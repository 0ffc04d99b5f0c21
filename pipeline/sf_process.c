/* sf_process.c: the process-wide library set-up (sf_process.h). */
#include "sf_process.h"

sf_status sf_process_init(void)
{
    /* libcurl is loaded and initialised by its first user (sf_libcurl.h),
     * libdeflate's allocator set by its one user, sf_compress.c: a config
     * that uses neither pays for neither. */
    return SF_OK;
}
