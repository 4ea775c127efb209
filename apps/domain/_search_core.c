/* The channel search's recursion in C: nccl_search_core.run, step for step.
 *
 * apps/domain/nccl_search_core.py is the reference. This file is the same depth-first search
 * (NCCL's ncclTopoSearchRec / RecGpu / RecNet / TryNvls of src/graph/search.cc at v2.30.7-1, with
 * topoweb's bounds), written over the same integer tables, for speed: a step costs some 3 us in
 * CPython and well under a tenth of that here. Every function below carries the name of the
 * Python one it mirrors, and does what that one does in the same order: the same states are
 * visited, the same steps counted, the same graph kept, the same comparisons recorded
 * (tests/domain/engine/test_search_native.py runs both and compares them).
 *
 * Python prepares the tables (nccl_search_core._native_spec) and builds the Graph from what this
 * returns; the candidate order of ncclTopoSearchNextGpuSort is asked of Python once per
 * (GPU, sort, NET) and filtered here, as nccl_search_core._next_order does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SIG_MOD ((1ULL << 61) - 1)
#define EPS 1e-9
#define PCI_TIMEOUT (1L << 10)
#define MAX_GPUS 64

enum { P_RING = 0, P_BTREE = 1, P_TREE = 2, P_NVLS = 3 };

/* ---- paths as one run reserves them (Tables.reserving) ------------------------------------ */
typedef struct {
    uint64_t sig; /* signature change */
    int hops;
    int off;      /* into the set's pairs */
    int cnt;      /* pairs; -1: no path */
} PathR;

typedef struct {
    PathR *p;
    int *k;
    int64_t *a;
} PathSet;

/* ---- the set of states searched, and the channel contexts --------------------------------- */
typedef struct {
    uint64_t *keys; /* 3 words per slot; word 0 has its top bit set when used */
    size_t cap, used;
} Seen;

typedef struct {
    int32_t *arena;
    size_t arena_len, arena_cap;
    size_t *slot_off; /* offset + 1 into arena; 0: empty */
    uint64_t *slot_hash;
    long *slot_id;
    size_t cap, used;
} Contexts;

typedef struct {
    int n, m;
    int pattern, inter, is_ring, is_nvls, is_btree, is_tree, trees;
    int64_t bwi, bwe;
    double bw_intra, bw_inter;
    int cross, same, min_ch, max_ch, nvswitch, can_close, btn0;
    long budget, ub;
    PathSet gpr, upr, dnr;
    int **sel; int *nsel;
    int *sel_all; int nsel_all;
    int **starts; int *nstarts; int has_starts;
    int *local_gpu; int **local_gpus; int *nlocal;
    uint64_t *net_delta, *weight;
    int *nvs_in, *nvs_out;
    int64_t *res, *nres;
    int nlinks;
    uint64_t *onward;
    int **ends[4]; int *nends[4];
    PyObject *order_of, *orders_kept;
    int **ord; int *nord; int **rnk;
    /* the run */
    long left, count;
    long hops;
    uint64_t sig;
    int abort, error;
    int cap_ch, nch;
    int *orders, *olen, *cnets;
    /* the graph kept */
    int k_has, k_n, k_samepat, k_cross;
    long k_hops;
    double k_bwi, k_bwe;
    int changed, k_version, th_version;
    long threshold;
    int k_nch;
    int *k_orders, *k_olen, *k_nets;
    /* the record */
    long *cmp; size_t ncmp, capcmp;
    long *cuts; size_t ncuts, capcuts;
    Seen seen;
    Contexts ctx;
} S;

static int in_range(const int *v, int len, int lo, int hi, const char *what);

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* 1: added, 0: already there, -1: out of memory */
static int seen_add(S *s, uint64_t a, uint64_t b, uint64_t c) {
    Seen *t = &s->seen;
    if ((t->used + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 4096;
        uint64_t *nk = calloc(ncap * 3, sizeof(uint64_t));
        if (nk == NULL)
            return -1;
        for (size_t i = 0; i < t->cap; i++) {
            uint64_t *e = t->keys + 3 * i;
            if (!(e[0] >> 63))
                continue;
            size_t j = mix(e[0] ^ mix(e[1] ^ mix(e[2]))) & (ncap - 1);
            while (nk[3 * j] >> 63)
                j = (j + 1) & (ncap - 1);
            memcpy(nk + 3 * j, e, 3 * sizeof(uint64_t));
        }
        free(t->keys);
        t->keys = nk;
        t->cap = ncap;
    }
    size_t j = mix(a ^ mix(b ^ mix(c))) & (t->cap - 1);
    for (;;) {
        uint64_t *e = t->keys + 3 * j;
        if (!(e[0] >> 63)) {
            e[0] = a;
            e[1] = b;
            e[2] = c;
            t->used++;
            return 1;
        }
        if (e[0] == a && e[1] == b && e[2] == c)
            return 0;
        j = (j + 1) & (t->cap - 1);
    }
}

/* context(): the id of (nch, start, end, btn, forced, replay), ids in order of first use */
static long context(S *s, int nch, int start, int end, int btn, int forced, int replay_ch) {
    Contexts *t = &s->ctx;
    int32_t key[6 + MAX_GPUS];
    int len = 6;
    key[0] = nch; key[1] = start; key[2] = end; key[3] = btn; key[4] = forced;
    if (replay_ch >= 0) {
        int rl = s->olen[replay_ch];
        key[5] = rl;
        for (int i = 0; i < rl; i++)
            key[6 + i] = s->orders[replay_ch * s->n + i];
        len += rl;
    } else {
        key[5] = -1;
    }
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < len; i++)
        h = mix(h ^ (uint32_t)key[i]);
    if ((t->used + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 256;
        size_t *no = calloc(ncap, sizeof(size_t));
        uint64_t *nh = calloc(ncap, sizeof(uint64_t));
        long *ni = calloc(ncap, sizeof(long));
        if (!no || !nh || !ni) {
            free(no); free(nh); free(ni);
            s->error = s->abort = 1;
            return 0;
        }
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slot_off[i])
                continue;
            size_t j = t->slot_hash[i] & (ncap - 1);
            while (no[j])
                j = (j + 1) & (ncap - 1);
            no[j] = t->slot_off[i]; nh[j] = t->slot_hash[i]; ni[j] = t->slot_id[i];
        }
        free(t->slot_off); free(t->slot_hash); free(t->slot_id);
        t->slot_off = no; t->slot_hash = nh; t->slot_id = ni; t->cap = ncap;
    }
    size_t j = h & (t->cap - 1);
    while (t->slot_off[j]) {
        if (t->slot_hash[j] == h) {
            int32_t *e = t->arena + (t->slot_off[j] - 1);
            int elen = e[5] >= 0 ? 6 + e[5] : 6;
            if (elen == len && memcmp(e, key, len * sizeof(int32_t)) == 0)
                return t->slot_id[j];
        }
        j = (j + 1) & (t->cap - 1);
    }
    if (t->arena_len + len > t->arena_cap) {
        size_t ncap = (t->arena_cap ? t->arena_cap * 2 : 4096) + len;
        int32_t *na = realloc(t->arena, ncap * sizeof(int32_t));
        if (na == NULL) {
            s->error = s->abort = 1;
            return 0;
        }
        t->arena = na;
        t->arena_cap = ncap;
    }
    memcpy(t->arena + t->arena_len, key, len * sizeof(int32_t));
    t->slot_off[j] = t->arena_len + 1;
    t->slot_hash[j] = h;
    t->slot_id[j] = (long)t->used;
    t->arena_len += len;
    return (long)t->used++;
}

static void push2(S *s, long **arr, size_t *len, size_t *cap, long x, long y) {
    if (*len + 2 > *cap) {
        size_t ncap = *cap ? *cap * 2 : 256;
        long *na = realloc(*arr, ncap * sizeof(long));
        if (na == NULL) {
            s->error = s->abort = 1;
            return;
        }
        *arr = na;
        *cap = ncap;
    }
    (*arr)[(*len)++] = x;
    (*arr)[(*len)++] = y;
}

/* ---- take / give (followPath) -------------------------------------------------------------- */
static inline int take(S *s, const PathSet *ps, const PathR *pt) {
    const int *k = ps->k + pt->off;
    const int64_t *a = ps->a + pt->off;
    for (int i = 0; i < pt->cnt; i++)
        if (s->res[k[i]] < a[i])
            return 0;
    for (int i = 0; i < pt->cnt; i++)
        s->res[k[i]] -= a[i];
    s->sig = (s->sig + SIG_MOD - pt->sig) % SIG_MOD;
    s->hops += pt->hops;
    return 1;
}

static inline void give(S *s, const PathSet *ps, const PathR *pt) {
    const int *k = ps->k + pt->off;
    const int64_t *a = ps->a + pt->off;
    for (int i = 0; i < pt->cnt; i++)
        s->res[k[i]] += a[i];
    s->sig = (s->sig + pt->sig) % SIG_MOD;
    s->hops -= pt->hops;
}

static inline uint64_t mulmod(uint64_t a, uint64_t b) {
    return (uint64_t)(((unsigned __int128)a * b) % SIG_MOD);
}

/* ---- nccl_search_bounds: better / cuts / first_kept / fit / _chain ----------------------------- */
static int better(S *s, int n, long hops) {
    if (!s->k_has)
        return 1;
    if (s->is_nvls)
        return (s->k_n < n && n <= s->n) || ((double)n * s->bw_inter > (double)s->k_n * s->k_bwe);
    if ((double)n * s->bw_intra > (double)s->k_n * s->k_bwi + EPS)
        return 1;
    if ((double)n * s->bw_intra < (double)s->k_n * s->k_bwi - EPS)
        return 0;
    return s->k_samepat && s->k_cross == s->cross && hops < s->k_hops;
}

static int cut_(S *s, long reach) {
    return s->k_has && (double)reach * s->bw_intra <= (double)s->k_n * s->k_bwi + EPS;
}

static long first_kept(S *s) {
    if (!s->k_has)
        return s->min_ch;
    long t = (long)(((double)s->k_n * s->k_bwi + EPS) / s->bw_intra) - 1;
    if (t < s->min_ch)
        t = s->min_ch;
    while (cut_(s, t))
        t++;
    return t;
}

static long chain(long *us, int m, long limit) {
    for (int i = 1; i < m; i++) { /* sorted(us) */
        long v = us[i];
        int j = i - 1;
        while (j >= 0 && us[j] > v) {
            us[j + 1] = us[j];
            j--;
        }
        us[j + 1] = v;
    }
    int i = 0;
    long cnt = 0, sum = 0;
    for (long r = 1; r <= limit; r++) {
        while (i < m && us[i] < r) {
            sum += us[i];
            cnt++;
            i++;
        }
        if (cnt * r - sum > r)
            return r - 1;
    }
    return limit;
}

static long fit(S *s, long enough) {
    long out = s->max_ch;
    int n = s->n;
    const int64_t bw = s->bwi, bw_net = s->bwe;
    if (s->inter) {
        long u = 0;
        for (int x = 0; x < s->m; x++)
            u += s->nres[x] / bw_net;
        if (u < out)
            out = u;
        if (out && s->is_ring && !s->can_close)
            return 0;
        if (out < enough)
            return out;
    }
    if (n > 1 && s->is_ring && !s->inter) {
        for (int e = 0; e < 2; e++) {
            for (int g = 0; g < n; g++) {
                long u = 0;
                for (int i = 0; i < s->nends[e][g]; i++)
                    u += s->res[s->ends[e][g][i]] / bw;
                if (u < out) {
                    out = u;
                    if (out < enough)
                        return out;
                }
            }
        }
    } else if (n > 1) {
        long outs[MAX_GPUS], ins[MAX_GPUS], tmp[MAX_GPUS];
        for (int e = 0; e < 2; e++) {
            long *units_of = e == 0 ? outs : ins;
            for (int g = 0; g < n; g++) {
                long u = 0;
                for (int i = 0; i < s->nends[e][g]; i++)
                    u += s->res[s->ends[e][g][i]] / bw;
                units_of[g] = u;
            }
            memcpy(tmp, units_of, n * sizeof(long));
            out = chain(tmp, n, out);
            if (out < enough)
                return out;
        }
        if (s->is_ring) {
            for (int g = 0; g < n; g++) {
                long u = outs[g];
                for (int i = 0; i < s->nends[2][g]; i++)
                    u += s->res[s->ends[2][g][i]] / bw_net;
                if (u < out)
                    out = u;
                u = ins[g];
                for (int i = 0; i < s->nends[3][g]; i++)
                    u += s->res[s->ends[3][g][i]] / bw_net;
                if (u < out)
                    out = u;
                if (out < enough)
                    return out;
            }
        }
    }
    return out;
}

/* ---- the candidate order (_next_order) ----------------------------------------------------- */
static int load_order(S *s, int idx, int g, int sort_net, int net) {
    /* (order, ranks): kept in the orders dict across runs of one pattern and limit, asked of
     * order_of (Tables.sorted_gpus, Tables.tie_groups) when missing */
    PyObject *key = PyLong_FromLong(idx);
    if (key == NULL)
        return -1;
    PyObject *r = PyDict_GetItemWithError(s->orders_kept, key);
    if (r != NULL) {
        Py_INCREF(r);
    } else if (PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    } else {
        r = PyObject_CallFunction(s->order_of, "iii", g, sort_net, net);
        if (r == NULL || PyDict_SetItem(s->orders_kept, key, r) < 0) {
            Py_XDECREF(r);
            Py_DECREF(key);
            return -1;
        }
    }
    Py_DECREF(key);
    PyObject *order = NULL, *ranks = NULL;
    if (!PyArg_ParseTuple(r, "OO", &order, &ranks)) {
        Py_DECREF(r);
        return -1;
    }
    PyObject *fo = PySequence_Fast(order, "order_of: a sequence");
    if (fo == NULL) {
        Py_DECREF(r);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fo);
    s->ord[idx] = calloc(len ? len : 1, sizeof(int));
    s->rnk[idx] = calloc(s->n, sizeof(int));
    if (!s->ord[idx] || !s->rnk[idx]) {
        Py_DECREF(fo);
        Py_DECREF(r);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        s->ord[idx][i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(fo, i));
    Py_DECREF(fo);
    if (len > s->n || in_range(s->ord[idx], (int)len, 0, s->n, "GPU") < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "order_of: more GPUs than the system has");
        Py_DECREF(r);
        return -1;
    }
    if (ranks != Py_None) {
        PyObject *fr = PySequence_Fast(ranks, "order_of: ranks");
        if (fr == NULL) {
            Py_DECREF(r);
            return -1;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fr) && i < s->n; i++)
            s->rnk[idx][i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(fr, i));
        Py_DECREF(fr);
    }
    Py_DECREF(r);
    if (PyErr_Occurred())
        return -1;
    s->nord[idx] = (int)len;
    return 0;
}

static int next_order(S *s, int g, int sort_net, int net, uint64_t mask, unsigned char *out) {
    int idx = (g * 3 + sort_net + 1) * (s->m + 1) + (net + 1);
    if (s->nord[idx] < 0 && load_order(s, idx, g, sort_net, net) < 0) {
        s->error = s->abort = 1;
        return 0;
    }
    int cnt = 0;
    const int *o = s->ord[idx];
    for (int i = 0; i < s->nord[idx]; i++)
        if (!((mask >> o[i]) & 1))
            out[cnt++] = (unsigned char)o[i];
    if (!s->nvswitch && cnt >= 3) {
        /* got.sort(key=(rank[h], unvisited GPUs h goes on to)): stable */
        const int *rank = s->rnk[idx];
        long key[MAX_GPUS];
        for (int i = 0; i < cnt; i++)
            key[i] = (long)rank[out[i]] * 128 + __builtin_popcountll(s->onward[out[i]] & ~mask);
        for (int i = 1; i < cnt; i++) {
            unsigned char h = out[i];
            long kv = key[i];
            int j = i - 1;
            while (j >= 0 && key[j] > kv) {
                out[j + 1] = out[j];
                key[j + 1] = key[j];
                j--;
            }
            out[j + 1] = h;
            key[j + 1] = kv;
        }
    }
    return cnt;
}

/* ---- the recursion ------------------------------------------------------------------------- */
static void rec(S *s);
static void rec_gpu(S *s, int g, int step, int btn, int forced, long ctx, uint64_t mask);

static void complete(S *s) {
    int nch = s->nch;
    if (nch >= s->min_ch) {
        push2(s, &s->cmp, &s->ncmp, &s->capcmp, nch, s->hops);
        if (better(s, nch, s->hops)) {
            s->k_has = 1; s->k_n = nch; s->k_hops = s->hops; s->k_samepat = 1; s->k_cross = s->cross;
            s->k_bwi = s->bw_intra; s->k_bwe = s->bw_inter;
            s->changed = 1;
            s->k_version++;
            s->k_nch = nch;
            memcpy(s->k_orders, s->orders, (size_t)nch * s->n * sizeof(int));
            memcpy(s->k_olen, s->olen, (size_t)nch * sizeof(int));
            memcpy(s->k_nets, s->cnets, (size_t)nch * 2 * sizeof(int));
            if (nch == s->max_ch) {
                s->left = -1;
                s->abort = 1;
                return;
            }
            if (nch >= s->ub) {
                s->abort = 1;
                return;
            }
        }
    }
    if (nch < s->max_ch && s->left > 0) {
        if (!s->is_nvls) {
            if (s->th_version != s->k_version) {
                s->th_version = s->k_version;
                s->threshold = first_kept(s);
            }
            long reach = nch + fit(s, s->threshold - nch);
            if (s->has_starts) {
                const int *first = s->orders;
                int back = s->trees ? first[0] : first[s->olen[0] - 1];
                long u = nch;
                for (int i = 0; i < s->nstarts[first[0]]; i++) {
                    int x = s->starts[first[0]][i];
                    if (s->cross || s->upr.p[back * s->m + x].cnt >= 0)
                        u += s->nres[x] / s->bwe;
                }
                if (u < reach)
                    reach = u;
            }
            if (reach < s->min_ch)
                return;
            int c = cut_(s, reach);
            push2(s, &s->cuts, &s->ncuts, &s->capcuts, reach, c);
            if (c)
                return;
        }
        rec(s);
    }
}

static void start_channel(S *s, int g, int forced, int btn, int from_net) {
    if (s->nch >= s->cap_ch) {
        PyErr_SetString(PyExc_RuntimeError, "channel search: more channels than max_channels");
        s->error = s->abort = 1;
        return;
    }
    int ch = s->nch++;
    s->olen[ch] = 0;
    s->cnets[2 * ch] = from_net;
    s->cnets[2 * ch + 1] = -1;
    const PathR *pt = NULL;
    if (from_net >= 0) {
        pt = &s->dnr.p[from_net * s->n + g];
        if (pt->cnt < 0 || !take(s, &s->dnr, pt)) {
            s->nch--;
            return;
        }
    }
    int nch = s->nch;
    int replay = (forced == 2 && nch > 1) ? ch - 1 : -1;
    long ctx = context(s, nch, from_net, -1, btn, forced, replay);
    if (s->abort)
        return;
    rec_gpu(s, g, 0, btn, forced, ctx, 1ULL << g);
    if (s->abort)
        return;
    if (pt != NULL)
        give(s, &s->dnr, pt);
    s->nch--;
}

static void back_to_nic(S *s, int g, int step, int forced, uint64_t mask) {
    int ch = s->nch - 1;
    int start = s->cnets[2 * ch];
    int nch = s->nch;
    int nxt = (s->is_btree && step == 0) ? 1 : -1;
    int replay = (forced == 2 && nch > 1) ? ch - 1 : -1;
    for (int i = 0; i < s->nsel[g]; i++) {
        int net = s->sel[g][i];
        if (s->is_tree && net != start)
            continue;
        if (s->is_ring && s->cross == 2) {
            if ((ch & 1) && net != s->cnets[2 * (ch - 1)])
                continue;
        } else if (s->cross == 0 && net != start) {
            continue;
        }
        if (s->is_btree && step != 0 && net != s->cnets[2 * ch + 1])
            continue;
        const PathR *pt = &s->upr.p[g * s->m + net];
        if (pt->cnt < 0 || !take(s, &s->upr, pt))
            continue;
        int saved = s->cnets[2 * ch + 1];
        s->cnets[2 * ch + 1] = net;
        long ctx = context(s, nch, start, net, nxt, forced, replay);
        if (s->abort)
            return;
        rec_gpu(s, g, step, nxt, forced, ctx, mask);
        if (s->abort)
            return;
        s->cnets[2 * ch + 1] = saved;
        give(s, &s->upr, pt);
        if (s->left <= 0)
            return;
    }
}

static void try_nvls(S *s, int head) {
    int tk[2 * MAX_GPUS];
    int64_t tn[2 * MAX_GPUS];
    int nt = 0, ok = 1;
    for (int d = 0; d < s->n && ok; d++) {
        int64_t need = s->bwi * (d == head ? 2 : 1);
        int ks[2] = {s->nvs_in[d], s->nvs_out[d]};
        for (int j = 0; j < 2; j++) {
            int k = ks[j];
            if (k < 0 || s->res[k] < need) {
                ok = 0;
                break;
            }
            s->res[k] -= need;
            s->sig = (s->sig + SIG_MOD - mulmod(s->weight[k], (uint64_t)need)) % SIG_MOD;
            tk[nt] = k;
            tn[nt++] = need;
        }
    }
    if (ok) {
        rec_gpu(s, -1, s->n, -1, 0, 0, 0);
        if (s->abort)
            return;
    }
    for (int i = 0; i < nt; i++) {
        s->res[tk[i]] += tn[i];
        s->sig = (s->sig + mulmod(s->weight[tk[i]], (uint64_t)tn[i])) % SIG_MOD;
    }
}

static void rec_gpu(S *s, int g, int step, int btn, int forced, long ctx, uint64_t mask) {
    const int n = s->n;
    if (step < n) {
        uint64_t a = (1ULL << 63) | ((uint64_t)ctx << 16) | ((uint64_t)step << 8) | (uint64_t)g;
        int r = seen_add(s, a, mask, s->sig);
        if (r == 0)
            return;
        if (r < 0) {
            PyErr_NoMemory();
            s->error = s->abort = 1;
            return;
        }
    }
    if (s->left <= 0)
        return;
    if (s->count >= s->budget) {
        s->abort = 1;
        return;
    }
    s->left--;
    s->count++;
    if (step == n) {
        complete(s);
        return;
    }
    const int ch = s->nch - 1;
    int *order = s->orders + ch * n;
    if (s->olen[ch] <= step)
        order[s->olen[ch]++] = g;
    else
        order[step] = g;
    if (step == btn) {
        back_to_nic(s, g, step, forced, mask);
    } else if (s->is_nvls) {
        try_nvls(s, g);
    } else if (step < n - 1) {
        unsigned char cands[MAX_GPUS];
        int nc = 0;
        if (forced == 1) {
            cands[nc++] = (unsigned char)(step + 1);
        } else if (forced == 2 && s->nch > 1) {
            if (step + 1 < s->olen[ch - 1])
                cands[nc++] = (unsigned char)s->orders[(ch - 1) * n + step + 1];
        } else if (btn == -1) {
            nc = next_order(s, g, 0, -1, mask, cands);
        } else {
            nc = next_order(s, g, btn == step + 1 ? 1 : -1, s->cnets[2 * ch], mask, cands);
        }
        if (s->abort)
            return;
        const PathR *row = s->gpr.p + (size_t)g * n;
        for (int i = 0; i < nc; i++) {
            int h = cands[i];
            if ((mask >> h) & 1)
                continue;
            const PathR *pt = &row[h];
            if (pt->cnt < 0 || !take(s, &s->gpr, pt))
                continue;
            rec_gpu(s, h, step + 1, btn, forced, ctx, mask | (1ULL << h));
            if (s->abort)
                return;
            give(s, &s->gpr, pt);
            if (s->left <= 0)
                return;
        }
    } else if (s->is_ring && !s->inter) {
        int first = order[0];
        if (n == 1) {
            rec_gpu(s, first, step + 1, btn, forced, ctx, mask);
        } else {
            const PathR *pt = &s->gpr.p[(size_t)g * n + first];
            if (pt->cnt >= 0 && take(s, &s->gpr, pt)) {
                rec_gpu(s, first, step + 1, btn, forced, ctx, mask);
                if (s->abort)
                    return;
                give(s, &s->gpr, pt);
            }
        }
    } else {
        rec_gpu(s, g, n, -1, forced, ctx, mask);
    }
    if (s->abort)
        return;
    if (s->olen[ch] > step)
        s->olen[ch] = step;
}

static void rec_net(S *s) {
    int c = s->nch, found = 0, cn = s->nsel_all;
    for (int i = 0; i < cn; i++) {
        if (s->is_nvls && found)
            break;
        int net = s->sel_all[(c + i) % cn];
        if (s->nres[net] < s->bwe)
            continue;
        if (s->is_ring && s->cross == 2 && (c & 1) && net != s->cnets[2 * (c - 1) + 1])
            continue;
        s->nres[net] -= s->bwe;
        s->sig = (s->sig + SIG_MOD - s->net_delta[net]) % SIG_MOD;
        int local = s->local_gpu[net];
        if (s->is_nvls) {
            int head = 0;
            for (int k = 0; k < c; k++)
                if (s->orders[k * s->n] == local)
                    head = 1;
            if (c < cn && local >= 0 && !head) {
                start_channel(s, local, 0, 0, net);
                found = 1;
            }
        } else if (c > 0 && s->same == 1) {
            start_channel(s, s->orders[(c - 1) * s->n], 2, s->btn0, net);
        } else {
            if (c == 0 && !s->nvswitch) {
                /* the first GPU in PCI order, with a time budget of its own (L782-788) */
                long saved = s->left;
                s->left = PCI_TIMEOUT;
                start_channel(s, 0, 1, s->btn0, net);
                s->left = s->left == -1 ? -1 : saved;
                if (s->abort)
                    return;
            }
            if (local >= 0 && s->left > 0) {
                start_channel(s, local, 0, s->btn0, net);
                if (s->abort)
                    return;
            }
            for (int j = 0; j < s->nlocal[net]; j++) {
                int g = s->local_gpus[net][j];
                if (g == local || s->left <= 0)
                    continue;
                start_channel(s, g, 0, s->btn0, net);
                if (s->abort)
                    return;
            }
        }
        if (s->abort)
            return;
        s->nres[net] += s->bwe;
        s->sig = (s->sig + s->net_delta[net]) % SIG_MOD;
        if (s->left <= 0)
            return;
    }
}

static void rec(S *s) {
    if (s->inter) {
        rec_net(s);
        return;
    }
    int c = s->nch;
    if (s->is_nvls) {
        if (c < s->n)
            start_channel(s, c, 0, -1, -1);
        return;
    }
    if (c == 0)
        start_channel(s, 0, 1, -1, -1);
    else
        start_channel(s, s->orders[(c - 1) * s->n], 2, -1, -1);
    if (s->abort)
        return;
    if (s->same == 0 || c == 0) {
        for (int g = 0; g < s->n; g++) {
            if (s->left <= 0)
                return;
            start_channel(s, g, 0, -1, -1);
            if (s->abort)
                return;
        }
    }
}

/* ---- reading the tables -------------------------------------------------------------------- */
static PyObject *item(PyObject *spec, const char *name) {
    PyObject *v = PyDict_GetItemString(spec, name); /* borrowed */
    if (v == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_KeyError, "channel search tables: no %s", name);
    return v;
}

/* a sequence of integers as 64-bit words: signed (None read as -1) or unsigned */
static int words(PyObject *seq, uint64_t **out, int *len, int is_signed) {
    PyObject *f = PySequence_Fast(seq, "a sequence of integers");
    if (f == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    *out = calloc(n ? n : 1, sizeof(uint64_t));
    if (*out == NULL) {
        Py_DECREF(f);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(f, i);
        if (!is_signed)
            (*out)[i] = (uint64_t)PyLong_AsUnsignedLongLong(o);
        else
            (*out)[i] = o == Py_None ? (uint64_t)-1 : (uint64_t)PyLong_AsLongLong(o);
    }
    Py_DECREF(f);
    *len = (int)n;
    return PyErr_Occurred() ? -1 : 0;
}

static int ints(PyObject *seq, int64_t **out, int *len) { return words(seq, (uint64_t **)out, len, 1); }

static int uints(PyObject *seq, uint64_t **out, int *len) { return words(seq, out, len, 0); }

static int small_ints(PyObject *seq, int **out, int *len) {
    int64_t *tmp;
    if (ints(seq, &tmp, len) < 0)
        return -1;
    *out = calloc(*len ? *len : 1, sizeof(int));
    if (*out == NULL) {
        free(tmp);
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < *len; i++)
        (*out)[i] = (int)tmp[i];
    free(tmp);
    return 0;
}

/* a list of lists of small integers */
static int rows(PyObject *seq, int rows_expected, int ***out, int **lens) {
    PyObject *f = PySequence_Fast(seq, "a sequence of rows");
    if (f == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n != rows_expected) {
        Py_DECREF(f);
        PyErr_Format(PyExc_ValueError, "channel search tables: %zd rows, %d expected", n, rows_expected);
        return -1;
    }
    *out = calloc(n ? n : 1, sizeof(int *));
    *lens = calloc(n ? n : 1, sizeof(int));
    if (*out == NULL || *lens == NULL) {
        Py_DECREF(f);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (small_ints(PySequence_Fast_GET_ITEM(f, i), &(*out)[i], &(*lens)[i]) < 0) {
            Py_DECREF(f);
            return -1;
        }
    Py_DECREF(f);
    return 0;
}

/* paths: a list of None or (plain links' weight, 6/5 links' weight, hops, link, charged 6/5, link,
 * charged 6/5, ...), the weights modulo SIG_MOD; reserving ``bw`` MB/s (Tables.reserving) */
static int paths(PyObject *seq, int expected, int64_t bw, PathSet *ps) {
    PyObject *f = PySequence_Fast(seq, "a sequence of paths");
    if (f == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n != expected) {
        Py_DECREF(f);
        PyErr_Format(PyExc_ValueError, "channel search tables: %zd paths, %d expected", n, expected);
        return -1;
    }
    const int64_t over = (bw * 6 + 4) / 5;
    size_t pairs = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(f, i);
        if (o != Py_None)
            pairs += (PyTuple_GET_SIZE(o) - 3) / 2;
    }
    ps->p = calloc(n ? n : 1, sizeof(PathR));
    ps->k = calloc(pairs ? pairs : 1, sizeof(int));
    ps->a = calloc(pairs ? pairs : 1, sizeof(int64_t));
    if (!ps->p || !ps->k || !ps->a) {
        Py_DECREF(f);
        PyErr_NoMemory();
        return -1;
    }
    size_t off = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(f, i);
        if (o == Py_None) {
            ps->p[i].cnt = -1;
            continue;
        }
        Py_ssize_t len = PyTuple_GET_SIZE(o);
        uint64_t w_plain = (uint64_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(o, 0));
        uint64_t w_pci = (uint64_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(o, 1));
        ps->p[i].sig = (mulmod(w_plain, (uint64_t)bw) + mulmod(w_pci, (uint64_t)over)) % SIG_MOD;
        ps->p[i].hops = (int)PyLong_AsLong(PyTuple_GET_ITEM(o, 2));
        ps->p[i].off = (int)off;
        ps->p[i].cnt = (int)((len - 3) / 2);
        for (Py_ssize_t j = 3; j + 1 < len; j += 2) {
            ps->k[off] = (int)PyLong_AsLong(PyTuple_GET_ITEM(o, j));
            ps->a[off++] = PyObject_IsTrue(PyTuple_GET_ITEM(o, j + 1)) ? over : bw;
        }
    }
    Py_DECREF(f);
    return PyErr_Occurred() ? -1 : 0;
}

static void free_rows(int **r, int n) {
    if (r == NULL)
        return;
    for (int i = 0; i < n; i++)
        free(r[i]);
    free(r);
}

static void release(S *s) {
    free(s->gpr.p); free(s->gpr.k); free(s->gpr.a);
    free(s->upr.p); free(s->upr.k); free(s->upr.a);
    free(s->dnr.p); free(s->dnr.k); free(s->dnr.a);
    free_rows(s->sel, s->n); free(s->nsel);
    free(s->sel_all);
    free_rows(s->starts, s->n); free(s->nstarts);
    free(s->local_gpu);
    free_rows(s->local_gpus, s->m); free(s->nlocal);
    free(s->net_delta); free(s->weight); free(s->nvs_in); free(s->nvs_out);
    free(s->res); free(s->nres); free(s->onward);
    for (int e = 0; e < 4; e++) {
        free_rows(s->ends[e], s->n);
        free(s->nends[e]);
    }
    int keys = s->n * 3 * (s->m + 1);
    free_rows(s->ord, s->ord ? keys : 0);
    free(s->nord);
    free_rows(s->rnk, s->rnk ? keys : 0);
    free(s->orders); free(s->olen); free(s->cnets);
    free(s->k_orders); free(s->k_olen); free(s->k_nets);
    free(s->cmp); free(s->cuts);
    free(s->seen.keys);
    free(s->ctx.arena); free(s->ctx.slot_off); free(s->ctx.slot_hash); free(s->ctx.slot_id);
}

/* every index the tables hold is checked once, here: the recursion then reads without checks */
static int in_range(const int *v, int len, int lo, int hi, const char *what) {
    for (int i = 0; i < len; i++)
        if (v[i] < lo || v[i] >= hi) {
            PyErr_Format(PyExc_ValueError, "channel search tables: %s %d outside %d..%d", what, v[i], lo, hi - 1);
            return -1;
        }
    return 0;
}

static int rows_in_range(int **r, const int *lens, int nrows, int lo, int hi, const char *what) {
    for (int i = 0; i < nrows; i++)
        if (in_range(r[i], lens[i], lo, hi, what) < 0)
            return -1;
    return 0;
}

static int sized(int len, int want, const char *what) {
    if (len != want) {
        PyErr_Format(PyExc_ValueError, "channel search tables: %d %s, %d expected", len, what, want);
        return -1;
    }
    return 0;
}

static int load(S *s, PyObject *spec) {
    PyObject *o;
    int len;
    const int n = s->n, m = s->m;
#define NEED(name) if ((o = item(spec, name)) == NULL) return -1
    NEED("cap0");
    if (ints(o, &s->res, &s->nlinks) < 0) return -1;
    const int L = s->nlinks;
    NEED("net0");
    if (ints(o, &s->nres, &len) < 0 || sized(len, m, "NET capacities") < 0) return -1;
    NEED("gpu");
    if (paths(o, n * n, s->bwi, &s->gpr) < 0) return -1;
    NEED("up");
    if (paths(o, s->inter ? n * m : 0, s->is_btree ? s->bwe / 2 : s->bwe, &s->upr) < 0) return -1;
    NEED("down");
    if (paths(o, s->inter ? m * n : 0, s->bwe, &s->dnr) < 0) return -1;
    const PathSet *sets[3] = {&s->gpr, &s->upr, &s->dnr};
    const int counts[3] = {n * n, s->inter ? n * m : 0, s->inter ? m * n : 0};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < counts[t]; i++)
            if (sets[t]->p[i].cnt > 0 && in_range(sets[t]->k + sets[t]->p[i].off, sets[t]->p[i].cnt, 0, L, "link") < 0)
                return -1;
    if (s->inter) {
        NEED("sel");
        if (rows(o, n, &s->sel, &s->nsel) < 0 || rows_in_range(s->sel, s->nsel, n, 0, m, "NET") < 0) return -1;
        NEED("sel_all");
        if (small_ints(o, &s->sel_all, &s->nsel_all) < 0 || in_range(s->sel_all, s->nsel_all, 0, m, "NET") < 0)
            return -1;
    }
    NEED("same_starts");
    if (o != Py_None) {
        s->has_starts = 1;
        if (rows(o, n, &s->starts, &s->nstarts) < 0 || rows_in_range(s->starts, s->nstarts, n, 0, m, "NET") < 0)
            return -1;
    }
    NEED("local_gpu");
    if (small_ints(o, &s->local_gpu, &len) < 0 || sized(len, m, "local GPUs") < 0 ||
        in_range(s->local_gpu, m, -1, n, "GPU") < 0) return -1;
    NEED("local_gpus");
    if (rows(o, m, &s->local_gpus, &s->nlocal) < 0 || rows_in_range(s->local_gpus, s->nlocal, m, 0, n, "GPU") < 0)
        return -1;
    NEED("net_weight");
    if (uints(o, &s->net_delta, &len) < 0 || sized(len, m, "NET weights") < 0) return -1;
    for (int x = 0; x < len; x++) /* (w * bwe) % SIG_MOD */
        s->net_delta[x] = mulmod(s->net_delta[x], (uint64_t)s->bwe);
    NEED("weight");
    if (uints(o, &s->weight, &len) < 0 || sized(len, L, "link weights") < 0) return -1;
    NEED("nvs_in");
    if (small_ints(o, &s->nvs_in, &len) < 0 || sized(len, n, "fabric links in") < 0 ||
        in_range(s->nvs_in, n, -1, L, "link") < 0) return -1;
    NEED("nvs_out");
    if (small_ints(o, &s->nvs_out, &len) < 0 || sized(len, n, "fabric links out") < 0 ||
        in_range(s->nvs_out, n, -1, L, "link") < 0) return -1;
    NEED("onward");
    if (uints(o, &s->onward, &len) < 0 || sized(len, n, "onward masks") < 0) return -1;
    static const char *names[4] = {"firsts", "lasts", "net_firsts", "net_lasts"};
    for (int e = 0; e < 4; e++) {
        NEED(names[e]);
        if (rows(o, n, &s->ends[e], &s->nends[e]) < 0 || rows_in_range(s->ends[e], s->nends[e], n, 0, L, "link") < 0)
            return -1;
    }
#undef NEED
    if (s->max_ch < 0 || s->max_ch > 1024) {
        PyErr_Format(PyExc_ValueError, "channel search: max_channels %d", s->max_ch);
        return -1;
    }
    int keys = n * 3 * (m + 1);
    s->ord = calloc(keys, sizeof(int *));
    s->rnk = calloc(keys, sizeof(int *));
    s->nord = malloc(keys * sizeof(int));
    s->cap_ch = s->max_ch + 2;
    s->orders = calloc((size_t)s->cap_ch * n, sizeof(int));
    s->olen = calloc(s->cap_ch, sizeof(int));
    s->cnets = calloc((size_t)s->cap_ch * 2, sizeof(int));
    s->k_orders = calloc((size_t)s->cap_ch * n, sizeof(int));
    s->k_olen = calloc(s->cap_ch, sizeof(int));
    s->k_nets = calloc((size_t)s->cap_ch * 2, sizeof(int));
    if (!s->ord || !s->rnk || !s->nord || !s->orders || !s->olen || !s->cnets || !s->k_orders || !s->k_olen ||
        !s->k_nets) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < keys; i++)
        s->nord[i] = -1;
    return 0;
}

static PyObject *result(S *s) {
    PyObject *orders = PyList_New(s->changed ? s->k_nch : 0);
    PyObject *nets = PyList_New(s->changed ? s->k_nch : 0);
    PyObject *cmp = PyList_New((Py_ssize_t)(s->ncmp / 2));
    PyObject *cuts = PyList_New((Py_ssize_t)(s->ncuts / 2));
    if (!orders || !nets || !cmp || !cuts)
        goto fail;
    for (int c = 0; s->changed && c < s->k_nch; c++) {
        PyObject *o = PyTuple_New(s->k_olen[c]);
        if (o == NULL)
            goto fail;
        for (int i = 0; i < s->k_olen[c]; i++)
            PyTuple_SET_ITEM(o, i, PyLong_FromLong(s->k_orders[c * s->n + i]));
        PyList_SET_ITEM(orders, c, o);
        PyObject *x = Py_BuildValue("(ii)", s->k_nets[2 * c], s->k_nets[2 * c + 1]);
        if (x == NULL)
            goto fail;
        PyList_SET_ITEM(nets, c, x);
    }
    for (size_t i = 0; i < s->ncmp / 2; i++) {
        PyObject *x = Py_BuildValue("(ll)", s->cmp[2 * i], s->cmp[2 * i + 1]);
        if (x == NULL)
            goto fail;
        PyList_SET_ITEM(cmp, (Py_ssize_t)i, x);
    }
    for (size_t i = 0; i < s->ncuts / 2; i++) {
        PyObject *x = Py_BuildValue("(lO)", s->cuts[2 * i], s->cuts[2 * i + 1] ? Py_True : Py_False);
        if (x == NULL)
            goto fail;
        PyList_SET_ITEM(cuts, (Py_ssize_t)i, x);
    }
    return Py_BuildValue("(llilNNNN)", s->left, s->count, s->changed, s->k_hops, orders, nets, cmp, cuts);
fail:
    Py_XDECREF(orders); Py_XDECREF(nets); Py_XDECREF(cmp); Py_XDECREF(cuts);
    return NULL;
}

PyDoc_STRVAR(run_doc,
"run(spec, order_of, orders, pattern, inter, bwi, bwe, bw_intra, bw_inter, cross, same, min_ch, max_ch,\n"
"    time, steps, budget, ub, can_close, best) -> (time left, steps, changed, hops, orders, nets,\n"
"    compared, cuts)\n\n"
"One ncclTopoSearchRec run: nccl_search_core.run on the tables of nccl_search_core._native_spec.");

static PyObject *py_run(PyObject *self, PyObject *args) {
    PyObject *spec, *order_of, *orders_kept, *best;
    int pattern, inter, cross, same, min_ch, max_ch, can_close;
    long long bwi, bwe;
    double bw_intra, bw_inter;
    long time_, steps, budget, ub;
    if (!PyArg_ParseTuple(args, "O!OO!iiLLddiiiillllpO", &PyDict_Type, &spec, &order_of, &PyDict_Type, &orders_kept, &pattern, &inter, &bwi,
                          &bwe, &bw_intra, &bw_inter, &cross, &same, &min_ch, &max_ch, &time_, &steps, &budget,
                          &ub, &can_close, &best))
        return NULL;
    S s;
    memset(&s, 0, sizeof s);
    PyObject *o = item(spec, "n");
    if (o == NULL)
        return NULL;
    s.n = (int)PyLong_AsLong(o);
    if ((o = item(spec, "m")) == NULL)
        return NULL;
    s.m = (int)PyLong_AsLong(o);
    if (PyErr_Occurred())
        return NULL;
    if (s.n < 1 || s.n > MAX_GPUS) {
        PyErr_Format(PyExc_ValueError, "channel search: %d GPUs (1 to %d)", s.n, MAX_GPUS);
        return NULL;
    }
    s.pattern = pattern;
    s.inter = inter;
    s.is_ring = pattern == P_RING; s.is_btree = pattern == P_BTREE; s.is_tree = pattern == P_TREE;
    s.is_nvls = pattern == P_NVLS; s.trees = s.is_btree || s.is_tree;
    s.bwi = bwi; s.bwe = bwe; s.bw_intra = bw_intra; s.bw_inter = bw_inter;
    s.cross = cross; s.same = same; s.min_ch = min_ch; s.max_ch = max_ch; s.can_close = can_close;
    s.budget = budget; s.ub = ub;
    s.btn0 = inter ? (s.is_ring ? s.n - 1 : 0) : -1;
    s.left = time_; s.count = steps;
    s.th_version = -1;
    if ((o = item(spec, "nvswitch")) == NULL)
        return NULL;
    s.nvswitch = PyObject_IsTrue(o);
    s.order_of = order_of;
    s.orders_kept = orders_kept;
    if (best != Py_None) {
        int samepat, kc;
        if (!PyArg_ParseTuple(best, "iddlpi", &s.k_n, &s.k_bwi, &s.k_bwe, &s.k_hops, &samepat, &kc))
            return NULL;
        s.k_has = 1; s.k_samepat = samepat; s.k_cross = kc;
    }
    PyObject *out = NULL;
    if (load(&s, spec) == 0) {
        if (s.count < s.budget)
            rec(&s);
        if (!s.error)
            out = result(&s);
        else if (!PyErr_Occurred())
            PyErr_NoMemory();
    }
    release(&s);
    return out;
}

PyDoc_STRVAR(min_cut_doc,
"min_cut(n, edges) -> int\n\n"
"The minimum cut of the graph on nodes 0..n-1 with the weighted edges (a, b, w), w >= 0\n"
"(Stoer-Wagner; 0 when the graph is not connected): Tables.ring_cut's bound.");

static PyObject *py_min_cut(PyObject *self, PyObject *args) {
    int n;
    PyObject *edges;
    if (!PyArg_ParseTuple(args, "iO", &n, &edges))
        return NULL;
    if (n < 2 || n > 4096) {
        PyErr_Format(PyExc_ValueError, "min_cut: %d nodes", n);
        return NULL;
    }
    PyObject *f = PySequence_Fast(edges, "min_cut: a sequence of (a, b, w)");
    if (f == NULL)
        return NULL;
    long long *w = calloc((size_t)n * n, sizeof(long long));
    long long *sum = calloc(n, sizeof(long long));
    int *v = calloc(n, sizeof(int));
    char *added = calloc(n, 1);
    if (!w || !sum || !v || !added) {
        free(w); free(sum); free(v); free(added);
        Py_DECREF(f);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(f); i++) {
        int a, b;
        long long x;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(f, i), "iiL", &a, &b, &x) || a < 0 || b < 0 || a >= n ||
            b >= n || x < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "min_cut: an edge out of range");
            free(w); free(sum); free(v); free(added);
            Py_DECREF(f);
            return NULL;
        }
        if (a != b) {
            w[(size_t)a * n + b] += x;
            w[(size_t)b * n + a] += x;
        }
    }
    Py_DECREF(f);
    long long best = -1;
    for (int i = 0; i < n; i++)
        v[i] = i;
    for (int cnt = n; cnt > 1; cnt--) {
        /* one phase: add the most tightly connected node until all are in; the last one's weight
         * to the rest is a cut; merge it into the one added before it */
        memset(added, 0, cnt);
        memset(sum, 0, cnt * sizeof(long long));
        int prev = -1, last = -1;
        for (int i = 0; i < cnt; i++) {
            int sel = -1;
            for (int j = 0; j < cnt; j++)
                if (!added[j] && (sel < 0 || sum[j] > sum[sel]))
                    sel = j;
            added[sel] = 1;
            if (i == cnt - 1) {
                last = sel;
                break;
            }
            prev = sel;
            for (int j = 0; j < cnt; j++)
                if (!added[j])
                    sum[j] += w[(size_t)v[sel] * n + v[j]];
        }
        if (best < 0 || sum[last] < best)
            best = sum[last];
        int p = v[prev], l = v[last];
        for (int j = 0; j < cnt; j++) {
            int u = v[j];
            if (u == p || u == l)
                continue;
            w[(size_t)p * n + u] += w[(size_t)l * n + u];
            w[(size_t)u * n + p] = w[(size_t)p * n + u];
        }
        v[last] = v[cnt - 1];
    }
    free(w); free(sum); free(v); free(added);
    return PyLong_FromLongLong(best);
}

static PyMethodDef methods[] = {
    {"run", py_run, METH_VARARGS, run_doc},
    {"min_cut", py_min_cut, METH_VARARGS, min_cut_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_search_core",
    "nccl_search_core.run in C (apps/domain/_search_core.c).", -1, methods, NULL, NULL, NULL, NULL,
};

#ifndef SOURCE_SHA
#define SOURCE_SHA "unknown"
#endif

PyMODINIT_FUNC PyInit__search_core(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "source_sha", SOURCE_SHA) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
