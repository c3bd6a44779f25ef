"""The fleet simulation (``simulate --replicas N``): replicas, routing, KV tiers, timing, the study and its document."""
