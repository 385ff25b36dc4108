// SPDX-License-Identifier: GPL-2.0
/*
 * The periodic timer of the mainline latency modules: starting it, pinned to
 * a CPU or not, and deciding when the event it started is abandoned. The
 * modules' own callbacks do the writes.
 */

#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/smp.h>
#include <linux/timekeeping.h>

#include "irqs_common.h"

struct irqs_timer_arg {
	struct hrtimer *timer;
	u64 period_ns;
};

static void irqs_timer_start_here(void *data)
{
	struct irqs_timer_arg *arg = data;

	/* Queued on this CPU and kept here: PINNED. */
	hrtimer_start(arg->timer, ns_to_ktime(ktime_get_ns() + arg->period_ns),
		      HRTIMER_MODE_ABS_PINNED_HARD);
}

/*
 * @timer must have been set up with hrtimer_init(..., HRTIMER_MODE_ABS_HARD):
 * HARD keeps the callback in hard interrupt context on PREEMPT_RT too.
 */
int irqs_timer_start(struct hrtimer *timer, int cpu, u64 period_ns)
{
	struct irqs_timer_arg arg = { .timer = timer, .period_ns = period_ns };

	if (cpu < 0) {
		hrtimer_start(timer, ns_to_ktime(ktime_get_ns() + period_ns),
			      HRTIMER_MODE_ABS_HARD);
		return 0;
	}
	return smp_call_function_single(cpu, irqs_timer_start_here, &arg, 1);
}

bool irqs_event_stale(struct irqs_event *ev, u64 now, u64 period_ns)
{
	u64 limit = max_t(u64, IRQS_ABANDON_NS, IRQS_ABANDON_PERIODS * period_ns);

	return now - READ_ONCE(ev->t_write_ns) > limit;
}
