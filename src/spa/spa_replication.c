/*
 * Whether new top-level vdevs match the redundancy a pool already has
 * (`pool add` without -f), as zpool decides it.
 *
 * WHY REFUSE. A pool is as safe as its weakest top-level vdev: every block
 * may land on any of them, and losing one loses the pool. Adding a plain disk
 * to a mirror pool, a raidz1 to a raidz2 pool or a 2-way mirror to a 3-way
 * mirror pool quietly lowers what the administrator chose at create time, and
 * the usual cause is a forgotten keyword ("pool add tank /dev/sdx" meaning
 * "mirror /dev/sdx /dev/sdy"). So the mismatch is refused with a line naming
 * both sides, and -f says "I mean it".
 *
 * WHAT MUST MATCH: the kind (disk, mirror, raidz), then the parity of a raidz,
 * then the width (sides of a mirror, devices of a raidz). Every new vdev is
 * compared with the pool's data vdevs and with the other new ones; log vdevs
 * are not data vdevs and are left out by the caller. Pure logic, no I/O: the
 * unit test drives it directly (tests/unit/test_spa_replication.c).
 */
#include <cairn/spa.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>

void spa_replication_describe(const spa_replication_t *r, char *buf, size_t len)
{
    if (r->type == VDEV_TYPE_MIRROR) snprintf(buf, len, "a %u-way mirror", r->width);
    else if (r->type == VDEV_TYPE_RAIDZ) snprintf(buf, len, "a %u-wide raidz%u", r->width, r->nparity);
    else snprintf(buf, len, "a single disk");
}

/* Why a and b differ, or NULL when they match. */
static const char *mismatch(const spa_replication_t *a, const spa_replication_t *b)
{
    if (a->type != b->type) return "kind";
    if (a->type == VDEV_TYPE_RAIDZ && a->nparity != b->nparity) return "parity";
    if (a->type != VDEV_TYPE_LEAF && a->width != b->width) return "width";
    return NULL;
}

int spa_replication_check(const spa_replication_t *pool, size_t npool,
                          const spa_replication_t *add, size_t nadd, char *err, size_t errlen)
{
    char have[64], want[64];
    for (size_t i = 0; i < nadd; i++) {
        for (size_t k = 0; k < npool; k++) {
            if (!mismatch(&pool[k], &add[i])) continue;
            spa_replication_describe(&pool[k], have, sizeof have);
            spa_replication_describe(&add[i], want, sizeof want);
            cairn_seterr(err, errlen,
                         "mismatched replication level: pool uses %s and new vdev is %s "
                         "(use -f to add it anyway)", have, want);
            return -EINVAL;
        }
        for (size_t k = 0; k < i; k++) {
            if (!mismatch(&add[k], &add[i])) continue;
            spa_replication_describe(&add[k], have, sizeof have);
            spa_replication_describe(&add[i], want, sizeof want);
            cairn_seterr(err, errlen,
                         "mismatched replication level: new vdevs are both %s and %s "
                         "(use -f to add them anyway)", have, want);
            return -EINVAL;
        }
    }
    return 0;
}
