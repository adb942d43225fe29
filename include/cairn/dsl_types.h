/*
 * The dataset layer's vocabulary without its engine: the kinds of dataset and
 * where a property's value comes from. The management layer (mgmt.h) speaks
 * these to the CLI and the daemon, which print and parse them; it includes this
 * header instead of dsl.h, so a program that only talks to cairnd does not see
 * (or link) the engine. dsl.h includes it too: one definition of each.
 */
#ifndef CAIRN_DSL_TYPES_H
#define CAIRN_DSL_TYPES_H

#define DSL_NAME_MAX 255        /* full name, "pool/a/b@snap" */

typedef enum dsl_type {
    DSL_TYPE_FILESYSTEM = 1,
    DSL_TYPE_VOLUME = 2,
    DSL_TYPE_SNAPSHOT = 3,
} dsl_type_t;

typedef enum dsl_prop_source {
    DSL_SRC_NONE = 0,       /* statistics and read-only values: "-" */
    DSL_SRC_DEFAULT = 1,
    DSL_SRC_LOCAL = 2,
    DSL_SRC_INHERITED = 3,  /* from `inherited_from` */
} dsl_prop_source_t;

#endif
