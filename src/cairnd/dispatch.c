/*
 * Where every management request enters (the socket in main.c, the HTTP API,
 * /metrics): it takes the pool table lock and hands the request to its
 * family's handler.
 *
 * The lock policy: commands that add or remove pools (create, import,
 * export, destroy) or change a pool's vdevs (add, remove, replace, attach,
 * detach) take the table lock for writing, everything else (list, status,
 * iostat, get, set, scrub, clear, and the dataset, ARC, iSCSI, history and
 * token commands) for reading, so a pool cannot vanish under a request that
 * is using it while ordinary requests still run side by side. Long work such
 * as a scrub runs inside the SPA's own threads; the handler only starts it.
 * `pool events` and ping take no lock: a follower of the events waits for
 * the next one and must not hold up an export.
 */
#include "cairnd.h"

#include <errno.h>
#include <unistd.h>

static bool changes_pool_table(const Cairn__Mgmt__Request *req)
{
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_POOL_CREATE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_IMPORT:
    case CAIRN__MGMT__REQUEST__CMD_POOL_EXPORT:
    case CAIRN__MGMT__REQUEST__CMD_POOL_DESTROY:
    case CAIRN__MGMT__REQUEST__CMD_POOL_ADD:
    case CAIRN__MGMT__REQUEST__CMD_POOL_REMOVE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_REPLACE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_ATTACH:
    case CAIRN__MGMT__REQUEST__CMD_POOL_DETACH: return true;
    default: return false;
    }
}

static void answer_ping(Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    Cairn__Mgmt__Pong *p = cairnd_arena_alloc(a, sizeof *p);
    cairn__mgmt__pong__init(p);
    p->version = cairnd_arena_strdup(a, CAIRN_VERSION);
    p->pid = (uint32_t)getpid();
    p->hostid = spa_hostid();
    p->hostname = cairnd_arena_strdup(a, cairnd_hostname());
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_PONG;
    resp->pong = p;
}

void cairnd_handle_request(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a)
{
    if (cairnd_handle_analytics(req, resp, a)) return;
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_POOL_EVENTS) {
        cairnd_handle_pool_events(req->pool_events, resp, a);
        return;
    }
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_PING) {
        answer_ping(resp, a);
        return;
    }
    /* An import takes the lock itself, after its devices are read (pools.c). */
    if (req->cmd_case != CAIRN__MGMT__REQUEST__CMD_POOL_IMPORT)
        cairnd_table_lock(changes_pool_table(req));
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_SHARE_LIST) cairnd_handle_share_list(resp, a);
    else if (!cairnd_handle_pool(req, resp, a) && !cairnd_handle_dataset(req, resp, a) &&
             !cairnd_handle_arc(req, resp, a) && !cairnd_handle_iscsi(req, resp, a) &&
             !cairnd_handle_history(req, resp, a) && !cairnd_handle_tokens(req, resp, a))
        cairnd_set_error(resp, a, -EOPNOTSUPP, "unknown request (is cairn newer than cairnd?)");
    cairnd_history_record(req, resp);
    cairnd_table_unlock();
}
