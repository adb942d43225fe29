/* placeholder: the dmu layer is being written */
void cairn_dmu_placeholder(void);
void cairn_dmu_placeholder(void) {}
