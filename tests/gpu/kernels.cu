/* kernels.cu: the suite's own device work: a kernel that changes a buffer on the caller's
 * stream, so a graph replay's input differs from the last one's. */
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void zg_add_kernel(int32_t *p, size_t n, int32_t v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] += v;
}

extern "C" int zg_cuda_add_i32(void *p, size_t n, int32_t v, cudaStream_t s) {
    zg_add_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(static_cast<int32_t *>(p), n, v);
    return (int)cudaGetLastError();
}
