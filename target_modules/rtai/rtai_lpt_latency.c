// SPDX-License-Identifier: GPL-2.0
/*
 * IRQ latency of a PC parallel port under RTAI: the
 * seed's LPT experiment as a parameterised instrument.
 *
 * Wiring: LPT pin 2 (D0) to pin 10 (nACK). A periodic RT task takes
 * rt_get_time_ns() and writes 0xFF to the data port; the rising nACK edge
 * raises the port's IRQ, which RTAI delivers to our handler ahead of Linux
 * (hard IRQ domain). The handler takes rt_get_time_ns() first thing, checks
 * the status port (check=1, the "inb" variant), writes 0x00 to end the
 * pulse and puts one record into RT FIFO `fifo` (/dev/rtf<fifo>).
 *
 * The IRQ line must be exclusive to this module: RTAI does not pass it on.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/init.h>
#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/module.h>

#include "../include/irqs_params.h"
#include "../include/lpt_regs.h"
#include "rtai_common.h"

#define DRV_NAME		"rtai_lpt_latency"

static unsigned int period_us = 100;
module_param(period_us, uint, 0444);
MODULE_PARM_DESC(period_us, IRQS_DESC_PERIOD_US);

static bool check = true;
module_param(check, bool, 0444);
MODULE_PARM_DESC(check, IRQS_DESC_CHECK_LPT);

static int cpu = -1;
module_param(cpu, int, 0444);
MODULE_PARM_DESC(cpu, IRQS_DESC_CPU("RT task"));

static char *format = "v1";
module_param(format, charp, 0444);
MODULE_PARM_DESC(format, IRQS_DESC_FORMAT);

static int fifo;
module_param(fifo, int, 0444);
MODULE_PARM_DESC(fifo, "RT FIFO number, read from /dev/rtf<fifo> (default 0)");

static unsigned int fifo_size = 65536 * IRQS_RECORD_SIZE;
module_param(fifo_size, uint, 0444);
MODULE_PARM_DESC(fifo_size, "RT FIFO size in bytes (default 2621440 = 65536 records)");

static unsigned long base = 0x378;
module_param(base, ulong, 0444);
MODULE_PARM_DESC(base, "I/O base address of the parallel port (default 0x378)");

static int irq = 7;
module_param(irq, int, 0444);
MODULE_PARM_DESC(irq, "IRQ line of the parallel port (default 7)");

static struct rtai_stream stream;
module_param_cb(dropped, &rtai_counter_ops, &stream.dropped, 0444);
MODULE_PARM_DESC(dropped, "Read-only: records dropped because the FIFO was full");
module_param_cb(missed, &rtai_counter_ops, &stream.missed, 0444);
MODULE_PARM_DESC(missed, "Read-only: writes abandoned because no IRQ came");

static struct rtai_event ev;
static struct rtai_writer writer;
static RTIME period_ns;
static u16 rec_flags;
static u8 saved_control;

/* RTAI interrupt handler: runs before Linux sees anything. */
static int lpt_handler(unsigned int irqn, void *cookie)
{
	RTIME now = rt_get_time_ns();	/* first: end of t_SW */
	u16 flags = rec_flags;

	/*
	 * The seed read the data port and tested bit 0: that reads back the
	 * latch we wrote. The status port shows pin 10, which the IRQ came
	 * from, for the same bus cost (one inb, t_rw).
	 */
	if (check && !(inb(LPT_STATUS(base)) & LPT_STATUS_ACK)) {
		rtai_stream_push(&stream, flags | IRQS_F_NOT_OURS,
				 atomic64_read(&ev.t_write_ns), now, 0);
		rt_unmask_irq(irqn);
		return 0;
	}

	outb(0x00, LPT_DATA(base));	/* ends the pulse on pin 10 */

	if (!atomic_xchg(&ev.pending, 0))
		flags |= IRQS_F_NOT_OURS;
	else if (atomic_read(&ev.overrun))
		flags |= IRQS_F_OVERRUN;
	rtai_stream_push(&stream, flags, atomic64_read(&ev.t_write_ns), now,
			 0);
	rt_unmask_irq(irqn);
	return 0;
}

static void lpt_task(long arg)
{
	for (;;) {
		if (atomic_read(&ev.pending)) {
			atomic_set(&ev.overrun, 1);
			if (!rtai_event_stale(&ev, rt_get_time_ns(), period_ns) ||
			    atomic_cmpxchg(&ev.pending, 1, 0) != 1)
				goto wait;
			outb(0x00, LPT_DATA(base));
			rtai_stream_skip(&stream);
		}
		atomic_set(&ev.overrun, 0);
		atomic64_set(&ev.t_write_ns, rt_get_time_ns());
		/* t_write_ns visible before pending: the handler may be on another CPU. */
		smp_wmb();
		atomic_set(&ev.pending, 1);
		outb(0xff, LPT_DATA(base));
wait:
		rt_task_wait_period();
	}
}

static int __init rtai_lpt_init(void)
{
	bool legacy;
	int ret;

	ret = rtai_check_params(period_us, cpu, format, fifo, fifo_size,
				&legacy);
	if (ret)
		return ret;
	if (!base || base > 0xffff - (LPT_NPORTS - 1)) {
		pr_err("base=0x%lx invalid: accepted 0x1..0x%x\n",
		       base, 0xffff - (LPT_NPORTS - 1));
		return -EINVAL;
	}
	if (irq < 1 || irq >= RTAI_NR_IRQS) {
		pr_err("irq=%d invalid: accepted 1..%d\n", irq, RTAI_NR_IRQS - 1);
		return -EINVAL;
	}
	period_ns = (RTIME)period_us * 1000;
	rec_flags = (IRQS_IFACE_LPT << IRQS_F_IFACE_SHIFT) |
		    (check ? IRQS_F_CHECK : 0);
	atomic_set(&ev.pending, 0);

	ret = rtai_stream_create(&stream, fifo, fifo_size, legacy);
	if (ret)
		return ret;

	if (!request_region(base, LPT_NPORTS, DRV_NAME)) {
		pr_err("I/O ports 0x%lx-0x%lx are busy: unload parport_pc (rmmod lp ppdev parport_pc) first\n",
		       base, base + LPT_NPORTS - 1);
		ret = -EBUSY;
		goto err_stream;
	}
	saved_control = inb(LPT_CONTROL(base));
	outb(0x00, LPT_DATA(base));

	ret = rtai_irq_start(irq, lpt_handler, cpu);
	if (ret)
		goto err_region;
	outb(LPT_CONTROL_IRQEN, LPT_CONTROL(base));

	ret = rtai_writer_start(&writer, lpt_task, period_ns, cpu);
	if (ret)
		goto err_irq;

	pr_info("port 0x%lx irq %d period %u us check=%d cpu=%d format=%s fifo=%d\n",
		base, irq, period_us, check, cpu, format, fifo);
	return 0;

err_irq:
	outb(saved_control & ~LPT_CONTROL_IRQEN, LPT_CONTROL(base));
	rtai_irq_stop(irq, cpu);
err_region:
	outb(0x00, LPT_DATA(base));
	outb(saved_control, LPT_CONTROL(base));
	release_region(base, LPT_NPORTS);
err_stream:
	rtai_stream_destroy(&stream);
	return ret;
}

static void __exit rtai_lpt_exit(void)
{
	rtai_writer_stop(&writer);
	outb(saved_control & ~LPT_CONTROL_IRQEN, LPT_CONTROL(base));
	rtai_irq_stop(irq, cpu);
	outb(0x00, LPT_DATA(base));
	outb(saved_control, LPT_CONTROL(base));
	release_region(base, LPT_NPORTS);
	rtai_stream_destroy(&stream);
	pr_info("unloaded: %lld events, %u dropped, %u missed\n",
		(long long)atomic64_read(&stream.seq), stream.dropped,
		stream.missed);
}

module_init(rtai_lpt_init);
module_exit(rtai_lpt_exit);

MODULE_DESCRIPTION("RTAI parallel-port IRQ latency with a sequence-numbered record stream");
MODULE_AUTHOR("irq-station contributors");
MODULE_LICENSE("GPL");
