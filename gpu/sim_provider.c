/* sim_provider.c: the simulated provider zc_gpu_sim (provider/gpu.h): gpu/cuda.c, the CUDA
 * provider, compiled against the simulated runtime of gpu/sim.c (gpu/sim_cuda.h maps the CUDA
 * names). Every build has it; a communicator uses it when cfg->gpu_provider is
 * ZC_GPU_PROVIDER_SIM (ZC_GPU_PROVIDER=sim). */
#define ZC_CUDA_SIM 1
#include "cuda.c"
