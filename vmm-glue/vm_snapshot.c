/* SPDX-License-Identifier: MIT */
#include "vm_snapshot.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/kvm.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../blkd/disk/disk.h"
#include "../common/fsutil.h"
#include "../layout/layout.h"
#include "serial.h"
#include "virtio_mmio.h"
#include "vm_snapshot_ram.h"
#include "vm_state.h"

#define VMSNAP_MAGIC "LZBKVMSN"
#define VMSNAP_VERSION 4u
#define VMSNAP_HDR 512u
#define VMSNAP_STATE_MAX (64u << 20)
#define VMSNAP_RAM_MAX (1ll << 40)
#define VMSNAP_F_DELTA 1u
#define VMSNAP_F_LAYOUT 2u
#define VMSNAP_F_STORE 4u   /* RAM in a store (vm_snapshot_blob): no ram file, no RAM digest */
#define VMSNAP_F_RW 8u      /* with STORE: the image disk had an overlay */
#define VMSNAP_F_ALL (VMSNAP_F_DELTA | VMSNAP_F_LAYOUT | VMSNAP_F_STORE | VMSNAP_F_RW)

struct vmsnap_header {
	char magic[8];                /* "LZBKVMSN" */
	uint32_t version;             /* 4 */
	uint32_t header_size;         /* 512 */
	uint64_t mem_size;            /* bytes of guest RAM: the ram file's size */
	uint32_t ncpus, ndisks;
	uint32_t page_size;           /* 4096 */
	uint32_t flags;               /* VMSNAP_F_* */
	uint8_t cpu_sig[VMSNAP_XXH];  /* XXH3-128 of KVM's CPU features (cpu_sig_pick) */
	char cpu_model[64];           /* "GenuineIntel family 6 model 85 stepping 7" */
	uint8_t kernel_sha[SHA256_LEN];
	uint8_t layout_digest[SHA256_LEN];
	uint64_t state_len;           /* bytes of records after the header */
	uint8_t state_xxh[VMSNAP_XXH];
	uint64_t ram_pages;           /* pages written */
	uint8_t ram_xxh3[VMSNAP_XXH]; /* over the 2 MiB regions' digests (ram_digest) */
	uint8_t delta_sha[SHA256_LEN];/* the delta's own trailing sha256 */
	uint8_t reserved[232];
	uint8_t header_xxh[VMSNAP_XXH];  /* of the 496 bytes before */
};
_Static_assert(sizeof(struct vmsnap_header) == VMSNAP_HDR, "the header is 512 bytes");

struct vm_snapshot {
	char dir[PATH_MAX];
	struct vmsnap_header h;
	uint8_t *file;                /* vm.state */
	size_t file_len;
	int ram_fd;
	struct ram_digest *chk;       /* the RAM check (vm_snapshot_ram_verify) */
	struct kvm_cpuid2 *cpuid;     /* the state's first record */
	bool ram_ok;                  /* vm_snapshot_ram_verify matched */
	struct vm_snapshot_info info;
};

/*
 * The CPU features a guest may rely on, as KVM offers them (a whitelist: other fields, such
 * as APIC ids, depend on the host CPU the call ran on): leaf 0, leaf 1 EAX ECX EDX, leaf 7
 * (subleaves 0 and 1), leaf 0xd (subleaves 0 and 1: the XSAVE features), leaves 0x80000001
 * ECX EDX and 0x80000008 EAX.
 */
static void cpu_sig_pick(const struct kvm_cpuid2 *cp, uint32_t out[24])
{
	static const struct { uint32_t fn, idx, regs; } pick[] = {
		{ 0, 0, 0xf }, { 1, 0, 0xd }, { 7, 0, 0xf }, { 7, 1, 0xf }, { 0xd, 0, 0xf },
		{ 0xd, 1, 0xf }, { 0x80000001, 0, 0xc }, { 0x80000008, 0, 0x1 },
	};
	unsigned k = 0;

	memset(out, 0, 24 * sizeof(out[0]));
	for (unsigned i = 0; i < sizeof(pick) / sizeof(pick[0]); i++) {
		for (uint32_t j = 0; j < cp->nent; j++) {
			const struct kvm_cpuid_entry2 *e = &cp->entries[j];
			uint32_t r[4] = { e->eax, e->ebx, e->ecx, e->edx };

			if (e->function != pick[i].fn || e->index != pick[i].idx)
				continue;
			for (unsigned b = 0; b < 4 && k < 24; b++)
				if (pick[i].regs & (1u << b))
					out[k++] = r[b];
			break;
		}
	}
}

/* The host's CPU as KVM offers it to guests (cp: cpu_sig_pick), and its name for messages. */
static void snap_cpu_sig(const struct kvm_cpuid2 *cp, uint8_t sig[VMSNAP_XXH], char model[64])
{
	unsigned a = 0, b = 0, c = 0, d = 0, vendor[3] = { 0 };
	uint32_t regs[24];

	cpu_sig_pick(cp, regs);
	vmsnap_xxh128(regs, sizeof(regs), sig);
	__get_cpuid(0, &a, &vendor[0], &vendor[2], &vendor[1]);
	__get_cpuid(1, &a, &b, &c, &d);
	memset(model, 0, 64);
	snprintf(model, 64, "%.12s family %u model %u stepping %u", (const char *)vendor,
		 ((a >> 8) & 0xf) + ((a >> 20) & 0xff), ((a >> 4) & 0xf) | ((a >> 12) & 0xf0),
		 a & 0xf);
}

/* cp's CPU (its name into model) is the one the header's signature is of. */
static bool snap_cpu_is(const struct vm_snapshot *s, const struct kvm_cpuid2 *cp, char model[64])
{
	uint8_t sig[VMSNAP_XXH];

	snap_cpu_sig(cp, sig, model);
	return !memcmp(sig, s->h.cpu_sig, VMSNAP_XXH);
}

static int snap_file_sha(const char *path, uint8_t out[SHA256_LEN], char *why, size_t why_len)
{
	struct fs_map m;
	int ret = fs_map_file(path, &m);

	if (ret)
		return why_set(why, why_len, ret, "%s: %s", path, strerror(-ret));
	ret = sha256_buf(m.data, m.len, out);
	fs_unmap(&m);
	return ret ? why_set(why, why_len, ret, "%s: sha256 failed", path) : 0;
}


int vm_snapshot_state_save(const struct vm_parts *p, struct vm_state_buf *b, char *why,
			   size_t why_len)
{
	struct virtio_mmio_state *vs;
	struct serial_state ss;
	int32_t st = *p->exit_status;
	int ret = vm_state_cpuid_save(p->kvm->cpuid, b, why, why_len);

	if (!ret)
		ret = vm_state_vm_save(p->kvm->vm_fd, b, why, why_len);
	for (unsigned i = 0; !ret && i < p->ncpus; i++)
		ret = vm_state_cpu_save(&p->cpus[i], p->kvm->sys_fd, b, why, why_len);
	if (ret)
		return ret;
	serial_state_save(p->serial, &ss);
	ret = vm_state_put(b, VMST_SERIAL, 0, &ss, sizeof(ss));
	vs = malloc(sizeof(*vs));
	if (!vs)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	for (unsigned i = 0; !ret && i < p->ndev; i++) {
		ret = virtio_mmio_state_save(p->vdev[i], vs);
		if (ret == -EBUSY)
			ret = why_set(why, why_len, ret, "virtio-blk disk %u: a request is in "
				      "flight (the VM is not paused)", i);
		else if (ret)
			ret = why_set(why, why_len, ret, "virtio-blk disk %u: %s", i,
				      strerror(-ret));
		else
			ret = vm_state_put(b, VMST_VIRTIO_MMIO, i, vs, sizeof(*vs));
	}
	free(vs);
	if (!ret)
		ret = vm_state_put(b, VMST_EXIT_STATUS, 0, &st, sizeof(st));
	if (!ret)
		ret = vm_state_put(b, VMST_END, 0, NULL, 0);
	return ret == -ENOMEM ? why_set(why, why_len, ret, "out of memory") : ret;
}

/* The trailing sha256 of a delta file (its own digest of everything before it). */
static int delta_sha(const char *path, uint8_t out[SHA256_LEN])
{
	struct stat st;
	int fd = fs_open_regular(AT_FDCWD, path, 0, &st), ret = 0;

	if (fd < 0)
		return fd;
	if (st.st_size < (off_t)(4096 + SHA256_LEN))
		ret = -EINVAL;
	if (!ret)
		ret = fs_pread_full(fd, out, SHA256_LEN, st.st_size - SHA256_LEN);
	close(fd);
	return ret;
}

static void snap_path(char *buf, size_t len, const char *dir, const char *name)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len)
		buf[0] = '\0';   /* too long: open() fails with ENOENT */
}

/* The disk delta and the machine's names into h. */
static int snap_names(const struct vm_parts *p, const char *dir, struct vmsnap_header *h,
		      char *why, size_t why_len)
{
	char path[PATH_MAX];
	char dwhy[WHY_MAX] = "";
	int ret;

	snap_cpu_sig(p->kvm->cpuid, h->cpu_sig, h->cpu_model);
	if (p->kernel && (ret = snap_file_sha(p->kernel, h->kernel_sha, why, why_len)))
		return ret;
	if (!p->kernel && p->kernel_sha)
		memcpy(h->kernel_sha, p->kernel_sha, SHA256_LEN);
	if (!p->disk || disk_layout_digest(p->disk, h->layout_digest))
		return 0;   /* not the lazy image: no layout names it */
	h->flags |= VMSNAP_F_LAYOUT;
	snap_path(path, sizeof(path), dir, VMSNAP_DELTA);
	ret = disk_snapshot(p->disk, path, NULL, NULL, dwhy, sizeof(dwhy));
	if (ret == -ENOENT)
		return 0;   /* no overlay: the disk is the image, read-only */
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", path, dwhy[0] ? dwhy : strerror(-ret));
	h->flags |= VMSNAP_F_DELTA;
	ret = delta_sha(path, h->delta_sha);
	return ret ? why_set(why, why_len, ret, "%s: %s", path, strerror(-ret)) : 0;
}

static int snap_write_state(const char *dir, struct vmsnap_header *h,
			    const struct vm_state_buf *b, char *why, size_t why_len)
{
	char path[PATH_MAX];
	int fd, ret;

	h->state_len = b->len;
	vmsnap_xxh128(b->p, b->len, h->state_xxh);
	vmsnap_xxh128(h, offsetof(struct vmsnap_header, header_xxh), h->header_xxh);
	snap_path(path, sizeof(path), dir, VMSNAP_STATE);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return why_set(why, why_len, -errno, "%s: %s", path, strerror(errno));
	ret = fs_write_full(fd, h, sizeof(*h));
	if (!ret)
		ret = fs_write_full(fd, b->p, b->len);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret ? why_set(why, why_len, ret, "%s: %s", path, strerror(-ret)) : 0;
}

static void snap_remove(const char *dir)
{
	static const char *const names[] = { VMSNAP_STATE, VMSNAP_RAM, VMSNAP_DELTA };
	char path[PATH_MAX];

	for (unsigned i = 0; i < 3; i++) {
		snap_path(path, sizeof(path), dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

int vm_snapshot_write(const struct vm_parts *p, const char *dir, char *why, size_t why_len)
{
	struct vmsnap_header h = { .version = VMSNAP_VERSION, .header_size = VMSNAP_HDR,
				   .mem_size = p->kvm->ram.size, .ncpus = p->ncpus,
				   .ndisks = p->ndev, .page_size = VMSNAP_PAGE };
	struct vm_state_buf b = { 0 };
	char path[PATH_MAX];
	int fd, ret;

	memcpy(h.magic, VMSNAP_MAGIC, 8);
	if (mkdir(dir, 0700) < 0)
		return why_set(why, why_len, -errno, "%s: %s", dir, strerror(errno));
	snap_path(path, sizeof(path), dir, VMSNAP_RAM);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ret = fd < 0 ? -errno : vmsnap_ram_write(&p->kvm->ram, fd, h.ram_xxh3, &h.ram_pages);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	if (ret)
		why_set(why, why_len, ret, "%s: %s", path, strerror(-ret));
	if (!ret)
		ret = vm_snapshot_state_save(p, &b, why, why_len);
	if (!ret)
		ret = snap_names(p, dir, &h, why, why_len);
	if (!ret)
		ret = snap_write_state(dir, &h, &b, why, why_len);
	if (!ret && (ret = fs_fsync_dir(dir)))
		why_set(why, why_len, ret, "%s: %s", dir, strerror(-ret));
	free(b.p);
	if (ret)
		snap_remove(dir);
	return ret;
}

int vm_snapshot_blob(const struct vm_parts *p, bool disk_rw, uint8_t **out, size_t *len,
		     char *why, size_t why_len)
{
	struct vmsnap_header h = { .version = VMSNAP_VERSION, .header_size = VMSNAP_HDR,
				   .mem_size = p->kvm->ram.size, .ncpus = p->ncpus,
				   .ndisks = p->ndev, .page_size = VMSNAP_PAGE,
				   .flags = VMSNAP_F_STORE | (disk_rw ? VMSNAP_F_RW : 0) };
	struct vm_state_buf b = { 0 };
	int ret = vm_snapshot_state_save(p, &b, why, why_len);

	memcpy(h.magic, VMSNAP_MAGIC, 8);
	snap_cpu_sig(p->kvm->cpuid, h.cpu_sig, h.cpu_model);
	if (!ret && p->kernel)
		ret = snap_file_sha(p->kernel, h.kernel_sha, why, why_len);
	if (!ret && !p->kernel && p->kernel_sha)
		memcpy(h.kernel_sha, p->kernel_sha, SHA256_LEN);
	if (!ret && p->disk && !disk_layout_digest(p->disk, h.layout_digest))
		h.flags |= VMSNAP_F_LAYOUT;
	if (!ret) {
		h.state_len = b.len;
		vmsnap_xxh128(b.p, b.len, h.state_xxh);
		vmsnap_xxh128(&h, offsetof(struct vmsnap_header, header_xxh), h.header_xxh);
		*out = malloc(VMSNAP_HDR + b.len);
		if (!*out)
			ret = why_set(why, why_len, -ENOMEM, "out of memory");
	}
	if (!ret) {
		memcpy(*out, &h, VMSNAP_HDR);
		memcpy(*out + VMSNAP_HDR, b.p, b.len);
		*len = VMSNAP_HDR + b.len;
	}
	free(b.p);
	return ret;
}

/* The header on its own: magic, digest, version, sizes (the CPU: vm_snapshot_apply). */
static int snap_check_header(struct vm_snapshot *s, char *why, size_t why_len)
{
	const struct vmsnap_header *h = &s->h;
	uint8_t d[VMSNAP_XXH];

	if (memcmp(h->magic, VMSNAP_MAGIC, 8))
		return why_set(why, why_len, -EINVAL, "%s/vm.state: not a lazyblk VM snapshot "
			       "(bad magic)", s->dir);
	vmsnap_xxh128(h, offsetof(struct vmsnap_header, header_xxh), d);
	if (memcmp(d, h->header_xxh, VMSNAP_XXH))
		return why_set(why, why_len, -EINVAL, "%s/vm.state: header digest mismatch "
			       "(corrupt or altered)", s->dir);
	if (h->version != VMSNAP_VERSION || h->header_size != VMSNAP_HDR ||
	    h->page_size != VMSNAP_PAGE)
		return why_set(why, why_len, -EPROTONOSUPPORT, "%s/vm.state: version %u (this "
			       "lazyblk reads version %u)", s->dir, h->version, VMSNAP_VERSION);
	if (!h->mem_size || h->mem_size % VMSNAP_PAGE || h->mem_size > VMSNAP_RAM_MAX ||
	    !h->ncpus || h->ncpus > CPU_MAX || h->ndisks > 32 ||
	    (h->flags & ~(uint32_t)VMSNAP_F_ALL) ||
	    ((h->flags & VMSNAP_F_STORE) && (h->flags & VMSNAP_F_DELTA)))
		return why_set(why, why_len, -EINVAL, "%s/vm.state: absurd machine (%llu bytes "
			       "of RAM, %u vCPUs, %u disks, flags 0x%x)", s->dir,
			       (unsigned long long)h->mem_size, h->ncpus, h->ndisks, h->flags);
	if (s->file_len - VMSNAP_HDR != h->state_len)
		return why_set(why, why_len, -EINVAL, "%s/vm.state: truncated (%zu bytes of "
			       "state, the header says %llu)", s->dir, s->file_len - VMSNAP_HDR,
			       (unsigned long long)h->state_len);
	vmsnap_xxh128(s->file + VMSNAP_HDR, s->file_len - VMSNAP_HDR, d);
	if (memcmp(d, h->state_xxh, VMSNAP_XXH))
		return why_set(why, why_len, -EINVAL, "%s/vm.state: state digest mismatch "
			       "(corrupt or altered)", s->dir);
	return 0;
}

int vm_snapshot_cpu_verify(const struct vm_snapshot *s, const struct kvm_vm *vm, char *why,
			   size_t why_len)
{
	struct kvm_cpuid2 *host = NULL;
	char model[64];
	int ret = kvm_cpuid_supported(vm->sys_fd, &host, why, why_len);
	bool same = !ret && snap_cpu_is(s, host, model);

	free(host);
	if (ret)
		return ret;
	if (!same)
		return why_set(why, why_len, -EXDEV, "%s: taken on another CPU model or KVM "
			       "(%.64s; this host: %s): a restore needs the same CPU features",
			       s->dir, s->h.cpu_model, model);
	return 0;
}

/* The ram file's size and the delta's digest. */
static int snap_check_files(struct vm_snapshot *s, char *why, size_t why_len)
{
	char path[PATH_MAX];
	uint8_t d[SHA256_LEN];
	struct stat st;
	int ret;

	snap_path(path, sizeof(path), s->dir, VMSNAP_RAM);
	if (s->ram_fd < 0)
		s->ram_fd = fs_open_regular(AT_FDCWD, path, 0, NULL); /* a FIFO: never opened */
	if (s->ram_fd < 0) {
		ret = s->ram_fd;
		s->ram_fd = -1;
		return why_set(why, why_len, ret, "%s: %s", path, fs_open_why(ret));
	}
	if (fstat(s->ram_fd, &st) < 0)
		return why_set(why, why_len, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != s->h.mem_size)
		return why_set(why, why_len, -EINVAL, "%s: %llu bytes, but the snapshot's RAM "
			       "is %llu (truncated, or not this snapshot's)", path,
			       (unsigned long long)st.st_size,
			       (unsigned long long)s->h.mem_size);
	if (!(s->h.flags & VMSNAP_F_DELTA))
		return 0;
	snap_path(path, sizeof(path), s->dir, VMSNAP_DELTA);
	ret = delta_sha(path, d);
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", path,
			       ret == -EINVAL ? "truncated" : strerror(-ret));
	if (memcmp(d, s->h.delta_sha, SHA256_LEN))
		return why_set(why, why_len, -EINVAL, "%s: not this snapshot's disk delta "
			       "(digest mismatch)", path);
	return 0;
}

/* The CPUID record the vCPUs will get: the one the header's CPU signature is of. */
static int snap_take_cpuid(struct vm_snapshot *s, char *why, size_t why_len)
{
	struct vm_state_rd r = { .p = s->file + VMSNAP_HDR, .len = s->file_len - VMSNAP_HDR };
	char model[64];
	int ret = vm_state_cpuid_take(&r, &s->cpuid, why, why_len);

	if (ret)
		return ret;
	if (!snap_cpu_is(s, s->cpuid, model))
		return why_set(why, why_len, -EINVAL, "%s/vm.state: the CPUID record is not the "
			       "one the header's CPU signature is of", s->dir);
	return 0;
}

/* s->file read: the header and the state checked, the info filled in; store: a blob's. */
static int snap_load(struct vm_snapshot *s, bool store, char *why, size_t why_len)
{
	int ret = 0;

	if (s->file_len < VMSNAP_HDR)
		return why_set(why, why_len, -EINVAL, "%s/vm.state: truncated (%zu bytes, the "
			       "header alone is %u)", s->dir, s->file_len, VMSNAP_HDR);
	memcpy(&s->h, s->file, VMSNAP_HDR);
	ret = snap_check_header(s, why, why_len);
	if (!ret && store != !!(s->h.flags & VMSNAP_F_STORE))
		ret = why_set(why, why_len, -EINVAL, store ? "%s/vm.state: the state of a "
			      "snapshot directory, not of one in a store" : "%s/vm.state: the "
			      "state of a snapshot in a store (restore it with --store)", s->dir);
	if (!ret)
		ret = snap_take_cpuid(s, why, why_len);
	if (!ret && !store)
		ret = snap_check_files(s, why, why_len);
	if (ret)
		return ret;
	s->info = (struct vm_snapshot_info){
		.mem_size = s->h.mem_size, .ncpus = s->h.ncpus, .ndisks = s->h.ndisks,
		.has_delta = s->h.flags & VMSNAP_F_DELTA,
		.has_layout = s->h.flags & VMSNAP_F_LAYOUT, .ram_pages = s->h.ram_pages,
		.in_store = store, .disk_rw = s->h.flags & (VMSNAP_F_DELTA | VMSNAP_F_RW),
	};
	memcpy(s->info.layout_digest, s->h.layout_digest, SHA256_LEN);
	memcpy(s->info.kernel_sha, s->h.kernel_sha, SHA256_LEN);
	memcpy(s->info.cpu_sig, s->h.cpu_sig, VMSNAP_XXH);
	memcpy(s->info.cpu_model, s->h.cpu_model, sizeof(s->info.cpu_model));
	s->info.cpu_model[sizeof(s->info.cpu_model) - 1] = '\0';
	return 0;
}

int vm_snapshot_open(const char *dir, struct vm_snapshot **out, char *why, size_t why_len)
{
	struct vm_snapshot *s = calloc(1, sizeof(*s));
	char path[PATH_MAX];
	int ret;

	if (!s)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	s->ram_fd = -1;
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	snap_path(path, sizeof(path), dir, VMSNAP_STATE);
	ret = fs_read_file_max(path, VMSNAP_STATE_MAX, &s->file, &s->file_len);
	if (ret)
		why_set(why, why_len, ret, "%s: %s", path, strerror(-ret));
	else
		ret = snap_load(s, false, why, why_len);
	if (ret) {
		vm_snapshot_close(s);
		return ret;
	}
	*out = s;
	return 0;
}

int vm_snapshot_open_blob(const char *name, uint8_t *state, size_t len,
			  struct vm_snapshot **out, char *why, size_t why_len)
{
	struct vm_snapshot *s = calloc(1, sizeof(*s));
	int ret;

	if (!s) {
		free(state);
		return why_set(why, why_len, -ENOMEM, "out of memory");
	}
	s->ram_fd = -1;
	snprintf(s->dir, sizeof(s->dir), "%s", name);
	s->file = state;
	s->file_len = len;
	ret = snap_load(s, true, why, why_len);
	if (ret) {
		vm_snapshot_close(s);
		return ret;
	}
	*out = s;
	return 0;
}

const struct vm_snapshot_info *vm_snapshot_info(const struct vm_snapshot *s)
{
	return &s->info;
}

int vm_snapshot_ram_fd(const struct vm_snapshot *s)
{
	return s->ram_fd;
}

const struct kvm_cpuid2 *vm_snapshot_cpuid(const struct vm_snapshot *s)
{
	return s->cpuid;
}

int vm_snapshot_ram_verify(struct vm_snapshot *s, char *why, size_t why_len)
{
	uint8_t d[VMSNAP_XXH];
	uint64_t pages = 0;
	int ret;

	if (s->h.flags & VMSNAP_F_STORE) {   /* every page is verified as its chunk is loaded */
		s->ram_ok = true;
		return 0;
	}
	ret = s->chk ? -EALREADY : vmsnap_ram_check_start(s->ram_fd, s->h.mem_size, &s->chk);

	if (!ret)
		ret = vmsnap_ram_check_end(s->chk, false, d, &pages);

	if (ret)
		return why_set(why, why_len, ret, "%s/ram: %s", s->dir, strerror(-ret));
	if (pages != s->h.ram_pages || memcmp(d, s->h.ram_xxh3, VMSNAP_XXH))
		return why_set(why, why_len, -EINVAL, "%s/ram: digest mismatch (%llu pages, the "
			       "snapshot wrote %llu): corrupt or altered", s->dir,
			       (unsigned long long)pages, (unsigned long long)s->h.ram_pages);
	s->ram_ok = true;
	return 0;
}

bool vm_snapshot_ram_ok(const struct vm_snapshot *s)
{
	return s && s->ram_ok;
}

/* The devices' records: UART, each virtio-mmio device, the exit status, the end. */
static int snap_apply_devices(const char *what, struct vm_state_rd *r,
			      const struct vm_parts *p, char *why, size_t why_len)
{
	struct virtio_mmio_state vs;
	struct serial_state ss;
	const void *d;
	size_t len;
	int32_t st;
	int ret = vm_state_take(r, VMST_SERIAL, 0, sizeof(ss), sizeof(ss), &d, &len, "UART",
				why, why_len);

	if (!ret) {
		memcpy(&ss, d, sizeof(ss));
		if (serial_state_load(p->serial, &ss))
			ret = why_set(why, why_len, -EINVAL, "vm.state: impossible UART state");
	}
	for (unsigned i = 0; !ret && i < p->ndev; i++) {
		ret = vm_state_take(r, VMST_VIRTIO_MMIO, i, sizeof(vs), sizeof(vs), &d, &len,
				    "virtio-mmio", why, why_len);
		if (ret)
			break;
		memcpy(&vs, d, sizeof(vs));
		if (virtio_mmio_state_load(p->vdev[i], &vs))
			ret = why_set(why, why_len, -EINVAL, "vm.state: virtio-blk disk %u: a state "
				      "this device cannot have (queues, features or rings)", i);
	}
	if (!ret)
		ret = vm_state_take(r, VMST_EXIT_STATUS, 0, sizeof(st), sizeof(st), &d, &len,
				    "exit status", why, why_len);
	if (!ret) {
		memcpy(&st, d, sizeof(st));
		*p->exit_status = st >= 0 && st < 256 ? st : -1;
		ret = vm_state_take(r, VMST_END, 0, 0, 0, &d, &len, "end", why, why_len);
	}
	if (!ret && r->off != r->len)
		ret = why_set(why, why_len, -EINVAL, "%s: %zu bytes after the end record", what,
			      r->len - r->off);
	return ret;
}

/*
 * The image disk top (its layout digest) is the one the snapshot was taken with: that layout,
 * or for a snapshot in a store a layer over it (its disk's writes, committed after the pause
 * as a layer on the image: the layout its document names, which the restore opened).
 */
static bool snap_layout_is(const struct vm_snapshot *s, const struct disk *disk,
			   const uint8_t top[SHA256_LEN])
{
	const struct layout *l = disk_layout(disk);

	if (!(s->h.flags & VMSNAP_F_LAYOUT))
		return false;
	if (!memcmp(top, s->h.layout_digest, SHA256_LEN))
		return true;
	if (!(s->h.flags & VMSNAP_F_STORE) || !l)
		return false;
	for (unsigned i = 0; i < l->n_layers; i++)
		if (!memcmp(l->layers[i].digest, s->h.layout_digest, SHA256_LEN))
			return true;
	return false;
}

int vm_snapshot_apply(const struct vm_snapshot *s, const struct vm_parts *p, char *why,
		      size_t why_len)
{
	char what[PATH_MAX + 16];
	uint8_t d[SHA256_LEN];
	int ret;

	if (p->ncpus != s->h.ncpus || p->ndev != s->h.ndisks ||
	    p->kvm->ram.size != s->h.mem_size)
		return why_set(why, why_len, -EINVAL, "%s: the snapshot's VM has %u vCPUs, %u "
			       "disks and %llu MiB of RAM; this one %u, %u and %llu MiB", s->dir,
			       s->h.ncpus, s->h.ndisks, (unsigned long long)(s->h.mem_size >> 20),
			       p->ncpus, p->ndev, (unsigned long long)(p->kvm->ram.size >> 20));
	if (p->kernel) {
		ret = snap_file_sha(p->kernel, d, why, why_len);
		if (ret)
			return ret;
		if (memcmp(d, s->h.kernel_sha, SHA256_LEN))
			return why_set(why, why_len, -EINVAL, "kernel %s: not the kernel the "
				       "snapshot was taken with (sha256 differs)", p->kernel);
	}
	if (p->disk && !disk_layout_digest(p->disk, d)) {
		if (!snap_layout_is(s, p->disk, d))
			return why_set(why, why_len, -EINVAL, "%s: taken with another image "
				       "layout", s->dir);
	} else if (s->h.flags & VMSNAP_F_LAYOUT) {
		return why_set(why, why_len, -EINVAL, "%s: taken with an image disk: give its "
			       "IMAGE.layout", s->dir);
	}
	snprintf(what, sizeof(what), "%s/vm.state", s->dir);
	return vm_snapshot_state_load(s->file + VMSNAP_HDR, s->file_len - VMSNAP_HDR, p, what,
				      why, why_len);
}

void vm_snapshot_cpu_explain(const struct vm_snapshot *s, const struct kvm_vm *vm, char *why,
			     size_t why_len)
{
	char cwhy[PATH_MAX + 256];

	if (vm->sys_fd >= 0 && vm_snapshot_cpu_verify(s, vm, cwhy, sizeof(cwhy)) == -EXDEV)
		snprintf(why, why_len, "%s", cwhy);
}

int vm_snapshot_state_load(const uint8_t *state, size_t len, const struct vm_parts *p,
			   const char *what, char *why, size_t why_len)
{
	struct vm_state_rd r = { .p = state, .len = len };
	/* the CPUID record: the VM has its table already (kvm_vm_create) */
	int ret = vm_state_cpuid_take(&r, NULL, why, why_len);

	if (!ret)
		ret = vm_state_vm_load(p->kvm->vm_fd, &r, why, why_len);
	for (unsigned i = 0; !ret && i < p->ncpus; i++)
		ret = vm_state_cpu_load(&p->cpus[i], &r, p->notes, why, why_len);
	if (!ret)
		ret = snap_apply_devices(what, &r, p, why, why_len);
	return ret;
}

void vm_snapshot_close(struct vm_snapshot *s)
{
	if (!s)
		return;
	vmsnap_ram_check_free(s->chk);
	free(s->cpuid);
	if (s->ram_fd >= 0)
		close(s->ram_fd);
	free(s->file);
	free(s);
}
