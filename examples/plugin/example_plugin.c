/* Example tfdata plugin: two user functions written in plain C.
 *
 *   scale   multiplies component 0 (int64 or float32, any shape) by the factor given as
 *           config (e.g. config: "3"); the other components pass through unchanged.
 *   strlen  replaces a string scalar (the only component) by its length, an int64 scalar.
 *
 * Building your own plugin: include lib/functions/tfdata_plugin.h (it is self-contained C),
 * define the version symbol with TFDATA_PLUGIN_DEFINE_ABI_VERSION(), export
 * tfdata_fn_NAME_apply (plus optional _create / _destroy) for each function NAME, and build
 * a shared library:
 *   cc -shared -fPIC -O2 -I<tfdata source root> my_plugin.c -o libmy_plugin.so
 * Then use it in a pipeline:
 *   map { fn { plugin { library: "/abs/path/libmy_plugin.so" function: "NAME" config: "..." } } }
 * apply runs concurrently on several threads: keep per-function state read-only after create. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/functions/tfdata_plugin.h"

TFDATA_PLUGIN_DEFINE_ABI_VERSION()

/* ---- scale ---------------------------------------------------------------------------------- */

typedef struct scale_state {
  double factor; /* read-only after create, so concurrent applies need no lock */
} scale_state;

TFDATA_PLUGIN_EXPORT int tfdata_fn_scale_create(const char* config, size_t config_len, void** state, char* err,
                                                size_t err_len) {
  (void)config_len; /* config is NUL-terminated; strtod stops there */
  char* end = NULL;
  errno = 0;
  const double factor = strtod(config, &end);
  if (end == config || *end != '\0' || errno != 0) {
    snprintf(err, err_len, "scale: config must be a number (the factor), got '%s'", config);
    return 1;
  }
  scale_state* s = (scale_state*)malloc(sizeof(scale_state));
  if (s == NULL) {
    snprintf(err, err_len, "scale: out of memory");
    return 1;
  }
  s->factor = factor;
  *state = s;
  return 0;
}

TFDATA_PLUGIN_EXPORT int tfdata_fn_scale_apply(void* state, const tfdata_tensor_view* inputs, size_t num_inputs,
                                               tfdata_output* out, char* err, size_t err_len) {
  const scale_state* s = (const scale_state*)state;
  if (num_inputs == 0) {
    snprintf(err, err_len, "scale: the element has no components");
    return 1;
  }
  const tfdata_tensor_view* in = &inputs[0];
  if (in->dtype != TFDATA_INT64 && in->dtype != TFDATA_FLOAT32) {
    snprintf(err, err_len, "scale: component 0 must be int64 or float32 (type code %d)", (int)in->dtype);
    return 1;
  }
  void* data = out->alloc_tensor(out, in->dtype, in->rank, in->dims);
  if (data == NULL) {
    snprintf(err, err_len, "scale: cannot allocate the output");
    return 1;
  }
  for (int64_t i = 0; i < in->num_elements; ++i) {
    if (in->dtype == TFDATA_INT64) {
      ((int64_t*)data)[i] = (int64_t)((double)((const int64_t*)in->data)[i] * s->factor);
    } else {
      ((float*)data)[i] = (float)((double)((const float*)in->data)[i] * s->factor);
    }
  }
  for (size_t i = 1; i < num_inputs; ++i) {
    if (out->add_input(out, i) != 0) return 1; /* the host has recorded why */
  }
  return 0;
}

TFDATA_PLUGIN_EXPORT void tfdata_fn_scale_destroy(void* state) { free(state); }

/* ---- strlen (stateless: no create or destroy) --------------------------------------------- */

TFDATA_PLUGIN_EXPORT int tfdata_fn_strlen_apply(void* state, const tfdata_tensor_view* inputs, size_t num_inputs,
                                                tfdata_output* out, char* err, size_t err_len) {
  (void)state;
  if (num_inputs != 1 || inputs[0].dtype != TFDATA_STRING || inputs[0].rank != 0) {
    snprintf(err, err_len, "strlen: expected one string scalar");
    return 1;
  }
  const tfdata_string_view* value = (const tfdata_string_view*)inputs[0].data;
  int64_t* length = (int64_t*)out->alloc_tensor(out, TFDATA_INT64, 0, NULL);
  if (length == NULL) {
    snprintf(err, err_len, "strlen: cannot allocate the output");
    return 1;
  }
  *length = (int64_t)value->size;
  return 0;
}
