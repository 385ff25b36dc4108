// SPDX-License-Identifier: GPL-2.0
/*
 * Parameters of the mainline latency modules: the checks of those both
 * modules have (ranges in ../include/irqs_params.h), and the kernel_param_ops
 * of the read-only counters dropped and missed, and the test-only handler
 * hold (test_hold_us). Each module checks its own other parameters. Messages
 * go out under the module's name.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/log2.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/processor.h>

#include "irqs_common.h"

/* Declared here, once for both modules: each links its own object of this file. */
unsigned int irqs_test_hold_us;
module_param_named(test_hold_us, irqs_test_hold_us, uint, 0444);
MODULE_PARM_DESC(test_hold_us, IRQS_DESC_TEST_HOLD_US);

static unsigned int test_hold_every = 100;
module_param(test_hold_every, uint, 0444);
MODULE_PARM_DESC(test_hold_every, IRQS_DESC_TEST_HOLD_EVERY);

static atomic_t test_hold_calls = ATOMIC_INIT(0);

/*
 * A busy wait on the module's own clock, not udelay(): udelay() may return
 * early (it was seen 0.5 us short of 200 us), and the hold must last at
 * least test_hold_us on the clock t_SW and the trace are read on.
 */
u16 irqs_test_hold_now(void)
{
	u64 start;

	if ((unsigned int)atomic_inc_return(&test_hold_calls) % test_hold_every)
		return 0;
	start = ktime_get_ns();
	while (ktime_get_ns() - start < (u64)irqs_test_hold_us * NSEC_PER_USEC)
		cpu_relax();
	return IRQS_F_HELD;
}

int irqs_check_params(unsigned int period_us, int cpu, const char *format,
		      unsigned int bufsize, bool *legacy)
{
	int ret = irqs_check_common_params(period_us, cpu, format, legacy);

	if (ret)
		return ret;
	if (bufsize < IRQS_BUFSIZE_MIN || bufsize > IRQS_BUFSIZE_MAX ||
	    !is_power_of_2(bufsize)) {
		pr_err("bufsize=%u invalid: accepted a power of two in %u..%u records\n",
		       bufsize, IRQS_BUFSIZE_MIN, IRQS_BUFSIZE_MAX);
		return -EINVAL;
	}
	if (irqs_test_hold_us > IRQS_TEST_HOLD_US_MAX) {
		pr_err("test_hold_us=%u out of range: accepted 0..%u\n",
		       irqs_test_hold_us, IRQS_TEST_HOLD_US_MAX);
		return -EINVAL;
	}
	if (!test_hold_every || test_hold_every > IRQS_TEST_HOLD_EVERY_MAX) {
		pr_err("test_hold_every=%u out of range: accepted 1..%u\n",
		       test_hold_every, IRQS_TEST_HOLD_EVERY_MAX);
		return -EINVAL;
	}
	return 0;
}

static int irqs_counter_set(const char *val, const struct kernel_param *kp)
{
	pr_err("%s is a read-only counter\n", kp->name);
	return -EPERM;
}

const struct kernel_param_ops irqs_counter_ops = {
	.set = irqs_counter_set,
	.get = param_get_uint,
};
