/*
 * The target registry: targets by name, their LUNs (logical units of the
 * SCSI layer over volumes), the initiator names each one admits (an empty
 * list admits all), CHAP credentials, and the sessions logged in to it. All
 * of it is under srv->lock. A connection holds a reference on its target
 * (refs); destroying a target closes its connections and waits for them to
 * let go (target_kill_locked) before it is freed.
 */
#include "iscsi_srv.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

itarget_t *iscsi_find_target(iscsi_server_t *srv, const char *name)
{
    for (itarget_t *t = srv->targets; t; t = t->next)
        if (!t->dying && !strcmp(t->name, name)) return t;
    return NULL;
}

bool iscsi_target_has_lun(itarget_t *t, uint64_t lun)
{
    for (size_t i = 0; i < t->nluns; i++)
        if (t->luns[i] == lun) return true;
    return false;
}

int iscsi_target_create(iscsi_server_t *srv, const char *iqn)
{
    char err[512];
    if (iscsi_name_check(iqn, err, sizeof err)) return -EINVAL;
    itarget_t *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    cairn_strlcpy(t->name, iqn, sizeof t->name);
    t->scsi = scsi_target_create(iqn);
    if (!t->scsi) {
        free(t);
        return -ENOMEM;
    }
    scsi_target_set_alua(t->scsi, &srv->alua);
    pthread_mutex_lock(&srv->lock);
    if (iscsi_find_target(srv, iqn)) {
        pthread_mutex_unlock(&srv->lock);
        scsi_target_destroy(t->scsi);
        free(t);
        return -EEXIST;
    }
    t->next = srv->targets;
    srv->targets = t;
    pthread_mutex_unlock(&srv->lock);
    return 0;
}

void iscsi_free_target(itarget_t *t)
{
    for (size_t i = 0; i < t->nacl; i++) free(t->acl[i]);
    free(t->acl);
    free(t->luns);
    scsi_target_destroy(t->scsi);
    free(t);
}

/* With srv->lock held: closes the target's connections and waits for them to
 * let go of it, then unlinks it. */
static void target_kill_locked(iscsi_server_t *srv, itarget_t *t)
{
    CAIRN_ASSERT(cairn_mutex_held(&srv->lock));
    t->dying = true;
    for (iconn_t *c = srv->conns; c; c = c->next)
        if (c->tgt == t) shutdown(c->fd, SHUT_RDWR);
    while (t->refs) pthread_cond_wait(&srv->cond, &srv->lock);
    for (itarget_t **pp = &srv->targets; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
}

int iscsi_target_destroy(iscsi_server_t *srv, const char *iqn)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    if (!t) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    if (t->nluns) {
        pthread_mutex_unlock(&srv->lock);
        return -EBUSY;
    }
    target_kill_locked(srv, t);
    pthread_mutex_unlock(&srv->lock);
    iscsi_free_target(t);
    return 0;
}

/* A LUN the target does not have yet: volume zv, or a standby LU (zv NULL)
 * of the geometry given. srv->lock held. */
static int lun_add_new(itarget_t *t, uint64_t lun, zvol_t *zv, const scsi_lu_opts_t *opts,
                       uint32_t block_size, uint32_t volblocksize)
{
    uint64_t *l = realloc(t->luns, (t->nluns + 1) * sizeof *l);
    if (!l) return -ENOMEM;
    t->luns = l;
    int rc = zv ? scsi_lu_add(t->scsi, lun, zv, opts, NULL)
                : scsi_lu_add_standby(t->scsi, lun, opts, block_size, volblocksize);
    if (!rc) t->luns[t->nluns++] = lun;
    return rc;
}

int iscsi_lun_add(iscsi_server_t *srv, const char *iqn, uint64_t lun, zvol_t *zv,
                  const scsi_lu_opts_t *opts)
{
    if (lun > 16383) return -ERANGE;
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    int rc = 0;
    if (!t) rc = -ENOENT;
    else if (iscsi_target_has_lun(t, lun)) /* a standby LU of that id becomes active */
        rc = scsi_lu_add(t->scsi, lun, zv, opts, NULL);
    else
        rc = lun_add_new(t, lun, zv, opts, 0, 0);
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

int iscsi_lun_add_standby(iscsi_server_t *srv, const char *iqn, uint64_t lun,
                          const scsi_lu_opts_t *opts, uint32_t block_size, uint32_t volblocksize)
{
    if (lun > 16383) return -ERANGE;
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    int rc = 0;
    if (!t) rc = -ENOENT;
    else if (iscsi_target_has_lun(t, lun)) rc = -EEXIST;
    else rc = lun_add_new(t, lun, NULL, opts, block_size, volblocksize);
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

int iscsi_lun_standby(iscsi_server_t *srv, const char *iqn, uint64_t lun)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    if (!t || !iscsi_target_has_lun(t, lun)) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    t->refs++; /* keeps the target while the LU's commands drain unlocked */
    pthread_mutex_unlock(&srv->lock);
    int rc = scsi_lu_set_standby(t->scsi, lun);
    pthread_mutex_lock(&srv->lock);
    t->refs--;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

int iscsi_lun_remove(iscsi_server_t *srv, const char *iqn, uint64_t lun)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    if (!t || !iscsi_target_has_lun(t, lun)) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    for (size_t i = 0; i < t->nluns; i++)
        if (t->luns[i] == lun) {
            t->luns[i] = t->luns[--t->nluns];
            break;
        }
    t->refs++; /* keeps the target while we wait unlocked */
    pthread_mutex_unlock(&srv->lock);
    int rc = scsi_lu_remove(t->scsi, lun);
    pthread_mutex_lock(&srv->lock);
    t->refs--;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    return rc == -ENOENT ? 0 : rc;
}

void iscsi_lun_capacity_changed(iscsi_server_t *srv, const char *iqn, uint64_t lun)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    if (t && iscsi_target_has_lun(t, lun)) scsi_lu_capacity_changed(t->scsi, lun);
    pthread_mutex_unlock(&srv->lock);
}

void iscsi_lun_transitioning(iscsi_server_t *srv, const char *iqn, uint64_t lun)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    if (t && iscsi_target_has_lun(t, lun)) scsi_lu_set_transitioning(t->scsi, lun);
    pthread_mutex_unlock(&srv->lock);
}

int iscsi_acl_add(iscsi_server_t *srv, const char *iqn, const char *initiator)
{
    char err[512];
    if (iscsi_name_check(initiator, err, sizeof err)) return -EINVAL;
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    int rc = 0;
    if (!t) rc = -ENOENT;
    for (size_t i = 0; !rc && i < t->nacl; i++)
        if (!strcmp(t->acl[i], initiator)) rc = -EEXIST;
    if (!rc) {
        char **a = realloc(t->acl, (t->nacl + 1) * sizeof *a);
        char *s = strdup(initiator);
        if (a) t->acl = a;
        if (!a || !s) {
            free(s);
            rc = -ENOMEM;
        } else {
            t->acl[t->nacl++] = s;
        }
    }
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

int iscsi_acl_remove(iscsi_server_t *srv, const char *iqn, const char *initiator)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    int rc = -ENOENT;
    for (size_t i = 0; t && i < t->nacl; i++)
        if (!strcmp(t->acl[i], initiator)) {
            free(t->acl[i]);
            t->acl[i] = t->acl[--t->nacl];
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

int iscsi_chap_set(iscsi_server_t *srv, const char *iqn, const char *user, const char *secret,
                   const char *muser, const char *msecret)
{
    if (user && (!secret || strlen(user) >= 256 || strlen(secret) >= 256 || !*user)) return -EINVAL;
    if (muser && (!user || !msecret || strlen(muser) >= 256 || strlen(msecret) >= 256 || !*muser))
        return -EINVAL;
    if (muser && secret && !strcmp(secret, msecret)) return -EINVAL; /* RFC 7143 12.1.3 */
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    if (!t) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    cairn_strlcpy(t->chap_user, user ? user : "", sizeof t->chap_user);
    cairn_strlcpy(t->chap_secret, user ? secret : "", sizeof t->chap_secret);
    cairn_strlcpy(t->mchap_user, muser ? muser : "", sizeof t->mchap_user);
    cairn_strlcpy(t->mchap_secret, muser ? msecret : "", sizeof t->mchap_secret);
    pthread_mutex_unlock(&srv->lock);
    return 0;
}

int iscsi_target_sessions(iscsi_server_t *srv, const char *iqn, iscsi_session_info_t *out,
                          size_t cap)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, iqn);
    if (!t) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    int n = 0;
    for (iconn_t *c = srv->conns; c; c = c->next) {
        if (c->tgt != t || !c->login_done || c->discovery) continue;
        if ((size_t)n < cap) {
            cairn_strlcpy(out[n].initiator, c->initiator, sizeof out[n].initiator);
            cairn_strlcpy(out[n].peer, c->peer, sizeof out[n].peer);
            out[n].isid = c->isid;
            out[n].tsih = c->tsih;
        }
        n++;
    }
    pthread_mutex_unlock(&srv->lock);
    return n;
}

bool iscsi_acl_allows(itarget_t *t, const char *initiator)
{
    if (!t->nacl) return true;
    for (size_t i = 0; i < t->nacl; i++)
        if (!strcmp(t->acl[i], initiator)) return true;
    return false;
}
