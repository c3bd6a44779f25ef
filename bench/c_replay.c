/* The plain C replay the issue compares simulate with (bench/bench_c_replay.py builds and runs it):
 * an LRU (doubly linked list over dense block ids) per capacity, touching blocks in prompt order, and a
 * per-block heap MIN per capacity, pinned and unpinned — the same algorithms as bench_simulate's
 * plain_lru / plain_belady, so hits must equal the library's on every request.
 *
 * Input (argv[1]): int64 n, int64 lens[n], int64 ids[sum lens] (dense ids 0..D-1), int64 D.
 * argv[2..]: capacities in blocks. Output (argv[2] is the output file, then capacities):
 * for each capacity: int64 hits[n] for lru, pinned, unpinned. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int64_t i64;
static i64 n, D, total, *lens, *ids, *off;

static void lru(i64 cap, i64 *hits) {
    i64 *prv = malloc(D * 8), *nxt = malloc(D * 8);
    char *in = calloc(D, 1);
    i64 head = -1, tail = -1, size = 0;  /* head: MRU, tail: LRU */
    for (i64 r = 0; r < n; r++) {
        const i64 *h = ids + off[r];
        i64 k = 0;
        while (k < lens[r] && in[h[k]]) k++;
        hits[r] = k;
        for (i64 i = 0; i < lens[r]; i++) {
            i64 b = h[i];
            if (in[b]) {
                if (b == head) continue;
                nxt[prv[b]] = nxt[b];
                if (nxt[b] >= 0) prv[nxt[b]] = prv[b]; else tail = prv[b];
            } else { in[b] = 1; size++; }
            prv[b] = -1; nxt[b] = head;
            if (head >= 0) prv[head] = b;
            head = b;
            if (tail < 0) tail = b;
        }
        while (size > cap) {
            i64 b = tail;
            tail = prv[b];
            if (tail >= 0) nxt[tail] = -1; else head = -1;
            in[b] = 0; size--;
        }
    }
    free(prv); free(nxt); free(in);
}

typedef struct { i64 key, id; } Item;
static Item *heap; static i64 hl;
static void push(i64 key, i64 id) {
    i64 i = hl++; heap[i].key = key; heap[i].id = id;
    while (i && heap[(i - 1) / 2].key < heap[i].key) { Item t = heap[i]; heap[i] = heap[(i - 1) / 2]; heap[(i - 1) / 2] = t; i = (i - 1) / 2; }
}
static Item pop(void) {
    Item top = heap[0]; heap[0] = heap[--hl];
    for (i64 i = 0;;) {
        i64 l = 2 * i + 1, r = l + 1, b = i;
        if (l < hl && heap[l].key > heap[b].key) b = l;
        if (r < hl && heap[r].key > heap[b].key) b = r;
        if (b == i) break;
        Item t = heap[i]; heap[i] = heap[b]; heap[b] = t; i = b;
    }
    return top;
}

static void belady(i64 cap, int pinned, const i64 *nextkey, i64 *hits) {
    i64 *when = malloc(D * 8), *stamp = malloc(D * 8);
    char *in = calloc(D, 1);
    heap = malloc((total + 1) * sizeof(Item)); hl = 0;
    Item *held = malloc((total + 1) * sizeof(Item));
    i64 size = 0;
    for (i64 b = 0; b < D; b++) stamp[b] = -1;
    for (i64 r = 0; r < n; r++) {
        const i64 *h = ids + off[r];
        i64 k = 0;
        while (k < lens[r] && in[h[k]]) k++;
        hits[r] = k;
        i64 mine = 0;
        for (i64 i = 0; i < lens[r]; i++) {
            i64 b = h[i];
            if (!in[b]) { in[b] = 1; size++; }
            when[b] = nextkey[off[r] + i];
            push(when[b], b);
            if (stamp[b] != r) { stamp[b] = r; mine++; }
        }
        if (!pinned) mine = 0;
        i64 others = size - mine, nh = 0;
        while (size > cap && others > 0) {
            Item it = pop();
            if (!in[it.id] || when[it.id] != it.key) continue;
            if (pinned && stamp[it.id] == r) held[nh++] = it;
            else { in[it.id] = 0; size--; others--; }
        }
        for (i64 j = 0; j < nh; j++) push(held[j].key, held[j].id);
        while (size > cap) {
            Item it = pop();
            if (in[it.id] && when[it.id] == it.key) { in[it.id] = 0; size--; }
        }
    }
    free(when); free(stamp); free(in); free(heap); free(held);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: c_replay TRACE.bin OUT.bin CAP...\n"); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(&n, 8, 1, f) != 1) return 2;
    lens = malloc(n * 8); off = malloc((n + 1) * 8);
    if (fread(lens, 8, n, f) != (size_t)n) return 2;
    off[0] = 0;
    for (i64 r = 0; r < n; r++) off[r + 1] = off[r] + lens[r];
    total = off[n];
    ids = malloc((total + 1) * 8);
    if (fread(ids, 8, total, f) != (size_t)total || fread(&D, 8, 1, f) != 1) return 2;
    fclose(f);
    i64 maxlen = 1;
    for (i64 r = 0; r < n; r++) if (lens[r] + 1 > maxlen) maxlen = lens[r] + 1;
    /* next use of each access: (request, position) as one key; never = the largest */
    i64 *nextkey = malloc((total + 1) * 8), *nk = malloc(D * 8);
    const i64 NEVER = INT64_MAX;
    for (i64 b = 0; b < D; b++) nk[b] = NEVER;
    for (i64 r = n - 1; r >= 0; r--)
        for (i64 i = lens[r] - 1; i >= 0; i--) {
            i64 t = off[r] + i;
            nextkey[t] = nk[ids[t]];
            nk[ids[t]] = r * maxlen + i;
        }
    FILE *o = fopen(argv[2], "wb");
    i64 *hits = malloc((n + 1) * 8);
    for (int a = 3; a < argc; a++) {
        i64 cap = atoll(argv[a]);
        lru(cap, hits); fwrite(hits, 8, n, o);
        belady(cap, 1, nextkey, hits); fwrite(hits, 8, n, o);
        belady(cap, 0, nextkey, hits); fwrite(hits, 8, n, o);
    }
    fclose(o);
    return 0;
}
