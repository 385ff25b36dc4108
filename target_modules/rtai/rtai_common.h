/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Parameters, record output and event state shared by the
 * RTAI latency modules (rtai_lpt_latency, rtai_pcie_latency).
 *
 * Everything here runs in the RTAI domain (RT task, RT interrupt handler):
 * no Linux locks, no sleeping, output through an RT FIFO with rtf_put_if(),
 * which writes a whole record or nothing, so the stream never tears.
 */
#ifndef RTAI_COMMON_H
#define RTAI_COMMON_H

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/string.h>
#include <linux/types.h>

#include <rtai.h>
#include <rtai_fifos.h>
#include <rtai_sched.h>

#include "../include/irqs_record.h"

#define RTAI_PERIOD_US_MIN	10U
#define RTAI_PERIOD_US_MAX	1000000U
#define RTAI_FIFO_SIZE_MIN	(16U * IRQS_RECORD_SIZE)
#define RTAI_FIFO_SIZE_MAX	(64U << 20)
#define RTAI_STACK_SIZE		4096
#define RTAI_TASK_PRIO		RT_SCHED_HIGHEST_PRIORITY
/* Size of RTAI's FIFO table (MAX_FIFOS in its fifos.c, not in a header). */
#define RTAI_FIFOS		64

/* See IRQS_ABANDON_* in linux/irqs_stream.h: same policy. */
#define RTAI_ABANDON_NS		100000000LL
#define RTAI_ABANDON_PERIODS	10

struct rtai_stream {
	unsigned int fifo;
	bool legacy;
	atomic64_t seq;			/* next sequence number */
	unsigned int dropped;		/* records the FIFO had no room for */
	unsigned int missed;		/* events abandoned without an IRQ */
};

/*
 * The event the RT task started and the handler ends. Atomics rather than
 * READ_ONCE/WRITE_ONCE, which RTAI's older kernels (3.x) do not have.
 */
struct rtai_event {
	atomic_t pending;
	atomic64_t t_write_ns;		/* set before pending */
	atomic_t overrun;		/* task ran while this event pended */
};

static inline int rtai_check_params(unsigned int period_us, int cpu,
				    const char *format, int fifo,
				    unsigned int fifo_size, bool *legacy)
{
	if (period_us < RTAI_PERIOD_US_MIN || period_us > RTAI_PERIOD_US_MAX) {
		pr_err("period_us=%u out of range: accepted %u..%u\n",
		       period_us, RTAI_PERIOD_US_MIN, RTAI_PERIOD_US_MAX);
		return -EINVAL;
	}
	if (cpu < -1 || cpu >= (int)nr_cpu_ids || (cpu >= 0 && !cpu_online(cpu))) {
		pr_err("cpu=%d invalid: accepted -1 (no pinning) or an online CPU in 0..%d\n",
		       cpu, (int)nr_cpu_ids - 1);
		return -EINVAL;
	}
	if (!format || (strcmp(format, "v1") && strcmp(format, "legacy"))) {
		pr_err("format=%s invalid: accepted v1 or legacy\n",
		       format ? format : "(null)");
		return -EINVAL;
	}
	if (fifo < 0 || fifo >= RTAI_FIFOS) {
		pr_err("fifo=%d invalid: accepted 0..%d\n", fifo, RTAI_FIFOS - 1);
		return -EINVAL;
	}
	if (fifo_size < RTAI_FIFO_SIZE_MIN || fifo_size > RTAI_FIFO_SIZE_MAX) {
		pr_err("fifo_size=%u invalid: accepted %u..%u bytes\n",
		       fifo_size, RTAI_FIFO_SIZE_MIN, RTAI_FIFO_SIZE_MAX);
		return -EINVAL;
	}
	*legacy = !strcmp(format, "legacy");
	return 0;
}

/* RT interrupt handler only: the one producer of records. */
static inline void rtai_stream_push(struct rtai_stream *s, u16 flags,
				    RTIME t_write_ns, RTIME now, u32 hw_width_ns)
{
	struct irqs_record_v1 r;
	s64 latency = now - t_write_ns;
	u64 seq = atomic64_inc_return(&s->seq) - 1;

	if (s->legacy) {
		/* The seed wrote its own IRQs only. */
		if (flags & IRQS_F_NOT_OURS)
			return;
		if (rtf_put_if(s->fifo, &latency, sizeof(latency)) !=
		    sizeof(latency))
			s->dropped++;
		return;
	}

	r.magic = IRQS_RECORD_MAGIC;
	r.version = IRQS_RECORD_VERSION;
	r.flags = flags;
	r.seq = seq;
	r.t_write_ns = t_write_ns;
	r.latency_ns = latency;
	r.hw_width_ns = hw_width_ns;
	r.dropped = s->dropped;
	if (rtf_put_if(s->fifo, &r, sizeof(r)) != sizeof(r))
		s->dropped++;
}

/* RT task only: spend a sequence number on an event that never came. */
static inline void rtai_stream_skip(struct rtai_stream *s)
{
	atomic64_inc(&s->seq);
	s->missed++;
}

static inline bool rtai_event_stale(struct rtai_event *ev, RTIME now,
				    RTIME period_ns)
{
	RTIME limit = RTAI_ABANDON_PERIODS * period_ns;

	if (limit < RTAI_ABANDON_NS)
		limit = RTAI_ABANDON_NS;
	return now - atomic64_read(&ev->t_write_ns) > limit;
}

static int rtai_counter_set(const char *val, const struct kernel_param *kp)
{
	pr_err("%s is a read-only counter\n", kp->name);
	return -EPERM;
}

static const struct kernel_param_ops rtai_counter_ops = {
	.set = rtai_counter_set,
	.get = param_get_uint,
};

#endif /* RTAI_COMMON_H */
