/* sim_cuda.h: the part of the CUDA runtime and driver API that gpu/cuda.c calls, with the same
 * names, served by the simulated runtime of gpu/sim.c (zc_simrt_*). Included only where cuda.c
 * is compiled as the simulated provider (gpu/sim_provider.c) and by sim.c itself, never next to
 * the real CUDA headers. The values are the simulation's own: nothing here reaches a real CUDA
 * runtime. Types are what cuda.c needs of them, nothing more. */
#ifndef ZC_GPU_SIM_CUDA_H
#define ZC_GPU_SIM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

/* ---- types ---- */
typedef int cudaError_t;
typedef int CUresult;
typedef struct zc_gpu_sim_stream *cudaStream_t;
typedef struct zc_gpu_sim_stream *CUstream;
typedef struct zc_sim_event *cudaEvent_t;
typedef struct zc_sim_ctx *CUcontext;
typedef int CUdevice;
typedef uintptr_t CUdeviceptr;
typedef uint32_t cuuint32_t;
typedef int CUmemRangeHandleType;
typedef int CUstreamCaptureMode;
typedef int cudaStreamCaptureMode;
typedef int CUdevice_attribute;
typedef struct cudaIpcMemHandle_st { uint8_t reserved[64]; } cudaIpcMemHandle_t;
struct cudaPointerAttributes {
    int type;   /* cudaMemoryType* */
    int device;
    void *devicePointer, *hostPointer;
};
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
};

/* ---- results ---- */
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorECCUncorrectable = 214,
    cudaErrorPeerAccessUnsupported = 217,
    cudaErrorNvlinkUncorrectable = 220,
    cudaErrorContained = 226,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchTimeout = 702,
    cudaErrorAssert = 710,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered = 713,
    cudaErrorHardwareStackError = 714,
    cudaErrorIllegalInstruction = 715,
    cudaErrorMisalignedAddress = 716,
    cudaErrorInvalidAddressSpace = 717,
    cudaErrorInvalidPc = 718,
    cudaErrorLaunchFailure = 719,
    cudaErrorTensorMemoryLeak = 721,
    cudaErrorMpsClientTerminated = 810,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorExternalDevice = 911,
    cudaErrorUnknown = 999
};
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900
};

/* ---- constants ---- */
enum cudaDriverEntryPointQueryResult {
    cudaDriverEntryPointSuccess = 0,
    cudaDriverEntryPointSymbolNotFound = 1
};
enum { cudaEnableDefault = 0 };
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
enum { cudaHostAllocPortable = 1, cudaHostAllocMapped = 2, cudaHostRegisterPortable = 1 };
enum { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2,
       cudaMemoryTypeManaged = 3 };
enum { cudaIpcMemLazyEnablePeerAccess = 1 };
enum { cudaMemcpyDefault = 4 };
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2
};
enum { CU_STREAM_CAPTURE_MODE_GLOBAL = 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
       CU_STREAM_CAPTURE_MODE_RELAXED = 2 };
enum { CU_STREAM_WRITE_VALUE_DEFAULT = 0, CU_STREAM_WAIT_VALUE_GEQ = 0 };
enum { CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1, CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE = 1 };
enum cudaDeviceAttr {
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrGPUDirectRDMASupported = 116,
    cudaDevAttrGPUDirectRDMAFlushWritesOptions = 117,
    cudaDevAttrGPUDirectRDMAWritesOrdering = 118,
    CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124
};
enum { cudaGPUDirectRDMAWritesOrderingNone = 0, cudaGPUDirectRDMAWritesOrderingOwner = 100,
       cudaGPUDirectRDMAWritesOrderingAllDevices = 200 };
enum { cudaFlushGPUDirectRDMAWritesOptionHost = 1, cudaFlushGPUDirectRDMAWritesOptionMemOps = 2 };
enum { cudaFlushGPUDirectRDMAWritesTargetCurrentDevice = 0 };
enum { cudaFlushGPUDirectRDMAWritesToOwner = 100 };

/* The host's page (dma-buf exports cover whole pages). */
#define ZC_HOST_PAGE ((uintptr_t)4096u)

/* ---- the runtime ---- */
#define cudaGetLastError zc_simrt_get_last_error
#define cudaPeekAtLastError zc_simrt_peek_at_last_error
#define cudaGetErrorName zc_simrt_error_name
#define cudaGetErrorString zc_simrt_error_string
#define cudaGetDriverEntryPointByVersion zc_simrt_entry_point
#define cudaDriverGetVersion zc_simrt_driver_version
#define cudaRuntimeGetVersion zc_simrt_runtime_version
#define cudaGetDeviceCount zc_simrt_device_count
#define cudaGetDevice zc_simrt_get_device
#define cudaDeviceGetAttribute zc_simrt_device_attribute
#define cudaGetDeviceProperties zc_simrt_device_properties
#define cudaDeviceGetPCIBusId zc_simrt_bus_id
#define cudaDeviceGetByPCIBusId zc_simrt_by_bus_id
#define cudaDeviceCanAccessPeer zc_simrt_can_access_peer
#define cudaStreamCreateWithFlags zc_simrt_stream_create
#define cudaStreamDestroy zc_simrt_stream_destroy
#define cudaStreamSynchronize zc_simrt_stream_synchronize
#define cudaStreamIsCapturing zc_simrt_stream_is_capturing
#define cudaEventCreateWithFlags zc_simrt_event_create
#define cudaEventDestroy zc_simrt_event_destroy
#define cudaEventRecord zc_simrt_event_record
#define cudaEventQuery zc_simrt_event_query
#define cudaHostAlloc zc_simrt_host_alloc
#define cudaFreeHost zc_simrt_free_host
#define cudaHostGetDevicePointer zc_simrt_host_device_pointer
#define cudaHostRegister zc_simrt_host_register
#define cudaHostUnregister zc_simrt_host_unregister
#define cudaMalloc zc_simrt_malloc
#define cudaFree zc_simrt_free
#define cudaPointerGetAttributes zc_simrt_pointer_attributes
#define cudaIpcGetMemHandle zc_simrt_ipc_get
#define cudaIpcOpenMemHandle zc_simrt_ipc_open
#define cudaIpcCloseMemHandle zc_simrt_ipc_close
#define cudaDeviceFlushGPUDirectRDMAWrites zc_simrt_flush_rdma
#define cudaMemcpyAsync zc_simrt_memcpy_async
#define zc__cuda_reduce zc_simrt_launch_reduce
#define zc__cuda_step zc_simrt_launch_step
#define zc__cuda_preload zc_simrt_preload

cudaError_t zc_simrt_get_last_error(void);
cudaError_t zc_simrt_peek_at_last_error(void);
const char *zc_simrt_error_name(cudaError_t e);
const char *zc_simrt_error_string(cudaError_t e);
cudaError_t zc_simrt_entry_point(const char *sym, void **fn, int version, unsigned long long flags,
                                 enum cudaDriverEntryPointQueryResult *q);
cudaError_t zc_simrt_driver_version(int *v);
cudaError_t zc_simrt_runtime_version(int *v);
cudaError_t zc_simrt_device_count(int *n);
cudaError_t zc_simrt_get_device(int *d);
cudaError_t zc_simrt_device_attribute(int *v, enum cudaDeviceAttr a, int d);
cudaError_t zc_simrt_device_properties(struct cudaDeviceProp *p, int d);
cudaError_t zc_simrt_bus_id(char *bus, int len, int d);
cudaError_t zc_simrt_by_bus_id(int *d, const char *bus);
cudaError_t zc_simrt_can_access_peer(int *can, int d, int peer);
cudaError_t zc_simrt_stream_create(cudaStream_t *s, unsigned int flags);
cudaError_t zc_simrt_stream_destroy(cudaStream_t s);
cudaError_t zc_simrt_stream_synchronize(cudaStream_t s);
cudaError_t zc_simrt_stream_is_capturing(cudaStream_t s, enum cudaStreamCaptureStatus *cs);
cudaError_t zc_simrt_event_create(cudaEvent_t *e, unsigned int flags);
cudaError_t zc_simrt_event_destroy(cudaEvent_t e);
cudaError_t zc_simrt_event_record(cudaEvent_t e, cudaStream_t s);
cudaError_t zc_simrt_event_query(cudaEvent_t e);
cudaError_t zc_simrt_host_alloc(void **p, size_t bytes, unsigned int flags);
cudaError_t zc_simrt_free_host(void *p);
cudaError_t zc_simrt_host_device_pointer(void **dev, void *host, unsigned int flags);
cudaError_t zc_simrt_host_register(void *p, size_t bytes, unsigned int flags);
cudaError_t zc_simrt_host_unregister(void *p);
cudaError_t zc_simrt_malloc(void **p, size_t bytes);
cudaError_t zc_simrt_free(void *p);
cudaError_t zc_simrt_pointer_attributes(struct cudaPointerAttributes *a, const void *p);
cudaError_t zc_simrt_ipc_get(cudaIpcMemHandle_t *h, void *p);
cudaError_t zc_simrt_ipc_open(void **p, cudaIpcMemHandle_t h, unsigned int flags);
cudaError_t zc_simrt_ipc_close(void *p);
cudaError_t zc_simrt_flush_rdma(int target, int scope);
cudaError_t zc_simrt_memcpy_async(void *dst, const void *src, size_t bytes, int kind,
                                  cudaStream_t s);
int zc_simrt_launch_reduce(void *stream, void *dst, const void *const *srcs, uint32_t nsrc,
                           size_t count, zc_dtype dtype, zc_op op, int sms);
int zc_simrt_launch_step(void *stream, const void *desc, zc_dtype dtype, zc_op op, int sms);
int zc_simrt_preload(void);

#endif
