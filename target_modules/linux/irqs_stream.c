// SPDX-License-Identifier: GPL-2.0
/*
 * Record ring and character device (/dev/<module>) of the mainline latency
 * modules.
 *
 * The ring is single-producer, single-consumer and lock-free: the only
 * producer is the module's IRQ handler (never concurrent with itself), the
 * only consumer the one reader allowed to open the device. A reader can
 * therefore never delay the handler being measured.
 */

#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "irqs_common.h"

#ifdef __BIG_ENDIAN
#error "records are little-endian on the wire: add byte swapping for this target"
#endif

/* Records copied per step of read(): bounds the time spent per copy. */
#define IRQS_READ_BATCH		64

static struct irqs_stream *file_stream(struct file *file)
{
	return container_of(file->private_data, struct irqs_stream, misc);
}

static u32 irqs_stream_avail(struct irqs_stream *s)
{
	/* Pairs with the release in irqs_stream_push(). */
	return smp_load_acquire(&s->head) - s->tail;
}

void irqs_stream_push(struct irqs_stream *s, u16 flags, u64 t_write_ns,
		      s64 latency_ns, u32 hw_width_ns)
{
	struct irqs_record_v1 *r;
	u64 seq = atomic64_fetch_inc(&s->seq);
	u32 head = s->head;

	/* The seed wrote only its own IRQs; legacy readers see no seq. */
	if (s->legacy && (flags & IRQS_F_NOT_OURS))
		return;

	/* Pairs with the release in irqs_stream_take(). */
	if (head - smp_load_acquire(&s->tail) >= s->size) {
		WRITE_ONCE(s->dropped, s->dropped + 1);
		return;
	}

	r = &s->ring[head & (s->size - 1)];
	r->magic = IRQS_RECORD_MAGIC;
	r->version = IRQS_RECORD_VERSION;
	r->flags = flags;
	r->seq = seq;
	r->t_write_ns = t_write_ns;
	r->latency_ns = latency_ns;
	r->hw_width_ns = hw_width_ns;
	r->dropped = s->dropped;
	/* Record complete before the reader can see it: pairs with avail(). */
	smp_store_release(&s->head, head + 1);

	/* Lazy: the reader is woken at the next tick, not by an extra IPI. */
	irq_work_queue(&s->wake_work);
}

void irqs_stream_skip(struct irqs_stream *s)
{
	atomic64_inc(&s->seq);
	WRITE_ONCE(s->missed, s->missed + 1);
}

/* Consumer side: copy up to @max records (converted to the format) to @buf. */
static u32 irqs_stream_take(struct irqs_stream *s, void *buf, u32 max)
{
	u32 tail = s->tail;
	u32 n = min(irqs_stream_avail(s), max);
	u32 i;

	for (i = 0; i < n; i++) {
		const struct irqs_record_v1 *r;

		r = &s->ring[(tail + i) & (s->size - 1)];
		if (s->legacy)
			((s64 *)buf)[i] = r->latency_ns;
		else
			((struct irqs_record_v1 *)buf)[i] = *r;
	}
	/* Slots read before the producer may reuse them: pairs with push(). */
	smp_store_release(&s->tail, tail + n);
	return n;
}

static void irqs_stream_wake(struct irq_work *work)
{
	struct irqs_stream *s = container_of(work, struct irqs_stream,
					     wake_work);

	wake_up_interruptible(&s->readq);
}

static int irqs_stream_open(struct inode *inode, struct file *file)
{
	struct irqs_stream *s = file_stream(file);

	/* Reads consume records: a second reader would steal half of them. */
	if (atomic_cmpxchg(&s->opened, 0, 1))
		return -EBUSY;
	return stream_open(inode, file);
}

static int irqs_stream_release(struct inode *inode, struct file *file)
{
	atomic_set(&file_stream(file)->opened, 0);
	return 0;
}

static ssize_t irqs_stream_read(struct file *file, char __user *ubuf,
				size_t len, loff_t *ppos)
{
	struct irqs_stream *s = file_stream(file);
	size_t rsz = s->legacy ? sizeof(s64) : sizeof(struct irqs_record_v1);
	size_t done = 0;
	int ret;

	if (len < rsz)
		return -EINVAL;

	if (mutex_lock_interruptible(&s->read_mutex))
		return -ERESTARTSYS;

	while (!irqs_stream_avail(s)) {
		mutex_unlock(&s->read_mutex);
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		ret = wait_event_interruptible(s->readq, irqs_stream_avail(s));
		if (ret)
			return ret;
		if (mutex_lock_interruptible(&s->read_mutex))
			return -ERESTARTSYS;
	}

	while (len - done >= rsz) {
		u32 want = min_t(size_t, (len - done) / rsz, IRQS_READ_BATCH);
		u32 n = irqs_stream_take(s, s->bounce, want);

		if (!n)
			break;
		/* Records taken but not copied are gone: a seq gap shows it. */
		if (copy_to_user(ubuf + done, s->bounce, n * rsz)) {
			mutex_unlock(&s->read_mutex);
			return done ? done : -EFAULT;
		}
		done += n * rsz;
	}

	mutex_unlock(&s->read_mutex);
	return done;
}

static __poll_t irqs_stream_poll(struct file *file, poll_table *wait)
{
	struct irqs_stream *s = file_stream(file);

	poll_wait(file, &s->readq, wait);
	return irqs_stream_avail(s) ? EPOLLIN | EPOLLRDNORM : 0;
}

static const struct file_operations irqs_stream_fops = {
	.owner = THIS_MODULE,
	.open = irqs_stream_open,
	.release = irqs_stream_release,
	.read = irqs_stream_read,
	.poll = irqs_stream_poll,
	.llseek = no_llseek,
};

int irqs_stream_init(struct irqs_stream *s, const char *name, u32 size,
		     bool legacy)
{
	s->ring = kvcalloc(size, sizeof(*s->ring), GFP_KERNEL);
	if (!s->ring)
		return -ENOMEM;
	s->bounce = kmalloc_array(IRQS_READ_BATCH, sizeof(*s->ring),
				  GFP_KERNEL);
	if (!s->bounce) {
		kvfree(s->ring);
		s->ring = NULL;
		return -ENOMEM;
	}
	s->size = size;
	s->head = 0;
	s->tail = 0;
	atomic64_set(&s->seq, 0);
	s->dropped = 0;
	s->missed = 0;
	s->legacy = legacy;
	s->wake_work = IRQ_WORK_INIT_LAZY(irqs_stream_wake);
	init_waitqueue_head(&s->readq);
	mutex_init(&s->read_mutex);
	atomic_set(&s->opened, 0);
	s->misc.minor = MISC_DYNAMIC_MINOR;
	s->misc.name = name;
	s->misc.fops = &irqs_stream_fops;
	s->misc.mode = 0440;
	return 0;
}

int irqs_stream_register(struct irqs_stream *s)
{
	return misc_register(&s->misc);
}

void irqs_stream_deregister(struct irqs_stream *s)
{
	misc_deregister(&s->misc);
}

/* Call only once the producer is stopped (timer cancelled, IRQ freed). */
void irqs_stream_destroy(struct irqs_stream *s)
{
	/* A queued lazy wake-up must not run after the module is gone. */
	irq_work_sync(&s->wake_work);
	kfree(s->bounce);
	s->bounce = NULL;
	kvfree(s->ring);
	s->ring = NULL;
}
