/* The compiled core of the cache passes (see kernels.py, which holds the pure-Python twin of each
 * function and picks one): columnar loops over int64 arrays handed in through the buffer protocol,
 * so the build needs only Python's headers (no numpy headers, no Cython).
 *
 *   dominance_le(prev1, L, q1, out)  out[i] = #{t < L[i] : prev1[t] <= q1[i]}   (Fenwick sweep)
 *   belady_hits(capacity, pinned, req_off, bucket_dst, bucket_off, pos, never, distinct, limit,
 *               chain_off, first, out)                                           (bucketed MIN replay)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

/* An int64, C-contiguous view of obj (writable when asked); returns 0 and sets an error otherwise. */
static int view(PyObject *obj, Py_buffer *b, int writable, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, b, flags) < 0) return 0;
    if (b->itemsize != 8 || b->format == NULL || (strcmp(b->format, "q") && strcmp(b->format, "l") &&
                                                  strcmp(b->format, "<q") && strcmp(b->format, "<l") &&
                                                  strcmp(b->format, "=q") && strcmp(b->format, "=l"))) {
        PyErr_Format(PyExc_TypeError, "%s: expected a contiguous int64 array (format %s)", name,
                     b->format ? b->format : "?");
        PyBuffer_Release(b);
        return 0;
    }
    return 1;
}

static PyObject *dominance_le(PyObject *self, PyObject *args) {
    PyObject *o_prev, *o_L, *o_q, *o_out;
    if (!PyArg_ParseTuple(args, "OOOO", &o_prev, &o_L, &o_q, &o_out)) return NULL;
    Py_buffer bp, bl, bq, bo;
    if (!view(o_prev, &bp, 0, "prev1")) return NULL;
    if (!view(o_L, &bl, 0, "L")) { PyBuffer_Release(&bp); return NULL; }
    if (!view(o_q, &bq, 0, "q1")) { PyBuffer_Release(&bp); PyBuffer_Release(&bl); return NULL; }
    if (!view(o_out, &bo, 1, "out")) { PyBuffer_Release(&bp); PyBuffer_Release(&bl); PyBuffer_Release(&bq); return NULL; }
    Py_ssize_t n = bp.len / 8, m = bl.len / 8;
    const i64 *prev1 = bp.buf, *L = bl.buf, *q1 = bq.buf;
    i64 *out = bo.buf;
    PyObject *ret = NULL;
    if (bq.len / 8 != m || bo.len / 8 != m) {
        PyErr_SetString(PyExc_ValueError, "dominance_le: L, q1 and out must have the same length");
        goto done;
    }
    i64 size = n + 2;                          /* values prev1 in [0, n], Fenwick index value + 1 */
    i64 *tree = calloc((size_t)size + 1, sizeof(i64));
    i64 *head = malloc(((size_t)n + 2) * sizeof(i64));  /* queries by L: bucket lists (L clamped to [0, n]) */
    i64 *link = malloc(((size_t)m + 1) * sizeof(i64));
    if (!tree || !head || !link) { free(tree); free(head); free(link); PyErr_NoMemory(); goto done; }
    for (i64 t = 0; t <= n; t++) head[t] = -1;
    for (i64 i = m - 1; i >= 0; i--) {
        i64 l = L[i] < 0 ? 0 : (L[i] > n ? n : L[i]);
        link[i] = head[l];
        head[l] = i;
    }
    Py_BEGIN_ALLOW_THREADS
    for (i64 t = 0; t <= n; t++) {
        for (i64 i = head[t]; i >= 0; i = link[i]) {   /* #{inserted values <= q1[i]} */
            i64 q = q1[i];
            i64 s = 0;
            if (q >= 0) {
                i64 k = (q + 1 < size ? q + 1 : size);
                for (; k > 0; k -= k & -k) s += tree[k];
            }
            out[i] = s;
        }
        if (t < n) {
            i64 v = prev1[t] < 0 ? 0 : prev1[t];
            for (i64 k = v + 1; k <= size; k += k & -k) tree[k] += 1;
        }
    }
    Py_END_ALLOW_THREADS
    free(tree); free(head); free(link);
    ret = Py_None; Py_INCREF(ret);
done:
    PyBuffer_Release(&bp); PyBuffer_Release(&bl); PyBuffer_Release(&bq); PyBuffer_Release(&bo);
    return ret;
}

/* ---- Belady MIN, bucketed (the same replay as bounds._Buckets) ---------------------------------
 * Cached blocks live in buckets keyed by the request of their next use; a bucket is a singly linked
 * list of entries (a position in that request) in a pool. A max-heap of bucket keys (stale entries
 * skipped) gives the furthest next use; blocks never used again are a count, evicted first. */

typedef struct {
    i64 *bhead, *blen;        /* per request: first entry of its bucket (-1: none), bucket size */
    i64 *epos, *enext;        /* entry pool: position, next entry */
    i64 efree, ecount, ecap;  /* free list head, entries used, pool capacity */
    i64 *heap, hlen;          /* max-heap of request indices */
    i64 size, never;
    i64 *tmp;                 /* scratch for a partial eviction */
} Min;

static void heap_push(Min *c, i64 v) {
    i64 i = c->hlen++;
    c->heap[i] = v;
    while (i > 0) {
        i64 p = (i - 1) / 2;
        if (c->heap[p] >= c->heap[i]) break;
        i64 x = c->heap[p]; c->heap[p] = c->heap[i]; c->heap[i] = x;
        i = p;
    }
}

static void heap_pop(Min *c) {
    c->heap[0] = c->heap[--c->hlen];
    i64 i = 0, n = c->hlen;
    for (;;) {
        i64 l = 2 * i + 1, r = l + 1, big = i;
        if (l < n && c->heap[l] > c->heap[big]) big = l;
        if (r < n && c->heap[r] > c->heap[big]) big = r;
        if (big == i) break;
        i64 x = c->heap[big]; c->heap[big] = c->heap[i]; c->heap[i] = x;
        i = big;
    }
}

static void free_list(Min *c, i64 e) {
    while (e >= 0) { i64 nx = c->enext[e]; c->enext[e] = c->efree; c->efree = e; e = nx; }
}

static i64 new_entry(Min *c) {
    if (c->efree >= 0) { i64 e = c->efree; c->efree = c->enext[e]; return e; }
    return c->ecount++;
}

static int cmp_i64(const void *a, const void *b) {
    i64 x = *(const i64 *)a, y = *(const i64 *)b;
    return (x > y) - (x < y);
}

/* store positions pos[a:e] into bucket t */
static void store_bucket(Min *c, i64 t, const i64 *pos, i64 a, i64 e) {
    if (e <= a) {                      /* an empty bucket still creates its key, as in Python */
        if (c->bhead[t] == -2) { c->bhead[t] = -1; heap_push(c, t); }
        return;
    }
    if (c->bhead[t] == -2) { c->bhead[t] = -1; heap_push(c, t); }
    for (i64 k = a; k < e; k++) {
        i64 en = new_entry(c);
        c->epos[en] = pos[k];
        c->enext[en] = c->bhead[t];
        c->bhead[t] = en;
    }
    c->blen[t] += e - a;
    c->size += e - a;
}

static void evict_to(Min *c, i64 capacity) {
    i64 over = c->size + c->never - capacity;
    if (over <= 0) return;
    i64 gone = over < c->never ? over : c->never;
    c->never -= gone;
    over -= gone;
    while (over > 0 && c->hlen > 0) {
        i64 t = c->heap[0];
        if (c->bhead[t] == -2) { heap_pop(c); continue; }       /* taken by its request already */
        i64 len = c->blen[t];
        if (len <= over) {
            heap_pop(c);
            free_list(c, c->bhead[t]);
            c->bhead[t] = -2; c->blen[t] = 0;
            over -= len; c->size -= len;
        } else {                                                 /* keep the len - over nearest positions */
            i64 k = 0;
            for (i64 e = c->bhead[t]; e >= 0; e = c->enext[e]) c->tmp[k++] = c->epos[e];
            qsort(c->tmp, (size_t)len, sizeof(i64), cmp_i64);
            i64 keep = len - over, e = c->bhead[t];
            for (i64 j = 0; j < keep; j++) { c->epos[e] = c->tmp[j]; if (j + 1 < keep) e = c->enext[e]; }
            free_list(c, c->enext[e]);
            c->enext[e] = -1;
            c->blen[t] = keep;
            c->size -= over; over = 0;
        }
    }
}

static PyObject *belady_hits(PyObject *self, PyObject *args) {
    long long capacity;
    int pinned;
    PyObject *o[10];
    if (!PyArg_ParseTuple(args, "LpOOOOOOOOOO", &capacity, &pinned, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &o[8], &o[9]))
        return NULL;
    static const char *names[10] = {"req_off", "bucket_dst", "bucket_off", "pos", "never", "distinct", "limit",
                                    "chain_off", "first", "out"};
    Py_buffer b[10];
    int got = 0;
    for (; got < 10; got++)
        if (!view(o[got], &b[got], got == 9, names[got])) break;
    PyObject *ret = NULL;
    Min c;
    memset(&c, 0, sizeof c);
    if (got < 10) goto done;
    const i64 *req_off = b[0].buf, *bdst = b[1].buf, *boff = b[2].buf, *pos = b[3].buf, *never = b[4].buf,
              *distinct = b[5].buf, *limit = b[6].buf, *chain_off = b[7].buf, *first = b[8].buf;
    i64 *out = b[9].buf;
    i64 n = b[4].len / 8, nb = b[1].len / 8, npos = b[3].len / 8, total = b[8].len / 8;
    if (b[0].len / 8 != n + 1 || b[2].len / 8 != nb + 1 || b[5].len / 8 != n || b[6].len / 8 != n ||
        b[7].len / 8 != n + 1 || b[9].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "belady_hits: inconsistent plan arrays");
        goto done;
    }
    i64 maxlen = 1;
    for (i64 r = 0; r < n; r++) if (chain_off[r + 1] - chain_off[r] > maxlen) maxlen = chain_off[r + 1] - chain_off[r];
    c.bhead = malloc(((size_t)n + 1) * sizeof(i64));
    c.blen = calloc((size_t)n + 1, sizeof(i64));
    c.ecap = npos + 1;
    c.epos = malloc((size_t)c.ecap * sizeof(i64));
    c.enext = malloc((size_t)c.ecap * sizeof(i64));
    c.heap = malloc(((size_t)nb + 1) * sizeof(i64));
    c.tmp = malloc(((size_t)npos + 1) * sizeof(i64));
    i64 *stamp = malloc(((size_t)maxlen + 1) * sizeof(i64));
    if (!c.bhead || !c.blen || !c.epos || !c.enext || !c.heap || !c.tmp || !stamp) {
        free(stamp); PyErr_NoMemory(); goto done;
    }
    (void)total;
    c.efree = -1;
    for (i64 r = 0; r <= n; r++) c.bhead[r] = -2;   /* -2: no bucket; -1: an empty one */
    for (i64 k = 0; k <= maxlen; k++) stamp[k] = -1;
    Py_BEGIN_ALLOW_THREADS
    for (i64 r = 0; r < n; r++) {
        out[r] = 0;
        if (c.bhead[r] != -2) {                       /* take(r): the positions r finds cached */
            i64 len = c.blen[r];
            if (len > 0) {
                for (i64 e = c.bhead[r]; e >= 0; e = c.enext[e]) stamp[c.epos[e]] = r;
                const i64 *f = first + chain_off[r];
                i64 k = 0, lim = limit[r];
                while (k < lim && stamp[f[k]] == r) k++;
                out[r] = k;
            }
            free_list(&c, c.bhead[r]);
            c.size -= len;
            c.bhead[r] = -2; c.blen[r] = 0;
        }
        i64 a = req_off[r], e = req_off[r + 1];
        if (!pinned) {
            for (i64 k = a; k < e; k++) store_bucket(&c, bdst[k], pos, boff[k], boff[k + 1]);
            c.never += never[r];
            evict_to(&c, capacity);
        } else if (distinct[r] <= capacity) {
            evict_to(&c, capacity - distinct[r]);
            for (i64 k = a; k < e; k++) store_bucket(&c, bdst[k], pos, boff[k], boff[k + 1]);
            c.never += never[r];
        } else {                                      /* alone too big: nothing else, its nearest uses */
            evict_to(&c, 0);
            i64 room = capacity;
            for (i64 k = a; k < e && room > 0; k++) {
                i64 len = boff[k + 1] - boff[k];
                i64 take = len < room ? len : room;
                store_bucket(&c, bdst[k], pos, boff[k], boff[k] + take);
                room -= len;
            }
            i64 nv = never[r] < room ? never[r] : room;
            c.never += nv > 0 ? nv : 0;
        }
    }
    Py_END_ALLOW_THREADS
    free(stamp);
    ret = Py_None; Py_INCREF(ret);
done:
    free(c.bhead); free(c.blen); free(c.epos); free(c.enext); free(c.heap); free(c.tmp);
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return ret;
}

static PyMethodDef methods[] = {
    {"dominance_le", dominance_le, METH_VARARGS, "out[i] = #{t < L[i] : prev1[t] <= q1[i]} (int64 arrays)."},
    {"belady_hits", belady_hits, METH_VARARGS, "Leading-block hits per request under bucketed MIN."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", "Compiled cache-pass kernels.", -1, methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
