"""Retention: ``planner`` decides (pure), ``executor`` loads a repository's state, removes the tags
the plan names and tells what the next garbage collection removes; ``services.gc`` asks
``executor.collectable`` which manifests of a repository under a rule it may remove."""
