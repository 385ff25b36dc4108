// SPDX-License-Identifier: GPL-2.0
/* lpt_latency's object of ../irqs_pin.c: see ../Kbuild. */
#include "../irqs_pin.c"
