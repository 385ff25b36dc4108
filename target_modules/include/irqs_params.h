/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Accepted ranges and modinfo descriptions of the parameters that several
 * latency modules declare (mainline linux/ and RTAI rtai/), kept in one
 * place so that the modules refuse alike and describe alike. Each module
 * still declares its own parameters; README.md documents them. Kernel code
 * only (mainline and RTAI's older kernels).
 */
#ifndef IRQS_PARAMS_H
#define IRQS_PARAMS_H

#include <linux/cpumask.h>
#include <linux/errno.h>
#include <linux/kernel.h>	/* pr_err(), also on RTAI's older kernels */
#include <linux/string.h>
#include <linux/types.h>

#define IRQS_PERIOD_US_MIN	10U
#define IRQS_PERIOD_US_MAX	1000000U
#define IRQS_DESC_PERIOD_US \
	"Period of the writes in microseconds, 10..1000000 (default 100)"

/* The "inb" variant: what the handler reads depends on the interface. */
#define IRQS_DESC_CHECK_LPT \
	"Read the status port in the handler to check the IRQ is ours before clearing it (the seed's \"inb\" variant; default 1)"
#define IRQS_DESC_CHECK_PCIE \
	"Read STATUS in the handler to check the IRQ is ours before the clearing RECV read (the \"inb\" variant; default 1)"

/* @writer: what makes the periodic writes ("periodic timer", "RT task"). */
#define IRQS_DESC_CPU(writer) \
	"CPU for the " writer " and the IRQ, -1 = no pinning (default -1)"

#define IRQS_DESC_FORMAT \
	"Record format: v1 (struct irqs_record_v1) or legacy (int64 ns per event)"

/* Mainline only: the RTAI modules have an RT FIFO instead of a ring. */
#define IRQS_BUFSIZE_MIN	16U
#define IRQS_BUFSIZE_MAX	(4U << 20)
#define IRQS_DESC_BUFSIZE \
	"Ring buffer size in records, a power of two in 16..4194304 (default 65536)"

/* Mainline only, test only: a handler-side delay of known length. */
#define IRQS_TEST_HOLD_US_MAX	1000U
#define IRQS_TEST_HOLD_EVERY_MAX	1000000U
#define IRQS_DESC_TEST_HOLD_US \
	"Test only: every test_hold_every-th handler call busy-waits this many microseconds (0..1000, on the module's clock) before its timestamp, its record flagged HELD (default 0: never)"
#define IRQS_DESC_TEST_HOLD_EVERY \
	"Test only: which handler calls test_hold_us holds, every n-th, 1..1000000 (default 100)"

/*
 * Checks of period_us, cpu and format, the parameters every module has;
 * sets *legacy from format. The messages go out under the caller's pr_fmt.
 */
static inline int irqs_check_common_params(unsigned int period_us, int cpu,
					   const char *format, bool *legacy)
{
	if (period_us < IRQS_PERIOD_US_MIN || period_us > IRQS_PERIOD_US_MAX) {
		pr_err("period_us=%u out of range: accepted %u..%u\n",
		       period_us, IRQS_PERIOD_US_MIN, IRQS_PERIOD_US_MAX);
		return -EINVAL;
	}
	/* int, not nr_cpu_ids' own type: it was an int on RTAI's kernels. */
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
	*legacy = !strcmp(format, "legacy");
	return 0;
}

#endif /* IRQS_PARAMS_H */
