// SPDX-License-Identifier: GPL-2.0
/* pcie_latency's object of ../irqs_params.c: see ../Kbuild. */
#include "../irqs_params.c"
