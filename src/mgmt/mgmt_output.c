/*
 * Listing output in the three shapes every listing command offers: aligned
 * columns for people, tab-separated without a header (-H) for scripts that
 * split lines, and one JSON document (--json) for scripts that parse.
 *
 * A table is built whole and printed at the end, because alignment needs the
 * widest cell of each column. Numeric columns are right-aligned like zpool's
 * and become JSON numbers when the cell is a plain integer (which it is when
 * the caller asked for exact values); a human "1.5G" stays a string.
 */
#include <cairn/mgmt.h>
#include <cairn/util.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

struct mgmt_table {
    size_t ncols, nrows;
    char **headers;
    char **cells; /* nrows * ncols */
    uint32_t numeric;
};

mgmt_table_t *mgmt_table_new(size_t ncols, const char *const *headers, uint32_t numeric_mask)
{
    mgmt_table_t *t = cairn_zalloc(sizeof *t);
    t->ncols = ncols;
    t->numeric = numeric_mask;
    t->headers = cairn_zalloc(sizeof(char *) * ncols);
    for (size_t i = 0; i < ncols; i++) t->headers[i] = cairn_strdup(headers[i]);
    return t;
}

void mgmt_table_add_row(mgmt_table_t *t, const char *const *cells)
{
    t->cells = cairn_realloc(t->cells, sizeof(char *) * t->ncols * (t->nrows + 1));
    for (size_t i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = cairn_strdup(cells[i] ? cells[i] : "-");
    t->nrows++;
}

size_t mgmt_table_rows(const mgmt_table_t *t) { return t->nrows; }

void mgmt_table_free(mgmt_table_t *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->ncols; i++) free(t->headers[i]);
    for (size_t i = 0; i < t->ncols * t->nrows; i++) free(t->cells[i]);
    free(t->headers);
    free(t->cells);
    free(t);
}

void mgmt_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

static bool is_integer(const char *s)
{
    if (*s == '-') s++;
    if (!*s) return false;
    if (s[0] == '0' && s[1]) return false; /* JSON forbids leading zeros */
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return false;
    return true;
}

void mgmt_table_print(const mgmt_table_t *t, FILE *f, mgmt_out_mode_t mode, const char *json_key)
{
    if (mode == MGMT_OUT_JSON) {
        fputc('{', f);
        mgmt_json_string(f, json_key ? json_key : "rows");
        fputs(": [", f);
        for (size_t r = 0; r < t->nrows; r++) {
            fputs(r ? ",\n  {" : "\n  {", f);
            for (size_t c = 0; c < t->ncols; c++) {
                char key[64];
                cairn_strlcpy(key, t->headers[c], sizeof key);
                for (char *k = key; *k; k++) *k = (char)tolower((unsigned char)*k);
                if (c) fputs(", ", f);
                mgmt_json_string(f, key);
                fputs(": ", f);
                const char *v = t->cells[r * t->ncols + c];
                if ((t->numeric >> c & 1) && is_integer(v)) fputs(v, f);
                else mgmt_json_string(f, v);
            }
            fputc('}', f);
        }
        fputs(t->nrows ? "\n]}\n" : "]}\n", f);
        return;
    }
    if (mode == MGMT_OUT_TABS) {
        for (size_t r = 0; r < t->nrows; r++)
            for (size_t c = 0; c < t->ncols; c++)
                fprintf(f, "%s%c", t->cells[r * t->ncols + c], c + 1 < t->ncols ? '\t' : '\n');
        return;
    }
    size_t *w = cairn_zalloc(sizeof(size_t) * t->ncols);
    for (size_t c = 0; c < t->ncols; c++) {
        w[c] = strlen(t->headers[c]);
        for (size_t r = 0; r < t->nrows; r++)
            w[c] = CAIRN_MAX(w[c], strlen(t->cells[r * t->ncols + c]));
    }
    for (size_t r = 0; r <= t->nrows; r++) {
        const char *const *row = r == 0 ? (const char *const *)t->headers
                                        : (const char *const *)&t->cells[(r - 1) * t->ncols];
        for (size_t c = 0; c < t->ncols; c++) {
            bool last = c + 1 == t->ncols;
            if (t->numeric >> c & 1) fprintf(f, "%*s", (int)w[c], row[c]);
            else if (last) fputs(row[c], f);
            else fprintf(f, "%-*s", (int)w[c], row[c]);
            fputs(last ? "\n" : "  ", f);
        }
    }
    free(w);
}

void mgmt_format_size(uint64_t bytes, bool exact, char *buf, size_t len)
{
    if (exact) snprintf(buf, len, "%llu", (unsigned long long)bytes);
    else cairn_format_size(bytes, buf, len);
}
