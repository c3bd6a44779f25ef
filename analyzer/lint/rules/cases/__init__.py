"""Pass/fail data cases of every lint rule (``PCnnn.json``), shipped as package data."""
