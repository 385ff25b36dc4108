// SPDX-License-Identifier: GPL-2.0
/* lpt_latency's object of ../irqs_timer.c: see ../Kbuild. */
#include "../irqs_timer.c"
