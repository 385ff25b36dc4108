"""What every run kind's analysis stands on: a campaign's runs grouped by kind and handed to each
kind's own analysis (campaign, run_pool), the distributions and their intervals (histogram,
distribution, streaming, stats, quantile_functions), dependence between events and runs as the
unit of comparison (dependence, run_level, slices), the worst case's tail (worst_case), and the
per-run samples the report draws (samples, collector). The module kind's pairing, correlation and
outliers live in its own package, station/kinds/module/."""

from station.analysis.campaign import SCHEMA_VERSION, analyse_campaign

__all__ = ["SCHEMA_VERSION", "analyse_campaign"]
