/* A deliberately incompatible plugin, for the tests: it claims a future ABI version, so tfdata
 * must refuse to load it instead of calling functions whose signatures may have changed. */
#include "lib/functions/tfdata_plugin.h"

TFDATA_PLUGIN_EXPORT uint32_t tfdata_plugin_abi_version(void) { return TFDATA_PLUGIN_ABI_VERSION + 41; }

TFDATA_PLUGIN_EXPORT int tfdata_fn_scale_apply(void* state, const tfdata_tensor_view* inputs, size_t num_inputs,
                                               tfdata_output* out, char* err, size_t err_len) {
  (void)state;
  (void)inputs;
  (void)num_inputs;
  (void)out;
  (void)err;
  (void)err_len;
  return 1;
}
