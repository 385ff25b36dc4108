// SPDX-License-Identifier: GPL-2.0
/*
 * irqgap_inject.ko: TEST ONLY. Never load it on a machine you measure.
 *
 * It takes one CPU away from whatever runs there, in interrupt context, for
 * hold_us microseconds every period_us microseconds: gaps of a known length
 * at a known period, to validate an interruption detector (a user-space
 * spin loop pinned on that CPU that records every gap in its loop) against
 * a ground truth. Each hold is a busy-wait on ktime_get() in hard interrupt
 * context; the parameter "fired" counts the holds.
 *
 * Every hold it makes is logged (the first GAP_LOG_MAX), so a test checks a
 * detector against the holds that happened, not the grid it asked for: an
 * emulated CPU can fire a timer late, skip a period or merge two. Reading
 * /proc/irqgap_inject_holds gives a header line and one line per hold:
 *
 *   irqgap_inject 2 <mode> <cpu> <period_us> <hold_us> <logged> <dropped> <now_ns>
 *   hold <due_ns> <start_ns> <end_ns> <cpu>
 *
 * all on CLOCK_MONOTONIC (ktime_get): now is when the header was written (the
 * log is complete up to then, but for a hold in progress, not listed), due the
 * earliest the interrupt could arrive (the hrtimer's expiry; mode=edu: when
 * the raise was written), start and end bound the busy-wait, cpu the CPU it
 * held (an edu IRQ routed elsewhere than @cpu holds another CPU).
 *
 * mode=hrtimer: a hard hrtimer pinned to @cpu holds in its callback. The gap
 * is counted on the local timer line (LOC in /proc/interrupts).
 *
 * mode=edu: QEMU's edu device (PCI 1234:11e8, emulation only) is bound as a
 * PCI driver, its IRQ (MSI, else INTx) routed to @cpu, and a hard hrtimer
 * pinned to another CPU (the first online one that is not @cpu) raises it
 * every period_us. The handler, a hard IRQ handler (never threaded, also on
 * PREEMPT_RT), acknowledges and holds. The gap is counted on the device's
 * own line, "irqgap_inject", in /proc/interrupts.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/hrtimer.h>
#include <linux/init.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/irq.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/pci.h>
#include <linux/proc_fs.h>
#include <linux/processor.h>
#include <linux/seq_file.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#define DRV_NAME		"irqgap_inject"

#define GAP_PERIOD_US_MIN	10U
#define GAP_HOLD_US_MAX		100000U
#define GAP_LOG_MAX		65536U	/* holds logged: 45 min at 41.3 ms */
#define GAP_LOG_FORMAT		2
#define GAP_LOG_PROC		"irqgap_inject_holds"

/* QEMU's educational PCI device (hw/misc/edu.c). */
#define EDU_VENDOR		0x1234
#define EDU_DEVICE		0x11e8
#define EDU_BAR			0
#define EDU_REG_SPAN		0x80
#define EDU_REG_IDENT		0x00	/* 0xMMmm00ed */
#define EDU_IDENT_MAGIC		0xed
#define EDU_REG_IRQ_STATUS	0x24	/* OR of the values raised, not acked */
#define EDU_REG_IRQ_RAISE	0x60	/* ORs the value in, raises the IRQ */
#define EDU_REG_IRQ_ACK		0x64	/* clears the bits written */
#define EDU_RAISE_VALUE		0x1	/* edu raises nothing for 0 */

static char *mode = "hrtimer";
module_param(mode, charp, 0444);
MODULE_PARM_DESC(mode, "hrtimer (hard hrtimer on cpu, LOC line) or edu (QEMU edu device IRQ routed to cpu) (default hrtimer)");

static int cpu;
module_param(cpu, int, 0444);
MODULE_PARM_DESC(cpu, "The online CPU to disturb (default 0)");

static unsigned int period_us = 10000;
module_param(period_us, uint, 0444);
MODULE_PARM_DESC(period_us, "Period of the gaps in microseconds, at least 10 (default 10000)");

static unsigned int hold_us = 1000;
module_param(hold_us, uint, 0444);
MODULE_PARM_DESC(hold_us, "Length of each gap in microseconds: the handler busy-waits that long, 0..100000 and below period_us (default 1000)");

static atomic_t fired = ATOMIC_INIT(0);
static atomic_t raised = ATOMIC_INIT(0);
static atomic_t overruns = ATOMIC_INIT(0);
static atomic_t spurious = ATOMIC_INIT(0);
static int raiser_cpu = -1;

/* One hold as it happened; end_ns is written last (0: not complete yet). */
struct gap_hold_rec {
	u64 due_ns;
	u64 start_ns;
	u64 end_ns;
	int cpu;
};

static struct gap_hold_rec *gap_log;
static atomic_t gap_log_claimed = ATOMIC_INIT(0);
/* mode=edu: when the oldest raise not yet handled was written (0: none) */
static atomic64_t edu_raised_ns = ATOMIC64_INIT(0);

static int gap_counter_set(const char *val, const struct kernel_param *kp)
{
	pr_err("%s is a read-only counter\n", kp->name);
	return -EPERM;
}

static int gap_counter_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%u\n",
			 (unsigned int)atomic_read((atomic_t *)kp->arg));
}

static const struct kernel_param_ops gap_counter_ops = {
	.set = gap_counter_set,
	.get = gap_counter_get,
};

static int gap_cpu_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n", READ_ONCE(*(int *)kp->arg));
}

static const struct kernel_param_ops gap_cpu_ops = {
	.set = gap_counter_set,
	.get = gap_cpu_get,
};

module_param_cb(fired, &gap_counter_ops, &fired, 0444);
MODULE_PARM_DESC(fired, "Read-only: holds done (gaps made) so far");
module_param_cb(raised, &gap_counter_ops, &raised, 0444);
MODULE_PARM_DESC(raised, "Read-only: timer expiries (mode=edu: IRQs raised)");
module_param_cb(overruns, &gap_counter_ops, &overruns, 0444);
MODULE_PARM_DESC(overruns, "Read-only: periods the timer skipped because it ran late (no gap in them)");
module_param_cb(spurious, &gap_counter_ops, &spurious, 0444);
MODULE_PARM_DESC(spurious, "Read-only: mode=edu: IRQs with nothing raised (no hold)");
module_param_cb(raiser_cpu, &gap_cpu_ops, &raiser_cpu, 0444);
MODULE_PARM_DESC(raiser_cpu, "Read-only: mode=edu: CPU of the timer that raises the IRQ (-1: none)");

struct gap_edu {
	struct pci_dev *pdev;
	void __iomem *regs;
	unsigned int irq;
	bool msi;		/* MSI (ours alone) rather than a shared INTx */
	bool affinity_saved;
	struct cpumask saved_affinity;
};

static bool use_edu;
static ktime_t period;
static struct hrtimer gap_timer;
static struct gap_edu edu;

/*
 * The gap itself: hard interrupt context, interrupts off. @due: the earliest
 * the interrupt that called it could have arrived.
 */
static void gap_hold(ktime_t due)
{
	ktime_t start = ktime_get();
	ktime_t end = ktime_add_us(start, hold_us);
	ktime_t now;
	unsigned int slot;

	do {
		cpu_relax();
		now = ktime_get();
	} while (ktime_before(now, end));
	atomic_inc(&fired);

	slot = (unsigned int)atomic_inc_return(&gap_log_claimed) - 1;
	if (slot < GAP_LOG_MAX) {
		gap_log[slot].due_ns = ktime_to_ns(due);
		gap_log[slot].start_ns = ktime_to_ns(start);
		gap_log[slot].cpu = smp_processor_id();	/* hard IRQ: no migration */
		/* pairs with gap_log_show()'s acquire: a set end, a whole record */
		smp_store_release(&gap_log[slot].end_ns, ktime_to_ns(now));
	}
}

static void gap_timer_forward(struct hrtimer *t)
{
	u64 n = hrtimer_forward_now(t, period);

	if (n > 1)
		atomic_add(n - 1, &overruns);
}

/* mode=hrtimer: hard hrtimer context on @cpu. */
static enum hrtimer_restart gap_hrtimer_tick(struct hrtimer *t)
{
	atomic_inc(&raised);
	gap_hold(hrtimer_get_expires(t));
	/* After the hold: the next expiry stays on the period grid. */
	gap_timer_forward(t);
	return HRTIMER_RESTART;
}

/* mode=edu: hard hrtimer context on raiser_cpu. */
static enum hrtimer_restart gap_edu_tick(struct hrtimer *t)
{
	gap_timer_forward(t);
	atomic_inc(&raised);
	/* stamped before the write: the IRQ cannot come earlier */
	atomic64_cmpxchg(&edu_raised_ns, 0, ktime_get_ns());
	iowrite32(EDU_RAISE_VALUE, edu.regs + EDU_REG_IRQ_RAISE);
	return HRTIMER_RESTART;
}

/* mode=edu: hard IRQ context on @cpu (IRQF_NO_THREAD). */
static irqreturn_t gap_edu_irq(int irq, void *dev_id)
{
	struct gap_edu *e = dev_id;
	u32 status = ioread32(e->regs + EDU_REG_IRQ_STATUS);

	if (!status) {
		atomic_inc(&spurious);
		/* A shared INTx line may be another device's; MSI is ours. */
		return e->msi ? IRQ_HANDLED : IRQ_NONE;
	}
	iowrite32(status, e->regs + EDU_REG_IRQ_ACK);	/* INTx drops here */
	gap_hold(ns_to_ktime(atomic64_xchg(&edu_raised_ns, 0)));
	return IRQ_HANDLED;
}

static void gap_timer_start_here(void *unused)
{
	/* Runs on the target CPU: PINNED keeps the timer there. */
	hrtimer_start(&gap_timer, period, HRTIMER_MODE_REL_PINNED_HARD);
}

static int gap_timer_start(int on_cpu,
			   enum hrtimer_restart (*fn)(struct hrtimer *))
{
	int ret;

	hrtimer_init(&gap_timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	gap_timer.function = fn;
	cpus_read_lock();
	if (cpu_online(on_cpu))
		ret = smp_call_function_single(on_cpu, gap_timer_start_here,
					       NULL, 1);
	else
		ret = -ENODEV;
	cpus_read_unlock();
	return ret;
}

static int gap_edu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct gap_edu *e = &edu;
	const struct cpumask *cur;
	unsigned long irqflags;
	u32 ident;
	int ret;

	if (e->pdev) {
		dev_err(&pdev->dev, "%s drives one edu device; %s already has it\n",
			DRV_NAME, pci_name(e->pdev));
		return -EBUSY;
	}
	ret = pci_enable_device(pdev);
	if (ret) {
		dev_err(&pdev->dev, "cannot enable device (%d)\n", ret);
		return ret;
	}
	ret = pci_request_regions(pdev, DRV_NAME);
	if (ret) {
		dev_err(&pdev->dev, "BARs busy (%d)\n", ret);
		goto err_disable;
	}
	if (pci_resource_len(pdev, EDU_BAR) < EDU_REG_SPAN) {
		dev_err(&pdev->dev, "BAR%d too small for the edu registers\n",
			EDU_BAR);
		ret = -ENODEV;
		goto err_regions;
	}
	e->regs = pci_iomap(pdev, EDU_BAR, EDU_REG_SPAN);
	if (!e->regs) {
		ret = -ENOMEM;
		goto err_regions;
	}
	ident = ioread32(e->regs + EDU_REG_IDENT);
	if ((ident & 0xff) != EDU_IDENT_MAGIC) {
		dev_err(&pdev->dev, "IDENT reads 0x%08x: not QEMU's edu device\n",
			ident);
		ret = -ENODEV;
		goto err_unmap;
	}
	pci_set_master(pdev);	/* MSI is a memory write by the device */

	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSI | PCI_IRQ_LEGACY);
	if (ret < 0) {
		dev_err(&pdev->dev, "no IRQ vector (%d)\n", ret);
		goto err_master;
	}
	e->irq = pci_irq_vector(pdev, 0);
	/* set before request_irq: a shared line may call the handler at once */
	e->msi = pdev->msi_enabled;
	iowrite32(U32_MAX, e->regs + EDU_REG_IRQ_ACK);	/* stale raises */

	irqflags = IRQF_NO_THREAD | (pdev->msi_enabled ? 0 : IRQF_SHARED);
	ret = request_irq(e->irq, gap_edu_irq, irqflags, DRV_NAME, e);
	if (ret) {
		dev_err(&pdev->dev, "cannot get IRQ %u (%d)\n", e->irq, ret);
		goto err_vectors;
	}

	cur = irq_get_affinity_mask(e->irq);
	cpumask_copy(&e->saved_affinity, cur ? cur : cpu_possible_mask);
	ret = irq_set_affinity(e->irq, cpumask_of(cpu));
	if (ret) {
		dev_err(&pdev->dev, "cannot route IRQ %u to CPU %d (%d)\n",
			e->irq, cpu, ret);
		goto err_irq;
	}
	e->affinity_saved = true;
	e->pdev = pdev;
	pci_set_drvdata(pdev, e);

	ret = gap_timer_start(raiser_cpu, gap_edu_tick);
	if (ret) {
		dev_err(&pdev->dev, "cannot start the timer on CPU %d (%d)\n",
			raiser_cpu, ret);
		goto err_affinity;
	}
	dev_info(&pdev->dev, "TEST ONLY: IRQ %u (%s) on CPU %d, raised from CPU %d every %u us, held %u us\n",
		 e->irq, pdev->msi_enabled ? "MSI" : "INTx", cpu, raiser_cpu,
		 period_us, hold_us);
	return 0;

err_affinity:
	e->pdev = NULL;
	e->affinity_saved = false;
	irq_set_affinity(e->irq, &e->saved_affinity);
err_irq:
	free_irq(e->irq, e);
err_vectors:
	pci_free_irq_vectors(pdev);
err_master:
	pci_clear_master(pdev);
err_unmap:
	pci_iounmap(pdev, e->regs);
err_regions:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

static void gap_edu_remove(struct pci_dev *pdev)
{
	struct gap_edu *e = pci_get_drvdata(pdev);

	hrtimer_cancel(&gap_timer);
	iowrite32(U32_MAX, e->regs + EDU_REG_IRQ_ACK);
	if (e->affinity_saved)
		irq_set_affinity(e->irq, &e->saved_affinity);
	e->affinity_saved = false;
	free_irq(e->irq, e);
	pci_free_irq_vectors(pdev);
	pci_clear_master(pdev);
	pci_iounmap(pdev, e->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	e->pdev = NULL;
}

/* Not exported for autoloading: bound only when loaded with mode=edu. */
static const struct pci_device_id gap_edu_ids[] = {
	{ PCI_DEVICE(EDU_VENDOR, EDU_DEVICE) },
	{ }
};

static struct pci_driver gap_edu_driver = {
	.name = DRV_NAME,
	.id_table = gap_edu_ids,
	.probe = gap_edu_probe,
	.remove = gap_edu_remove,
};

static unsigned int gap_log_count(void)
{
	return min_t(unsigned int, atomic_read(&gap_log_claimed), GAP_LOG_MAX);
}

static void *gap_log_start(struct seq_file *m, loff_t *pos)
{
	/* position 0 is the header, position i > 0 the record i - 1 */
	return *pos <= gap_log_count() ? pos : NULL;
}

static void *gap_log_next(struct seq_file *m, void *v, loff_t *pos)
{
	++*pos;
	return gap_log_start(m, pos);
}

static void gap_log_stop(struct seq_file *m, void *v)
{
}

static int gap_log_show(struct seq_file *m, void *v)
{
	loff_t i = *(loff_t *)v;
	const struct gap_hold_rec *r;
	u64 end;

	if (i == 0) {
		unsigned int claimed = atomic_read(&gap_log_claimed);

		seq_printf(m, "irqgap_inject %d %s %d %u %u %u %u %llu\n",
			   GAP_LOG_FORMAT, use_edu ? "edu" : "hrtimer", cpu,
			   period_us, hold_us, min(claimed, GAP_LOG_MAX),
			   claimed > GAP_LOG_MAX ? claimed - GAP_LOG_MAX : 0,
			   ktime_get_ns());
		return 0;
	}
	r = &gap_log[i - 1];
	/* pairs with gap_hold()'s release: due and start are written */
	end = smp_load_acquire(&r->end_ns);
	if (end)
		seq_printf(m, "hold %llu %llu %llu %d\n", r->due_ns, r->start_ns,
			   end, r->cpu);
	return 0;
}

static const struct seq_operations gap_log_ops = {
	.start = gap_log_start,
	.next = gap_log_next,
	.stop = gap_log_stop,
	.show = gap_log_show,
};

static int __init gap_check_params(void)
{
	if (!mode || (strcmp(mode, "hrtimer") && strcmp(mode, "edu"))) {
		pr_err("mode=%s unknown: accepted hrtimer or edu\n",
		       mode ? mode : "(null)");
		return -EINVAL;
	}
	use_edu = !strcmp(mode, "edu");
	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu)) {
		pr_err("cpu=%d invalid: not an online CPU\n", cpu);
		return -EINVAL;
	}
	if (period_us < GAP_PERIOD_US_MIN) {
		pr_err("period_us=%u invalid: %s (at least %u)\n", period_us,
		       period_us ? "too short" : "0 has no period",
		       GAP_PERIOD_US_MIN);
		return -EINVAL;
	}
	if (hold_us > GAP_HOLD_US_MAX) {
		pr_err("hold_us=%u invalid: above the %u us maximum\n",
		       hold_us, GAP_HOLD_US_MAX);
		return -EINVAL;
	}
	if (hold_us >= period_us) {
		pr_err("hold_us=%u invalid: must be below period_us=%u\n",
		       hold_us, period_us);
		return -EINVAL;
	}
	if (use_edu) {
		unsigned int other = cpumask_any_but(cpu_online_mask, cpu);

		if (other >= nr_cpu_ids) {
			pr_err("cpu=%d invalid for mode=edu: no other online CPU to raise the IRQ from\n",
			       cpu);
			return -EINVAL;
		}
		raiser_cpu = other;
	}
	return 0;
}

static int __init irqgap_inject_init(void)
{
	int ret;

	ret = gap_check_params();
	if (ret)
		return ret;
	period = ns_to_ktime((u64)period_us * NSEC_PER_USEC);

	gap_log = vzalloc(array_size(GAP_LOG_MAX, sizeof(*gap_log)));
	if (!gap_log)
		return -ENOMEM;
	if (!proc_create_seq(GAP_LOG_PROC, 0444, NULL, &gap_log_ops)) {
		pr_err("cannot create /proc/%s\n", GAP_LOG_PROC);
		ret = -ENOMEM;
		goto err_log;
	}

	if (!use_edu) {
		ret = gap_timer_start(cpu, gap_hrtimer_tick);
		if (ret) {
			pr_err("cannot start the timer on CPU %d (%d)\n",
			       cpu, ret);
			goto err_proc;
		}
		pr_info("TEST ONLY: mode=hrtimer on CPU %d every %u us, held %u us\n",
			cpu, period_us, hold_us);
		return 0;
	}

	ret = pci_register_driver(&gap_edu_driver);
	if (ret)
		goto err_proc;
	/* Probing is synchronous: nothing bound now means none is free. */
	if (!edu.pdev) {
		pr_err("mode=edu: no free QEMU edu device (PCI %04x:%04x): QEMU needs -device edu, and no other driver (pcie_latency) may hold it\n",
		       EDU_VENDOR, EDU_DEVICE);
		pci_unregister_driver(&gap_edu_driver);
		ret = -ENODEV;
		goto err_proc;
	}
	return 0;

err_proc:
	remove_proc_entry(GAP_LOG_PROC, NULL);
err_log:
	vfree(gap_log);
	return ret;
}

static void __exit irqgap_inject_exit(void)
{
	if (use_edu)
		pci_unregister_driver(&gap_edu_driver);
	else
		hrtimer_cancel(&gap_timer);
	/* no hold runs now: the timer and the IRQ are gone */
	remove_proc_entry(GAP_LOG_PROC, NULL);
	vfree(gap_log);
	pr_info("unloaded: %u gaps of %u us, %u timer expiries, %u overruns, %u spurious\n",
		atomic_read(&fired), hold_us, atomic_read(&raised),
		atomic_read(&overruns), atomic_read(&spurious));
}

module_init(irqgap_inject_init);
module_exit(irqgap_inject_exit);

MODULE_DESCRIPTION("TEST ONLY: injects interrupt gaps of known length and period on one CPU, to validate an interruption detector");
MODULE_AUTHOR("irq-station contributors");
MODULE_LICENSE("GPL");
