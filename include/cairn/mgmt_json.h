/*
 * JSON <-> protobuf bridge of the REST API (src/mgmt/mgmt_json.c).
 *
 * The REST API and the CLI share one implementation of every verb: an HTTP
 * request becomes the same cairn.mgmt.Request the CLI sends, and the daemon's
 * Response goes back as JSON. The translation is generic, driven by protobuf-c's
 * descriptors (field names and types), so a field added to cairn_mgmt.proto is
 * in the API at once with nothing written per verb.
 *
 * Mapping: a message is an object keyed by the .proto field names; repeated
 * fields are arrays; enums are their value names; bools, strings and numbers are
 * themselves. 64-bit unsigned numbers above 2^63-1 (pool guids) do not fit
 * JSON's usual integers and travel as decimal strings; numbers are also accepted
 * as decimal strings on input. Of a oneof only the member that is set appears.
 * Unknown keys and wrong types are errors that name the field.
 */
#ifndef CAIRN_MGMT_JSON_H
#define CAIRN_MGMT_JSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* A new JSON object for m (every field, with defaults; unset submessages left out). */
json_t *mgmt_json_from_message(const ProtobufCMessage *m);
/* A new message of type desc from the JSON object j (missing fields keep their
 * defaults); free with protobuf_c_message_free_unpacked(*out, NULL). -EINVAL with
 * err ("DatasetCreate.volsize: want a number") when j does not fit. */
int mgmt_json_to_message(const json_t *j, const ProtobufCMessageDescriptor *desc,
                         ProtobufCMessage **out, char *err, size_t errlen);

#endif
