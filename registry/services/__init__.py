"""Registry services: blobs, uploads, manifests, tags, referrers, catalog. No HTTP in here."""
