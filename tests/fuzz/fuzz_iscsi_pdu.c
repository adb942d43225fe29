/*
 * libFuzzer target for the iSCSI target's PDU parsing (clang only:
 * cmake -DCMAKE_C_COMPILER=clang, then ./fuzz_iscsi_pdu CORPUS_DIR).
 *
 * The input is read as a stream of PDUs the way a connection reads it: a BHS,
 * its AHS and padded data segment, again and again. Each data segment also
 * goes through the text-key parser and the operational negotiation, and each
 * value through the CHAP decoder, as login PDUs do. The suite
 * (tests/integration/test_fuzz_targets.sh) builds it with clang and runs a fixed
 * 200000 inputs; the deterministic cousin that runs in the gcc builds too is
 * test_random_headers in tests/unit/test_iscsi_proto.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/iscsi/iscsi_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    iscsi_params_t params;
    iscsi_params_defaults(&params);
    while (size - off >= ISCSI_BHS_LEN) {
        iscsi_bhs_info_t info;
        int rc = iscsi_bhs_parse(data + off, 65536, &info);
        if (rc == -EMSGSIZE) break;
        off += ISCSI_BHS_LEN;
        size_t body = (size_t)info.ahs_bytes + info.data_padded;
        if (body > size - off) body = size - off;
        const uint8_t *seg = data + off + (info.ahs_bytes < body ? info.ahs_bytes : body);
        size_t seglen = body > info.ahs_bytes ? body - info.ahs_bytes : 0;
        if (seglen > info.data_len) seglen = info.data_len;
        (void)iscsi_lun_decode(data + off - ISCSI_BHS_LEN + 8);
        iscsi_kv_iter_t it;
        if (iscsi_kv_iter_init(&it, seg, seglen) == 0) {
            const char *k, *v;
            iscsi_kv_out_t out = {0};
            while (iscsi_kv_next(&it, &k, &v) > 0) {
                (void)iscsi_param_negotiate(&params, k, v, &out);
                uint8_t bin[1024];
                (void)iscsi_chap_decode(v, bin, sizeof bin);
                char err[300];
                (void)iscsi_name_check(v, err, sizeof err);
            }
            iscsi_kv_out_free(&out);
            iscsi_kv_iter_fini(&it);
        }
        (void)iscsi_crc32c(0, seg, seglen);
        off += body;
    }
    return 0;
}
