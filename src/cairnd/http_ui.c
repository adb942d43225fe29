/*
 * The web UI's static files: HTML, CSS and JavaScript built into cairnd from
 * web/ (cmake/embed_ui.cmake writes the table cairnd_ui_assets). They are served
 * without authentication because they hold no data: every figure the pages show
 * comes from the REST API with the session cookie of a log-in.
 *
 * A request names an asset by its exact URL in the fixed table, and nothing
 * else is ever read: there is no file system path to escape from, so ".." and
 * encoded tricks simply find nothing (404).
 *
 * http.c sends them, as every answer, with a strict Content-Security-Policy
 * (scripts, styles and fetches only from this origin, no inline script, no
 * framing), so a hostile string in a dataset name could not run as script even
 * if a page mishandled it (the pages only ever set it as text).
 */
#include "cairnd.h"

#include <microhttpd.h>
#include <string.h>

bool cairnd_ui_is_asset_url(const char *url)
{
    return !strcmp(url, "/") || !strcmp(url, "/ui") || !strncmp(url, "/ui/", 4);
}

const cairnd_ui_asset_t *cairnd_ui_find(const char *method, const char *url, http_reply_t *err)
{
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        cairnd_http_error(err, MHD_HTTP_METHOD_NOT_ALLOWED, "%s only answers GET", url);
        return NULL;
    }
    if (!strcmp(url, "/ui") || !strcmp(url, "/ui/")) url = "/";
    for (size_t i = 0; i < cairnd_ui_asset_count; i++)
        if (!strcmp(cairnd_ui_assets[i].path, url)) return &cairnd_ui_assets[i];
    cairnd_http_error(err, MHD_HTTP_NOT_FOUND, "no such page: %s", url);
    return NULL;
}
