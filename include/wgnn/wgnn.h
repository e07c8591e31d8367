#ifndef WGNN_WGNN_H
#define WGNN_WGNN_H
/* The C API of wgnn: ONNX models on the GPU through WebGPU.
 *
 * A whole program is in docs/INSTALL.md (compiled by the test suite).
 *
 * Errors: every call that can fail returns a wgnn_status; WGNN_OK (0) is
 * success, anything else leaves the outputs untouched and sets a message for
 * the calling thread (wgnn_last_error()). No C++ exception leaves the
 * library; a NULL or otherwise invalid argument is WGNN_ERROR_INVALID_ARGUMENT.
 *
 * Ownership: what a *_create call returns is the caller's, freed by its
 * *_destroy (NULL is accepted and ignored). Strings and arrays a getter
 * returns belong to the object they came from and live as long as it.
 *
 * Threads: a session is used by one thread at a time; sessions on one
 * context may run from different threads (their runs take turns). The
 * context must outlive its sessions.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wgnn_status {
  WGNN_OK = 0,
  WGNN_ERROR_INVALID_ARGUMENT = 1, /* NULL, an index out of range, a wrong dtype, shape or size */
  WGNN_ERROR_MODEL = 2,            /* the model (or a run's input) is not valid: the message says why */
  WGNN_ERROR_UNSUPPORTED = 3,      /* valid, but wgnn cannot run it (an op, a dtype, an attribute) */
  WGNN_ERROR_GPU = 4,              /* the WebGPU implementation reported an error */
  WGNN_ERROR_DEVICE_LOST = 5,      /* the device is gone: make a new context */
  WGNN_ERROR_OUT_OF_MEMORY = 6,    /* host memory ran out */
  WGNN_ERROR_INTERNAL = 7          /* anything else (a bug in wgnn) */
} wgnn_status;

/* Element types, as in ONNX's TensorProto (data in host layout, row-major). */
typedef enum wgnn_dtype {
  WGNN_DTYPE_FLOAT32 = 1,
  WGNN_DTYPE_UINT8 = 2,
  WGNN_DTYPE_INT8 = 3,
  WGNN_DTYPE_INT32 = 6,
  WGNN_DTYPE_INT64 = 7,
  WGNN_DTYPE_BOOL = 9,
  WGNN_DTYPE_FLOAT16 = 10
} wgnn_dtype;

typedef struct wgnn_context wgnn_context;
typedef struct wgnn_session wgnn_session;
typedef struct wgnn_tensor wgnn_tensor;

/* The library's version ("MAJOR.MINOR.PATCH"). */
const char* wgnn_version(void);
/* The message of the last failed call on this thread ("" if none). */
const char* wgnn_last_error(void);
/* A status's name, e.g. "WGNN_ERROR_MODEL". */
const char* wgnn_status_name(wgnn_status status);
/* Bytes per element on the host (0 for a value that is no wgnn_dtype). */
size_t wgnn_dtype_size(wgnn_dtype dtype);

/* ---- context: the GPU (or lavapipe, Vulkan on the CPU) ------------------ */
/* adapter: NULL or "" (WGNN_ADAPTER, else "auto"), "auto", "gpu" or "lavapipe";
 * or one adapter: an index (as wgnn_adapters_json lists them), a UUID
 * ("GPU-..." as nvidia-smi -L writes it, or a prefix), "VVVV:DDDD" (PCI vendor
 * and device id in hex), "pci:ADDRESS", or a part of its name. Without one,
 * an NVIDIA adapter is the one CUDA_VISIBLE_DEVICES names (docs/ADAPTERS.md). */
wgnn_status wgnn_context_create(const char* adapter, wgnn_context** out);
void wgnn_context_destroy(wgnn_context* ctx);

typedef struct wgnn_adapter_info {
  const char* name;          /* e.g. "NVIDIA H200", "llvmpipe (LLVM 15.0.7, 256 bits)" */
  const char* vendor;
  const char* architecture;
  const char* description;   /* the driver's */
  const char* backend;       /* "Vulkan", "Metal", ... */
  const char* adapter_type;  /* "discrete GPU", "integrated GPU", "CPU", "unknown" */
  const char* driver_source; /* how the driver was chosen */
  uint32_t vendor_id;
  uint32_t device_id;
  int shader_f16;            /* 1 if the device stores float16 natively */
  int index;                 /* in wgnn_adapters_json's list */
  const char* uuid;          /* the Vulkan device UUID (CUDA's on NVIDIA), "" if unknown */
  const char* pci_bus;       /* "dddd:bb:dd.f", "" if unknown */
} wgnn_adapter_info;
/* Fills *out; its strings belong to ctx. */
wgnn_status wgnn_context_adapter_info(const wgnn_context* ctx, wgnn_adapter_info* out);
/* Every adapter the driver choice of `adapter` (as wgnn_context_create)
 * offers, as a JSON array of objects (index, name, vendor, vendor_id,
 * device_id, backend, type, uuid, pci_bus), in *out_json; starts no device.
 * Free the string with wgnn_string_free. */
wgnn_status wgnn_adapters_json(const char* adapter, char** out_json);
void wgnn_string_free(char* s);

/* ---- session: an ONNX model ---------------------------------------------- */
typedef struct wgnn_session_options {
  int fp16;      /* float16 execution (needs shader-f16); 0: off */
  int fusion;    /* fuse node chains (GELU, MatMul+bias, ...); 1: on */
  int checked;   /* run-time index and division checks; 1: on */
  int verbose;   /* a summary on stderr after each run that built a plan; 0: off */
  int max_plans; /* plans kept at once (each serves the input shapes of one structure), at least 1; 8 */
  int tiered;    /* tiered first runs on tensor-core devices (docs/FP16.md); 1: on */
  int ir_import; /* import to IR and run the passes (else record directly); 1: on */
  /* The outputs to compute, by name (NULL: all, as the model declares
   * them); output_count names. The others are not computed. */
  const char* const* outputs;
  size_t output_count;
  int max_plan_sizes; /* sets of input shapes one plan keeps, at least 1; 64 */
  int size_classes;   /* sizes within a power of 4 of elements record one plan's structure; 1: on */
} wgnn_session_options;
/* The defaults: {0, 1, 1, 0, 8, 1, 1, NULL, 0, 64, 1}, the C++ SessionOptions'
 * (onnx/session.h). NULL options mean these; start from this function
 * rather than zero-filling, so fields added later keep their defaults. */
wgnn_session_options wgnn_session_options_default(void);

wgnn_status wgnn_session_create_from_file(wgnn_context* ctx, const char* path, const wgnn_session_options* options,
                                          wgnn_session** out);
/* A model in memory (copied). External data, if the model has any, is read
 * relative to external_data_dir (NULL: the current folder). */
wgnn_status wgnn_session_create_from_bytes(wgnn_context* ctx, const void* data, size_t size,
                                           const char* external_data_dir, const wgnn_session_options* options,
                                           wgnn_session** out);
void wgnn_session_destroy(wgnn_session* session);

/* An input or output: its name, dtype and shape (-1: a dynamic dimension). */
typedef struct wgnn_value_info {
  const char* name;
  wgnn_dtype dtype;
  size_t rank;
  const int64_t* shape;
} wgnn_value_info;
size_t wgnn_session_input_count(const wgnn_session* session);  /* 0 for NULL */
size_t wgnn_session_output_count(const wgnn_session* session); /* 0 for NULL */
wgnn_status wgnn_session_input(const wgnn_session* session, size_t index, wgnn_value_info* out);
wgnn_status wgnn_session_output(const wgnn_session* session, size_t index, wgnn_value_info* out);

/* Runs the model. Every input is given by name with its declared dtype and a
 * shape matching the declared one. outputs has wgnn_session_output_count()
 * slots, filled in the model's output order with new tensors (the caller's to
 * destroy); on failure none is made. The inputs are only read. */
wgnn_status wgnn_session_run(wgnn_session* session, const char* const* input_names,
                             wgnn_tensor* const* inputs, size_t input_count, wgnn_tensor** outputs);

/* Sets the model's state back to its initial values: an ExecuTorch
 * program's mutable buffers (a key/value cache), which otherwise carry over
 * from each run to the next. WGNN_OK and nothing done for a model without
 * state. */
wgnn_status wgnn_session_reset_state(wgnn_session* session);

/* ---- tensors in host memory ---------------------------------------------- */
/* A tensor of dtype and shape (rank dims, each >= 0; shape may be NULL for
 * rank 0). data: NULL for zeros, else exactly size bytes (numel x dtype size)
 * that are copied. */
wgnn_status wgnn_tensor_create(wgnn_dtype dtype, const int64_t* shape, size_t rank, const void* data, size_t size,
                               wgnn_tensor** out);
void wgnn_tensor_destroy(wgnn_tensor* tensor);
/* Getters: 0 / NULL for a NULL tensor. */
wgnn_dtype wgnn_tensor_dtype(const wgnn_tensor* tensor);
size_t wgnn_tensor_rank(const wgnn_tensor* tensor);
const int64_t* wgnn_tensor_shape(const wgnn_tensor* tensor);
int64_t wgnn_tensor_numel(const wgnn_tensor* tensor);
size_t wgnn_tensor_size(const wgnn_tensor* tensor); /* bytes */
const void* wgnn_tensor_data(const wgnn_tensor* tensor);
void* wgnn_tensor_mutable_data(wgnn_tensor* tensor);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WGNN_WGNN_H */
