/* SPDX-License-Identifier: MIT */
/*
 * The memory tier: chunks a reader uses, kept in an LRU bounded in bytes. A chunk is kept as
 * its decompressed bytes, or, when it came as a plain copy (cas/plain.h), as the copy's open
 * descriptor: then its bytes live in the page cache, shared with every process reading the
 * store, and the entry costs a descriptor, not memory (at most half of RLIMIT_NOFILE of
 * those, in [16, 65536]). Under a bounded store a plain copy held open would keep its disk
 * space after eviction, so there such entries count against the bytes too.
 *
 * get lends an entry (referenced: never evicted while lent; release gives it back); put
 * takes a block from below in place (the chain leaves offsetof(struct mem_entry, data)
 * bytes free in front of it), so a chunk's bytes are never copied here.
 */
#include "../tier.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct mem_entry {
	struct mem_entry *prev, *next;    /* LRU list, most recently used first */
	struct mem_entry *hnext;          /* hash bucket */
	uint8_t d[SHA256_LEN];
	uint32_t refs;                    /* lent out: not evicted meanwhile */
	bool ra_mark;                     /* read ahead and not used yet */
	bool dead;                        /* forgotten while lent: freed by the last release */
	int fd;                           /* a plain copy, or -1: the bytes are in data[] */
	size_t len;
	uint8_t data[];
};

struct mem_tier {
	struct tier t;
	pthread_mutex_t lock;
	size_t budget;                    /* bytes of decompressed chunks kept at most */
	unsigned fd_max;                  /* plain copies kept open at most */
	bool plain_bytes_budget;          /* and their bytes count in budget (a bounded store) */
	unsigned n_fds;
	struct mem_entry **buckets;
	size_t mask;
	struct mem_entry *head, *tail;
	struct cas_memory_stats st;
};

#define MT(t) ((struct mem_tier *)(t))

/* Half the descriptors this process may open, within [16, 65536]. */
static unsigned fd_budget(void)
{
	struct rlimit rl;
	rlim_t n = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = rl.rlim_cur;
	else if (rl.rlim_cur == RLIM_INFINITY)
		n = 1u << 17;
	n /= 2;
	return n < 16 ? 16 : n > 65536 ? 65536 : (unsigned)n;
}

static struct mem_entry **bucket(struct mem_tier *m, const uint8_t d[SHA256_LEN])
{
	uint64_t h;

	memcpy(&h, d, sizeof(h)); /* a sha256: already uniform */
	return &m->buckets[h & m->mask];
}

/* Under m->lock. */
static struct mem_entry *find(struct mem_tier *m, const uint8_t d[SHA256_LEN])
{
	struct mem_entry *e = *bucket(m, d);

	while (e && memcmp(e->d, d, SHA256_LEN))
		e = e->hnext;
	return e;
}

static void entry_free(struct mem_entry *e)
{
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

static void lru_unlink(struct mem_tier *m, struct mem_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		m->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		m->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push_front(struct mem_tier *m, struct mem_entry *e)
{
	e->prev = NULL;
	e->next = m->head;
	if (m->head)
		m->head->prev = e;
	m->head = e;
	if (!m->tail)
		m->tail = e;
}

/* Take e out of the tier (its borrowers, if any, keep it). Under m->lock. */
static void entry_remove(struct mem_tier *m, struct mem_entry *e)
{
	struct mem_entry **pp = bucket(m, e->d);

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(m, e);
	if (e->fd >= 0) {
		m->n_fds--;
		m->st.plain--;
	}
	if (e->fd < 0 || m->plain_bytes_budget)
		m->st.bytes -= e->len;
}

/*
 * Evict least recently used entries nobody borrows, to make room for one more entry like n:
 * its bytes, or its descriptor. Under m->lock.
 */
static void make_room(struct mem_tier *m, const struct mem_entry *n)
{
	bool plain = n->fd >= 0 && !m->plain_bytes_budget;
	struct mem_entry *e = m->tail;

	while (e && (plain ? m->n_fds + 1 > m->fd_max
			   : m->st.bytes + n->len > m->budget ||
			     (n->fd >= 0 && m->n_fds + 1 > m->fd_max))) {
		struct mem_entry *prev = e->prev;

		if (e->refs || (plain && e->fd < 0) ||
		    (!plain && e->fd >= 0 && !m->plain_bytes_budget)) {
			e = prev;
			continue;
		}
		entry_remove(m, e);
		m->st.evictions++;
		entry_free(e);
		e = prev;
	}
}

static void lend(struct mem_entry *e, struct tier_chunk *c)
{
	c->ref = e;
	c->fd = e->fd;
	c->data = e->fd < 0 ? e->data : NULL;
	c->len = e->len;
	c->block = NULL;
}

static int mem_get(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct mem_tier *m = MT(t);
	struct mem_entry *e;

	pthread_mutex_lock(&m->lock);
	e = find(m, q->d);
	if (!e) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	if (!q->ahead && e->ra_mark) {
		c->ahead = true;
		e->ra_mark = false;
	}
	m->st.hits++;
	lru_unlink(m, e);
	lru_push_front(m, e);
	e->refs++;
	pthread_mutex_unlock(&m->lock);
	lend(e, c);
	c->from = TIER_MEMORY;
	return 0;
}

/* A chunk from below for a holder: kept, and lent to it (c->ref NULL: out of memory). */
static void mem_put(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct mem_tier *m = MT(t);
	struct mem_entry *e, *old;

	if (q->ask != TIER_ASK_HOLD)
		return;
	if (c->fd >= 0) {
		e = malloc(sizeof(*e));
		if (!e)
			return;
	} else {
		e = c->block;
	}
	memcpy(e->d, q->d, SHA256_LEN);
	e->fd = c->fd;
	e->len = c->len;
	e->refs = 1;
	e->dead = false;
	e->ra_mark = q->mark;
	e->prev = e->next = e->hnext = NULL;
	pthread_mutex_lock(&m->lock);
	m->st.loads++;
	m->st.loaded_bytes += e->len;
	m->st.frame_bytes += c->frame_len;
	old = find(m, q->d);
	if (old) {
		entry_remove(m, old);
		old->dead = true;
		if (old->refs)
			old = NULL;
	}
	make_room(m, e);
	lru_push_front(m, e);
	e->hnext = *bucket(m, e->d);
	*bucket(m, e->d) = e;
	if (e->fd >= 0) {
		m->n_fds++;
		m->st.plain++;
	}
	if (e->fd < 0 || m->plain_bytes_budget)
		m->st.bytes += e->len;
	pthread_mutex_unlock(&m->lock);
	if (old)
		entry_free(old);
	lend(e, c);
}

static bool mem_release(struct tier *t, struct tier_chunk *c, bool bad)
{
	struct mem_tier *m = MT(t);
	struct mem_entry *e = c->ref;
	bool gone, forgot = false;

	pthread_mutex_lock(&m->lock);
	if (bad && !e->dead) {
		e->dead = true;
		entry_remove(m, e);
		forgot = true;
	}
	gone = --e->refs == 0 && e->dead;
	pthread_mutex_unlock(&m->lock);
	if (gone)
		entry_free(e);
	c->ref = NULL;
	return forgot;
}

static int mem_has(struct tier *t, const uint8_t d[SHA256_LEN])
{
	struct mem_tier *m = MT(t);
	bool here;

	pthread_mutex_lock(&m->lock);
	here = find(m, d) != NULL;
	pthread_mutex_unlock(&m->lock);
	return here;
}

static void mem_drop(struct tier *t, const uint8_t d[SHA256_LEN])
{
	struct mem_tier *m = MT(t);
	struct mem_entry *e;

	pthread_mutex_lock(&m->lock);
	e = find(m, d);
	if (e) {
		entry_remove(m, e);
		e->dead = true;
		if (e->refs)
			e = NULL;
	}
	pthread_mutex_unlock(&m->lock);
	if (e)
		entry_free(e);
}

static void mem_stats(struct tier *t, struct cas_source_stats *s)
{
	struct mem_tier *m = MT(t);

	pthread_mutex_lock(&m->lock);
	s->mem = m->st;
	pthread_mutex_unlock(&m->lock);
}

/* Free every entry nobody borrows. Under m->lock. */
static void mem_empty(struct mem_tier *m)
{
	for (struct mem_entry *e = m->head, *next; e; e = next) {
		next = e->next;
		if (e->refs)
			continue;
		entry_remove(m, e);
		entry_free(e);
	}
}

void tier_memory_set(struct tier *t, size_t bytes)
{
	struct mem_tier *m = MT(t);

	pthread_mutex_lock(&m->lock);
	mem_empty(m);
	memset(&m->st, 0, sizeof(m->st));
	m->budget = bytes;
	pthread_mutex_unlock(&m->lock);
}

static void mem_close(struct tier *t)
{
	struct mem_tier *m = MT(t);

	mem_empty(m);
	pthread_mutex_destroy(&m->lock);
	free(m->buckets);
	free(m);
}

static const struct tier_ops mem_ops = {
	.get = mem_get,
	.put = mem_put,
	.has = mem_has,
	.drop = mem_drop,
	.stats = mem_stats,
	.release = mem_release,
	.close = mem_close,
};

struct tier *tier_memory_new(const struct cache *cache)
{
	struct mem_tier *m = calloc(1, sizeof(*m));
	size_t n = 1024;

	if (!m)
		return NULL;
	m->fd_max = fd_budget();
	while (n < (size_t)m->fd_max + 4096)
		n *= 2;
	m->buckets = calloc(n, sizeof(*m->buckets));
	if (!m->buckets) {
		free(m);
		return NULL;
	}
	m->mask = n - 1;
	m->plain_bytes_budget = cache != NULL;
	pthread_mutex_init(&m->lock, NULL);
	m->t = (struct tier){ .ops = &mem_ops, .level = TIER_MEMORY, .name = "memory",
			      .head = offsetof(struct mem_entry, data) };
	return &m->t;
}
