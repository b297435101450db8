"""The evidence view: pages with every crop region, crops at full resolution (renders core.run.evidence)."""
