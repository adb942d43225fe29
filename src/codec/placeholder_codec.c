/* placeholder: the codec layer is being written */
void cairn_codec_placeholder(void);
void cairn_codec_placeholder(void) {}
