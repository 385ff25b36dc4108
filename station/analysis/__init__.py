"""Analysis of measured campaigns: statistics (stats), HW↔SW correlation
(correlation), event pairing (pairing), outliers (outliers), and the campaign's
comparisons that make the report (campaign)."""

from station.analysis.campaign import SCHEMA_VERSION, analyse_campaign

__all__ = ["SCHEMA_VERSION", "analyse_campaign"]
