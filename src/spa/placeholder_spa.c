/* placeholder: the spa layer is being written */
void cairn_spa_placeholder(void);
void cairn_spa_placeholder(void) {}
