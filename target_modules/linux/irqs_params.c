// SPDX-License-Identifier: GPL-2.0
/*
 * Parameters of the mainline latency modules: the checks of those both
 * modules have (ranges in ../include/irqs_params.h), and the kernel_param_ops
 * of the read-only counters dropped and missed. Each module checks its own
 * other parameters. Messages go out under the module's name.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>

#include "irqs_common.h"

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
