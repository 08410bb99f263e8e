/* SPDX-License-Identifier: MIT */
/*
 * Pausing a running VM and its statistics: vmm_pause() parks every vCPU out of KVM_RUN,
 * quiesces the virtio-mmio queues (the batch in progress completes, nothing new starts) and
 * holds the console's input, so that nothing changes guest RAM or device state until
 * vmm_resume(). vmm_stats_json() writes the exits and the disks' statistics.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "../blkd/disk/disk.h"
#include "../common/json_out.h"
#include "lazyram/lazyram.h"
#include "vm.h"

int vmm_pause(struct vm *v)
{
	if (!__atomic_load_n(&v->running, __ATOMIC_SEQ_CST))
		return -EAGAIN; /* the vCPUs are not all started yet */
	pthread_mutex_lock(&v->pause_lock);
	if (v->paused) {
		pthread_mutex_unlock(&v->pause_lock);
		return -EALREADY;
	}
	/* the vCPUs first: then nothing kicks a queue or touches a register */
	for (unsigned i = 0; i < v->ncpus; i++)
		cpu_pause(&v->cpus[i]);
	for (unsigned i = 0; i < v->ndev; i++)
		virtio_mmio_pause(v->vdev[i]);
	serial_pause(v->serial, true);
	__atomic_store_n(&v->paused, true, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&v->pause_lock);
	return 0;
}

int vmm_resume(struct vm *v)
{
	pthread_mutex_lock(&v->pause_lock);
	if (!v->paused) {
		pthread_mutex_unlock(&v->pause_lock);
		return -EALREADY;
	}
	__atomic_store_n(&v->paused, false, __ATOMIC_SEQ_CST);
	serial_pause(v->serial, false);
	for (unsigned i = 0; i < v->ndev; i++)
		virtio_mmio_resume(v->vdev[i]);
	for (unsigned i = 0; i < v->ncpus; i++)
		cpu_resume(&v->cpus[i]);
	pthread_mutex_unlock(&v->pause_lock);
	return 0;
}

bool vmm_paused(struct vm *v)
{
	return __atomic_load_n(&v->paused, __ATOMIC_SEQ_CST);
}

/* One disk's statistics object, as serve --control gives it (its trailing newline cut). */
static void vmm_disk_stats(struct json_buf *b, const struct disk *d)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f) {
		disk_stats(d, f, true);
		if (fclose(f))
			len = 0;
	}
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		len--;
	if (len && buf[0] == '{')
		json_buf_put(b, buf, len);
	else
		json_buf_puts(b, "{}");
	free(buf);
}

/*
 * "lazy_ram": the lazy RAM's statistics (lazyram_stats_json) and its compressed bytes
 * fetched by the guest's first console output.
 */
static void vmm_lazy_json(struct json_buf *b, struct vm *v)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int ret = f ? lazyram_stats_json(v->o->lazy, f) : -ENOMEM;

	if (f && fclose(f) && !ret)
		ret = -EIO;
	if (!ret && len > 1 && text[len - 1] == '}') {
		json_buf_puts(b, ",\"lazy_ram\":");
		json_buf_put(b, text, len - 1);
		json_field_u64(b, "bytes_at_first_output",
			       __atomic_load_n(&v->first_output_ram_bytes, __ATOMIC_RELAXED));
		json_buf_puts(b, "}");
	} else if (!b->err) {
		b->err = ret ? ret : -EIO;
	}
	free(text);
}

int vmm_stats_json(struct vm *v, FILE *f)
{
	struct json_buf b = { 0 };
	char *text;
	size_t len;

	json_buf_puts(&b, "{");
	json_field_bool(&b, "paused", vmm_paused(v));
	/* CLOCK_MONOTONIC, ns: when this process's `run` started, when each vCPU first exited */
	json_field_u64(&b, "start_ns", (uint64_t)v->o->t0.tv_sec * 1000000000u +
		       (uint64_t)v->o->t0.tv_nsec);
	json_buf_puts(&b, ",\"vcpus\":[");
	for (unsigned i = 0; i < v->ncpus; i++) {
		uint64_t total = 0;

		json_buf_puts(&b, i ? ",{" : "{");
		json_field_u64(&b, "id", i);
		json_buf_puts(&b, ",\"exits\":{");
		for (unsigned e = 0; e < CPU_EXIT_NR; e++) {
			uint64_t n = __atomic_load_n(&v->cpus[i].exits[e], __ATOMIC_RELAXED);

			json_field_u64(&b, cpu_exit_name(e), n);
			total += n;
		}
		json_field_u64(&b, "total", total);
		json_buf_puts(&b, "}");
		json_field_u64(&b, "first_exit_ns",
			       __atomic_load_n(&v->cpus[i].first_exit_ns, __ATOMIC_RELAXED));
		json_buf_puts(&b, "}");
	}
	json_buf_puts(&b, "]");
	json_field_u64(&b, "first_output_ns",
		       __atomic_load_n(&v->first_output_ns, __ATOMIC_RELAXED));
	if (v->o->lazy)
		vmm_lazy_json(&b, v);
	json_buf_puts(&b, ",\"disks\":[");
	for (unsigned i = 0; i < v->o->ndisks; i++) {
		if (i)
			json_buf_puts(&b, ",");
		vmm_disk_stats(&b, &v->o->disks[i]);
	}
	json_buf_puts(&b, "]}\n");
	if (b.err) {
		int err = b.err;

		json_buf_free(&b);
		return err;
	}
	text = json_buf_take(&b, &len);
	if (fwrite(text, 1, len, f) != len) {
		free(text);
		return -EIO;
	}
	free(text);
	return 0;
}
