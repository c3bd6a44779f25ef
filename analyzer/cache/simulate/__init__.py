"""The sequential simulation: the simulator, capacity sweeps, offline bounds, figures, bands and the ``simulate`` document."""
