// The subset of the Neuron Runtime C API (libnrt, Neuron SDK headers nrt/nrt.h, nrt/nrt_status.h and
// nrt/nrt_experimental.h) that sluice calls, declared here so that building needs nothing from the SDK: the
// library is dlopen()ed at run time (nrt_library.h). Signatures and enum values follow the public headers in
// github.com/aws-neuron/aws-neuron-sdk, src/libnrt/include/nrt/; only what sluice uses is declared.
// Thread-safety: declarations only.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// NRT_STATUS values (nrt_status.h). Only the ones sluice names in messages are listed; any other value is
// reported by number.
typedef int NRT_STATUS;
enum : int {
  NRT_SUCCESS = 0,
  NRT_FAILURE = 1,
  NRT_INVALID = 2,
  NRT_INVALID_HANDLE = 3,
  NRT_RESOURCE = 4,
  NRT_TIMEOUT = 5,
  NRT_HW_ERROR = 6,
  NRT_QUEUE_FULL = 7,
  NRT_LOAD_NOT_ENOUGH_NC = 9,
  NRT_UNSUPPORTED_NEFF_VERSION = 10,
  NRT_UNINITIALIZED = 13,
  NRT_CLOSED = 14,
  NRT_EXEC_BAD_INPUT = 1002,
  NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003,
  NRT_EXEC_COMPLETED_WITH_ERR = 1004,
  NRT_EXEC_NC_BUSY = 1005,
};

typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
typedef void nrt_tensor_set_t;

typedef enum {
  NRT_TENSOR_PLACEMENT_DEVICE = 0,
  NRT_TENSOR_PLACEMENT_HOST = 1,
  NRT_TENSOR_PLACEMENT_VIRTUAL = 2,
} nrt_tensor_placement_t;

typedef enum {
  NRT_FRAMEWORK_TYPE_INVALID = 0,
  NRT_FRAMEWORK_TYPE_NO_FW = 1,
} nrt_framework_type_t;

typedef enum nrt_dtype {
  NRT_DTYPE_UNKNOWN = 0x0,
  NRT_DTYPE_UINT64 = 0x1,
  NRT_DTYPE_INT8 = 0x2,
  NRT_DTYPE_UINT8 = 0x3,
  NRT_DTYPE_INT16 = 0x4,
  NRT_DTYPE_UINT16 = 0x5,
  NRT_DTYPE_BFLOAT16 = 0x6,
  NRT_DTYPE_FLOAT16 = 0x7,
  NRT_DTYPE_INT32 = 0x8,
  NRT_DTYPE_UINT32 = 0x9,
  NRT_DTYPE_FLOAT32 = 0xA,
  NRT_DTYPE_FP32R = 0xB,
  NRT_DTYPE_INT64 = 0xC,
} nrt_dtype_t;

typedef enum nrt_tensor_usage {
  NRT_TENSOR_USAGE_INPUT = 0,
  NRT_TENSOR_USAGE_OUTPUT = 1,
} nrt_tensor_usage_t;

#define NRT_TENSOR_NAME_MAX 256

typedef struct nrt_tensor_info {
  char name[NRT_TENSOR_NAME_MAX];
  nrt_tensor_usage_t usage;
  size_t size;  // bytes
  nrt_dtype_t dtype;
  uint32_t* shape;
  uint32_t ndim;
} nrt_tensor_info_t;

typedef struct nrt_tensor_info_array {
  uint64_t tensor_count;
  nrt_tensor_info_t tensor_array[];
} nrt_tensor_info_array_t;

// Function types of the entry points sluice resolves with dlsym.
typedef NRT_STATUS (*nrt_init_fn)(nrt_framework_type_t framework, const char* fw_version, const char* fal_version);
typedef void (*nrt_close_fn)();
// vnc: the (virtual) NeuronCore to load onto, relative to the visible cores; vnc_count: deprecated, -1.
typedef NRT_STATUS (*nrt_load_fn)(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                                  nrt_model_t** model);
typedef NRT_STATUS (*nrt_unload_fn)(nrt_model_t* model);
typedef NRT_STATUS (*nrt_get_model_tensor_info_fn)(nrt_model_t* model, nrt_tensor_info_array_t** tensor_info);
typedef NRT_STATUS (*nrt_free_model_tensor_info_fn)(nrt_tensor_info_array_t* tensor_info);
typedef NRT_STATUS (*nrt_tensor_allocate_fn)(nrt_tensor_placement_t placement, int vnc, size_t size,
                                             const char* name, nrt_tensor_t** tensor);
typedef void (*nrt_tensor_free_fn)(nrt_tensor_t** tensor);
typedef NRT_STATUS (*nrt_tensor_write_fn)(nrt_tensor_t* tensor, const void* buf, size_t offset, size_t size);
typedef NRT_STATUS (*nrt_tensor_read_fn)(const nrt_tensor_t* tensor, void* buf, size_t offset, size_t size);
typedef NRT_STATUS (*nrt_allocate_tensor_set_fn)(nrt_tensor_set_t** result);
typedef void (*nrt_destroy_tensor_set_fn)(nrt_tensor_set_t** tensor_set);
typedef NRT_STATUS (*nrt_add_tensor_to_tensor_set_fn)(nrt_tensor_set_t* tensor_set, const char* tensor_name,
                                                      nrt_tensor_t* tensor);
typedef NRT_STATUS (*nrt_execute_fn)(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                                     nrt_tensor_set_t* output_set);

}  // extern "C"
