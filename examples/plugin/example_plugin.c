/* TEMPORARY placeholder until the plugin ABI lands. */
int tfdata_placeholder(void) { return 0; }
