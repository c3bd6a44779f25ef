/* The compiled core of the cache passes (see kernels.py, which holds the pure-Python twin of each
 * function and picks one): columnar loops over int64 arrays handed in through the buffer protocol,
 * so the build needs only Python's headers (no numpy headers, no Cython).
 *
 *   dominance_le(prev1, L, q1, out)  out[i] = #{t < L[i] : prev1[t] <= q1[i]}   (Fenwick sweep)
 *   belady_hits(capacity, pinned, req_off, bucket_dst, bucket_off, pos, never, distinct, limit,
 *               chain_off, first, out)                                           (bucketed MIN replay)
 *   trace_drift(offsets, ids, tokens, block_size, lcp, overlap, lost) -> distinct ids
 *               (a sessionless block trace: trace sessions, baseline and lint's PC002 in one pass;
 *                the twin of trace_sessions._trace_drift_py)
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


/* ---- trace_drift: the twin of trace_sessions._trace_drift_py (TraceSessions, ChainIndex, chain_break) ---- */

/* A hash map from a pair of int64 to two int64 values and flags (open addressing, linear probing, at most
 * half full). No deletion: entries are dropped only by rebuilding the map (tm_prune). */
typedef struct { i64 a, b, v, w; int32_t f; int32_t used; } TEnt;
typedef struct { TEnt *e; size_t cap, n; } TMap;

static inline uint64_t tmix(i64 a, i64 b) {
    uint64_t x = (uint64_t)a * 0x9E3779B97F4A7C15ULL + (uint64_t)b;
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ULL; x ^= x >> 27; x *= 0x94D049BB133111EBULL; x ^= x >> 31;
    return x;
}

static int tm_init(TMap *m, size_t cap) {
    m->e = calloc(cap, sizeof(TEnt));
    m->cap = cap; m->n = 0;
    return m->e != NULL;
}

static TEnt *tm_find(const TMap *m, i64 a, i64 b) {
    size_t mask = m->cap - 1, i = tmix(a, b) & mask;
    while (m->e[i].used) {
        if (m->e[i].a == a && m->e[i].b == b) return &m->e[i];
        i = (i + 1) & mask;
    }
    return NULL;
}

/* Rebuild m with cap slots, keeping every entry, or (prune) only those with 16 * v >= seen. */
static int tm_rebuild(TMap *m, size_t cap, int prune, i64 seen) {
    TMap g;
    if (!tm_init(&g, cap)) return 0;
    for (size_t k = 0; k < m->cap; k++) {
        TEnt *x = &m->e[k];
        if (!x->used || (prune && 16 * x->v < seen)) continue;
        size_t i = tmix(x->a, x->b) & (cap - 1);
        while (g.e[i].used) i = (i + 1) & (cap - 1);
        g.e[i] = *x;
        g.n++;
    }
    free(m->e);
    *m = g;
    return 1;
}

static int tm_grow(TMap *m, size_t cap) { return tm_rebuild(m, cap, 0, 0); }

/* The entry of (a, b), added (values v = w = 0, f = 0, *created = 1) when absent; NULL when out of memory. */
static TEnt *tm_put(TMap *m, i64 a, i64 b, int *created) {
    if (2 * (m->n + 1) > m->cap && !tm_grow(m, m->cap * 2)) return NULL;
    size_t mask = m->cap - 1, i = tmix(a, b) & mask;
    while (m->e[i].used) {
        if (m->e[i].a == a && m->e[i].b == b) { *created = 0; return &m->e[i]; }
        i = (i + 1) & mask;
    }
    TEnt *x = &m->e[i];
    x->a = a; x->b = b; x->v = 0; x->w = 0; x->f = 0; x->used = 1;
    m->n++;
    *created = 1;
    return x;
}

/* int64 id -> dense number (first seen, 0, 1, 2...): 16 bytes an entry, at most half full. */
typedef struct { i64 *k; i64 *v; size_t cap, n; } IdMap;

static int id_init(IdMap *m, size_t cap) {
    m->k = malloc(cap * sizeof(i64));
    m->v = malloc(cap * sizeof(i64));
    m->cap = cap; m->n = 0;
    if (!m->k || !m->v) return 0;
    for (size_t i = 0; i < cap; i++) m->v[i] = -1;
    return 1;
}

static inline size_t id_slot(const IdMap *m, i64 key) {
    size_t mask = m->cap - 1, i = tmix(key, 0) & mask;
    while (m->v[i] >= 0 && m->k[i] != key) i = (i + 1) & mask;
    return i;
}

/* The dense number of key (the next one when new); -1 when out of memory. */
static i64 id_get(IdMap *m, i64 key) {
    if (2 * (m->n + 1) > m->cap) {
        IdMap g;
        if (!id_init(&g, m->cap * 2)) { free(g.k); free(g.v); return -1; }
        for (size_t i = 0; i < m->cap; i++)
            if (m->v[i] >= 0) { size_t j = id_slot(&g, m->k[i]); g.k[j] = m->k[i]; g.v[j] = m->v[i]; g.n++; }
        free(m->k); free(m->v);
        *m = g;
    }
    size_t i = id_slot(m, key);
    if (m->v[i] < 0) { m->k[i] = key; m->v[i] = (i64)m->n++; }
    return m->v[i];
}

/* TraceSessions' constants (trace_sessions.py): CANDIDATES, HEAD_TOKENS, MIN_DEPTH, MAX_DEPTH, PRUNE_EVERY. */
#define TS_CANDIDATES 64
#define TS_PRUNE_EVERY 4096

/* holders entries: v = requests holding (p, id) among their leading blocks, w = its first next block,
 * f bit 1: w is set, bit 2: it branched. */
static int tm_prune(TMap *m, i64 seen) {
    size_t cap = 16, keep = 0;
    for (size_t k = 0; k < m->cap; k++) if (m->e[k].used && 16 * m->e[k].v >= seen) keep++;
    while (cap < 2 * (keep + 1)) cap *= 2;
    return tm_rebuild(m, cap, 1, seen);
}

static inline i64 prefix_len(const i64 *a, i64 na, const i64 *b, i64 nb) {
    i64 n = na < nb ? na : nb, k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k;
}

typedef struct {
    i64 depth, sessions, scap;
    i64 *latest;           /* session -> its latest request */
    i64 *nprev, *nnext;    /* list node (session s, position p) = s * depth + p */
    TMap holders, lists;   /* lists: (p, block) -> v head node, w tail node (-1: none), most recent last */
} TS;

static void ts_unlink(TS *t, TEnt *l, i64 node) {
    i64 pv = t->nprev[node], nx = t->nnext[node];
    if (pv >= 0) t->nnext[pv] = nx; else l->v = nx;
    if (nx >= 0) t->nprev[nx] = pv; else l->w = pv;
}

static void ts_append(TS *t, TEnt *l, i64 node) {
    t->nprev[node] = l->w; t->nnext[node] = -1;
    if (l->w >= 0) t->nnext[l->w] = node; else l->v = node;
    l->w = node;
}

/* TraceSessions._index: session s moves from its latest chain old (nold ids; NULL for a new session) to new. */
static int ts_index(TS *t, i64 s, const i64 *old, i64 nold, const i64 *nw, i64 n) {
    i64 d = t->depth;
    for (i64 p = 0; p < (nold < d ? nold : d); p++) {
        if (p >= n || nw[p] != old[p]) {
            TEnt *l = tm_find(&t->lists, p, old[p]);
            if (l) ts_unlink(t, l, s * d + p);
        }
    }
    for (i64 p = 0; p < (n < d ? n : d); p++) {
        int created;
        TEnt *l = tm_put(&t->lists, p, nw[p], &created);
        if (!l) return 0;
        if (created) { l->v = -1; l->w = -1; }
        i64 node = s * d + p;
        if (p < nold && nw[p] == old[p]) ts_unlink(t, l, node);  /* still a peer: to the end */
        ts_append(t, l, node);
    }
    return 1;
}

/* TraceSessions.head */
static i64 ts_head(TS *t, const i64 *ids, i64 n, i64 seen) {
    i64 h = 0, d = n < t->depth ? n : t->depth;
    for (i64 p = 0; p < d; p++) {
        TEnt *x = tm_find(&t->holders, p, ids[p]);
        i64 held = x ? x->v : 0;
        if (2 * held <= seen) break;
        if (x && (x->f & 2)) h = p + 1;
    }
    return h;
}

static PyObject *trace_drift(PyObject *self, PyObject *args) {
    PyObject *o[6];
    long long block_size;
    if (!PyArg_ParseTuple(args, "OOOLOOO", &o[0], &o[1], &o[2], &block_size, &o[3], &o[4], &o[5])) return NULL;
    static const char *names[6] = {"offsets", "ids", "tokens", "lcp", "overlap", "lost"};
    Py_buffer b[6];
    int got = 0;
    for (; got < 6; got++)
        if (!view(o[got], &b[got], got >= 3, names[got])) break;
    PyObject *ret = NULL;
    TS t;
    memset(&t, 0, sizeof t);
    TMap trie;             /* (parent node, dense id) -> node, for ids met under a second parent */
    IdMap dense;
    memset(&trie, 0, sizeof trie);
    memset(&dense, 0, sizeof dense);
    i64 *tparent = NULL, *tnode = NULL, *dn = NULL;   /* dense id -> its first parent node, that node */
    if (got < 6) goto done;
    const i64 *off = b[0].buf, *ids = b[1].buf, *tok = b[2].buf;
    i64 *lcp = b[3].buf, *overlap = b[4].buf, *lost = b[5].buf;
    i64 n = b[2].len / 8, B = block_size, total = b[1].len / 8;
    if (b[0].len / 8 != n + 1 || b[3].len / 8 != n || b[4].len / 8 != n || b[5].len / 8 != n || B < 1 ||
        (n && (off[0] != 0 || off[n] != total))) {
        PyErr_SetString(PyExc_ValueError, "trace_drift: inconsistent arrays");
        goto done;
    }
    i64 maxlen = 1;
    for (i64 r = 0; r < n; r++) {
        if (off[r + 1] < off[r]) { PyErr_SetString(PyExc_ValueError, "trace_drift: offsets go down"); goto done; }
        if (off[r + 1] - off[r] > maxlen) maxlen = off[r + 1] - off[r];
    }
    {   /* _depth(block_size) */
        i64 d = 8192 / B;
        t.depth = d < 16 ? 16 : (d > 128 ? 128 : d);
    }
    t.scap = 1024;
    t.latest = malloc((size_t)t.scap * sizeof(i64));
    t.nprev = malloc((size_t)(t.scap * t.depth) * sizeof(i64));
    t.nnext = malloc((size_t)(t.scap * t.depth) * sizeof(i64));
    tparent = malloc(((size_t)total + 1) * sizeof(i64));
    tnode = malloc(((size_t)total + 1) * sizeof(i64));
    dn = malloc(((size_t)maxlen + 1) * sizeof(i64));
    if (!t.latest || !t.nprev || !t.nnext || !tparent || !tnode || !dn || !tm_init(&t.holders, 1024) ||
        !tm_init(&t.lists, 1024) || !tm_init(&trie, 1024) || !id_init(&dense, 1024)) {
        PyErr_NoMemory(); goto done;
    }
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    i64 nodes = 1;   /* trie node 0 is the root */
    for (i64 i = 0; i < n && !oom; i++) {
        const i64 *c = ids + off[i];
        i64 len = off[i + 1] - off[i], tk = tok[i];
        int created;
        /* baseline: leading ids some earlier request held (dense numbers are given in order of first use) */
        i64 before = (i64)dense.n;
        for (i64 j = 0; j < len; j++) {
            i64 d = id_get(&dense, c[j]);
            if (d < 0) { oom = 1; break; }
            if (d >= before) tparent[d] = -1;
            dn[j] = d;
        }
        if (oom) break;
        i64 k = 0;
        while (k < len && dn[k] < before) k++;
        lcp[i] = k * B < tk ? k * B : tk;
        /* ChainIndex: the longest prefix shared with any earlier request (a trie over dense ids) */
        i64 node = 0, m = 0;
        for (i64 j = 0; j < len; j++) {
            i64 d = dn[j], next;
            if (tparent[d] == node) { next = tnode[d]; if (m == j) m = j + 1; }
            else if (tparent[d] < 0) { tparent[d] = node; next = tnode[d] = nodes++; }
            else {
                TEnt *x = tm_put(&trie, node, d, &created);
                if (!x) { oom = 1; break; }
                if (created) x->v = nodes++;
                else if (m == j) m = j + 1;
                next = x->v;
            }
            node = next;   /* (below a node made here every node is new: m stops) */
        }
        if (oom) break;
        i64 shared = m * B < tk ? m * B : tk;
        /* TraceSessions.assign: _best, then _index, then _learn */
        i64 s = -1, seen = i;
        if (len) {
            i64 h = ts_head(&t, c, len, seen);
            if (h < len) {
                i64 at = h < t.depth - 1 ? h : t.depth - 1;
                TEnt *l = tm_find(&t.lists, at, c[at]);
                if (l) {
                    i64 most = h, cand = 0;
                    for (i64 nd = l->w; nd >= 0 && cand < TS_CANDIDATES; nd = t.nprev[nd], cand++) {
                        i64 q = nd / t.depth, r = t.latest[q];
                        i64 kk = prefix_len(c, len, ids + off[r], off[r + 1] - off[r]);
                        if (kk > most) { s = q; most = kk; }
                    }
                }
            }
        }
        i64 prev = -1;
        if (s < 0) {
            if (t.sessions == t.scap) {
                i64 cap = t.scap * 2;
                i64 *a = realloc(t.latest, (size_t)cap * sizeof(i64));
                if (a) t.latest = a;
                i64 *pp = realloc(t.nprev, (size_t)(cap * t.depth) * sizeof(i64));
                if (pp) t.nprev = pp;
                i64 *nn = realloc(t.nnext, (size_t)(cap * t.depth) * sizeof(i64));
                if (nn) t.nnext = nn;
                if (!a || !pp || !nn) { oom = 1; break; }
                t.scap = cap;
            }
            s = t.sessions++;
            if (!ts_index(&t, s, NULL, 0, c, len)) { oom = 1; break; }
        } else {
            prev = t.latest[s];
            if (!ts_index(&t, s, ids + off[prev], off[prev + 1] - off[prev], c, len)) { oom = 1; break; }
        }
        t.latest[s] = i;
        /* _learn */
        if ((seen + 1) % TS_PRUNE_EVERY == 0 && !tm_prune(&t.holders, seen + 1)) { oom = 1; break; }
        i64 d = len < t.depth ? len : t.depth;
        for (i64 p = 0; p < d; p++) {
            TEnt *x = tm_put(&t.holders, p, c[p], &created);
            if (!x) { oom = 1; break; }
            x->v += 1;
            if (p + 1 < len) {
                if (!(x->f & 1)) { x->w = c[p + 1]; x->f |= 1; }
                else if (x->w != c[p + 1]) x->f |= 2;
            }
        }
        if (oom) break;
        /* lint's PC002 against the session's previous request (chain_break) */
        overlap[i] = 0; lost[i] = 0;
        if (prev >= 0) {
            const i64 *q = ids + off[prev];
            i64 nq = off[prev + 1] - off[prev], tq = tok[prev];
            i64 kk = prefix_len(c, len, q, nq);
            int brk = kk < nq && !(kk == nq - 1 && nq * B > tq);
            if (brk) {
                overlap[i] = tk < tq ? tk : tq;
                lost[i] = overlap[i] - shared > 0 ? overlap[i] - shared : 0;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (oom) { PyErr_NoMemory(); goto done; }
    ret = PyLong_FromSsize_t((Py_ssize_t)dense.n);
done:
    free(t.latest); free(t.nprev); free(t.nnext); free(t.holders.e); free(t.lists.e); free(trie.e);
    free(dense.k); free(dense.v); free(tparent); free(tnode); free(dn);
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return ret;
}

static PyMethodDef methods[] = {
    {"dominance_le", dominance_le, METH_VARARGS, "out[i] = #{t < L[i] : prev1[t] <= q1[i]} (int64 arrays)."},
    {"belady_hits", belady_hits, METH_VARARGS, "Leading-block hits per request under bucketed MIN."},
    {"trace_drift", trace_drift, METH_VARARGS, "Sessionless block trace: baseline lcp, drift overlap, PC002 loss."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", "Compiled cache-pass kernels.", -1, methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
