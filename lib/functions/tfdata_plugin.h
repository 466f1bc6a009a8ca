/* tfdata user-function plugins: the C ABI between tfdata (the host) and a shared library.
 *
 * A plugin is a shared library (.so) that tfdata loads with dlopen when a pipeline uses
 *   map { fn { plugin { library: "/path/libfoo.so" function: "NAME" config: "..." } } }
 * This header is pure C (C99, usable from C and C++) and is the only thing a plugin needs; it
 * has no tfdata dependency, so plugins can be built with any compiler:
 *   cc -shared -fPIC -O2 -I<tfdata source root> my_plugin.c -o libmy_plugin.so
 * See examples/plugin/example_plugin.c for a complete plugin.
 *
 * Symbols a plugin exports (all with C linkage and default visibility):
 *   uint32_t tfdata_plugin_abi_version(void);         required; return TFDATA_PLUGIN_ABI_VERSION
 * and for each function NAME (a C identifier):
 *   int  tfdata_fn_NAME_create(...);                  optional; see tfdata_create_fn
 *   int  tfdata_fn_NAME_apply(...);                   required; see tfdata_apply_fn
 *   void tfdata_fn_NAME_destroy(void* state);         optional; see tfdata_destroy_fn
 *
 * Life cycle of one function instance (one per pipeline that uses it):
 *   create  once, when the pipeline is built (with the pipeline's `config`);
 *   apply   once per element, CONCURRENTLY from several threads (parallel map) with the same
 *           state: apply must be thread-safe and must not mutate `state` without its own
 *           synchronization;
 *   destroy once, after the last apply has returned; the library may be unloaded afterwards.
 * Distinct instances (and so create/destroy of different states) may run on different
 * threads at the same time. Never let a C++ exception or a longjmp cross these functions.
 *
 * Memory rule: the host never frees plugin memory and the plugin never frees host memory.
 * Inputs are borrowed views valid only during the apply call; outputs are produced through
 * the host's tfdata_output callbacks, which allocate (or copy into) host-owned memory.
 *
 * Errors: create and apply return 0 on success and nonzero on failure, after writing a
 * NUL-terminated message of at most err_len bytes (including the NUL) into `err`, which the
 * host provides (err_len >= 1; err[0] is '\0' on entry). The host reports it as
 * "plugin LIBRARY:NAME: <message>".
 *
 * Versioning: any incompatible change to this header increments TFDATA_PLUGIN_ABI_VERSION;
 * the host refuses plugins built for another version. */
#ifndef TFDATA_FUNCTIONS_TFDATA_PLUGIN_H_
#define TFDATA_FUNCTIONS_TFDATA_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#define TFDATA_PLUGIN_ABI_VERSION 1

#ifdef __cplusplus
#define TFDATA_PLUGIN_EXTERN_C extern "C"
extern "C" {
#else
#define TFDATA_PLUGIN_EXTERN_C
#endif

/* Marks a plugin symbol for export (also when built with -fvisibility=hidden). */
#define TFDATA_PLUGIN_EXPORT TFDATA_PLUGIN_EXTERN_C __attribute__((visibility("default")))

/* Defines the required version symbol; put it once in one source file of the plugin. */
#define TFDATA_PLUGIN_DEFINE_ABI_VERSION() \
  TFDATA_PLUGIN_EXPORT uint32_t tfdata_plugin_abi_version(void) { return TFDATA_PLUGIN_ABI_VERSION; }

/* Element types; the values equal tfdata::DType (lib/core/tensor.h). */
enum {
  TFDATA_BOOL = 1, /* one byte, 0 or 1 */
  TFDATA_INT8 = 2,
  TFDATA_INT16 = 3,
  TFDATA_INT32 = 4,
  TFDATA_INT64 = 5,
  TFDATA_UINT8 = 6,
  TFDATA_UINT16 = 7,
  TFDATA_UINT32 = 8,
  TFDATA_UINT64 = 9,
  TFDATA_FLOAT32 = 10,
  TFDATA_FLOAT64 = 11,
  TFDATA_STRING = 12 /* byte strings of any content, including NULs */
};

/* Tensors have at most this many dimensions. */
#define TFDATA_MAX_RANK 32

/* One string value: `size` bytes at `data` (not NUL-terminated; may contain NULs). */
typedef struct tfdata_string_view {
  const char* data;
  size_t size;
} tfdata_string_view;

/* A read-only view of one input tensor. All pointers are borrowed from the host and valid only
 * until the apply call returns: copy whatever must outlive it. Values are row-major. */
typedef struct tfdata_tensor_view {
  int32_t dtype;        /* a TFDATA_* type code */
  int32_t rank;         /* number of dimensions; 0 for a scalar */
  const int64_t* dims;  /* `rank` dimensions, each >= 0 (NULL when rank is 0) */
  int64_t num_elements; /* product of dims (1 for a scalar) */
  /* Numeric: the values, host-endian, aligned to their type (may be NULL when nbytes is 0).
   * String: a `const tfdata_string_view*` array of num_elements entries. */
  const void* data;
  /* Numeric: num_elements * size of the type. String: total bytes of all strings. */
  size_t nbytes;
} tfdata_tensor_view;

/* How apply produces its result: the output element is the list of tensors appended through
 * these callbacks, in call order (at least one). The struct and everything it points to belong
 * to the host and are valid only during the apply call; call the callbacks only from the thread
 * running apply, passing the same `out` that apply received. */
typedef struct tfdata_output tfdata_output;
struct tfdata_output {
  /* Opaque host state; plugins must not read or write it. */
  void* host;

  /* Appends a numeric tensor (dtype not TFDATA_STRING) of shape dims[0..rank) and returns its
   * zero-filled, writable values (num_elements * type size bytes, aligned for the type). The
   * memory belongs to the host: fill it before apply returns and never free it. Returns NULL
   * (and the host fails the element) for an invalid dtype, rank or dims. `dims` is read during
   * the call only. A tensor with zero elements gets a non-NULL pointer that must not be written. */
  void* (*alloc_tensor)(tfdata_output* out, int32_t dtype, int32_t rank, const int64_t* dims);

  /* Appends a string tensor of shape dims[0..rank) whose num_elements values are copied from
   * `values` during the call (the plugin keeps ownership of its strings). num_values must equal
   * the product of dims. Returns 0 on success, nonzero (and the element fails) otherwise. */
  int (*add_string_tensor)(tfdata_output* out, int32_t rank, const int64_t* dims, const tfdata_string_view* values,
                           size_t num_values);

  /* Appends input tensor `index` unchanged, without copying. Returns 0, or nonzero if `index`
   * is out of range. */
  int (*add_input)(tfdata_output* out, size_t index);
};

/* tfdata_fn_NAME_create: builds the function's state from the pipeline's `config` (config_len
 * bytes, followed by a NUL that is not counted; may be empty). On success stores an opaque
 * pointer in *state (may be NULL) that the host passes to apply and destroy; the plugin owns
 * it. `config` and `err` are valid only during the call. Without a create symbol, state is NULL. */
typedef int (*tfdata_create_fn)(const char* config, size_t config_len, void** state, char* err, size_t err_len);

/* tfdata_fn_NAME_apply: maps one element (num_inputs tensor views) to the output element
 * appended to `out`. Thread-safe: called concurrently with the same state. */
typedef int (*tfdata_apply_fn)(void* state, const tfdata_tensor_view* inputs, size_t num_inputs, tfdata_output* out,
                               char* err, size_t err_len);

/* tfdata_fn_NAME_destroy: releases `state`; called once, after every apply has returned, if
 * create succeeded (or with NULL if the plugin has no create). Not called if create failed:
 * a failing create frees what it allocated itself. */
typedef void (*tfdata_destroy_fn)(void* state);

/* tfdata_plugin_abi_version: returns TFDATA_PLUGIN_ABI_VERSION as the plugin was built with. */
typedef uint32_t (*tfdata_abi_version_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TFDATA_FUNCTIONS_TFDATA_PLUGIN_H_ */
