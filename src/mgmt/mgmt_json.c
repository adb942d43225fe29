/*
 * The generic JSON <-> protobuf translation (include/cairn/mgmt_json.h).
 *
 * Messages built here own every string, array and submessage they point to, in
 * memory from malloc, exactly as protobuf-c's unpacker leaves them, so
 * protobuf_c_message_free_unpacked() frees either kind.
 */
#include <cairn/mgmt_json.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- to JSON */

static json_t *u64_json(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX) return json_integer((json_int_t)v);
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return json_string(buf);
}

static json_t *enum_json(const ProtobufCEnumDescriptor *d, int v)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
    return ev ? json_string(ev->name) : json_integer(v);
}

/* One value of field f stored at p. */
static json_t *value_json(const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return json_integer(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return json_integer(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return json_integer(*(const int64_t *)p);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return u64_json(*(const uint64_t *)p);
    case PROTOBUF_C_TYPE_FLOAT: return json_real(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE: return json_real(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL: return json_boolean(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: return enum_json(f->descriptor, *(const int *)p);
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return json_string(s ? s : "");
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        return json_stringn((const char *)b->data, b->len);
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(ProtobufCMessage *const *)p;
        return m ? mgmt_json_from_message(m) : json_null();
    }
    }
    return json_null();
}

static size_t type_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    default: return 4;
    }
}

static bool oneof_member(const ProtobufCFieldDescriptor *f)
{
    return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
}

json_t *mgmt_json_from_message(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    json_t *obj = json_object();
    const char *base = (const char *)m;
    for (unsigned i = 0; obj && i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *p = base + f->offset;
        json_t *v;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            const char *arr = *(char *const *)p;
            v = json_array();
            for (size_t k = 0; k < n; k++)
                json_array_append_new(v, value_json(f, arr + k * type_size(f->type)));
        } else {
            if (oneof_member(f) && *(const uint32_t *)(base + f->quantifier_offset) != f->id)
                continue;
            if (f->type == PROTOBUF_C_TYPE_MESSAGE && !*(void *const *)p) continue;
            v = value_json(f, p);
        }
        json_object_set_new(obj, f->name, v);
    }
    return obj;
}

/* -------------------------------------------------------------- from JSON */

static int bad(char *err, size_t errlen, const ProtobufCMessageDescriptor *d,
               const ProtobufCFieldDescriptor *f, const char *want)
{
    snprintf(err, errlen, "%s.%s: want %s", d->short_name, f->name, want);
    return -EINVAL;
}

/* An integer from a JSON integer or a decimal string, within [lo, hi]. */
static bool json_int_in(const json_t *j, long long lo, unsigned long long hi,
                        unsigned long long *out)
{
    if (json_is_integer(j)) {
        json_int_t v = json_integer_value(j);
        if (v < lo || (v >= 0 && (unsigned long long)v > hi)) return false;
        *out = (unsigned long long)v;
        return true;
    }
    if (!json_is_string(j)) return false;
    const char *s = json_string_value(j);
    char *end;
    errno = 0;
    if (*s == '-') {
        long long v = strtoll(s, &end, 10);
        if (errno || *end || end == s || v < lo) return false;
        *out = (unsigned long long)v;
        return true;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s || v > hi) return false;
    *out = v;
    return true;
}

static int value_from_json(const json_t *j, const ProtobufCMessageDescriptor *d,
                           const ProtobufCFieldDescriptor *f, void *p, char *err, size_t errlen)
{
    unsigned long long u;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if (!json_int_in(j, INT32_MIN, INT32_MAX, &u))
            return bad(err, errlen, d, f, "a 32-bit integer");
        *(int32_t *)p = (int32_t)(long long)u;
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (!json_int_in(j, 0, UINT32_MAX, &u))
            return bad(err, errlen, d, f, "a number 0..4294967295");
        *(uint32_t *)p = (uint32_t)u;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (!json_int_in(j, INT64_MIN, INT64_MAX, &u)) return bad(err, errlen, d, f, "an integer");
        *(int64_t *)p = (int64_t)u;
        return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        if (!json_int_in(j, 0, UINT64_MAX, &u)) return bad(err, errlen, d, f, "a number >= 0");
        *(uint64_t *)p = u;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
        if (!json_is_number(j)) return bad(err, errlen, d, f, "a number");
        *(float *)p = (float)json_number_value(j);
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        if (!json_is_number(j)) return bad(err, errlen, d, f, "a number");
        *(double *)p = json_number_value(j);
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(j)) return bad(err, errlen, d, f, "true or false");
        *(protobuf_c_boolean *)p = json_is_true(j);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        const ProtobufCEnumValue *ev =
            json_is_string(j)
                ? protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(j))
            : json_is_integer(j)
                ? protobuf_c_enum_descriptor_get_value(ed, (int)json_integer_value(j))
                : NULL;
        if (!ev) return bad(err, errlen, d, f, "one of the enum's names");
        *(int *)p = ev->value;
        return 0;
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(j)) return bad(err, errlen, d, f, "a string");
        char *s = strdup(json_string_value(j));
        if (!s) return -ENOMEM;
        *(char **)p = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        if (!json_is_string(j)) return bad(err, errlen, d, f, "a string");
        ProtobufCBinaryData *b = p;
        size_t n = json_string_length(j);
        b->data = malloc(n ? n : 1);
        if (!b->data) return -ENOMEM;
        memcpy(b->data, json_string_value(j), n);
        b->len = n;
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        if (!json_is_object(j)) return bad(err, errlen, d, f, "an object");
        return mgmt_json_to_message(j, f->descriptor, (ProtobufCMessage **)p, err, errlen);
    }
    return bad(err, errlen, d, f, "a supported type");
}

static int field_from_json(const json_t *j, const ProtobufCMessageDescriptor *d,
                           const ProtobufCFieldDescriptor *f, char *base, char *err, size_t errlen)
{
    void *p = base + f->offset;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
        int rc = value_from_json(j, d, f, p, err, errlen);
        if (!rc && oneof_member(f)) *(uint32_t *)(base + f->quantifier_offset) = f->id;
        return rc;
    }
    if (!json_is_array(j)) return bad(err, errlen, d, f, "an array");
    size_t n = json_array_size(j), sz = type_size(f->type);
    char *arr = calloc(n ? n : 1, sz);
    if (!arr) return -ENOMEM;
    /* Owned by the message from here on, so a failure part-way frees what was made. */
    *(void **)p = arr;
    size_t *count = (size_t *)(base + f->quantifier_offset);
    for (size_t k = 0; k < n; k++) {
        int rc = value_from_json(json_array_get(j, k), d, f, arr + k * sz, err, errlen);
        if (rc) return rc;
        (*count)++;
    }
    return 0;
}

int mgmt_json_to_message(const json_t *j, const ProtobufCMessageDescriptor *desc,
                         ProtobufCMessage **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!json_is_object(j)) {
        snprintf(err, errlen, "%s: want a JSON object", desc->short_name);
        return -EINVAL;
    }
    ProtobufCMessage *m = malloc(desc->sizeof_message);
    if (!m) return -ENOMEM;
    protobuf_c_message_init(desc, m);
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach((json_t *)j, key, v)
    {
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(desc, key);
        if (!f) {
            snprintf(err, errlen, "%s: unknown field '%s'", desc->short_name, key);
            rc = -EINVAL;
            break;
        }
        if (oneof_member(f) && *(uint32_t *)((char *)m + f->quantifier_offset) != 0) {
            snprintf(err, errlen, "%s: '%s' and another member of its oneof both given",
                     desc->short_name, key);
            rc = -EINVAL;
            break;
        }
        if ((rc = field_from_json(v, desc, f, (char *)m, err, errlen))) {
            if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
            break;
        }
    }
    if (rc) {
        protobuf_c_message_free_unpacked(m, NULL);
        return rc;
    }
    *out = m;
    return 0;
}
