"""Retention: ``planner`` decides (pure, over a snapshot in memory: the rule's specification),
``executor`` makes the same plan a page at a time over the database, removes the tags it names and
tells what the next garbage collection removes; ``services.gc`` asks ``executor.roots`` what keeps
a covered repository's manifests."""
