/* placeholder until the management layer lands */
#include <cairn/log.h>
void cairn_mgmt_placeholder(void);
void cairn_mgmt_placeholder(void) {}
