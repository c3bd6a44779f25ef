"""Log readers, one module per format family; each registers its readers with ``@reader`` (:mod:`prefixcache.analyzer.ingest.detect`)."""
