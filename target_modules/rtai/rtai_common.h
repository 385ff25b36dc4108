/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Parameters, record output, event state, RT IRQ and periodic RT task
 * shared by the RTAI latency modules (rtai_lpt_latency, rtai_pcie_latency).
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

#include "../include/irqs_params.h"
#include "../include/irqs_record.h"

#define RTAI_FIFO_SIZE_MIN	(16U * IRQS_RECORD_SIZE)
#define RTAI_FIFO_SIZE_MAX	(64U << 20)
#define RTAI_STACK_SIZE		4096
#define RTAI_TASK_PRIO		RT_SCHED_HIGHEST_PRIORITY
/* Size of RTAI's FIFO table (MAX_FIFOS in its fifos.c, not in a header). */
#define RTAI_FIFOS		64

/* See IRQS_ABANDON_* in linux/irqs_common.h: same policy. */
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
	int ret = irqs_check_common_params(period_us, cpu, format, legacy);

	if (ret)
		return ret;
	if (fifo < 0 || fifo >= RTAI_FIFOS) {
		pr_err("fifo=%d invalid: accepted 0..%d\n", fifo, RTAI_FIFOS - 1);
		return -EINVAL;
	}
	if (fifo_size < RTAI_FIFO_SIZE_MIN || fifo_size > RTAI_FIFO_SIZE_MAX) {
		pr_err("fifo_size=%u invalid: accepted %u..%u bytes\n",
		       fifo_size, RTAI_FIFO_SIZE_MIN, RTAI_FIFO_SIZE_MAX);
		return -EINVAL;
	}
	return 0;
}

/*
 * Start @s on a new RT FIFO @fifo of @fifo_size bytes, seq from 0.
 * Undone by rtai_stream_destroy().
 */
static inline int rtai_stream_create(struct rtai_stream *s, int fifo,
				     unsigned int fifo_size, bool legacy)
{
	int ret;

	s->fifo = fifo;
	s->legacy = legacy;
	atomic64_set(&s->seq, 0);
	ret = rtf_create(fifo, fifo_size);
	if (ret < 0) {
		pr_err("cannot create RT FIFO %d of %u bytes (%d)\n",
		       fifo, fifo_size, ret);
		return ret;
	}
	return 0;
}

static inline void rtai_stream_destroy(struct rtai_stream *s)
{
	rtf_destroy(s->fifo);
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

/*
 * Take @irq for @handler in the RTAI domain, routed to @cpu (-1: no
 * pinning), and start it. All or nothing: on failure nothing is left to
 * undo. Undone by rtai_irq_stop() with the same @cpu.
 */
static inline int rtai_irq_start(unsigned int irq,
				 int (*handler)(unsigned int irq, void *cookie),
				 int cpu)
{
	int ret = rt_request_irq(irq, handler, NULL, 0);

	if (ret) {
		pr_err("cannot get RT IRQ %u (%d)\n", irq, ret);
		return ret;
	}
	if (cpu >= 0)
		rt_assign_irq_to_cpu(irq, 1UL << cpu);
	rt_startup_irq(irq);
	return 0;
}

static inline void rtai_irq_stop(unsigned int irq, int cpu)
{
	rt_shutdown_irq(irq);
	if (cpu >= 0)
		rt_reset_irq_to_sym_mode(irq);
	rt_release_irq(irq);
}

/* The periodic RT task that makes the writes, and the RT timer it needs. */
struct rtai_writer {
	RT_TASK task;
	bool timer_started;	/* we started the RT timer: stop it */
};

/*
 * Run @fn as an RT task on @cpu (-1: no pinning), every @period_ns from one
 * period after now. A running RT timer is shared; otherwise one is started
 * in one-shot mode, and only that one is stopped again. All or nothing: on
 * failure nothing is left to undo. Undone by rtai_writer_stop().
 */
static inline int rtai_writer_start(struct rtai_writer *w, void (*fn)(long),
				    RTIME period_ns, int cpu)
{
	RTIME period;
	int ret;

	w->timer_started = false;
	if (!rt_is_hard_timer_running()) {
		rt_set_oneshot_mode();
		start_rt_timer(0);
		w->timer_started = true;
	}
	period = nano2count(period_ns);	/* depends on the timer mode */

	if (cpu >= 0)
		ret = rt_task_init_cpuid(&w->task, fn, 0, RTAI_STACK_SIZE,
					 RTAI_TASK_PRIO, 0, NULL, cpu);
	else
		ret = rt_task_init(&w->task, fn, 0, RTAI_STACK_SIZE,
				   RTAI_TASK_PRIO, 0, NULL);
	if (ret) {
		pr_err("cannot create the RT task (%d)\n", ret);
		goto err_timer;
	}
	ret = rt_task_make_periodic(&w->task, rt_get_time() + period, period);
	if (ret) {
		pr_err("cannot make the RT task periodic (%d)\n", ret);
		goto err_task;
	}
	return 0;

err_task:
	rt_task_delete(&w->task);
err_timer:
	if (w->timer_started)
		stop_rt_timer();
	w->timer_started = false;
	return ret;
}

static inline void rtai_writer_stop(struct rtai_writer *w)
{
	rt_task_delete(&w->task);
	if (w->timer_started)
		stop_rt_timer();
	w->timer_started = false;
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
