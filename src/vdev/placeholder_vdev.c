/* placeholder: the vdev layer is being written */
void cairn_vdev_placeholder(void);
void cairn_vdev_placeholder(void) {}
