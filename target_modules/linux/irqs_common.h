/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The code the mainline latency modules (lpt_latency, pcie_latency) share,
 * one file each (Kbuild builds them into both modules):
 *
 *   irqs_stream.c  record ring and character device
 *   irqs_params.c  checks of the shared parameters, read-only counters
 *   irqs_timer.c   periodic hard hrtimer, abandoning unanswered events
 *   irqs_pin.c     routing the IRQ to the timer's CPU
 *
 * The producer runs in hard IRQ context (also on PREEMPT_RT, where the
 * handler is IRQF_NO_THREAD unless threaded=1) and the periodic timer in hard
 * hrtimer context (HRTIMER_MODE_*_HARD), so nothing there may sleep: the ring
 * is lock-free and readers are woken through an irq_work, because wake_up()
 * takes a sleeping lock on PREEMPT_RT.
 */
#ifndef IRQS_COMMON_H
#define IRQS_COMMON_H

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/hrtimer.h>
#include <linux/irq_work.h>
#include <linux/ktime.h>
#include <linux/miscdevice.h>
#include <linux/moduleparam.h>
#include <linux/smp.h>
#include <linux/mutex.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "../include/irqs_params.h"
#include "../include/irqs_record.h"

/* irqs_stream.c: record ring and character device /dev/<name>. */

struct irqs_stream {
	struct irqs_record_v1 *ring;	/* size records, size a power of two */
	u32 size;
	u32 head;			/* free-running, written by producer */
	u32 tail;			/* free-running, written by consumer */
	atomic64_t seq;			/* next sequence number (timer + IRQ) */
	unsigned int dropped;		/* records lost on a full ring */
	unsigned int missed;		/* events abandoned without an IRQ */
	bool legacy;			/* read() yields bare int64 latencies */
	struct irq_work wake_work;
	wait_queue_head_t readq;
	struct mutex read_mutex;	/* serialises read() and the bounce */
	void *bounce;
	atomic_t opened;		/* one reader: reads consume records */
	struct miscdevice misc;
};

int irqs_stream_init(struct irqs_stream *s, const char *name, u32 size,
		     bool legacy);
int irqs_stream_register(struct irqs_stream *s);
void irqs_stream_deregister(struct irqs_stream *s);
void irqs_stream_destroy(struct irqs_stream *s);
void irqs_stream_push(struct irqs_stream *s, u16 flags, u64 t_write_ns,
		      s64 latency_ns, u32 hw_width_ns);
void irqs_stream_skip(struct irqs_stream *s);

/* irqs_params.c: parameters. */

int irqs_check_params(unsigned int period_us, int cpu, const char *format,
		      unsigned int bufsize, bool *legacy);

/* Read-only counters exposed as /sys/module/<name>/parameters/<counter>. */
extern const struct kernel_param_ops irqs_counter_ops;

/*
 * Test only: test_hold_us (0 = off) makes every test_hold_every-th handler
 * call wait that long before its timestamp, a delay of known length between
 * the kernel's IRQ entry and the module's timestamp, and says so in the
 * record (IRQS_F_HELD): what a traced run's decomposition is checked against.
 * The handler calls irqs_test_hold() first; with the hold off it costs one
 * load and a branch, taken before the timestamp.
 */
extern unsigned int irqs_test_hold_us;
u16 irqs_test_hold_now(void);

static inline u16 irqs_test_hold(void)
{
	return likely(!irqs_test_hold_us) ? 0 : irqs_test_hold_now();
}

/* irqs_timer.c: the periodic timer and the event it starts. */

/*
 * An event still unanswered after this long (and at least
 * IRQS_ABANDON_PERIODS periods) is given up: its sequence number is spent
 * without a record, so the station counts it as a lost sample.
 */
#define IRQS_ABANDON_NS		(100 * NSEC_PER_MSEC)
#define IRQS_ABANDON_PERIODS	10

/*
 * State of the one outstanding event, shared by the periodic timer (which
 * starts events) and the IRQ handler (which ends them). `pending` is claimed
 * with atomic_xchg/cmpxchg so that exactly one side finishes an event even
 * when the timer and the handler run on different CPUs.
 */
struct irqs_event {
	atomic_t pending;
	u64 t_write_ns;			/* published before pending is set */
	bool overrun;			/* timer fired while this event pended */
	int hard_cpu;			/* threaded=1: where the kernel took the IRQ */
	u64 hard_ns;			/* threaded=1: when it took it */
};

/* threaded=1's primary handler (hard IRQ context): where and when. */
static inline void irqs_note_hard_irq(struct irqs_event *ev)
{
	WRITE_ONCE(ev->hard_ns, ktime_get_ns());
	WRITE_ONCE(ev->hard_cpu, smp_processor_id());
}

/*
 * threaded=1: the kernel took the IRQ the thread now answers before the
 * outstanding write was made, so it answers an event the timer has since
 * abandoned (the thread ran over IRQS_ABANDON_NS late), not this write: the
 * record is NOT_OURS and the outstanding event keeps waiting for its own.
 */
static inline bool irqs_answers_earlier(struct irqs_event *ev, bool threaded)
{
	return threaded && atomic_read_acquire(&ev->pending) &&
	       (s64)(READ_ONCE(ev->hard_ns) - READ_ONCE(ev->t_write_ns)) < 0;
}

int irqs_timer_start(struct hrtimer *timer, int cpu, u64 period_ns);
bool irqs_event_stale(struct irqs_event *ev, u64 now, u64 period_ns);

/* irqs_pin.c: IRQ affinity. */

bool irqs_irq_pin(unsigned int irq, int cpu, struct cpumask *saved);
void irqs_irq_unpin(unsigned int irq, const struct cpumask *saved);

/*
 * IRQS_F_OFF_CPU when the IRQ is pinned to @cpu but was taken on @hard_cpu:
 * on x86's IO-APIC a new route takes effect at the IRQ's next interrupt, so
 * the first one after loading can still arrive on the CPU it left. Such an
 * event measured another CPU's path; the station counts it apart.
 */
static inline u16 irqs_off_cpu(bool pinned, int cpu, int hard_cpu)
{
	return pinned && hard_cpu != cpu ? IRQS_F_OFF_CPU : 0;
}

#endif /* IRQS_COMMON_H */
