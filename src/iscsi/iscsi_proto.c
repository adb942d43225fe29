/*
 * The pure protocol logic of the iSCSI target: digests, BHS decoding, LUN
 * encoding, CmdSN windows, text keys, operational parameter negotiation and
 * CHAP arithmetic. Nothing here touches a socket, so every rule is unit
 * tested on buffers (tests/unit/test_iscsi_*.c) and fuzzed (tests/fuzz/).
 *
 * CRC32C: the digest is computed on every PDU of a session that negotiated
 * digests, so it must cost little next to the copy of the data. x86-64's
 * SSE4.2 has a crc32 instruction for exactly this polynomial; it is used
 * eight bytes at a time when the CPU has it (checked once at run time, the
 * function is compiled for SSE4.2 with a target attribute so the rest of the
 * binary stays baseline), else a byte-wise table (slicing would be faster but
 * no machine we run on lacks SSE4.2).
 *
 * Negotiation follows RFC 7143 section 13: each key has a result function
 * (minimum, maximum, OR, AND, or declarative); we answer with the result so
 * the initiator's and our view agree. A value that is not legal for its key
 * (syntax or range) fails the login with an initiator error rather than
 * being silently corrected: such an initiator has a bug worth seeing.
 */
#include "iscsi_impl.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ CRC32C */

static uint32_t crc_table[256];
static int crc_mode; /* 0 unknown, 1 table, 2 hardware */

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_mode = __builtin_cpu_supports("sse4.2") ? 2 : 1;
#else
    crc_mode = 1;
#endif
}

uint32_t iscsi_crc32c_table(uint32_t crc, const void *buf, size_t len)
{
    if (!crc_mode) crc_init();
    const uint8_t *p = buf;
    crc = ~crc;
    while (len--) crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *buf,
                                                                size_t len)
{
    const uint8_t *p = buf;
    uint64_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    while (len--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

bool iscsi_crc32c_hw(void)
{
    if (!crc_mode) crc_init();
    return crc_mode == 2;
}

uint32_t iscsi_crc32c(uint32_t crc, const void *buf, size_t len)
{
    if (!crc_mode) crc_init();
#if defined(__x86_64__)
    if (crc_mode == 2) return crc32c_sse42(crc, buf, len);
#endif
    return iscsi_crc32c_table(crc, buf, len);
}

/* --------------------------------------------------------------------- BHS */

bool iscsi_opcode_known(uint8_t op)
{
    switch (op) {
    case ISCSI_OP_NOP_OUT: case ISCSI_OP_SCSI_CMD: case ISCSI_OP_TMF_REQ:
    case ISCSI_OP_LOGIN_REQ: case ISCSI_OP_TEXT_REQ: case ISCSI_OP_DATA_OUT:
    case ISCSI_OP_LOGOUT_REQ: case ISCSI_OP_SNACK:
        return true;
    default:
        return false;
    }
}

int iscsi_bhs_parse(const uint8_t bhs[ISCSI_BHS_LEN], uint32_t max_data, iscsi_bhs_info_t *out)
{
    memset(out, 0, sizeof *out);
    out->opcode = bhs[0] & 0x3f;
    out->immediate = bhs[0] & 0x40;
    out->final = bhs[1] & 0x80;
    out->ahs_words = bhs[4];
    out->data_len = (uint32_t)bhs[5] << 16 | (uint32_t)bhs[6] << 8 | bhs[7];
    out->itt = iscsi_get32(bhs + 16);
    out->ahs_bytes = out->ahs_words * 4u;
    out->data_padded = (out->data_len + 3) & ~3u;
    if (out->data_len > max_data) return -EMSGSIZE; /* first: the stream cannot be followed */
    if (bhs[0] & 0x80) return -EPROTO;               /* reserved bit */
    if (!iscsi_opcode_known(out->opcode)) return -EPROTO;
    return 0;
}

uint64_t iscsi_lun_decode(const uint8_t l[8])
{
    switch (l[0] >> 6) {
    case 0: return l[1];                               /* peripheral device addressing */
    case 1: return (uint64_t)(l[0] & 0x3f) << 8 | l[1]; /* flat space addressing */
    default: return UINT64_MAX - 1;                     /* nothing we configure */
    }
}

void iscsi_lun_encode(uint64_t lun, uint8_t out[8])
{
    memset(out, 0, 8);
    if (lun < 256) {
        out[1] = (uint8_t)lun;
    } else {
        out[0] = (uint8_t)(0x40 | ((lun >> 8) & 0x3f));
        out[1] = (uint8_t)lun;
    }
}

/* -------------------------------------------------------------- CmdSN window */

uint32_t iscsi_window_max(const iscsi_cmdsn_window_t *w)
{
    uint32_t room = w->in_flight >= w->depth ? 0 : w->depth - w->in_flight;
    /* MaxCmdSN = ExpCmdSN - 1 closes the window (RFC 7143 4.2.2.1). */
    return w->exp_cmdsn - 1 + room;
}

iscsi_cmdsn_verdict_t iscsi_window_check(iscsi_cmdsn_window_t *w, uint32_t cmdsn, bool immediate)
{
    if (immediate) return ISCSI_CMDSN_IMMEDIATE;
    /* One connection per session and TCP delivery: a command in order is the
     * only acceptable one; anything else is a duplicate or beyond the window. */
    if (cmdsn != w->exp_cmdsn) return ISCSI_CMDSN_DROP;
    if (iscsi_sn_lt(iscsi_window_max(w), cmdsn)) return ISCSI_CMDSN_DROP;
    w->exp_cmdsn++;
    return ISCSI_CMDSN_ACCEPT;
}

/* ----------------------------------------------------------------- text keys */

int iscsi_kv_iter_init(iscsi_kv_iter_t *it, const uint8_t *data, size_t len)
{
    it->buf = malloc(len + 1);
    if (!it->buf) return -ENOMEM;
    if (len) memcpy(it->buf, data, len);
    it->buf[len] = '\0';
    it->len = len;
    it->pos = 0;
    return 0;
}

int iscsi_kv_next(iscsi_kv_iter_t *it, const char **key, const char **value)
{
    while (it->pos < it->len && it->buf[it->pos] == '\0') it->pos++; /* padding, empty */
    if (it->pos >= it->len) return 0;
    char *s = it->buf + it->pos;
    size_t n = strlen(s);
    it->pos += n + 1;
    char *eq = strchr(s, '=');
    if (!eq || eq == s || eq - s > 63) return -EINVAL;
    *eq = '\0';
    for (char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '-' && *c != '.' && *c != '_') return -EINVAL;
    *key = s;
    *value = eq + 1;
    return 1;
}

void iscsi_kv_iter_fini(iscsi_kv_iter_t *it)
{
    free(it->buf);
    it->buf = NULL;
}

int iscsi_kv_add(iscsi_kv_out_t *o, const char *key, const char *value)
{
    size_t kl = strlen(key), vl = strlen(value), need = o->len + kl + vl + 2;
    if (need > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 1024;
        while (cap < need) cap *= 2;
        uint8_t *b = realloc(o->buf, cap);
        if (!b) return -ENOMEM;
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, key, kl);
    o->buf[o->len + kl] = '=';
    memcpy(o->buf + o->len + kl + 1, value, vl);
    o->buf[o->len + kl + 1 + vl] = '\0';
    o->len = need;
    return 0;
}

void iscsi_kv_out_free(iscsi_kv_out_t *o)
{
    free(o->buf);
    memset(o, 0, sizeof *o);
}

/* --------------------------------------------------------------- parameters */

#define OUR_MAX_BURST 16776192u     /* 2^24 - 1024: the largest legal multiple of 1 KiB */
#define OUR_FIRST_BURST 262144u
#define OUR_MAX_R2T 16u
#define OUR_TIME2WAIT 2u

void iscsi_params_defaults(iscsi_params_t *p)
{
    *p = (iscsi_params_t){
        .initial_r2t = true,
        .immediate_data = true,
        .max_recv_dsl_initiator = 8192,
        .max_recv_dsl_target = 262144,
        .max_burst = 262144,
        .first_burst = 65536,
        .default_time2wait = 2,
        .default_time2retain = 20,
        .max_outstanding_r2t = 1,
        .data_pdu_in_order = true,
        .data_sequence_in_order = true,
        .error_recovery_level = 0,
    };
}

static int parse_num(const char *v, uint32_t lo, uint32_t hi, uint32_t *out)
{
    if (!*v || strlen(v) > 20) return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 0);
    if (errno || *end || v[0] == '-' || v[0] == '+' || isspace((unsigned char)v[0])) return -EINVAL;
    if (n < lo || n > hi) return -EINVAL;
    *out = (uint32_t)n;
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "Yes")) *out = true;
    else if (!strcmp(v, "No")) *out = false;
    else return -EINVAL;
    return 0;
}

static int answer_num(iscsi_kv_out_t *out, const char *key, uint32_t v)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%" PRIu32, v);
    return iscsi_kv_add(out, key, buf);
}

/* HeaderDigest / DataDigest: the first value of the initiator's list we
 * support; "Reject" when none. */
static int negotiate_digest(bool *dst, const char *key, const char *value, iscsi_kv_out_t *out)
{
    char list[256];
    if (strlen(value) >= sizeof list) return -EINVAL;
    strcpy(list, value);
    char *save = NULL;
    for (char *v = strtok_r(list, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        if (!strcmp(v, "CRC32C")) { *dst = true; return iscsi_kv_add(out, key, "CRC32C"); }
        if (!strcmp(v, "None")) { *dst = false; return iscsi_kv_add(out, key, "None"); }
    }
    return iscsi_kv_add(out, key, "Reject");
}

int iscsi_param_negotiate(iscsi_params_t *p, const char *key, const char *value,
                          iscsi_kv_out_t *out)
{
    uint32_t n;
    bool b;
    if (!strcmp(key, "HeaderDigest")) return negotiate_digest(&p->header_digest, key, value, out);
    if (!strcmp(key, "DataDigest")) return negotiate_digest(&p->data_digest, key, value, out);
    if (!strcmp(key, "MaxConnections")) {
        if (parse_num(value, 1, 65535, &n)) return -EINVAL;
        return answer_num(out, key, 1);
    }
    if (!strcmp(key, "InitialR2T")) { /* OR with our No */
        if (parse_bool(value, &b)) return -EINVAL;
        p->initial_r2t = b;
        return iscsi_kv_add(out, key, b ? "Yes" : "No");
    }
    if (!strcmp(key, "ImmediateData")) { /* AND with our Yes */
        if (parse_bool(value, &b)) return -EINVAL;
        p->immediate_data = b;
        return iscsi_kv_add(out, key, b ? "Yes" : "No");
    }
    if (!strcmp(key, "DataPDUInOrder") || !strcmp(key, "DataSequenceInOrder")) {
        /* OR with our Yes: we always get data in order. */
        if (parse_bool(value, &b)) return -EINVAL;
        return iscsi_kv_add(out, key, "Yes");
    }
    if (!strcmp(key, "MaxRecvDataSegmentLength")) { /* declarative */
        if (parse_num(value, 512, 16777215, &n)) return -EINVAL;
        p->max_recv_dsl_initiator = n;
        return 0;
    }
    if (!strcmp(key, "MaxBurstLength")) {
        if (parse_num(value, 512, 16777215, &n)) return -EINVAL;
        p->max_burst = n < OUR_MAX_BURST ? n : OUR_MAX_BURST;
        return answer_num(out, key, p->max_burst);
    }
    if (!strcmp(key, "FirstBurstLength")) {
        if (parse_num(value, 512, 16777215, &n)) return -EINVAL;
        p->first_burst = n < OUR_FIRST_BURST ? n : OUR_FIRST_BURST;
        return answer_num(out, key, p->first_burst);
    }
    if (!strcmp(key, "DefaultTime2Wait")) {
        if (parse_num(value, 0, 3600, &n)) return -EINVAL;
        p->default_time2wait = n > OUR_TIME2WAIT ? n : OUR_TIME2WAIT;
        return answer_num(out, key, p->default_time2wait);
    }
    if (!strcmp(key, "DefaultTime2Retain")) { /* ERL 0 keeps nothing */
        if (parse_num(value, 0, 3600, &n)) return -EINVAL;
        p->default_time2retain = 0;
        return answer_num(out, key, 0);
    }
    if (!strcmp(key, "MaxOutstandingR2T")) {
        if (parse_num(value, 1, 65535, &n)) return -EINVAL;
        p->max_outstanding_r2t = n < OUR_MAX_R2T ? n : OUR_MAX_R2T;
        return answer_num(out, key, p->max_outstanding_r2t);
    }
    if (!strcmp(key, "ErrorRecoveryLevel")) {
        if (parse_num(value, 0, 2, &n)) return -EINVAL;
        p->error_recovery_level = 0;
        return answer_num(out, key, 0);
    }
    if (!strcmp(key, "IFMarker") || !strcmp(key, "OFMarker")) { /* AND with our No */
        if (parse_bool(value, &b)) return -EINVAL;
        return iscsi_kv_add(out, key, "No");
    }
    if (!strcmp(key, "IFMarkInt") || !strcmp(key, "OFMarkInt"))
        return iscsi_kv_add(out, key, "Irrelevant");
    return 1;
}

/* -------------------------------------------------------------------- CHAP */

void iscsi_chap_response(uint8_t id, const char *secret, const uint8_t *challenge,
                         size_t challenge_len, uint8_t out[16])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int n = 16;
    EVP_DigestInit_ex(ctx, EVP_md5(), NULL);
    EVP_DigestUpdate(ctx, &id, 1);
    EVP_DigestUpdate(ctx, secret, strlen(secret));
    EVP_DigestUpdate(ctx, challenge, challenge_len);
    EVP_DigestFinal_ex(ctx, out, &n);
    EVP_MD_CTX_free(ctx);
}

static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

int iscsi_chap_decode(const char *t, uint8_t *out, size_t cap)
{
    size_t n = 0;
    if (t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
        const char *h = t + 2;
        size_t len = strlen(h);
        if (len == 0 || len > 2 * cap + 1) return -EINVAL;
        size_t i = 0;
        if (len % 2) { /* an odd count: the first nibble stands alone */
            if (!isxdigit((unsigned char)h[0])) return -EINVAL;
            char s[2] = {h[0], 0};
            out[n++] = (uint8_t)strtoul(s, NULL, 16);
            i = 1;
        }
        for (; i < len; i += 2) {
            if (!isxdigit((unsigned char)h[i]) || !isxdigit((unsigned char)h[i + 1]))
                return -EINVAL;
            char s[3] = {h[i], h[i + 1], 0};
            if (n >= cap) return -EINVAL;
            out[n++] = (uint8_t)strtoul(s, NULL, 16);
        }
        return (int)n;
    }
    if (t[0] == '0' && (t[1] == 'b' || t[1] == 'B')) {
        uint32_t acc = 0;
        int bits = 0;
        for (const char *c = t + 2; *c && *c != '='; c++) {
            int v = b64_val(*c);
            if (v < 0) return -EINVAL;
            acc = acc << 6 | (uint32_t)v;
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                if (n >= cap) return -EINVAL;
                out[n++] = (uint8_t)(acc >> bits);
            }
        }
        return n ? (int)n : -EINVAL;
    }
    return -EINVAL;
}

void iscsi_chap_encode_hex(const uint8_t *bin, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (cap < 3) { if (cap) out[0] = '\0'; return; }
    out[o++] = '0';
    out[o++] = 'x';
    for (size_t i = 0; i < len && o + 2 < cap; i++) {
        out[o++] = hex[bin[i] >> 4];
        out[o++] = hex[bin[i] & 15];
    }
    out[o] = '\0';
}

/* --------------------------------------------------------------------- names */

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return s[n] == '\0';
}

int iscsi_name_check(const char *name, char *err, size_t errlen)
{
    size_t len = strlen(name);
    if (len == 0 || len > ISCSI_NAME_MAX) {
        snprintf(err, errlen, "iSCSI name '%.40s' must be 1 to %d bytes", name, ISCSI_NAME_MAX);
        return -EINVAL;
    }
    if (!strncmp(name, "eui.", 4)) {
        if (!all_hex(name + 4, 16)) goto bad;
        return 0;
    }
    if (!strncmp(name, "naa.", 4)) {
        if (!all_hex(name + 4, 16) && !all_hex(name + 4, 32)) goto bad;
        return 0;
    }
    if (!strncmp(name, "iqn.", 4)) {
        /* iqn.YYYY-MM.reversed.domain[:optional] */
        const char *d = name + 4;
        for (int i = 0; i < 7; i++) {
            if (i == 4 ? d[i] != '-' : !isdigit((unsigned char)d[i])) goto bad;
        }
        if (d[7] != '.' || !d[8] || d[8] == ':' || d[8] == '.') goto bad;
        for (const char *c = d + 8; *c; c++) {
            if (isupper((unsigned char)*c)) goto bad;
            if (!isalnum((unsigned char)*c) && !strchr(".-:", *c)) goto bad;
        }
        return 0;
    }
bad:
    snprintf(err, errlen,
             "'%s' is not an iSCSI name (iqn.YYYY-MM.domain[:id], eui.<16 hex>, naa.<16|32 hex>, lower case)",
             name);
    return -EINVAL;
}
