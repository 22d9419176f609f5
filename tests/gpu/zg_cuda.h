/* zg_cuda.h: what the suite's files need of CUDA (CUDA builds only): the runtime header and
 * ZG_CUDA, a CUDA call checked (the error's name on failure). Without CUDA it is empty. */
#ifndef ZG_CUDA_H
#define ZG_CUDA_H

#ifdef ZC_HAVE_CUDA
#include <cuda_runtime.h>

#include "zg.h"

#define ZG_CUDA(call)                                                                         \
    do {                                                                                      \
        cudaError_t zg_e_ = (call);                                                           \
        if (zg_e_ != cudaSuccess) zt_fail(__FILE__, __LINE__, #call, cudaGetErrorName(zg_e_)); \
    } while (0)
#endif

#endif
