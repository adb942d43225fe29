/* placeholder: the metaslab layer is being written */
void cairn_metaslab_placeholder(void);
void cairn_metaslab_placeholder(void) {}
