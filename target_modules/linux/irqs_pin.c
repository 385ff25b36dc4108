// SPDX-License-Identifier: GPL-2.0
/*
 * IRQ pinning of the mainline latency modules (cpu=N): the IRQ goes to the
 * CPU of the periodic timer, and back where it was at unload.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/interrupt.h>
#include <linux/irq.h>
#include <linux/printk.h>

#include "irqs_common.h"

/*
 * Route @irq to @cpu, the CPU of the timer, so that write and handler share
 * one CPU as the RTAI task and handler do. Returns true if the affinity was
 * changed (and @saved must be restored with irqs_irq_unpin()).
 */
bool irqs_irq_pin(unsigned int irq, int cpu, struct cpumask *saved)
{
	const struct cpumask *cur = irq_get_affinity_mask(irq);
	int ret;

	if (cpu < 0)
		return false;
	cpumask_copy(saved, cur ? cur : cpu_possible_mask);
	ret = irq_set_affinity(irq, cpumask_of(cpu));
	if (ret) {
		pr_warn("cannot route IRQ %u to CPU %d (%d): it stays where it is\n",
			irq, cpu, ret);
		return false;
	}
	return true;
}

void irqs_irq_unpin(unsigned int irq, const struct cpumask *saved)
{
	irq_set_affinity(irq, saved);
}
