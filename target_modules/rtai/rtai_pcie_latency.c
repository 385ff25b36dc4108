// SPDX-License-Identifier: GPL-2.0
/*
 * IRQ latency of the DE4 PCIe IRQ echoer under RTAI:
 * the seed's PCIe experiment as a parameterised instrument.
 *
 * A periodic RT task takes rt_get_time_ns() and writes an event tag to
 * SEND; the board raises its (INTx) IRQ and irqflagtap. The RTAI handler
 * takes rt_get_time_ns() first thing; check=1 reads STATUS first (the "inb"
 * variant); then one read of RECV returns the tag (the check of check=0)
 * and clears the IRQ. Boards with timestamps add their own pulse width.
 *
 * The board is claimed with pci_get_device(), not a pci_driver: RTAI, not
 * Linux, owns its interrupt, and the INTx line must not be shared with a
 * Linux device (RTAI does not pass it on). MSI is not used: RTAI 3.x
 * handles legacy lines.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/init.h>
#include <linux/io.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/pci.h>

#include "../include/echoer_regs.h"
#include "../include/irqs_params.h"
#include "rtai_common.h"

#define DRV_NAME		"rtai_pcie_latency"
#define ECHOER_VENDOR		0x1172	/* Altera */
#define ECHOER_DEVICE		0x0de4

static unsigned int period_us = 100;
module_param(period_us, uint, 0444);
MODULE_PARM_DESC(period_us, IRQS_DESC_PERIOD_US);

static bool check = true;
module_param(check, bool, 0444);
MODULE_PARM_DESC(check, IRQS_DESC_CHECK_PCIE);

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

static struct rtai_stream stream;
module_param_cb(dropped, &rtai_counter_ops, &stream.dropped, 0444);
MODULE_PARM_DESC(dropped, "Read-only: records dropped because the FIFO was full");
module_param_cb(missed, &rtai_counter_ops, &stream.missed, 0444);
MODULE_PARM_DESC(missed, "Read-only: writes abandoned because no IRQ came");

static struct pci_dev *pdev;
static void __iomem *regs;
static unsigned int board_irq;
static u32 clock_hz;		/* 0: no board-side timestamps */
static bool has_status;		/* STATUS exists (not a seed-era design) */
static atomic_t tag;		/* value of the last SEND */
static struct rtai_event ev;
static struct rtai_writer writer;
static RTIME period_ns;
static u16 rec_flags;

static int echoer_handler(unsigned int irqn, void *cookie)
{
	RTIME now = rt_get_time_ns();	/* first: end of t_SW */
	RTIME t_write = atomic64_read(&ev.t_write_ns);
	u16 flags = rec_flags;
	u32 status, value, cycles;
	u32 width = 0;

	if (check) {
		status = ioread32(regs + ECHOER_REG_STATUS);
		/* Seed-era boards: the read is made for its bus time only. */
		if (has_status && !(status & ECHOER_STATUS_IRQ)) {
			rtai_stream_push(&stream, flags | IRQS_F_NOT_OURS,
					 t_write, now, 0);
			rt_unmask_irq(irqn);
			return 0;
		}
	}

	value = ioread32(regs + ECHOER_REG_RECV);	/* clears, ends pulse */

	if (value != (u32)atomic_read(&tag) || !atomic_xchg(&ev.pending, 0)) {
		flags |= IRQS_F_NOT_OURS;
	} else {
		if (atomic_read(&ev.overrun))
			flags |= IRQS_F_OVERRUN;
		if (clock_hz) {
			cycles = ioread32(regs + ECHOER_REG_WIDTH);
			width = (u32)min_t(u64, 0xffffffffU,
					   div_u64((u64)cycles * NSEC_PER_SEC,
						   clock_hz));
			flags |= IRQS_F_HW_WIDTH;
		}
	}
	rtai_stream_push(&stream, flags, t_write, now, width);
	rt_unmask_irq(irqn);
	return 0;
}

static void echoer_task(long arg)
{
	for (;;) {
		if (atomic_read(&ev.pending)) {
			atomic_set(&ev.overrun, 1);
			if (!rtai_event_stale(&ev, rt_get_time_ns(), period_ns) ||
			    atomic_cmpxchg(&ev.pending, 1, 0) != 1)
				goto wait;
			ioread32(regs + ECHOER_REG_RECV);
			rtai_stream_skip(&stream);
		}
		atomic_inc(&tag);
		atomic_set(&ev.overrun, 0);
		atomic64_set(&ev.t_write_ns, rt_get_time_ns());
		/* tag and t_write_ns visible before pending. */
		smp_wmb();
		atomic_set(&ev.pending, 1);
		iowrite32((u32)atomic_read(&tag), regs + ECHOER_REG_SEND);
wait:
		rt_task_wait_period();
	}
}

static int echoer_claim(void)
{
	u32 version;
	int ret;

	pdev = pci_get_device(ECHOER_VENDOR, ECHOER_DEVICE, NULL);
	if (!pdev) {
		pr_err("no DE4 echoer (PCI %04x:%04x) found\n",
		       ECHOER_VENDOR, ECHOER_DEVICE);
		return -ENODEV;
	}
	ret = pci_enable_device(pdev);
	if (ret) {
		pr_err("cannot enable %s (%d)\n", pci_name(pdev), ret);
		goto err_put;
	}
	ret = pci_request_regions(pdev, DRV_NAME);
	if (ret) {
		pr_err("%s: BARs busy (%d)\n", pci_name(pdev), ret);
		goto err_disable;
	}
	if (pci_resource_len(pdev, ECHOER_BAR) < ECHOER_REG_SPAN) {
		pr_err("%s: BAR%d too small for the echoer\n", pci_name(pdev),
		       ECHOER_BAR);
		ret = -ENODEV;
		goto err_regions;
	}
	regs = pci_iomap(pdev, ECHOER_BAR, ECHOER_REG_SPAN);
	if (!regs) {
		ret = -ENOMEM;
		goto err_regions;
	}
	version = ioread32(regs + ECHOER_REG_VERSION);
	if (version == 0xffffffffU) {
		pr_err("%s: BAR%d reads all ones: board not responding\n",
		       pci_name(pdev), ECHOER_BAR);
		ret = -EIO;
		goto err_unmap;
	}
	has_status = version != ECHOER_OTHER_VALUE;
	clock_hz = 0;
	if (has_status &&
	    ECHOER_VERSION_MAJOR(version) >= ECHOER_VERSION_MAJOR_TIMESTAMPS) {
		clock_hz = ioread32(regs + ECHOER_REG_CLOCK_HZ);
		if (clock_hz == ECHOER_OTHER_VALUE)
			clock_hz = 0;
	}
	board_irq = pdev->irq;
	ioread32(regs + ECHOER_REG_RECV);	/* drop a stale IRQ */
	return 0;

err_unmap:
	pci_iounmap(pdev, regs);
err_regions:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_put:
	pci_dev_put(pdev);
	pdev = NULL;
	return ret;
}

static void echoer_release(void)
{
	ioread32(regs + ECHOER_REG_RECV);	/* leave irqflagtap low */
	pci_iounmap(pdev, regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	pci_dev_put(pdev);
	pdev = NULL;
}

static int __init rtai_pcie_init(void)
{
	bool legacy;
	int ret;

	ret = rtai_check_params(period_us, cpu, format, fifo, fifo_size,
				&legacy);
	if (ret)
		return ret;
	period_ns = (RTIME)period_us * 1000;
	rec_flags = (IRQS_IFACE_PCIE << IRQS_F_IFACE_SHIFT) |
		    (check ? IRQS_F_CHECK : 0);
	atomic_set(&ev.pending, 0);

	ret = rtai_stream_create(&stream, fifo, fifo_size, legacy);
	if (ret)
		return ret;

	ret = echoer_claim();
	if (ret)
		goto err_stream;

	ret = rtai_irq_start(board_irq, echoer_handler, cpu);
	if (ret)
		goto err_board;

	ret = rtai_writer_start(&writer, echoer_task, period_ns, cpu);
	if (ret)
		goto err_irq;

	pr_info("%s irq %u period %u us check=%d cpu=%d format=%s fifo=%d clock %u Hz\n",
		pci_name(pdev), board_irq, period_us, check, cpu, format, fifo,
		clock_hz);
	return 0;

err_irq:
	rtai_irq_stop(board_irq, cpu);
err_board:
	echoer_release();
err_stream:
	rtai_stream_destroy(&stream);
	return ret;
}

static void __exit rtai_pcie_exit(void)
{
	rtai_writer_stop(&writer);
	rtai_irq_stop(board_irq, cpu);
	echoer_release();
	rtai_stream_destroy(&stream);
	pr_info("unloaded: %lld events, %u dropped, %u missed\n",
		(long long)atomic64_read(&stream.seq), stream.dropped,
		stream.missed);
}

module_init(rtai_pcie_init);
module_exit(rtai_pcie_exit);

MODULE_DESCRIPTION("RTAI PCIe (DE4 IRQ echoer) IRQ latency with a sequence-numbered record stream");
MODULE_AUTHOR("irq-station contributors");
MODULE_LICENSE("GPL");
